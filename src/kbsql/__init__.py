"""kbsql: knowledge bases and AI agents in Jupyter.

`kbsql.connect()` gives a client on the embedded engine (nothing to start);
`kbsql.connect("http://host:port")` gives the same client over HTTP.
`%load_ext kbsql` registers the notebook magics.

The public surface is what `tests/test_public_names.py` pins: this package's `__all__`,
`kbsql.interface` (data shapes, errors, the `ServiceApi` protocol), `kbsql.spi` (what a
plugin implements), `kbsql.client`, `kbsql.widgets` and the magics. Everything else
(`kbsql.engine.*`, `kbsql.server.*`, the modules under `kbsql.client` and `kbsql.notebook`) is
internal and may change.
"""

import functools as _functools
from typing import Any as _Any

from kbsql import _parser_import
from kbsql._version import __version__
from kbsql.client import Client
from kbsql.client import connect as _connect
from kbsql.notebook.progress_bar import notebook_or_tqdm as _notebook_or_tqdm

_parser_import.install()


@_functools.wraps(_connect)
def connect(*args: _Any, **kwargs: _Any) -> Client:
    # `kbsql.client.connect` with the front end's progress bars: an HTML bar in a Jupyter
    # kernel (saved in its final state), tqdm elsewhere; `progress=None` draws none
    kwargs.setdefault("progress", _notebook_or_tqdm)
    return _connect(*args, **kwargs)


def load_ipython_extension(ipython):
    """`%load_ext kbsql`: register the magics (imported lazily: IPython is optional)."""
    from kbsql.notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from kbsql.notebook.magics import unload_ipython_extension as unload

    unload(ipython)


__all__ = ["Client", "__version__", "connect"]
