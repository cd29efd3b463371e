"""SQL: the reference dialect parsed by mindsdb_sql_parser, routed to the engine's parts."""
