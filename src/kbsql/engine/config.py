"""Where the engine keeps its data and which models it uses when none is given.

Resolution order, most specific first: explicit argument, environment variable, the
`config.json` file in the data directory, built-in default. The default agent model is the
offline retrieval agent, so an agent works on a fresh machine with no key and no network.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA_DIR_ENV = "KBSQL_HOME"
CATALOG_URL_ENV = "KBSQL_CATALOG_URL"
DEFAULT_DATA_DIR = ".kbsql"
CONFIG_FILE = "config.json"

OFFLINE_PROVIDER = "kbsql"
OFFLINE_MODEL = "retrieval"

_LIMIT_KEYS = ("statement_timeout", "sql_memory_mb", "sql_spill_mb", "model_timeout",
               "max_chunks_per_row")

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
    """Settings read once when the engine starts."""

    data_dir: Path
    default_model: dict[str, Any] = field(
        default_factory=lambda: {"provider": OFFLINE_PROVIDER, "model_name": OFFLINE_MODEL}
    )
    default_embedding_model: dict[str, Any] | None = None
    """None means the bundled all-MiniLM-L6-v2; a descriptor here replaces it engine-wide."""
    extra: dict[str, Any] = field(default_factory=dict)
    allowed_paths: tuple[Path, ...] | None = None
    """Roots file-based data sources may open; None: anywhere but the data directory
    (datasources/confine.py). `kbsql serve` sets it with a token or a public bind."""
    read_only: bool = False
    """Set by the engine when the data directory cannot be written: it serves reads only."""
    background_workers: int = 2
    """Background inserts (`INSERT ... SELECT ... USING batch_size`) running at once; more
    wait their turn (`kbsql serve --background-inserts N`, `background_inserts` in config.json)."""
    catalog_url: str | None = None
    """A `postgresql://` URL: the catalog (and, by default, new knowledge bases) live in that
    database, shared by every server started with it. None: `catalog.sqlite` in data_dir."""
    statement_timeout: float | None = None
    """Seconds one SQL statement may run before it is interrupted; None or 0: no limit
    (embedded default; `kbsql serve --statement-timeout` sets one)."""
    sql_memory_mb: int | None = None
    """DuckDB's memory limit; None: DuckDB's default (80% of RAM). Spills go to data_dir/tmp."""
    sql_spill_mb: int | None = None
    """The most DuckDB may spill to disk; None: 4x the memory limit, at most a quarter of
    the free disk space."""
    model_timeout: float | None = None
    """Seconds one model call (embedding, chat, rerank) may take; None: the providers' own."""
    allowed_model_hosts: tuple[str, ...] | None = None
    """Where model calls may go (engine/outbound.py); None: anywhere."""
    model_concurrency: int | None = None
    """Model calls in flight per model host (engine/outbound.py lanes); None: 16."""
    max_chunks_per_row: int = 10_000
    """Chunks one row's text may make (knowledge/chunking.py MAX_CHUNKS_PER_ROW)."""
    served: bool = False
    """Set by `kbsql serve`: messages name its flags rather than config.json keys."""

    def note(self, key: str) -> str:
        """Where a user changes setting `key`: the server's flag or config.json's key."""
        if self.served:
            return "kbsql serve --" + key.replace("_", "-")
        return f"{key} in config.json"

    @classmethod
    def load(cls, data_dir: str | os.PathLike[str] | None = None,
             catalog_url: str | None = None) -> EngineConfig:
        path = resolve_data_dir(data_dir)
        file_values: dict[str, Any] = {}
        config_file = path / CONFIG_FILE
        if config_file.exists():
            file_values = json.loads(config_file.read_text(encoding="utf-8"))
        config = cls(data_dir=path)
        if isinstance(file_values.get("default_model"), dict):
            config.default_model = dict(file_values["default_model"])
        if isinstance(file_values.get("default_embedding_model"), dict):
            config.default_embedding_model = dict(file_values["default_embedding_model"])
        for key in _LIMIT_KEYS:  # bounds an embedded user may set in config.json
            value = file_values.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                whole = key.endswith(("_mb", "_row"))
                setattr(config, key, int(value) if whole else float(value))
        if isinstance(file_values.get("background_inserts"), int) and file_values["background_inserts"] > 0:
            config.background_workers = file_values["background_inserts"]
        config.extra = {k: v for k, v in file_values.items()
                        if k not in ("default_model", "default_embedding_model", "catalog_url",
                                     "background_inserts", *_LIMIT_KEYS)}
        config.catalog_url = (catalog_url or os.environ.get(CATALOG_URL_ENV)
                              or file_values.get("catalog_url") or None)
        env_model = {key: os.environ[var] for var, key in _MODEL_ENV.items() if os.environ.get(var)}
        if env_model:
            if "provider" in env_model and env_model["provider"] != config.default_model.get("provider"):
                config.default_model = {}
            config.default_model.update(env_model)
        return config
