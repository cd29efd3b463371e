"""Agent statements: CREATE/ALTER/DROP AGENT, SHOW AGENTS, and asking an agent with
`SELECT answer FROM agent WHERE question = '...'`."""
