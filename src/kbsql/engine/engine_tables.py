"""The engine's tables surface: registered DataFrames (`df`), uploaded files (`files`),
MindsDB's databases, their tables and the projects' views, as `interface.api` declares them
(FileTables, UploadedFiles, Databases, Views).

A mixin of `Engine` (engine.py), kept apart so the composition root stays about composing:
every method here is a thin call into the part that does the work (the SQL executor's frame
store, the upload store, sql/databases/), reached through the attributes `Engine` wires.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbsql.interface.api import Databases, FileTables, UploadedFiles, Views

if TYPE_CHECKING:
    from kbsql.engine.config import EngineConfig
    from kbsql.engine.datasources.upload_store import UploadStore
    from kbsql.engine.fair_slots import FairSlots
    from kbsql.engine.sql.databases.database_ops import DatabaseOps
    from kbsql.engine.sql.databases.view_ops import ViewOps
    from kbsql.engine.sql.executor import SqlExecutor


class TableSurface(FileTables, UploadedFiles, Databases, Views):
    """What `Engine` provides these methods (its wiring)."""

    config: EngineConfig
    _pdf_slots: FairSlots
    _parse_slots: FairSlots | None

    @property
    def sql(self) -> SqlExecutor:
        raise NotImplementedError

    @property
    def uploads(self) -> UploadStore:
        raise NotImplementedError

    def _views(self) -> ViewOps:
        from kbsql.engine.sql.databases.view_ops import ViewOps

        return ViewOps(self.sql)

    def _databases(self) -> DatabaseOps:
        from kbsql.engine.sql.databases.database_ops import DatabaseOps

        return DatabaseOps(self.sql)

    # registered DataFrames (the built-in data source `df`) ---------------------------------
    def register_dataframe(self, name: str, frame: Any) -> int:
        """Make `frame` (pandas or Arrow) the table `df.<name>`, stored as Parquet in the data
        directory so it survives a restart; returns its row count."""
        return self.sql.frames.register(name, frame)

    def register_file(self, name: str, raw: bytes, content_type: str = "",
                      max_table_bytes: int | None = None) -> int:
        """Register an uploaded Parquet (or CSV) file as the table `df.<name>`; a Parquet
        file decoding to more than `max_table_bytes` (default 512 MB) is refused."""
        from kbsql.interface.frames import MAX_UPLOADED_TABLE_BYTES, read_uploaded

        table = read_uploaded(raw, content_type, max_table_bytes or MAX_UPLOADED_TABLE_BYTES)
        return self.register_dataframe(name, table)

    def unregister_dataframe(self, name: str) -> bool:
        return self.sql.frames.unregister(name)

    # uploaded files (the built-in data source `files`, MindsDB's) ---------------------------
    def upload_file(self, name: str, raw: bytes, filename: str, *, source_file: str | None = None,
                    max_table_bytes: int | None = None) -> dict[str, Any]:
        """`interface.api.UploadedFiles`: the file `filename` (csv, tsv, json, parquet, xlsx, txt,
        pdf, or one of those zipped) becomes `files.<name>`, read as MindsDB's file handler
        reads it (datasources/upload_formats.py); a name in use is a Conflict."""
        from kbsql.engine.datasources.upload_formats import Parse, UploadBounds, read_pages
        from kbsql.interface.frames import MAX_UPLOADED_TABLE_BYTES

        config = self.config
        bounds = UploadBounds(config.max_upload_decoded_mb * 2**20, config.max_upload_columns,
                              config.max_upload_cells, config.pdf_timeout, self._pdf_slots,
                              config.pdf_cpu_per_mb, self._parse_slots, config.upload_timeout,
                              config.note)
        parse: Parse | None = None
        if self._parse_slots is not None:  # a process of its own (served: --upload-processes)
            from kbsql.engine.datasources.parse_process import parse_apart

            parse = parse_apart
        pages = read_pages(raw, filename, max_table_bytes or MAX_UPLOADED_TABLE_BYTES, bounds, parse)
        record = self.uploads.save(name, pages, source_file or filename)
        self.sql.plans.clear()
        return record.meta()

    def list_files(self) -> list[dict[str, Any]]:
        return [f.meta() for f in self.uploads.files()]

    def delete_file(self, name: str) -> None:
        self.uploads.delete(name)
        self.sql.plans.clear()

    # databases (MindsDB's /api/databases) -----------------------------------------------
    # `Databases`: projects, data sources and their tables, over the catalog CREATE DATABASE
    # writes (sql/databases/database_ops.py)
    def list_databases(self) -> list[dict[str, Any]]:
        return self._databases().list_databases()

    def get_database(self, name: str, check_connection: bool = False) -> dict[str, Any]:
        return self._databases().get_database(name, check_connection)

    def create_database(self, name: str, engine: str, parameters: dict[str, Any] | None = None,
                        check_connection: bool = False) -> dict[str, Any]:
        return self._databases().create_database(name, engine, parameters if parameters is not None
                                                     else {}, check_connection)

    def update_database(self, name: str, parameters: dict[str, Any],
                        check_connection: bool = False, engine: str | None = None) -> dict[str, Any]:
        return self._databases().update_database(name, parameters, check_connection, engine)

    def delete_database(self, name: str) -> None:
        self._databases().delete_database(name)

    def check_database(self, engine: str, parameters: dict[str, Any]) -> str | None:
        return self._databases().check_database(engine, parameters)

    def list_tables(self, database: str) -> list[dict[str, Any]]:
        return self._databases().list_tables(database)

    def get_table(self, database: str, table: str) -> dict[str, Any]:
        return self._databases().get_table(database, table)

    def create_table(self, database: str, table: str, select: str, replace: bool = False) -> dict[str, Any]:
        return self._databases().create_table(database, table, select, replace)

    def drop_table(self, database: str, table: str) -> None:
        self._databases().drop_table(database, table)

    # `Views`: MindsDB's /api/projects/{project}/views, over the views CREATE VIEW keeps
    def list_views(self, project: str) -> list[dict[str, Any]]:
        return self._views().list_views(project)

    def get_view(self, project: str, name: str) -> dict[str, Any]:
        return self._views().get_view(project, name)

    def create_view(self, project: str, name: str, query: str) -> dict[str, Any]:
        return self._views().create_view(project, name, query)

    def put_view(self, project: str, name: str, query: str | None) -> tuple[dict[str, Any], bool]:
        return self._views().put_view(project, name, query)

    def delete_view(self, project: str, name: str) -> None:
        self._views().delete_view(project, name)
