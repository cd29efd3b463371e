"""labextension/src/observation.ts against the engine's own observations, in Node: the chat's
table cells read as the `%agent` panel's (kbsql.notebook.table_view) for what render.py
writes. Needs Node and the extension's node_modules (cd labextension && npm install)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kbsql.engine.agents.render import table_text
from kbsql.interface.observation import parse_table
from kbsql.notebook.table_view import display_cells

EXT = Path(__file__).resolve().parents[2] / "labextension"
TYPESCRIPT = EXT / "node_modules" / "typescript"
SHOWN = """
const { parseObservation, displayCells } = require('./observation.js');
const text = require('fs').readFileSync(0, 'utf8');
const table = parseObservation(text);
process.stdout.write(JSON.stringify(displayCells(table.columns, table.rows)));
"""


def chat_cells(observation: str, tmp_path: Path) -> list[list[str]]:
    """The cells the chat shows for `observation`: observation.ts transpiled (its DOM helper
    stubbed) and run in Node."""
    node = shutil.which("node")
    if node is None or not TYPESCRIPT.is_dir():
        pytest.skip("needs node and labextension/node_modules (cd labextension && npm install)")
    build = ("const ts = require(process.argv[1]); const fs = require('fs');"
             "const src = fs.readFileSync(process.argv[2], 'utf8');"
             "fs.writeFileSync('observation.js', ts.transpileModule(src, {compilerOptions: "
             "{module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2020}}).outputText);")
    (tmp_path / "sidebar.js").write_text("exports.el = () => null;")
    subprocess.run([node, "-e", build, str(TYPESCRIPT), str(EXT / "src" / "observation.ts")],
                   cwd=tmp_path, check=True, timeout=60)
    shown = subprocess.run([node, "-e", SHOWN], cwd=tmp_path, input=observation, capture_output=True,
                           text=True, check=True, timeout=60)
    return json.loads(shown.stdout)


def test_metadata_cells_show_the_values_as_stored(tmp_path: Path) -> None:
    """The chat parsed a metadata cell and wrote it again: an order id 12345678901234567890
    (past 2^53) showed as 12345678901234567000 and a price 1.0 as 1, where the %agent panel
    shows them as stored. Its cells are now the panel's, internal keys hidden as before."""
    metadata = {"order_id": 12345678901234567890, "price": 1.0, "city": "Zürich",
                "tags": ["a", {"n": 9007199254740993}], "chunk_index": 0, "start_char": 0}
    observation = table_text(["chunk_content", "metadata", "relevance"],
                             [["The pump, model P-7", metadata, 0.638167250767744]], "2026-11-30")
    table = parse_table(observation)
    assert table is not None
    panel = [[str(c) for c in row] for row in display_cells(table.columns, table.rows)]
    shown = chat_cells(observation, tmp_path)
    assert shown == panel, (shown, panel)
    assert "12345678901234567890" in shown[0][1] and '"price": 1.0' in shown[0][1], shown
    assert "chunk_index" not in shown[0][1] and "_updated_at" not in shown[0][1], shown
