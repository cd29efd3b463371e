"""Projects and data sources in SQL (CREATE/ALTER/DROP DATABASE, USE, SHOW DATABASES/TABLES,
DESCRIBE), the tables of the built-in `files` and `df` (CREATE/DROP TABLE, `builtin_tables`),
MindsDB's database operations behind `/api/databases` (`database_ops`) and the
`information_schema` tables built from the catalog."""
