"""The kbsql JupyterLab extension, shipped prebuilt, and its small server part.

pip puts the bundle in share/jupyter/labextensions/kbsql-labextension, where JupyterLab
finds it, and enables the server extension (the routes behind the sidebar and the agent
chat, see handlers.py) through etc/jupyter/jupyter_server_config.d.
"""

__version__ = "0.1.0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "kbsql-labextension"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "kbsql_labextension"}]


def _load_jupyter_server_extension(server_app) -> None:
    import atexit

    from kbsql_labextension.handlers import CLIENTS, setup_handlers

    setup_handlers(server_app.web_app)
    atexit.register(CLIENTS.close_all)
