"""Markdown as users paste it (a README, a docs site's page), rewritten as the plain text the
offline agent's reader splits into sentences (offline_text.paragraphs_of).

Why: Markdown is what most pasted documentation is, and two of its forms hid whole answers
(round 20, heldout18.json's `skyapi`). A pipe table with outer pipes and a `|---|` row was
dropped as debris (only rows written as text, "Oak pod | 4 | £85", were read); a fenced code
block's lines were glued to the prose around them. Each is rewritten here, before any reading:
a table's rows become text rows the reader already reads under their header, and a code block
ends the paragraph before it and is left out (code is never a sentence). (A sentence opening
in bold is offline_text.is_whole's; bold stays in what is quoted, as the text has it.) Plain
deterministic text processing. A table copied from a spreadsheet has its cells between tabs:
its lines are text rows too (round 27: heldout25's opening-hours table was read as one
"sentence" of every cell, too long and too diluted to answer "how late is the bar open").
A plain-text grid table (`+----+----+` borders, `| a | b |` rows, as psql or a text editor
draws it) is read as the same rows: heldout26.json's bin table was dropped as debris, so "and
the glass?" quoted the sentence under it (round 28).
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^\s*(?:```|~~~)")
_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
"""A Markdown table's row under its header: `|---|---|`, `| :--- | ---: |`."""
_PIPED = re.compile(r"^\s*\|(.*)\|\s*$")
_BORDER = re.compile(r"^\s*\+(?:[-=]{3,}\+)+\s*$")
"""A grid table's border line: `+-----+------+` (`=` under its header in some tools)."""


def plain(chunk: str) -> str:
    """`chunk` with its Markdown read as text: a table (a piped header line over a `|---|` row,
    and the piped rows after it) as text rows ("Day entry | £14 | £11"), a fenced code block as
    a blank line, a line of tab-separated cells as a text row, a grid table (`+---+` borders
    round piped rows) as text rows under its first row. Text without these marks is returned
    as it is."""
    if "|" not in chunk and "```" not in chunk and "~~~" not in chunk and "\t" not in chunk:
        return chunk
    lines = chunk.splitlines()
    out: list[str] = []
    fenced = table = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        if fenced:
            continue
        piped = _PIPED.match(line)
        if _BORDER.match(line):
            table = True  # a grid's border: debris to the reader, as a separator row is
            out.append(line)
            continue
        if piped and not table and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
            table = True  # the header: its separator row is read as debris and dropped
        elif not piped:
            table = False
        if table and _SEPARATOR.match(line):
            out.append(line)  # debris to the reader
            continue
        if table and piped:
            cells = [" ".join(c.split()) or "-" for c in piped.group(1).split("|")]
            line = " | ".join(cells)
        elif "\t" in line.strip():  # spreadsheet cells
            line = " | ".join(" ".join(c.split()) or "-" for c in line.strip().split("\t"))
        out.append(line)
    return "\n".join(out)
