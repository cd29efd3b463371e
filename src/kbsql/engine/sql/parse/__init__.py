"""From SQL text to a parsed statement: `@variables` and bound parameters, the fast paths
for long VALUES rows and IN lists, and the bounded call into mindsdb_sql_parser."""
