"""The client: `connect()` for the embedded engine, `connect(url)` for a server."""

from kbsql.client.client import Client, connect

__all__ = ["Client", "connect"]
