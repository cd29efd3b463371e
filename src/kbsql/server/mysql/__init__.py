"""MindsDB's MySQL door: `kbsql serve --mysql-port` speaks MySQL's wire protocol beside HTTP.

The `mysql` client, JDBC/ODBC tools, SQLAlchemy (`mysql+pymysql://`), pandas and JupySQL reach
the same engine, projects, knowledge bases, agents, limits and lockout as HTTP. Modules:

- `door`: the listening socket, connection tasks, shutdown;
- `connection`: one connection (mysql-mimic's handshake and packets, kbsql's command loop);
- `framing`: packets off the socket, bounded in size and time;
- `identity`: logins (`mysql_native_password`) against the server's token or user;
- `router`: one connection's session, and which statements the engine answers;
- `chatter`, `sysvars`: the client's own statements (SET, @@variables, transactions);
- `metadata`: information_schema, SHOW COLUMNS and SHOW CREATE TABLE in MySQL's shapes;
- `prepared`: the binary protocol's parameters, bound as literals;
- `resultsets`: SQL results as MySQL columns and rows, batch by batch;
- `error_codes`: MySQL error packets.
"""

from kbsql.server.mysql.door import MysqlDoor

__all__ = ["MysqlDoor"]
