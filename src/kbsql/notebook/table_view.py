"""How a result table is shown (never what it holds): the DataFrame a magic returns keeps
every value; only the display copy is trimmed.

- Internal metadata keys (chunk_index, start_char, ... the contract's bookkeeping) are hidden
  from the `metadata` column unless asked (`%kbsql --internal-metadata`): they drown the
  user's own columns.
- `relevance` / `distance` are rounded to 4 decimals for the eye.
- Long text is cut with a click-to-expand `<details>` in HTML (`%kbsql --full` shows it
  whole, in HTML and in text), instead of pandas' silent 50-character cut.
- Text is left-aligned (numbers stay right-aligned, as notebooks align them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

import pandas as pd

from kbsql.interface.results import KB_INTERNAL_METADATA

INTERNAL_METADATA = frozenset(KB_INTERNAL_METADATA)
"""Hidden from display, with any `_`-prefixed key."""
SCORE_COLUMNS = ("relevance", "distance")
SCORE_DECIMALS = 4
PREVIEW_CHARS = 80
TEXT_WIDTH = 50


def public_metadata(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: v for k, v in value.items() if k not in INTERNAL_METADATA and not str(k).startswith("_")}


def display_frame(frame: pd.DataFrame, *, internal_metadata: bool = False) -> pd.DataFrame:
    """A copy for display: internal metadata keys dropped (unless asked), scores rounded."""
    shown = frame.copy(deep=False)
    if "metadata" in shown.columns and not internal_metadata:
        shown["metadata"] = shown["metadata"].map(public_metadata)
    for name in SCORE_COLUMNS:
        if name in shown.columns and pd.api.types.is_float_dtype(shown[name]):
            shown[name] = shown[name].round(SCORE_DECIMALS)
    return shown


def display_cells(columns: list[str], rows: Sequence[Sequence[object]]) -> list[list[object]]:
    """An agent step's observation table (text cells, as the model read them) trimmed by the
    same rules for the agent panel: its `metadata` JSON without the internal keys, its scores
    to 4 decimals. The panel showed `{"product": "pump", "_chunk_index": 0, ...,
    "_updated_at": "2026-11-30 05:02:29.727126"}` and `0.638167250767744` in every row."""
    metadata = columns.index("metadata") if "metadata" in columns else None
    scores = [i for i, name in enumerate(columns) if name in SCORE_COLUMNS]
    shown = []
    for row in rows:
        cells = list(row)
        if metadata is not None and metadata < len(cells):
            cells[metadata] = _public_json(str(cells[metadata]))
        for i in (i for i in scores if i < len(cells)):
            cells[i] = _rounded(str(cells[i]))
        shown.append(cells)
    return shown


def _public_json(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(public_metadata(value), ensure_ascii=False) if isinstance(value, dict) else text


def _rounded(text: str) -> str:
    try:
        return f"{float(text):.{SCORE_DECIMALS}f}"
    except ValueError:
        return text


LEFT = "text-align:left"
"""Text reads from the left: notebooks right-align every cell (`td {text-align: right}`,
for numbers), which leaves sentences ragged on the left."""


def _cell_html(value: Any, full: bool) -> str:
    text = str(value)
    if full or len(text) <= PREVIEW_CHARS:
        return f'<div style="{LEFT}">{escape(text)}</div>'
    return (f'<div style="{LEFT}"><details class="kbsql-cell"><summary style="cursor:pointer">'
            f'{escape(text[:PREVIEW_CHARS])}…</summary>'
            f'<div style="white-space:pre-wrap;max-width:60em">{escape(text)}</div></details></div>')


SCROLL = "overflow-x:auto;max-width:100%"
"""The table's box: a result wider than the output (EVALUATE's `created_at`, many metadata
columns) scrolls sideways inside it instead of being cut at the panel's edge."""


def frame_html(shown: pd.DataFrame, *, full: bool = False) -> str:
    """pandas' HTML table, in a box that scrolls sideways (`SCROLL`), with text cells escaped
    here (`escape=False` to pandas) so a long one can carry its click-to-expand markup; names
    and index are escaped the same way."""
    safe = shown.set_axis([escape(str(c)) for c in shown.columns], axis=1)
    safe = safe.set_axis([escape(str(v)) for v in safe.index], axis=0)
    formatters = {name: (lambda v, f=full: _cell_html(v, f))
                  for name, column in zip(safe.columns, shown.columns, strict=True)
                  if not pd.api.types.is_numeric_dtype(shown[column])}  # every value that is text
    with pd.option_context("display.max_colwidth", None):  # pandas would cut our markup
        table = safe.to_html(escape=False, formatters=formatters, max_rows=None, max_cols=None,
                             notebook=True, na_rep="NaN")
    return f'<div class="kbsql-table" style="{SCROLL}">{table}</div>'


def frame_text(shown: pd.DataFrame, *, full: bool = False) -> str:
    with pd.option_context("display.max_colwidth", None if full else TEXT_WIDTH,
                           "display.max_rows", None):
        return repr(shown)
