"""Databases and their tables as MindsDB's DatabaseController and IntegrationController
answer them (mindsdb/interfaces/database/, behind `/api/databases`): the same catalog
CREATE DATABASE writes, so SQL and REST see the same data sources.

The shapes are MindsDB's: a listed database is `{name, type, id, engine, visible,
deletable}` (plus `class_type`, `connection_data` for data sources), a data source on its
own is its integration record (`id, name, type, class_type, engine, permanent,
date_last_update, connection_data`), a table `{name, type}`. The list is MindsDB's:
`information_schema`, `log` (system), the projects, the user's data sources; kbsql's own
`files` and `df` are not listed (a fresh MindsDB lists three databases, and clients count
on it) but answer by name here, in SHOW DATABASES and in SQL. `log` lists `llm_log` (the
engine's model calls) and `jobs_history` (the job runs). Differences, on purpose: connection
parameters are shown with secrets masked (MindsDB shows them in clear, to anyone who can
call the route). Errors carry MindsDB's titles ("Name conflict", "Database not found",
"Connection error", ...). A data source is stored without connecting, even with incomplete
parameters, unless `check_connection` asks for it (CREATE DATABASE in SQL always checks, as
MindsDB's does); the path confinement and the parameter checks run again when it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb
from mindsdb_sql_parser import ast

from kbsql.engine.catalog import DatasourceRecord
from kbsql.engine.datasources import registry
from kbsql.engine.datasources.frame_store import FRAMES_SOURCE
from kbsql.engine.datasources.upload_store import UPLOADS_SOURCE
from kbsql.engine.sql.databases import builtin_tables, info_schema
from kbsql.engine.sql.parse import parsing
from kbsql.engine.sql.tables.names import INFORMATION_SCHEMA, LOG_DATABASE, LOG_TABLES, find_project
from kbsql.engine.view_store import views
from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.errors import (
    BadRequest,
    Conflict,
    ConnectionFailed,
    PermissionDenied,
    ServiceError,
    SqlError,
    UnknownDatabase,
    UnknownTable,
)
from kbsql.interface.results import OkResult, SqlResult
from kbsql.interface.secrets import mask_secrets

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession

BUILTIN_ENGINES = {UPLOADS_SOURCE: "files", FRAMES_SOURCE: "dataframe"}
CLASS_TYPE = "sql"  # MindsDB's class of a data handler answering SQL (every kbsql source)
PROJECT_ENGINES = (None, "", "mindsdb")


def _not_parameters() -> BadRequest:
    return BadRequest('"parameters" must be an object of connection parameters', title="Wrong argument")


def _cannot_delete(name: str, why: str) -> BadRequest:
    return BadRequest(f"Cannot delete database {name}. This is most likely a system database, a permanent "
                      f"integration, or an ML engine with active models. Full error: {why}. Please check "
                      "the name and try again.", title="Error")


class DatabaseOps:
    """`kbsql.interface.api.DatabasesApi` over the SQL session (catalog, DuckDB, built-ins)."""

    def __init__(self, session: SqlSession):
        self.session = session

    # databases ----------------------------------------------------------------------------
    def list_databases(self) -> list[dict[str, Any]]:
        catalog = self.session.catalog
        out: list[dict[str, Any]] = [{"name": system, "type": "system", "id": None, "engine": None,
                                      "visible": True, "deletable": False}
                                     for system in (INFORMATION_SCHEMA, LOG_DATABASE)]
        out += [{"name": p.name, "type": "project", "id": p.id, "engine": None, "visible": True,
                 "deletable": p.name.lower() != DEFAULT_PROJECT} for p in catalog.projects()]
        out += [{"name": d.name, "type": "data", "id": d.id, "engine": d.engine, "class_type": CLASS_TYPE,
                 "connection_data": mask_secrets(d.parameters), "visible": True, "deletable": True}
                for d in catalog.datasources()]
        return out

    def get_database(self, name: str, check_connection: bool = False) -> dict[str, Any]:
        project = find_project(self.session, name)
        if project is not None:
            answer: dict[str, Any] = {"name": project, "type": "project",
                                      "id": self.session.catalog.project(project).id, "engine": None}
            if check_connection:
                answer["connection_status"] = {"success": True, "error_message": None}
            return answer
        lowered = name.lower()
        if lowered == INFORMATION_SCHEMA:
            return {"name": INFORMATION_SCHEMA, "type": "system", "id": None, "engine": None}
        if lowered in BUILTIN_ENGINES:
            answer = {"id": None, "name": lowered, "type": "data", "class_type": CLASS_TYPE,
                      "engine": BUILTIN_ENGINES[lowered], "permanent": True, "date_last_update": None,
                      "connection_data": {}}
        else:
            record = self._datasource(name)
            answer = _integration(record)
        if check_connection:
            error = self._reach(answer["name"])
            answer["connection_status"] = {"success": error is None, "error_message": error}
        return answer

    def create_database(self, name: str, engine: str, parameters: dict[str, Any] | None = None,
                        check_connection: bool = False) -> dict[str, Any]:
        """A new data source (201 `{name, type, engine, id}`); with `check_connection` it is
        reached first and, failing, not stored (ConnectionFailed)."""
        if name is None or name == "":
            raise BadRequest('Missing "name" field for database', title="Wrong argument")
        if not isinstance(name, str) or not isinstance(engine, str):  # not "Missing", not "a project"
            field, value = ("name", name) if not isinstance(name, str) else ("engine", engine)
            raise BadRequest(f'"{field}" must be a string, not {value!r}'[:200], title="Wrong argument")
        if engine.lower() in PROJECT_ENGINES:
            raise BadRequest(f'"engine" {engine!r} makes a project, not a data source: use CREATE '
                             "PROJECT (or the /api/projects routes)", title="Wrong argument")
        if not isinstance(parameters, dict):
            raise _not_parameters()
        if self._exists(name):
            raise Conflict(f"Database with name {name} already exists.", title="Name conflict")
        self._check_policy(engine, parameters)  # before the file is looked for (an existence oracle)
        normalized = self._normalized(engine, parameters, check_connection)
        self._check_policy(engine, normalized)
        record = self.session.catalog.create_datasource(name, engine.lower(), normalized)
        if check_connection:
            error = self._reach(record.name)
            if error is not None:
                self._forget(record.name)
                self.session.catalog.delete_datasource(record.name)
                raise ConnectionFailed(error)
        return {"name": record.name, "type": "data", "engine": record.engine, "id": record.id}

    def update_database(self, name: str, parameters: dict[str, Any],
                        check_connection: bool = False, engine: Any = None) -> dict[str, Any]:
        """New connection parameters, merged over the stored ones (MindsDB's modify); with
        `check_connection` a source that cannot be reached keeps its old ones. An `engine`
        other than the source's is a 400: MindsDB's modify ignores it, merging the new
        engine's parameters into the old one's (a duckdb source pointed at a sqlite file)."""
        if find_project(self.session, name) is not None:
            raise BadRequest(f"{name} is a project: only a data source's parameters can be updated",
                             title="Wrong argument")
        if name.lower() in BUILTIN_ENGINES or name.lower() == INFORMATION_SCHEMA:
            raise BadRequest(f"{name} is built in: it has no parameters to update", title="Wrong argument")
        if not isinstance(parameters, dict):
            raise _not_parameters()
        record = self._datasource(name)
        if engine is not None and not self._same_engine(engine, record.engine):
            raise BadRequest(f"{record.name} is a {record.engine} data source: its engine cannot be "
                             f"changed to {engine!r} (DROP DATABASE {record.name}, then create it with the "
                             "new engine)", title="Wrong argument")
        self._check_policy(record.engine, {**record.parameters, **parameters})
        merged = self._normalized(record.engine, {**record.parameters, **parameters}, check_connection)
        self._check_policy(record.engine, merged)
        catalog = self.session.catalog
        catalog.update_datasource(record.name, merged)
        self._forget(record.name)
        if check_connection:
            error = self._reach(record.name)
            if error is not None:
                catalog.update_datasource(record.name, record.parameters)
                self._forget(record.name)
                raise ConnectionFailed(error)
        return _integration(self._datasource(record.name))

    def delete_database(self, name: str) -> None:
        lowered = name.lower()
        if lowered in (INFORMATION_SCHEMA, LOG_DATABASE) or lowered in BUILTIN_ENGINES:
            raise _cannot_delete(name, "Unable to drop: is system database")
        catalog = self.session.catalog
        project = find_project(self.session, name)
        try:
            if project is not None:
                if project.lower() == DEFAULT_PROJECT:
                    raise _cannot_delete(name, f"the default project {DEFAULT_PROJECT} cannot be dropped")
                catalog.drop_project(project)
            else:
                record = self._datasource(name)
                catalog.delete_datasource(record.name)
                self._forget(record.name)
        except Conflict as exc:  # a project holding knowledge bases, a source a KB stores in
            raise _cannot_delete(name, exc.detail) from None
        self.session.plans.clear()

    def check_database(self, engine: str, parameters: dict[str, Any]) -> str | None:
        """`POST /api/databases/status`: None when a source of `engine` with `parameters`
        can be reached, else why not. Nothing is kept."""
        name = f"kbsql_check_{id(parameters):x}"
        try:
            self.create_database(name, engine, parameters, check_connection=True)
        except ServiceError as exc:
            return exc.detail
        self._forget(name)
        self.session.catalog.delete_datasource(name)
        return None

    # tables -----------------------------------------------------------------------------
    def list_tables(self, database: str) -> list[dict[str, Any]]:
        session = self.session
        if database.lower() == LOG_DATABASE:
            return [{"name": t, "type": "system view"} for t in LOG_TABLES]
        if database.lower() == INFORMATION_SCHEMA:
            return [{"name": t.upper(), "type": "system view"} for t in info_schema.TABLES]
        project = find_project(session, database)
        if project is not None:
            catalog = session.catalog
            kbs = [{"name": kb.name, "type": "knowledge base"} for kb in catalog.knowledge_bases(project)]
            kbs += [{"name": v.name, "type": "view"} for v in views(catalog, project)]
            return kbs + [{"name": a.name, "type": "agent"} for a in catalog.agents(project)]
        source = self._source(database)
        if source is None:
            raise UnknownDatabase(f"Database with name {database} does not exist", title="Database not found")
        try:
            with session.duck.cursor() as con:
                names = source.tables(con)
        except SqlError as exc:
            raise BadRequest(exc.message, title="Error") from None
        return [{"name": t, "type": "data"} for t in names]

    def get_table(self, database: str, table: str) -> dict[str, Any]:
        for item in self.list_tables(database):
            if item["name"] == table:
                return item
        raise UnknownTable(f"Table with name {table} not found", title="Table not found")

    def create_table(self, database: str, table: str, select: str, replace: bool = False) -> dict[str, Any]:
        """`CREATE [OR REPLACE] TABLE database.table (select)`, in `files`, `df` or a data
        source (builtin_tables / source_writes)."""
        self._refuse_project(database, table, "create")
        if self._source(database) is None:
            raise UnknownDatabase(f"Database with name {database} does not exist",
                                  title="Database not exists")
        if not replace and any(t["name"] == table for t in self.list_tables(database)):
            raise Conflict(f"Table with name {table} already exists", title="Name conflict")
        try:
            statement = parsing.parse(select)
        except Exception:
            raise BadRequest(f"Could not parse select statement {select}", title="Error") from None
        if not isinstance(statement, (ast.Select, ast.Union, ast.Intersect, ast.Except)):
            raise BadRequest(f"Could not parse select statement {select}", title="Error")
        create = ast.CreateTable(ast.Identifier(parts=[database, table]), from_select=statement,
                                 is_replace=replace)
        self._sql(lambda ctx: builtin_tables.create_table(self.session, create, ctx))
        return self.get_table(database, table)

    def drop_table(self, database: str, table: str) -> None:
        self._refuse_project(database, table, "delete")
        if self._source(database) is None:
            raise UnknownDatabase(f"Database with name {database} not found", title="Database not found")
        self.get_table(database, table)
        drop = ast.DropTables(tables=[ast.Identifier(parts=[database, table])], if_exists=True)
        self._sql(lambda ctx: builtin_tables.drop_table(self.session, drop, ctx))

    # helpers ----------------------------------------------------------------------------
    def _refuse_project(self, database: str, table: str, verb: str) -> None:
        """MindsDB's tables routes make and drop tables of data sources only."""
        if find_project(self.session, database) is not None:
            raise BadRequest(f"Database {database} is a project. If you want to {verb} a model or view, use "
                             f"the projects/{database}/models/{table} or projects/{database}/views/{table} "
                             "endpoints instead.", title="Error")

    def _source(self, database: str) -> Any:
        """The data source `database` (None when there is none); one that cannot be opened (its
        stored parameters are incomplete, its file is gone) is a 400 "Error" saying why."""
        try:
            return self.session.duck.source(database)
        except SqlError as exc:
            raise BadRequest(exc.message, title="Error") from None

    def _sql(self, run: Any) -> None:
        """Run a table statement; its SQL error becomes a 400 "Error" (MindsDB's answer), also
        one DuckDB raises running it (a column the SELECT names that does not exist: MindsDB's
        tables_test expects 400, not a 500), in one line; a refused permission (read-only
        sources, a path not allowed) stays a 403."""
        try:
            run({"db": DEFAULT_PROJECT})
        except PermissionDenied:
            raise
        except SqlError as exc:
            raise BadRequest(exc.message, title="Error") from None
        except duckdb.Error as exc:
            raise BadRequest(str(exc).strip().splitlines()[0], title="Error") from None

    def _exists(self, name: str) -> bool:
        lowered = name.lower()
        return (lowered in BUILTIN_ENGINES or lowered in (INFORMATION_SCHEMA, LOG_DATABASE)
                or find_project(self.session, name) is not None
                or self.session.catalog.find_datasource(name) is not None)

    def _datasource(self, name: str) -> DatasourceRecord:
        record = self.session.catalog.find_datasource(name)
        if record is None:
            raise UnknownDatabase(f"Database with name {name} does not exist.", title="Database not found")
        return record

    def _same_engine(self, sent: Any, stored: str) -> bool:
        """`sent` names the engine `stored`: in any case, or an alias opening the same class
        (postgres, postgresql)."""
        if not isinstance(sent, str):
            return False
        if sent.lower() == stored.lower():
            return True
        engines = self.session.duck.engines
        found = engines.get(sent.lower()) if sent.lower() in engines else None
        return found is not None and stored in engines and found is engines.get(stored)

    def _normalized(self, engine: str, parameters: dict[str, Any], check_connection: bool) -> dict[str, Any]:
        """The parameters as the engine keeps them. Incomplete ones (a postgres source without
        a host) are kept as given unless the connection is to be checked (then they are a
        connection error), as MindsDB stores them: the source then fails, in the engine's
        words, when it is used (DuckSources checks them again before attaching). An unknown
        engine is a 400 either way."""
        engines = self.session.duck.engines
        try:
            return registry.normalize(engine, dict(parameters), engines)
        except SqlError as exc:
            if engine.lower() not in engines:
                raise BadRequest(exc.message, title="Wrong argument") from None
            if check_connection:
                raise ConnectionFailed(exc.message) from None
            return dict(parameters)

    def _check_policy(self, engine: str, parameters: dict[str, Any]) -> None:
        policy = self.session.duck.policy
        if policy is not None:
            try:
                policy.check_source(engine, parameters)
            except SqlError as exc:
                raise BadRequest(exc.message, title="Wrong argument") from None

    def _reach(self, name: str) -> str | None:
        """Why the stored source `name` cannot be reached (attached, its tables listed), or None."""
        session = self.session
        try:
            source = session.duck.source(name)
            if source is not None:
                with session.duck.cursor() as con:
                    source.tables(con)
        except SqlError as exc:
            return exc.message
        except ServiceError as exc:
            return exc.detail
        except Exception as exc:  # a driver's own error: the message is what the user needs
            return " ".join(f"{type(exc).__name__}: {exc}".split())
        return None

    def _forget(self, name: str) -> None:
        self.session.duck.forget(name)
        self.session.plans.clear()


def _integration(record: DatasourceRecord) -> dict[str, Any]:
    """A data source as MindsDB's integration record (secrets masked)."""
    return {"id": record.id, "name": record.name, "type": "data", "class_type": CLASS_TYPE,
            "engine": record.engine, "permanent": False, "date_last_update": record.created_at,
            "connection_data": mask_secrets(record.parameters)}


def alter_database(session: SqlSession, statement: Any, ctx: dict[str, Any], routed: Any = None) -> SqlResult:
    """`ALTER DATABASE ds PARAMETERS = {...}` (MindsDB checks the connection first)."""
    params = {str(k).lower(): v for k, v in (statement.params or {}).items()}
    name = str(statement.name.parts[-1])
    if set(params) != {"parameters"}:
        raise SqlError("Only the 'parameters' field can be updated for integrations "
                       "(ALTER DATABASE ds PARAMETERS = {...})")
    try:
        DatabaseOps(session).update_database(name, params["parameters"], check_connection=True)
    except ServiceError as exc:
        raise SqlError(exc.detail) from None
    return OkResult(None, context=ctx)

