"""Loaded by the Jupyter processes the tests start (JupyterLab, `jupyter ... list`), which
find this folder first on their PYTHONPATH (tests/jupyterlab_fixtures.py `jupyter_env`).

jsonschema (imported by every Jupyter server through jupyter_events, and by nbformat) imports
`rfc3987_syntax` when it is installed, which compiles 17 Lark Earley grammars at import: about
3.3 CPU-s in every such process, measured here (`python -c "import jsonschema"`: 3.3 s with it,
0.2 s without). jsonschema treats the module as optional (it then skips the `iri` format check
of event schemas). The tests drive kbsql's extension, not jupyter_events' schema formats, so
the Jupyter processes they start do without it."""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder


class _NoIriGrammars(MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname == "rfc3987_syntax" or fullname.startswith("rfc3987_syntax."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (tests/jupyter_site)", name=fullname)
        return None


sys.meta_path.insert(0, _NoIriGrammars())
