"""JupySQL's `%sql`, as MindsDB's docs show it, in a notebook executed by nbclient against a
real `kbsql serve --mysql-port`: create a knowledge base, insert, search, ask an agent."""

from __future__ import annotations

import json

import nbformat
from nbclient import NotebookClient

from kbsql.server.process import ServerProcess


def test_jupysql_notebook(door: ServerProcess) -> None:
    cells = [
        "%load_ext sql",
        f"%sql mysql+pymysql://mindsdb@127.0.0.1:{door.mysql_port}/mindsdb",
        "%%sql\nCREATE KNOWLEDGE_BASE manuals USING embedding_model = "
        "{'provider': 'kbsql', 'model_name': 'hash-64'}, metadata_columns = ['topic']",
        "%%sql\nINSERT INTO manuals (id, content, topic) VALUES\n"
        "(1, 'Refunds are accepted within 30 days of purchase.', 'billing'),\n"
        "(2, 'The pump seal must be replaced every year.', 'maintenance')",
        "found = %sql SELECT id, chunk_content, metadata, relevance FROM manuals "
        "WHERE content = 'pump seal' LIMIT 2\n"
        "frame = found.DataFrame()\n"
        "print(frame.columns.tolist(), frame['id'].tolist(), frame['relevance'].dtype)\n"
        "print(frame['metadata'][0])",
        "%sql CREATE AGENT manuals_helper USING data = {'knowledge_bases': ['mindsdb.manuals']}",
        "answer = %sql SELECT answer FROM manuals_helper WHERE question = "
        "'How often is the pump seal replaced?'\n"
        "print(answer.DataFrame()['answer'][0])",
        "%sql DROP AGENT manuals_helper",
        "%sql DROP KNOWLEDGE_BASE manuals",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = [o for cell in nb.cells for o in cell.get("outputs", [])]
    assert "error" not in {o["output_type"] for o in outputs}
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "2 rows affected." in text  # the insert
    # per cell: one print may reach the notebook as several stream outputs
    printed = ["".join(o["text"] for o in cell.get("outputs", [])
                       if o["output_type"] == "stream" and o.get("name") == "stdout") for cell in nb.cells]
    printed = [text for text in printed if text]
    columns_line, metadata_line = printed[0].splitlines()[:2]
    assert columns_line.startswith("['id', 'chunk_content', 'metadata', 'relevance'] ['2'")
    assert columns_line.endswith("float64")
    assert json.loads(metadata_line)["topic"] == "maintenance"
    assert "The pump seal must be replaced every year." in printed[1]  # the agent answered from the KB
