"""Knowledge-base statements: CREATE/DROP/ALTER/EVALUATE KNOWLEDGE_BASE, CREATE/DROP INDEX,
SHOW/DESCRIBE, and SELECT/INSERT/UPDATE/DELETE on a knowledge base (its WHERE becomes a
search); INSERT ... SELECT ... USING batch_size in the background (`kb_background`)."""
