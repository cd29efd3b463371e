"""Magic behaviours that must be the same on the embedded engine and over HTTP: `# comments`
at the end of magic lines, `%agent` failures failing the cell, errors naming the connection."""

from __future__ import annotations

import pytest

from kbsql.notebook.cell_params import strip_comment


@pytest.fixture(params=["embedded", "http"])
def where(request: pytest.FixtureRequest, cells) -> str:
    """Runs the test on the embedded engine, then on a real `kbsql serve` on loopback."""
    if request.param == "http":
        url = request.getfixturevalue("server_url")
        result, out = cells.run(f"%kbsql_connect {url} -a remote  # the team's server")
        assert result.success, out
        return "remote"
    cells.ok("%kbsql SELECT 1")  # opens the default (embedded) connection
    return "default"


def test_comment_rules():
    assert strip_comment("DIR  # note") == "DIR"
    assert strip_comment("# only a comment") == ""
    assert strip_comment("SELECT '#1' AS a # why") == "SELECT '#1' AS a"
    assert strip_comment("What is C#?") == "What is C#?"
    assert strip_comment("issue #12") == "issue #12"  # `#12` is a word, not a comment
    assert strip_comment('say "a # b" # c') == 'say "a # b"'


def test_comments_end_magic_lines(cells, where, tmp_path):
    frame = cells.ok("%kbsql -l 5 SELECT 1 AS a  # a line magic with a comment")
    assert list(frame.columns) == ["a"] and frame.iloc[0, 0] == 1
    assert cells.ok("%%kbsql -o kept  # cell magics too\nSELECT 2 AS b").iloc[0, 0] == 2
    assert cells.ns["kept"].iloc[0, 0] == 2
    result, out = cells.run(f"%kbsql_connect {tmp_path / 'other'} -a other  # a second engine")
    assert result.success and "other" in out, out
    _, listing = cells.run("%kbsql_connect --list  # which ones?")
    assert "* other" in listing and where in listing


def test_unknown_agent_fails_the_cell(cells, where):
    result, out = cells.run("%agent nobody hello?  # no such agent")
    assert not result.success, out
    assert "nobody" in out and "Traceback" not in out
