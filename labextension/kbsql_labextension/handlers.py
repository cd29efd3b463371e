"""The Jupyter server side of the sidebar: `GET <base_url>/kbsql/catalog?url=...`.

Authenticated like every Jupyter API (token or cookie). Errors carry the kbsql interface's
problem fields, `{"title", "detail"}` (as JSON: Jupyter's APIHandler sets the type), so the
sidebar shows the kbsql server's own sentence.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from kbsql_labextension.catalog import fetch_catalog


class CatalogHandler(APIHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        url = self.get_query_argument("url", "").strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            return self._problem(400, "Bad request", "url must be an http:// or https:// kbsql server URL")
        try:
            catalog = await asyncio.to_thread(fetch_catalog, url)
        except ImportError:
            return self._problem(501, "Not available", "kbsql is not installed in the Jupyter server's "
                                 "environment")
        except Exception as exc:  # network errors and the service's own errors, shown as sent
            return self._problem(502, "Bad gateway", f"{url}: {exc}")
        self.finish(json.dumps(catalog))

    def _problem(self, status: int, title: str, detail: str) -> None:
        self.set_status(status)
        self.finish(json.dumps({"title": title, "detail": detail}))


def setup_handlers(web_app: Any) -> None:
    base = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base, "kbsql", "catalog"), CatalogHandler)])
