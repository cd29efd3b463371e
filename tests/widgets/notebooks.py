"""The demo notebook the nbclient and JupyterLab tests run: a real offline agent over the
embedded engine, its stream shown by `show_agent_stream`."""

from __future__ import annotations

from pathlib import Path

import nbformat

QUESTION = "What is the refund policy?"

SETUP = """\
import kbsql
from kbsql.notebook.widgets import show_agent_stream
client = kbsql.connect(data_dir={data_dir!r})
client.knowledge_bases.create("docs")
client.knowledge_bases.insert("docs", [
    {{"id": "1", "content": "Refunds are accepted within 30 days of purchase with a receipt."}},
    {{"id": "2", "content": "Shipping takes five business days inside the country."}},
])
client.agents.create("support", data={{"knowledge_bases": ["mindsdb.docs"]}})
"""

RUN = """\
question = {question!r}
answer = show_agent_stream(client.agents.stream("support", question), question=question, agent="support")
print("ANSWER:", answer)
"""

FALLBACK = """\
import os
os.environ["KBSQL_WIDGETS"] = "html"  # as for a frontend that cannot render widgets
answer = show_agent_stream(client.agents.stream("support", "How long does shipping take?"),
                           question="How long does shipping take?", agent="support")
del os.environ["KBSQL_WIDGETS"]
"""

CHAT = """\
from kbsql.notebook.widgets import ChatWidget
chat = ChatWidget(client, "support")
chat
"""


def write_demo_notebook(path: Path, data_dir: Path, *, chat: bool = False,
                        fallback: bool = False) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(SETUP.format(data_dir=str(data_dir))),
                nbformat.v4.new_code_cell(RUN.format(question=QUESTION))]
    if fallback:
        nb.cells.append(nbformat.v4.new_code_cell(FALLBACK))
    if chat:
        nb.cells.append(nbformat.v4.new_code_cell(CHAT))
    nbformat.write(nb, path)
    return path


SAVED_STATE_CELLS = [
    """\
%load_ext kbsql
%kbsql_connect {data_dir} -a demo  # the notebook's own engine
from kbsql.notebook import current_client
from kbsql.widgets import ChatWidget, browse
client = current_client()
client.knowledge_bases.create("docs")
client.knowledge_bases.insert("docs", [
    {{"id": "1", "content": "Refunds are accepted within 30 days of purchase with a receipt."}},
    {{"id": "2", "content": "Shipping takes five business days inside the country."}},
])
client.agents.create("support", data={{"knowledge_bases": ["mindsdb.docs"]}})
""",
    """\
client.knowledge_bases.create("big", embedding_model={{"provider": "kbsql", "model_name": "hash-64"}})
client.knowledge_bases.insert("big", [{{"id": i, "content": f"row {{i}} " * 40}} for i in range(1200)],
                              progress=True)
""",
    "%agent support What is the refund policy?",
    """\
chat = ChatWidget(client, "support")
chat
""",
    """\
chat.send("How long does shipping take?", block=True)
chat.send("And refunds?", block=True)
""",
    """\
browser = browse(client)
browser
""",
    """\
browser.kb_list.value = "docs"
browser.search("refund")
""",
]


def write_saved_state_notebook(path: Path, data_dir: Path) -> Path:
    """Every kbsql widget and the insert progress, each left in a state a user would want
    to find again: a two-question chat, a browser showing a search, a finished bar."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c.format(data_dir=str(data_dir))) for c in SAVED_STATE_CELLS]
    nbformat.write(nb, path)
    return path
