"""PostgreSQL adapters: the shared catalog, pgvector storage and its HNSW index, the frame store,
and the `postgres`/`pgvector` data sources; psycopg loads only when one is used."""
