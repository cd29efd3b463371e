"""A package that extends kbsql only through entry points (see ../kbsql_test_plugins-0.1.dist-info/
entry_points.txt): an embedding provider, a storage backend, a chat provider and a reranker,
each the smallest real implementation of its protocol. Used by tests/plugins."""
