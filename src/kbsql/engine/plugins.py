"""Registries: for each kind of extension, one table from a name to its implementation.

Four kinds, each with its entry-point group, so another package adds a storage backend or
a model provider by declaring it (as jupyter-ai and chromadb let plugins add models):

- storage backends, group `kbsql.storage`: a name a KB's `storage` (or a data source's
  ENGINE) gives; an object with `open(place) -> KbStorage` (knowledge/storage.py);
- embedding providers, `kbsql.embedding_providers`: `embedding_model.provider`; a factory
  `(descriptor, context) -> Embedder` (models/embeddings.py);
- chat (LLM) providers, `kbsql.llm_providers`: an agent's `model.provider`; a factory
  `(descriptor, context) -> Provider` (models/chat/base.py);
- rerankers, `kbsql.rerankers`: `reranking_model.provider`; a factory
  `(descriptor, context) -> Reranker` (models/rerank.py);
- data-source engines, `kbsql.datasources`: `CREATE DATABASE ... ENGINE`; a class
  `(name, alias, parameters) -> DataSource` with a static `normalize(parameters)`
  (datasources/scans.py, `DataSourceEngine`).

The protocols and value types a plugin implements are public in `kbsql.spi`; a plugin
imports only `kbsql.spi` and `kbsql.interface`.

A plugin's `pyproject.toml`:

    [project.entry-points."kbsql.embedding_providers"]
    my_provider = "my_package.embed:MyEmbedder"

The built-ins are a table in code (`providers.BUILTINS`), merged with the entry points, not
entry points of kbsql's own metadata: a checkout run from source (or an editable install
not reinstalled since a built-in was added) still has every built-in, a built-in name never
costs a scan of the installed distributions, and a plugin cannot silently replace one (a
plugin naming a built-in is ignored with a warning). Both are loaded on first use of a
name, never at import (`import kbsql` stays cheap): an unknown name asks the entry points,
once per registry. A plugin that fails to load is one `PluginError` naming the plugin, its
entry point and the error, for the request that named it; every other name keeps working.

Names are matched case-insensitively. The engine owns its registries (`Engine.__init__`
builds them), so nothing here is process-global state.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kbsql.interface.errors import ServiceError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

T = TypeVar("T")
log = logging.getLogger("kbsql.plugins")

STORAGE = "kbsql.storage"
EMBEDDING_PROVIDERS = "kbsql.embedding_providers"
LLM_PROVIDERS = "kbsql.llm_providers"
RERANKERS = "kbsql.rerankers"
DATASOURCES = "kbsql.datasources"
GROUPS = (STORAGE, EMBEDDING_PROVIDERS, LLM_PROVIDERS, RERANKERS, DATASOURCES)
"""Every entry-point group kbsql reads (`kbsql.spi` exports them)."""


class PluginError(ServiceError):
    """A registered implementation could not be loaded (a broken plugin): the server's
    installation is at fault, not the request, so a 500 whose detail names the plugin."""

    default_title = "Plugin error"


def load_reference(reference: str) -> Any:
    """`module:attribute` (an entry point's value) -> the object it names."""
    module, _, attribute = reference.partition(":")
    target: Any = importlib.import_module(module.strip())
    for part in filter(None, attribute.strip().split(".")):
        target = getattr(target, part)
    return target


@dataclass(frozen=True)
class _Entry:
    name: str
    reference: str  # module:attribute
    source: str  # "kbsql" for a built-in, else the plugin's distribution
    entry_point: EntryPoint | None = None


class Registry(Generic[T]):
    """Name -> implementation for one kind (`kind`, e.g. "embedding provider"): the
    built-ins (`builtins`: name -> "module:attribute") and the entry points of `group`.
    `instances`: a registered class is instantiated once (storage backends are objects);
    otherwise the registered callable is the implementation (a provider's factory)."""

    def __init__(self, kind: str, group: str, builtins: Mapping[str, str], *, instances: bool = False):
        self.kind = kind
        self.group = group
        self.instances = instances
        self._builtins = {name.lower(): _Entry(name.lower(), ref, "kbsql") for name, ref in builtins.items()}
        self._plugins: dict[str, _Entry] | None = None  # read on first miss
        self._loaded: dict[str, T] = {}
        self._lock = threading.Lock()

    def _plugin_entries(self) -> dict[str, _Entry]:
        if self._plugins is None:
            from importlib.metadata import entry_points  # read on the first miss only

            found: dict[str, _Entry] = {}
            for ep in entry_points(group=self.group):
                name = ep.name.lower()
                dist = getattr(getattr(ep, "dist", None), "name", None) or "an unknown distribution"
                if name in self._builtins:
                    log.warning("%s plugin %r from %s is ignored: %r is a built-in %s",
                                self.group, ep.value, dist, name, self.kind)
                    continue
                found.setdefault(name, _Entry(name, ep.value, dist, ep))
            self._plugins = found
        return self._plugins

    def _entry(self, name: str) -> _Entry | None:
        key = name.lower()
        hit = self._builtins.get(key)
        if hit is not None:
            return hit
        with self._lock:
            return self._plugin_entries().get(key)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._entry(name) is not None

    def names(self) -> list[str]:
        """Every name this registry knows (built-ins and plugins), without loading any."""
        with self._lock:
            return sorted({*self._builtins, *self._plugin_entries()})

    def get(self, name: str) -> T | None:
        """The implementation registered as `name`, loaded on first use; None when no
        built-in and no plugin has that name. A plugin that fails to load: `PluginError`."""
        key = name.lower()
        loaded = self._loaded.get(key)
        if loaded is not None:
            return loaded
        entry = self._entry(key)
        if entry is None:
            return None
        try:
            ep = entry.entry_point
            target = ep.load() if ep is not None else load_reference(entry.reference)
            implementation: T = target() if self.instances and isinstance(target, type) else target
        except Exception as exc:  # a plugin's import error must not be anything but its own
            raise PluginError(f"The {self.kind} {entry.name!r} could not be loaded: entry point "
                              f"{self.group} = {entry.reference} (from {entry.source}) failed with "
                              f"{type(exc).__name__}: {exc}") from exc
        with self._lock:
            return self._loaded.setdefault(key, implementation)
