"""One MySQL connection's session, and where each of its statements is answered.

Statements go to the engine through `ServiceApi.query(text, {"db": project})`, the call the
HTTP SQL route makes, so results and one-line errors are the same on both doors; the
session's database follows the answer's `context.db` (`USE project`, a dropped project).
The SQL size limit is HTTP's (`limits.check_sql_size`), checked before anything parses.

Answered here instead (`chatter`, `metadata`): what a client asks about its own session
(SET, @@variables, transactions), the SHOW statements MindsDB answers in MySQL's shapes
(VARIABLES, STATUS, WARNINGS, ENGINES, CHARSET, COLLATION, FUNCTION/PROCEDURE STATUS,
[FULL] COLUMNS, INDEX, CREATE TABLE, TABLE STATUS) and the MySQL `information_schema` tables
the engine does not have (tried after the engine, so its own tables answer as over HTTP).

`answer` runs in a worker thread: it may call the engine, which may embed text or call a
model. A connection runs one statement at a time, so the session needs no lock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

import duckdb
import sqlglot
from mysql_mimic.errors import MysqlError
from mysql_mimic.session import BaseSession
from mysql_mimic.types import ColumnType
from mysql_mimic.variables import GlobalVariables

from kbsql.interface.api import DEFAULT_PROJECT, ServiceApi
from kbsql.interface.control import Stopped
from kbsql.interface.errors import ServiceError
from kbsql.interface.literals import quote_identifier
from kbsql.interface.results import ErrorResult, OkResult, SqlResult, TableResult
from kbsql.interface.system_variables import shown
from kbsql.server.limits import Limits, check_sql_size
from kbsql.server.mysql import chatter, metadata
from kbsql.server.mysql.error_codes import EMPTY_QUERY, NOT_SUPPORTED, PARSE_ERROR, code_of
from kbsql.server.mysql.local_sql import TIMEOUT_S, LocalRefused, having_as_where
from kbsql.server.mysql.resultsets import Answer, Failed, Ok, Rows, local_rows, table_rows
from kbsql.server.mysql.sysvars import SessionVariables

log = logging.getLogger("kbsql.server")

_LOGIN_WORDS = re.compile(r"user|connection_id", re.IGNORECASE)
"""A statement the engine may answer user() / connection_id() in: it gets the login."""
_NAME = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_SHOW = re.compile(
    r"^\s*SHOW\s+(?P<mods>(?:(?:FULL|SESSION|GLOBAL|LOCAL|STORAGE)\s+)*)"
    r"(?P<kind>VARIABLES|STATUS|WARNINGS|ERRORS|ENGINES|CHARSET|CHARACTER\s+SET|COLLATION|"
    r"FUNCTION\s+STATUS|PROCEDURE\s+STATUS|COLUMNS|FIELDS|INDEX|INDEXES|KEYS|CREATE\s+TABLE|"
    r"TABLE\s+STATUS|COUNT\(\*\)\s+WARNINGS|COUNT\(\*\)\s+ERRORS)(?![\w$])(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL)  # on the statement stripped of its end: no backtracking over spaces
_SHOW_REST = re.compile(
    rf"^(?:\s+(?:FROM|IN)\s+(?P<target>{_NAME}(?:\s*\.\s*{_NAME})?))?"
    rf"(?:\s+(?:FROM|IN)\s+(?P<db>{_NAME}))?"
    r"(?:\s+LIKE\s+(?P<like>'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"))?"
    r"(?:\s+WHERE\s+(?P<where>.+))?$", re.IGNORECASE | re.DOTALL)
_CREATE_TARGET = re.compile(rf"^\s+(?P<target>{_NAME}(?:\s*\.\s*{_NAME})?)$", re.DOTALL)

STATUS_COLUMNS = ["Level", "Code", "Message"]
ROUTINE_COLUMNS = ["Db", "Name", "Type", "Definer", "Modified", "Created", "Security_type", "Comment",
                   "character_set_client", "collation_connection", "Database Collation"]
INDEX_COLUMNS = ["Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name", "Collation",
                 "Cardinality", "Sub_part", "Packed", "Null", "Index_type", "Comment", "Index_comment",
                 "Visible", "Expression"]
TABLE_STATUS_COLUMNS = ["Name", "Engine", "Version", "Row_format", "Rows", "Avg_row_length", "Data_length",
                        "Max_data_length", "Index_length", "Data_free", "Auto_increment", "Create_time",
                        "Update_time", "Check_time", "Collation", "Checksum", "Create_options", "Comment"]


def unquote(name: str) -> str:
    name = name.strip()
    if name.startswith("`") and name.endswith("`"):
        return name[1:-1].replace("``", "`")
    return name


def split_name(target: str) -> tuple[str | None, str]:
    """(schema or None, table) of `db.t`, `` `d`.`t` `` or `t`."""
    match = re.match(rf"^\s*({_NAME})\s*\.\s*({_NAME})\s*$", target)
    if match:
        return unquote(match.group(1)), unquote(match.group(2))
    return None, unquote(target)


class DoorSession(BaseSession):
    """The state of one MySQL connection (mysql-mimic's session interface)."""

    def __init__(self, api: ServiceApi, limits: Limits, host: str, defaults: GlobalVariables | None = None):
        self.api = api
        self.limits = limits
        self.host = host
        self.variables = SessionVariables(defaults)
        self.username: str | None = None
        self.database: str | None = DEFAULT_PROJECT
        self.connection_id = 0
        self.metadata_timeout = TIMEOUT_S
        """Seconds a SHOW ... WHERE may run here (the door sets the server's statement timeout
        when that is less)."""

    @property
    def db(self) -> str:
        return self.database or DEFAULT_PROJECT

    # --- the engine ---------------------------------------------------------------------
    def run(self, sql: str) -> SqlResult:
        """One statement through the engine, as the HTTP route sends it; one naming `@@` also
        carries this connection's system variables, one naming user() or connection_id() its
        login, which the engine reads them from (chatter answers them alike)."""
        ctx: dict[str, Any] = {"db": self.db}
        if "@@" in sql:
            ctx["system_variables"] = dict(self.variables.list())
        if _LOGIN_WORDS.search(sql):
            user = self.username or ""
            ctx["login"] = {"user": f"{user}@{self.host}", "session_user": f"{user}@{self.host}",
                            "current_user": f"{user}@%", "connection_id": self.connection_id}
        result = self.api.query(sql, ctx)
        db = result.context.get("db") if isinstance(result.context, dict) else None
        if isinstance(db, str) and db:
            self.database = db
        return result

    def engine(self, sql: str, word: str = "") -> Answer:
        try:
            result = self.run(sql)
        except ServiceError as exc:  # a request error the engine raises (an empty statement)
            return Failed(exc.detail, code_of(exc.problem_type))
        if isinstance(result, ErrorResult):
            # MySQL's HAVING on aliases without GROUP BY, which the engine's SQL refuses: drivers
            # send it on information_schema (Connector/J's getTables), small tables to read
            # again; any other failed SELECT (a deadline, a memory limit) is never run twice
            metadata_read = word == "SELECT" and "information_schema" in sql.lower()
            rewritten = having_as_where(sql) if metadata_read else None
            if rewritten is not None:
                return self.engine(rewritten)
            return Failed(result.error_message, code_of(result.kind))
        if isinstance(result, OkResult):
            return Ok(result.affected_rows or 0)
        assert isinstance(result, TableResult)
        return table_rows(result)

    # --- routing ------------------------------------------------------------------------
    def answer(self, sql: str) -> Answer:
        """The answer to one statement's text (in a worker thread)."""
        if not sql.strip():
            return Failed("Query was empty", EMPTY_QUERY)
        too_big = check_sql_size(sql, self.limits)
        if too_big is not None:
            return Failed(too_big)
        word = chatter.leading_word(sql)
        try:
            if word == "SET" and chatter.is_session_set(sql):
                chatter.apply_set(sql, self.variables)
                return Ok()
            if word in ("BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE") and \
                    chatter.is_transaction(sql):
                return Ok()
            if word == "SHOW":
                shown_answer = self.show(sql)
                if shown_answer is not None:
                    return shown_answer
            if word == "KILL":
                return Failed("KILL is not supported by kbsql: a statement runs to its end; close the "
                              "connection to stop waiting for it", NOT_SUPPORTED)
            if word == "SELECT" and chatter.is_static_select(sql):
                facts = chatter.SessionFacts(self.db, self.username or "", self.host, self.connection_id)
                static = chatter.static_select(sql, facts, self.variables)
                if static is not None:
                    return local_rows(*static)
        except MysqlError as exc:
            return Failed(exc.msg, int(exc.code))
        except metadata.Refused as exc:  # metadata: the engine's answer for a missing table
            return Failed(exc.result.error_message, code_of(exc.result.kind))
        except (LocalRefused, Stopped) as exc:  # a SHOW ... WHERE past the door's bounds (local_sql.py)
            return Failed(f"The statement was stopped: {exc}" if isinstance(exc, Stopped) else str(exc))
        except (duckdb.Error, sqlglot.errors.SqlglotError) as exc:  # a SHOW ... WHERE it cannot run
            return Failed(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        except Exception as exc:  # a fault of the door: this statement fails, the connection goes on
            log.exception("MySQL door: answering a statement failed")  # no text: it may hold keys
            return Failed(f"{type(exc).__name__}: {exc}")
        return self.engine(sql, word)

    def use(self, name: str) -> Answer:
        """COM_INIT_DB (the mysql client's `use`, a driver's database switch)."""
        return self.engine(f"USE {quote_identifier(name)}")

    # --- SHOW -----------------------------------------------------------------------------
    def show(self, sql: str) -> Answer | None:
        """The SHOW statements answered here, or None (the engine's: DATABASES, TABLES, ...)."""
        match = _SHOW.match(sql.strip().rstrip(";").rstrip())
        if match is None:
            return None
        kind = " ".join(match.group("kind").upper().split())
        mods = match.group("mods").upper().split()
        rest_text = match.group("rest")
        if kind == "CREATE TABLE":
            target = _CREATE_TARGET.match(rest_text)
            if target is None:
                return Failed("SHOW CREATE TABLE needs a table name", PARSE_ERROR)
            schema, table = split_name(target.group("target"))
            text = metadata.create_table(self.api, self.db, table, schema)
            return local_rows(["Table", "Create Table"], [[table, text]])
        rest = _SHOW_REST.match(rest_text)
        if rest is None:
            return Failed(f"This SHOW statement cannot be read: {sql.strip()[:200]}",
                          PARSE_ERROR)
        like, where = rest.group("like"), rest.group("where")
        return self._show(kind, "FULL" in mods, rest.group("target"), rest.group("db"), like, where)

    def _filtered(self, names: list[str], rows: Iterable[Sequence[Any]], like: str | None,
                  where: str | None, integers: Iterable[str] = ()) -> Rows:
        return metadata.filtered(names, rows, like, where, integers, timeout=self.metadata_timeout)

    def _show(self, kind: str, full: bool, target: str | None, db: str | None, like: str | None,
              where: str | None) -> Answer:
        if kind == "VARIABLES":
            rows = [[name, shown(value)] for name, value in self.variables.list()]
            return self._filtered(["Variable_name", "Value"], rows, like, where)
        if kind == "STATUS":
            rows = [["Ssl_cipher", ""], ["Ssl_version", ""], ["Threads_connected", "1"]]
            return self._filtered(["Variable_name", "Value"], rows, like, where)
        if kind in ("WARNINGS", "ERRORS"):
            return local_rows(STATUS_COLUMNS, [],
                              [ColumnType.VAR_STRING, ColumnType.LONG, ColumnType.VAR_STRING])
        if kind.startswith("COUNT(*)"):
            name = "@@session.warning_count" if kind.endswith("WARNINGS") else "@@session.error_count"
            return local_rows([name], [[0]])
        if kind == "ENGINES":
            return self._filtered(["Engine", "Support", "Comment", "Transactions", "XA", "Savepoints"],
                                  metadata.ENGINES, like, where)
        if kind in ("CHARSET", "CHARACTER SET"):
            charsets: list[list[Any]] = [[c[0], c[2], c[1], c[3]] for c in metadata.CHARACTER_SETS]
            return self._filtered(["Charset", "Description", "Default collation", "Maxlen"], charsets,
                                  like, where, ["Maxlen"])
        if kind == "COLLATION":
            return self._filtered(["Collation", "Charset", "Id", "Default", "Compiled", "Sortlen",
                                   "Pad_attribute"], metadata.COLLATIONS, like, where, ["Id", "Sortlen"])
        if kind in ("FUNCTION STATUS", "PROCEDURE STATUS"):
            return self._filtered(ROUTINE_COLUMNS, [], like, where)
        if kind == "TABLE STATUS":
            return self._table_status(unquote(target) if target else self.db, like, where)
        if target is None:
            return Failed(f"SHOW {kind} needs a table name (SHOW {kind} FROM table)", PARSE_ERROR)
        schema, table = split_name(target)
        schema = unquote(db) if db else schema
        if kind in ("COLUMNS", "FIELDS"):
            rows = metadata.show_columns(self.api, self.db, table, schema, full)
            names = metadata.SHOW_FULL_COLUMNS if full else metadata.SHOW_COLUMNS
            return self._filtered(names, rows, like, where)
        metadata.show_columns(self.api, self.db, table, schema, False)  # INDEX: the table must exist
        return self._filtered(INDEX_COLUMNS, [], like, where)

    def _table_status(self, schema: str, like: str | None, where: str | None) -> Answer:
        tables = metadata.EngineCatalog(self.api, self.db).tables()
        rows = [[name, "InnoDB", "10", "Dynamic", None, None, None, None, None, None, None, None, None, None,
                 "utf8mb4_0900_ai_ci", None, "", kind.lower() if kind != "BASE TABLE" else ""]
                for s, name, kind in tables if s.lower() == schema.lower()]
        return self._filtered(TABLE_STATUS_COLUMNS, rows, like, where, ["Rows"])
