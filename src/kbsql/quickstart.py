"""`kbsql quickstart`: the embedded engine end to end, on real offline text.

Builds a knowledge base from Python's own documentation topics (`pydoc_data.topics`,
shipped with CPython), searches it with SQL, and asks the offline agent a question,
printing each step of its stream. Nothing is downloaded; nothing needs a key.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kbsql
from kbsql.interface.errors import KbsqlError
from kbsql.interface.observation import parse_table
from kbsql.interface.stream import chunk_kind

TOPICS = ("assert", "break", "continue", "for", "if", "import", "lambda", "raise", "return",
          "try", "while", "with", "yield", "del", "global", "pass", "class", "def")


def documents() -> list[dict[str, str]]:
    from pydoc_data.topics import topics

    return [{"id": name, "content": topics[name], "topic": name}
            for name in TOPICS if name in topics]


def run(data_dir: str | None = None) -> int:
    """Run the tour in `data_dir` (kept), else in a temporary folder removed at the end. An
    error the service gives is one line on stderr and exit 1: without the model package (the
    second step of README's first command) it ended in a 20-line Python traceback whose last
    line held the fix."""
    try:
        if data_dir:
            return _tour(Path(data_dir))
        with tempfile.TemporaryDirectory(prefix="kbsql-quickstart-", ignore_cleanup_errors=True) as home:
            return _tour(Path(home), temporary=True)
    except KbsqlError as exc:
        print(f"kbsql quickstart: {exc}", file=sys.stderr)
        return 1


def _tour(home: Path, temporary: bool = False) -> int:
    kept = " (a temporary folder, removed at the end; --data-dir keeps one)" if temporary else ""
    print(f"kbsql {kbsql.__version__} quickstart, embedded engine in {home}{kept}")
    client = kbsql.connect(data_dir=home)
    try:
        client.sql("DROP KNOWLEDGE_BASE IF EXISTS python_docs")
        client.sql("CREATE KNOWLEDGE_BASE python_docs USING content_columns = ['content'], "
                   "metadata_columns = ['topic'], id_column = 'id'")
        started = time.perf_counter()
        count = client.knowledge_bases.insert("python_docs", documents(), progress=False)
        chunks = client.query("SELECT * FROM python_docs LIMIT 100000")
        print(f"inserted {count} documents as {len(chunks)} chunks "
              f"in {time.perf_counter() - started:.1f}s (all-MiniLM-L6-v2, FAISS)")

        question = "how do I leave a loop early"
        hits = client.query(f"SELECT * FROM python_docs WHERE content = '{question}' LIMIT 3")
        print(f"\nSELECT * FROM python_docs WHERE content = '{question}' LIMIT 3")
        print(f"{'id':<10} {'relevance':<9}  chunk_content")  # the text: why each row was found
        for row in hits.itertuples():
            print(f"{row.id:<10} {row.relevance:<9.4f}  {snippet(row.chunk_content)}")

        if "docs_agent" in [a.name for a in client.agents.list()]:
            client.agents.delete("docs_agent")
        client.agents.create("docs_agent", data={"knowledge_bases": ["mindsdb.python_docs"]},
                             prompt_template="Answer questions about Python statements.")
        print(f"\n%agent docs_agent {question}?")
        return print_stream(client.agents.stream("docs_agent", f"{question}?"))
    finally:
        client.close()


def print_stream(chunks: Iterable[dict[str, Any]]) -> int:
    """Each step of an agent's stream on its own line, the answer as it grows: a streaming
    model's tokens arrive as partial output chunks and print one after the other on one line
    (the offline agent sends its answer whole; its last line says how to get a real model).
    1 when the stream ended on an error."""
    answering = False
    for chunk in chunks:
        kind = chunk_kind(chunk)
        if kind == "output":
            print("" if answering else "answer: ", chunk["output"], sep="", end="", flush=True)
            answering = True
            continue
        if answering and kind in ("actions", "steps", "error"):  # text before a tool call: a thought
            print()
            answering = False
        if kind == "actions":
            for action in chunk["actions"]:
                print(f"  tool  {action['tool']}({action['tool_input']!r})")
        elif kind == "steps":
            for step in chunk["steps"]:
                print(f"  seen  {seen(step['observation'])}")
        elif kind == "error":
            print(f"error: {chunk['content']}")
            return 1
    if answering:
        print()
    return 0


def seen(observation: str) -> str:
    """One line for a tool's observation: a table's row count and the ids it holds (the first
    line of a table observation is its column names, "Output columns: 'id', 'chunk_id', ...",
    which is all the quick start printed of kb_query_tool's 20 rows), else its first line."""
    table = parse_table(observation)
    if table is None or not table.columns:
        first = observation.strip().splitlines()[:1]
        return first[0][:90] if first else ""
    count = f"{len(table.rows)} row{'' if len(table.rows) == 1 else 's'}"
    ids = list(dict.fromkeys(row.get("id", "") for row in table.records() if row.get("id")))
    if not ids:
        return count
    return f"{count}, ids {', '.join(ids[:6])}{', ...' if len(ids) > 6 else ''}"


def snippet(text: str, width: int = 70) -> str:
    """A chunk's opening words on one line, without the rows of `*` that underline a pydoc
    topic's title."""
    words = " ".join(re.sub(r"[*=~^-]{4,}", " ", text).split())
    return words if len(words) <= width else words[:width - 3] + "..."
