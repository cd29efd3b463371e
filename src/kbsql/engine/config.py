"""Where the engine keeps its data, which models it uses when none is given, and its bounds.

Every setting is declared once in `engine/settings_table.py`; `EngineConfig.load` reads the
engine's through it with one precedence: explicit (a `kbsql serve` flag given, or
`kbsql.connect(settings={...})`) > environment variable > the `config.json` file in the data
directory > default. An unknown key or a value of the wrong type is a `SettingError` (one
line naming it). The default agent model is the offline retrieval agent, so an agent works
on a fresh machine with no key and no network.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbsql.engine.settings_table import BY_NAME, FILE_KEYS, SettingError, resolve, unknown_key

DATA_DIR_ENV = "KBSQL_HOME"
CATALOG_URL_ENV = "KBSQL_CATALOG_URL"
DEFAULT_DATA_DIR = ".kbsql"
CONFIG_FILE = "config.json"

OFFLINE_PROVIDER = "kbsql"
OFFLINE_MODEL = "retrieval"

# environment variable -> key of the default agent model descriptor
_MODEL_ENV = {
    "KBSQL_DEFAULT_MODEL_PROVIDER": "provider",
    "KBSQL_DEFAULT_MODEL_NAME": "model_name",
    "KBSQL_DEFAULT_MODEL_API_KEY": "api_key",
    "KBSQL_DEFAULT_MODEL_BASE_URL": "base_url",
}


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data directory: argument, then `$KBSQL_HOME`, then `./.kbsql`."""
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    return Path(chosen).expanduser().resolve()


