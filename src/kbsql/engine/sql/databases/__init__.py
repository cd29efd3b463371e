"""Projects and data sources in SQL (CREATE/DROP DATABASE, USE, SHOW DATABASES/TABLES,
DESCRIBE) and the `information_schema` tables built from the catalog."""
