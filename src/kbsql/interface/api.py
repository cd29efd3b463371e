"""The service's operations as one Python protocol.

The local engine implements it in-process; `kbsql.client.http.HttpApi` implements it over
HTTP. The client wraps either, so embedded and remote use give the same objects and the
same errors (the chromadb pattern). Bodies are the *inner* objects of the contract
(`{"name": ...}`, not `{"knowledge_base": {"name": ...}}`).

Beyond `ServiceApi`, a backend may declare optional capabilities, each a runtime-checkable
protocol it subclasses: `FileTables` (DataFrames uploaded as tables `df.<name>`),
`UploadedFiles` (files as MindsDB's `files` database), `Databases` (MindsDB's
`/api/databases`), `KnowledgeBaseEditing` (altering a knowledge base, inserting a query's
result), `KnowledgeBaseVectors` (chunk vectors, for a notebook's map) and `DefaultModels`
(the server's default models, MindsDB's `GET /api/config`). Callers ask
`isinstance(api, FileTables)`, never probe for attributes, so what a backend offers is
written where it is defined.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, Protocol, runtime_checkable

from kbsql.interface.models import Agent, KnowledgeBase
from kbsql.interface.progress import OnProgress
from kbsql.interface.results import SqlResult

DEFAULT_PROJECT = "mindsdb"
MYSQL_VERSION = "8.0.17"
"""The MySQL version MindsDB reports (`version()`, `@@version`): clients pick their dialect by it."""

INSERT_BATCH_ROWS = 1000
"""Rows per PUT when inserting over HTTP: big enough to amortise a request, small enough
that a 100k-row insert never holds more than one batch of JSON in memory."""


class InsertCounts(NamedTuple):
    """What an insert did: rows sent (None when the rows were an iterator the engine took
    whole, so nobody counted them) and rows stored (rows without content are skipped)."""

    sent: int | None
    stored: int


class ServiceApi(Protocol):
    """Every operation the client and the notebook use. `embedded` and `location` say where
    the service lives (for reprs and connection listings), so nobody probes the backend."""

    embedded: bool
    """True for the in-process engine, False over HTTP."""

    @property
    def location(self) -> str:
        """The data directory (embedded) or the base URL (HTTP, unmasked: mask before showing)."""
        ...

    def status(self) -> dict[str, Any]: ...

    def list_projects(self) -> list[dict[str, Any]]: ...

    def get_project(self, name: str) -> dict[str, Any]: ...

    # knowledge bases (contract endpoints 1-4, plus the reference's PUT for rows)
    def create_knowledge_base(self, project: str, body: dict[str, Any]) -> KnowledgeBase: ...

    def get_knowledge_base(self, project: str, name: str) -> KnowledgeBase: ...

    def list_knowledge_bases(self, project: str) -> list[KnowledgeBase]: ...

    def delete_knowledge_base(self, project: str, name: str) -> None: ...

    def insert_knowledge_base_rows(
        self, project: str, name: str, rows: list[dict[str, Any]]
    ) -> dict[str, Any]: ...

    def insert_into_knowledge_base(
        self, project: str, name: str, rows: Iterable[dict[str, Any]] | Any, *,
        batch_size: int = INSERT_BATCH_ROWS, progress: OnProgress | None = None,
    ) -> InsertCounts:
        """Insert rows (a DataFrame or dicts). Embedded, the engine takes them in one call
        (it batches and reports its phases); over HTTP they go in PUTs of `batch_size`
        rows (reported per batch sent). `progress` receives the events; nothing is drawn."""
        ...

    # registered DataFrames (the built-in data source `df`)
    def register_dataframe(self, name: str, frame: Any) -> int: ...

    # agents (contract endpoints 5-6, plus get/list/delete)
    def create_agent(self, project: str, body: dict[str, Any]) -> Agent: ...

    def get_agent(self, project: str, name: str) -> Agent: ...

    def list_agents(self, project: str) -> list[Agent]: ...

    def update_agent(self, project: str, name: str, body: dict[str, Any]) -> Agent: ...

    def delete_agent(self, project: str, name: str) -> None: ...

    # SQL (endpoint 7) and completions (endpoint 8)
    def query(self, query: str, context: dict[str, Any] | None = None,
              params: dict[str, Any] | list[Any] | None = None,
              progress: OnProgress | None = None) -> SqlResult:
        """One SQL statement; `params` fill its `:name` / `?` placeholders (rest/sql.mdx).
        `progress` receives the events of long work it does (INSERT ... SELECT, EVALUATE)."""
        ...

    def complete(self, project: str, agent: str, messages: list[dict[str, Any]]) -> dict[str, Any]: ...

    def stream(
        self, project: str, agent: str, messages: list[dict[str, Any]]
    ) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


@runtime_checkable
class FileTables(Protocol):
    """Optional: uploaded files as tables `df.<name>` (`PUT` / `DELETE /api/files/{name}`)."""

    def register_file(self, name: str, raw: bytes, content_type: str = "",
                      max_table_bytes: int | None = None) -> int:
        """Make a Parquet (or CSV) file's rows the table `df.<name>`; returns its row count.
        A Parquet file decoding to more than `max_table_bytes` is refused."""
        ...

    def unregister_dataframe(self, name: str) -> bool:
        """Drop the table `df.<name>`; False when there was none."""
        ...


@runtime_checkable
class UploadedFiles(Protocol):
    """Optional: files as MindsDB's `files` database (`PUT /api/files/{name}` with a file,
    rest/files/*.mdx): csv, tsv, json, parquet, xlsx, txt or pdf becomes `files.<name>`."""

    def upload_file(self, name: str, raw: bytes, filename: str, *, source_file: str | None = None,
                    max_table_bytes: int | None = None) -> dict[str, Any]:
        """Store the file `filename` as `files.<name>` (a name in use: Conflict; a file that
        cannot be read: BadRequest titled "Error"); its `{name, row_count, columns}`."""
        ...

    def list_files(self) -> list[dict[str, Any]]:
        """`{name, row_count, columns}` of each file (`GET /api/files`)."""
        ...

    def delete_file(self, name: str) -> None:
        """Remove `files.<name>` (NotFound when there is none)."""
        ...


@runtime_checkable
class Databases(Protocol):
    """Optional: MindsDB's `/api/databases` (rest/databases/*.mdx), over the catalog that
    CREATE DATABASE writes. Shapes and error titles are MindsDB's DatabaseController's."""

    def list_databases(self) -> list[dict[str, Any]]:
        """`{name, type, id, engine, visible, deletable, ...}` of each database."""
        ...

    def get_database(self, name: str, check_connection: bool = False) -> dict[str, Any]: ...

    def create_database(self, name: str, engine: str, parameters: dict[str, Any] | None = None,
                        check_connection: bool = False) -> dict[str, Any]:
        """A new data source, stored without connecting unless `check_connection`."""
        ...

    def update_database(self, name: str, parameters: dict[str, Any],
                        check_connection: bool = False, engine: str | None = None) -> dict[str, Any]:
        """New parameters merged over the stored ones; an `engine` sent beside them must be
        the source's own (an update never changes what a source is)."""
        ...

    def delete_database(self, name: str) -> None: ...

    def check_database(self, engine: str, parameters: dict[str, Any]) -> str | None:
        """None when a source with these parameters can be reached, else why not."""
        ...

    def list_tables(self, database: str) -> list[dict[str, Any]]: ...

    def get_table(self, database: str, table: str) -> dict[str, Any]: ...

    def create_table(self, database: str, table: str, select: str,
                     replace: bool = False) -> dict[str, Any]: ...

    def drop_table(self, database: str, table: str) -> None: ...


@runtime_checkable
class Views(Protocol):
    """Optional: MindsDB's `/api/projects/{project}/views` (`{id, name, query}` per view), the
    views `CREATE VIEW` makes."""

    def list_views(self, project: str) -> list[dict[str, Any]]: ...

    def get_view(self, project: str, name: str) -> dict[str, Any]: ...

    def create_view(self, project: str, name: str, query: str) -> dict[str, Any]:
        """A new view (a name in use: Conflict; a query that is no SELECT: BadRequest)."""
        ...

    def put_view(self, project: str, name: str, query: str | None) -> tuple[dict[str, Any], bool]:
        """Create the view or give it a new query; (the view, whether it was created)."""
        ...

    def delete_view(self, project: str, name: str) -> None: ...


@runtime_checkable
class KnowledgeBaseEditing(Protocol):
    """Optional: what the reference's `PUT .../knowledge_bases/{kb}` does besides inserting
    rows (docs/rest/knowledge_bases/alter.mdx and insert.mdx)."""

    def alter_knowledge_base(self, project: str, name: str, changes: dict[str, Any]) -> KnowledgeBase:
        """Change `embedding_model` (its api_key only), `reranking_model`, `content_columns`,
        `metadata_columns`, `id_column` or `preprocessing`, as ALTER KNOWLEDGE_BASE does."""
        ...

    def insert_query_into_knowledge_base(self, project: str, name: str, query: str,
                                         options: dict[str, Any] | None = None) -> int:
        """Insert the rows of a SELECT (`options`: INSERT ... USING batch_size, threads, ...);
        returns the rows stored."""
        ...


@runtime_checkable
class KnowledgeBaseVectors(Protocol):
    """Optional, in-process only (the HTTP API never sends embeddings): chunk vectors for a
    notebook's 2-D map of a knowledge base (`%kbsql_plot map`)."""

    def knowledge_base_vectors(self, project: str, name: str, limit: int = 5000,
                               query: str | None = None) -> dict[str, Any]:
        """The first `limit` chunks' `chunk_ids`, `metadata` and `vectors`, and the
        `query_vector` of `query`."""
        ...


@runtime_checkable
class DefaultModels(Protocol):
    """Optional: the models used where none is named, as MindsDB's `GET /api/config` shows them."""

    def default_models(self) -> dict[str, Any]:
        """`default_llm` and `default_embedding_model` descriptors, secrets masked."""
        ...
