"""HTTP calls to model providers (embeddings, rerankers) with errors a user can act on.

Every failure becomes a `ProviderError` whose message names the provider and the model
(`what`) and the URL, never the api key.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx

from kbsql.engine import outbound
from kbsql.engine.providers import base_url_of
from kbsql.interface.errors import ProviderError
from kbsql.interface.secrets import scrub_secret

TIMEOUT = httpx.Timeout(60.0, connect=5.0)
OPENAI_BASE = "https://api.openai.com/v1"

_client: httpx.Client | None = None


def client() -> httpx.Client:
    global _client
    if _client is None:
        _client = httpx.Client(timeout=TIMEOUT, transport=outbound.transport())
    return _client


def openai_base(descriptor: dict[str, Any]) -> str:
    """The OpenAI-style base URL of a model descriptor (`base_url` or `api_base`), ending
    with the API version path (a bare host gets `/v1`). Only provider `openai` may omit it
    and mean api.openai.com: any other provider (azure_openai, vllm, lmstudio, ...) without
    a URL is an error, never a guess that would send its key to OpenAI."""
    base_url = base_url_of(descriptor)  # the one base-URL rule (engine/providers.py)
    if base_url is None:
        return OPENAI_BASE
    url = str(base_url).rstrip("/")
    return url if urlsplit(url).path not in ("", "/") else url + "/v1"


def post_json(url: str, body: dict[str, Any], api_key: Any, what: str) -> Any:
    """POST one JSON call to a model; it passes the outbound policy (engine/outbound.py:
    allowed hosts, a lane slot, the model timeout) and fails in its words."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    outbound.check(url, what)
    timeout = httpx.Timeout(outbound.call_timeout(TIMEOUT.read or 60.0), connect=TIMEOUT.connect)
    with outbound.lane(url, what):
        try:
            response = client().post(url, json=body, headers=headers, timeout=timeout)
        except httpx.HTTPError as exc:
            raise outbound.unreachable(what, url) from exc
    if response.status_code >= 400:
        text = scrub_secret(response.text[:300], str(api_key) if api_key else None)
        raise outbound.refused(what, url, response.status_code, text)
    try:
        return response.json()
    except ValueError as exc:
        raise ProviderError(f"{what} answered something that is not JSON at "
                            f"{outbound.origin(url)}") from exc
