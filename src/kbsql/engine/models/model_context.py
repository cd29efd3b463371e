"""What the engine lends every model provider it builds, and the one base-URL rule.

`ProviderContext` is the second argument of every provider factory (a plugin's too, so it is
public in `kbsql.spi`); the base-URL rule is shared by embeddings, rerankers and chat
providers. Both sit below the provider modules and the registries that list them
(`providers.py`), so the protocol modules can name the context without a cycle.

The base-URL rule: a provider whose name is its own service (`openai`, `anthropic`,
`ollama`) may omit `base_url` and means that service's default URL; an alias for "anything
speaking the OpenAI API" (`vllm`, `lmstudio`, `azure_openai`, ...) must name its URL: never
a guess that would send a key to OpenAI.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from kbsql.engine.models.llm_log import LlmLog
from kbsql.engine.models.model_http import ModelHttp
from kbsql.interface.errors import MissingParameter, ProviderError

T = TypeVar("T")

# the providers that are their own service: they may omit base_url
OWN_SERVICE = frozenset({"openai", "anthropic", "ollama"})
OPENAI_BASE = "https://api.openai.com/v1"


def base_url_of(descriptor: dict[str, Any]) -> str | None:
    """The descriptor's `base_url` (or `api_base`), or None when the provider may use its own
    service's default. A missing URL for an alias is a `ProviderError` naming the fix."""
    base_url = descriptor.get("base_url") or descriptor.get("api_base")
    if base_url:
        return str(base_url)
    provider = str(descriptor.get("provider") or "")
    if provider.lower() in OWN_SERVICE:
        return None
    raise ProviderError(f"Provider '{provider}' (model '{descriptor.get('model_name')}') "
                        "needs a base_url: only provider 'openai' defaults to api.openai.com")


def openai_base(descriptor: dict[str, Any]) -> str:
    """The OpenAI-style base URL of a model descriptor, ending with the API version path (a
    bare host gets `/v1`); `base_url_of`'s rule decides whether it may be left out."""
    base_url = base_url_of(descriptor)
    if base_url is None:
        return OPENAI_BASE
    url = str(base_url).rstrip("/")
    return url if urlsplit(url).path not in ("", "/") else url + "/v1"


@dataclass
class ProviderContext:
    """What the engine lends every provider it builds (the second argument of a provider
    factory): the pooled outbound HTTP client with the engine's outbound policy,
    `load_once` for what is costly to load and safe to share (a local model's weights),
    kept for the engine's lifetime, and the engine's `llm_log` of language-model calls
    (`log.llm_log`; a plugin's provider may record its own calls there)."""

    http: ModelHttp = field(default_factory=ModelHttp)
    llm_log: LlmLog = field(default_factory=LlmLog)
    _loaded: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def with_http(self, http: ModelHttp) -> ProviderContext:
        """A context with this one's loaded models and another HTTP client: what two engines
        of one process may share (the weights), keeping apart what they must not (each
        engine's client carries its own outbound policy and is closed with that engine, and
        each engine keeps its own log of model calls)."""
        return ProviderContext(http=http, _loaded=self._loaded, _lock=self._lock)

    def load_once(self, key: str, load: Callable[[], T]) -> T:
        """`load()` the first time `key` is asked for, the same object after that."""
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = load()
            return self._loaded[key]  # type: ignore[no-any-return]


def hosted_key(api_key: Any, base_url: str, own_url: str, variable: str, provider: str) -> str | None:
    """The key a model is called with, chat and embedding providers alike: the descriptor's;
    else, only at the service's own URL (`own_url`), the environment's `variable` (a model
    whose descriptor names another base_url never receives the server's key). At its own URL
    the hosted service refuses a call without one, so none there is said before going out."""
    if api_key:
        return str(api_key)
    if not variable or base_url.rstrip("/") != own_url.rstrip("/"):
        return None
    key = os.environ.get(variable) or None
    if key is None:
        raise MissingParameter(f"'api_key' is required for provider '{provider}' at {own_url}: give it "
                               f"in the model's parameters, or set {variable} where the engine runs")
    return key
