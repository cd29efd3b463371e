"""`ENGINE = 'pgvector'`: a PostgreSQL database with the pgvector extension.

Its PARAMETERS are the reference's (host, port, database, user, password; optional schema,
sslmode). It is two things at once: a vector store that knowledge bases name in
`storage = vdb.table` (engine/postgres/pgvector.py keeps their chunks there), and a read-only
SQL source like `ENGINE = 'postgres'`, so `SELECT ... FROM vdb.kb_chunks` reads the table.
"""

from __future__ import annotations

from kbsql.engine.postgres.postgres_source import PostgresSource


class PgVectorSource(PostgresSource):
    engine = "pgvector"