@dataclass
class EngineConfig:
    """Settings read once when the engine starts (each one's help: settings_table.py)."""

    data_dir: Path
    default_model: dict[str, Any] = field(
        default_factory=lambda: {"provider": OFFLINE_PROVIDER, "model_name": OFFLINE_MODEL}
    )
    default_embedding_model: dict[str, Any] | None = None
    """None means the bundled all-MiniLM-L6-v2; a descriptor here replaces it engine-wide."""
    allowed_paths: tuple[Path, ...] | None = None
    """Roots file-based data sources may open; None: anywhere but the data directory
    (datasources/confine.py). `kbsql serve` sets it with a token or a public bind."""
    read_only: bool = False
    """Set by the engine when the data directory cannot be written: it serves reads only."""
    background_inserts: int = 2
    """Background inserts (`INSERT ... SELECT ... USING batch_size`) running at once; more
    wait their turn."""
    catalog_url: str | None = None
    """A `postgresql://` URL: the catalog (and, by default, new knowledge bases) live in that
    database, shared by every server started with it. None: `catalog.sqlite` in data_dir."""
    statement_timeout: float | None = None
    """Seconds one SQL statement may run before it is interrupted; None or 0: no limit."""
    sql_memory_mb: int | None = None
    """DuckDB's memory limit; None: DuckDB's default (80% of RAM). Spills go to data_dir/tmp."""
    sql_threads: int | None = None
    """Threads one SQL statement may use (DuckDB's `threads`); None: every core."""
    sql_spill_mb: int | None = None
    """The most DuckDB may spill to disk; None: 4x the memory limit, at most a quarter of
    the free disk space."""
    model_timeout: float | None = None
    """Seconds one model call (embedding, chat, rerank) may take; None: the providers' own."""
    model_answer_mb: int = 8
    """Most one model answer may send (engine/models/answer_bound.py)."""
    allowed_model_hosts: tuple[str, ...] | None = None
    """Where model calls may go (engine/outbound.py); None: anywhere."""
    allowed_source_hosts: tuple[str, ...] | None = None
    """Where postgres/pgvector data sources may connect (engine/outbound.py's host rule);
    None: anywhere."""
    source_connect_timeout: float = 10.0
    """Seconds a postgres data source's connection attempt may take (postgres_source.py)."""
    model_concurrency: int | None = None
    """Model calls in flight per model host (engine/outbound.py lanes); None: 16."""
    max_chunks_per_row: int = 10_000
    """Chunks one row's text may make (knowledge/chunking.py MAX_CHUNKS_PER_ROW)."""
    jobs_poll_s: float = 5.0
    """Seconds between the scheduler's looks for due job runs; 0: no scheduler thread."""
    job_workers: int = 2
    """Job runs at once in one engine (engine/jobs/scheduler.py); one creator's take half."""
    jobs_history_rows: int = 10_000
    """Job runs kept in the catalog's jobs_history (engine/jobs/job_store.py): each run adds a
    row holding its statements' text, so a job every minute grew the catalog without end."""
    jobs_time_scale: float = 1.0
    value_check_nodes: int = 50_000
    """Expression nodes the per-value size checks may add to one statement
    (sql/tables/value_caps.py): each copies its operands, so nested value functions (eight
    replace()s in one another) multiply the statement; one needing more is refused."""
    long_statement_tokens: int = 1000
    """SQL tokens above which a statement's parse and compile wait for a long-statement slot
    (sql/parse/long_statements.py); 0: none does."""
    long_statement_slots: int = 1
    edit_distance_cells: int = 250_000
    """Character pairs one levenshtein/damerau_levenshtein/editdist3 call may compare
    (value_caps.py): DuckDB cannot stop one within its vector of 2,048 rows."""
    """Test-only: job periods multiplied by it (engine/jobs/schedule.py)."""
    read_only_sources: bool = False
    """Writes to connected data sources (CREATE TABLE, INSERT, UPDATE, DELETE, DROP TABLE)
    are refused; off by default, as MindsDB writes to the databases it connects."""
    max_upload_decoded_mb: int = 64
    """What one uploaded file may decode to (datasources/upload_formats.py UploadBounds)."""
    disk_reserve_mb: int = 256
    """Free space a stored table must leave on the data directory's disk (frame_store.py)."""
    max_upload_columns: int = 4096
    max_upload_cells: int = 10_000_000
    pdf_timeout: float = 60.0
    """Seconds an uploaded PDF's text extraction may take (datasources/pdf_text.py)."""
    pdf_workers: int = 1
    """PDF text extractions at once (each a process taking a core); the table's default is
    half the cores."""
    pdf_cpu_per_mb: float = 60.0
    """CPU-seconds a PDF's text extraction may take per MB of the file, at least 2
    (datasources/pdf_text.py cpu_budget)."""
    upload_processes: int = 0
    """Uploaded files parsed at once, each in a process of its own
    (datasources/parse_process.py); 0: in the calling thread (the embedded default)."""
    upload_timeout: float = 60.0
    """Seconds the parse of an uploaded file in its process may take, its wait included."""
    llm_log_rows: int = 500
    """Language-model calls kept for `log.llm_log` (engine/models/llm_log.py); 0: none."""
    agent_max_iterations: int = 12
    agent_wall_time_s: float = 300.0
    agent_join_max_rows: int = 100
    """Distinct questions a query joining an agent with a table may ask (sql/tables/agent_join.py)."""
    max_variables: int = 1000
    max_variables_mb: int = 16
    """What one user's SET @name variables may keep (sql/parse/variables.py)."""
    served: bool = False
    """Set by `kbsql serve`: messages name its flags rather than config.json keys."""

    def note(self, key: str) -> str:
        """Where a user changes setting `key`: the server's flag or config.json's key."""
        flag = BY_NAME[key].flag
        if self.served and flag:
            return f"kbsql serve {flag}"
        return f"{key} in config.json"

    @classmethod
    def load(cls, data_dir: str | os.PathLike[str] | None = None, catalog_url: str | None = None,
             *, settings: Mapping[str, Any] | None = None, served: bool = False) -> EngineConfig:
        """The config of the data directory: `settings` (a `kbsql serve` flag given, or
        `kbsql.connect(settings=...)`) > environment > its config.json > default (the
        served default under `kbsql serve`). Raises `SettingError` for an unknown key or a
        value of the wrong type, or a config.json that is not JSON."""
        path = resolve_data_dir(data_dir)
        config_file = path / CONFIG_FILE
        file_values: Any = {}
        if config_file.exists():
            try:
                file_values = json.loads(config_file.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:  # which file: json's own words name none
                raise SettingError(f"config.json in {path} is not valid JSON: {exc}") from None
            if not isinstance(file_values, dict):
                raise SettingError(f"{config_file} must hold a JSON object of settings")
        given = dict(settings or {})
        for key in given:
            if key not in FILE_KEYS:
                raise unknown_key(key, FILE_KEYS, "kbsql serve" if served else "settings")
        if catalog_url:
            given["catalog_url"] = catalog_url
        values = resolve(given, file_values, served=served, environ=os.environ,
                         where=f"config.json in {path}", names=FILE_KEYS)
        config = cls(data_dir=path, served=served)
        if values["default_model"] is not None:
            config.default_model = values["default_model"]
        for key in FILE_KEYS:
            if key != "default_model" and values[key] is not None:
                setattr(config, key, values[key])
        config.catalog_url = config.catalog_url or None
        if config.catalog_url is not None:
            _check_catalog_url(config.catalog_url)
        if config.allowed_model_hosts is not None:
            config.allowed_model_hosts = _hosts(config.allowed_model_hosts)
        if config.allowed_source_hosts is not None:
            config.allowed_source_hosts = _hosts(config.allowed_source_hosts, "allowed_source_hosts")
        env_model = {key: os.environ[var] for var, key in _MODEL_ENV.items() if os.environ.get(var)}
        if env_model:
            if "provider" in env_model and env_model["provider"] != config.default_model.get("provider"):
                config.default_model = {}
            config.default_model.update(env_model)
        return config


def _hosts(entries: tuple[str, ...], key: str = "allowed_model_hosts") -> tuple[str, ...] | None:
    """Allowed model (or source) hosts, normalized (engine/outbound.py); none named: None (anywhere)."""
    from kbsql.engine.outbound import normalize_entry

    try:
        return tuple(normalize_entry(h) for h in entries) or None
    except ValueError as exc:
        raise SettingError(f"{key}: {exc}") from None


def _check_catalog_url(url: str) -> None:
    """Only a postgresql:// URL names a shared catalog. Anything else (libpq's `host=...
    password=...` form) was taken for a SQLite path: the server started alone on a new file
    named after it, password and all, in its working directory. The value is not echoed: it
    may hold a password in a form the URL masker does not know."""
    from kbsql.engine.postgres.catalog_pg import is_postgres_url

    if not is_postgres_url(url):
        raise SettingError("catalog_url (kbsql serve --catalog, $KBSQL_CATALOG_URL) must be a "
                           "postgresql:// URL; without one the catalog is catalog.sqlite in the "
                           "data directory")
