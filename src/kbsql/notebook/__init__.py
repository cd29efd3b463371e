"""The notebook layer: `%%kbsql` / `%kbsql` SQL magics, `%agent`, connections and display.

Everything here is a thin shell over the client (`client.sql`, `client.agents.stream`):
a magic parses its arguments, makes one client call and shows the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbsql.client import Client


def current_client(alias: str | None = None) -> Client:
    """The client the magics use (the current connection, or `alias`), for Python calls in
    the same notebook: `current_client().register("sales", df)`. Opening a second client
    on the same data directory is avoided this way."""
    from IPython import get_ipython

    from kbsql.notebook.magics import KbSql

    shell = get_ipython()
    magics = next((c for c in getattr(shell, "configurables", []) if isinstance(c, KbSql)), None)
    if magics is None:
        raise RuntimeError("Load the magics first: %load_ext kbsql")
    return magics._connection(alias).client


__all__ = ["current_client"]
