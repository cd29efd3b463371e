"""Knowledge-base statements: CREATE/DROP/ALTER/EVALUATE KNOWLEDGE_BASE, CREATE/DROP INDEX,
SHOW/DESCRIBE, and SELECT/INSERT/DELETE on a knowledge base (its WHERE becomes a search)."""
