"""Tab completion in `%%kbsql` cells (an IPython matcher: every frontend gets it), embedded and
over HTTP: knowledge bases and tables after FROM, columns and metadata keys of the tables the
cell names; nothing of it outside kbsql cells."""

from __future__ import annotations

import pandas as pd
import pytest
from IPython.core.completer import provisionalcompleter


@pytest.fixture(params=["embedded", "http"])
def where(request: pytest.FixtureRequest, cells) -> str:
    if request.param == "http":
        url = request.getfixturevalue("server_url")
        assert cells.run(f"%kbsql_connect {url} -a remote")[0].success
    cells.ok("%kbsql CREATE KNOWLEDGE_BASE notes USING embedding_model = "
             "{'provider': 'kbsql', 'model_name': 'hash-64'}, metadata_columns = ['room', 'floor']")
    from kbsql.notebook import current_client

    current_client().register("sales", pd.DataFrame({"region": ["n"], "amount": [1]}))
    return request.param


def complete(ip, text: str) -> dict[str, str]:
    with provisionalcompleter():
        return {c.text: c.type for c in ip.Completer.completions(text, len(text))}


def test_names_after_from_and_join(ip, where):
    found = complete(ip, "%%kbsql\nSELECT * FROM no")
    assert found.get("notes") == "knowledge base"
    assert "df." in complete(ip, "%%kbsql\nSELECT * FROM notes JOIN ")
    assert complete(ip, "%%kbsql -o x\nSELECT * FROM df.sa") == {"df.sales": "table"}
    assert "notes" in complete(ip, "%kbsql SELECT * FROM no")  # the line magic too


def test_columns_and_metadata_keys_of_the_tables_in_the_cell(ip, where):
    text = "%%kbsql\nSELECT chunk_content, ro"  # the cursor sits on `ro`, FROM comes after
    with provisionalcompleter():
        cell = text + "\nFROM notes WHERE content = 'x'"
        found = {c.text: c.type for c in ip.Completer.completions(cell, len(text))}
    assert found == {"room": "metadata column"}
    assert "relevance" in complete(ip, "%%kbsql\nSELECT * FROM notes WHERE rel")
    assert complete(ip, "%%kbsql\nSELECT reg FROM df.sales WHERE reg") == {"region": "column"}


def test_python_cells_are_left_alone(ip, where):
    ip.user_ns["notebook_value"] = 1
    found = complete(ip, "note")
    assert "notebook_value" in found and "notes" not in found
