"""Fixtures for the notebook layer: a real IPython shell with `%load_ext kbsql` on a temp
engine, and helpers to run cells the way a notebook does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.getipython import get_ipython
from IPython.testing import globalipapp
from IPython.testing.globalipapp import start_ipython


class Cells:
    """Runs cells in the shell and keeps what they printed."""

    def __init__(self, shell, capsys: pytest.CaptureFixture[str]):
        self.shell = shell
        self.capsys = capsys

    def run(self, code: str):
        """Run a cell; return (ExecutionResult, printed text)."""
        self.capsys.readouterr()
        result = self.shell.run_cell(code, store_history=True)
        captured = self.capsys.readouterr()
        return result, captured.out + captured.err

    def ok(self, code: str):
        result, out = self.run(code)
        assert result.success, f"cell failed: {result.error_in_exec!r}\n{out}"
        return result.result

    @property
    def ns(self) -> dict:
        return self.shell.user_ns


def global_shell():
    """IPython's global test shell, created once per process (`start_ipython`; later calls
    return None), and made the current shell again if a test cleared the singleton
    (`InteractiveShell.clear_instance()`): with pytest-xdist, files run in another order."""
    start_ipython()
    shell = globalipapp.get_ipython()  # rebound to the global shell's own get_ipython
    if get_ipython() is not shell:
        for cls in type(shell)._walk_mro():  # as SingletonConfigurable.instance() sets it
            cls._instance = shell
    assert get_ipython() is shell
    return shell


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """The global test shell with kbsql loaded on an embedded engine in a temp dir."""
    monkeypatch.setenv("KBSQL_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above a temp dir: built-in defaults
    shell = global_shell()
    shell.config.pop("KbSql", None)
    shell.extension_manager.load_extension("kbsql")
    yield shell
    shell.extension_manager.unload_extension("kbsql")
    shell.config.pop("KbSql", None)


@pytest.fixture
def cells(ip, capsys: pytest.CaptureFixture[str]) -> Cells:
    return Cells(ip, capsys)
