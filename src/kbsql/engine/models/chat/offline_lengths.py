"""Another value of the same thing (offline_limits.past_its_limit reads it as a limit passed): a
yes/no question asking if a thing takes or lasts a length of time the text gives otherwise ("does
the chainsaw induction take an hour" of "a 30-minute induction", round 23; "does the spray last 2
years" of "lasts 12 months", round 24), or happens at a time the table row naming it gives otherwise
("first jab at 6 weeks" of "8 weeks | First puppy jab", round 24, on heldout2-22.json; heldout23.json
is never tuned on). The text gives the thing's own value and it is not the one asked, so quoting it
as the answer would be a wrong answer. Plain deterministic text processing.
"""

from __future__ import annotations

import re

from kbsql.engine.models.chat.offline_amounts import CELL as _CELL
from kbsql.engine.models.chat.offline_amounts import MEASURES as _MEASURES
from kbsql.engine.models.chat.offline_amounts import NUM, number_value
from kbsql.engine.models.chat.offline_amounts import YES_NO as _YES_NO
from kbsql.engine.models.chat.offline_amounts import unit as _unit
from kbsql.engine.models.chat.offline_text import content_words, stem

_AT = re.compile(r"\bat\s+" + NUM + r"\s*-?\s*([a-z]+)", re.IGNORECASE)


def another_row_time(question: str, sentence: str) -> bool:
    """Whether a yes/no question asks if a thing happens "at" a time ("first jab at 6 weeks")
    that the table row naming it gives otherwise ("8 weeks | First puppy jab | £48"): the row
    sharing most words with the question is the thing's, and its time is not the one asked."""
    asked = _AT.search(question)
    if not _YES_NO.match(question) or "|" not in sentence or not asked:
        return False
    value, unit, times = number_value(asked.group(1)), _unit(asked.group(2)), _MEASURES[0][0]
    if value is None or unit not in times:
        return False
    words = {stem(w) for w in content_words(_AT.sub(" ", question))}
    lines = re.split(r"[.:]\s+|\n", sentence)
    rows = [[c for c in row.split("|") if c.strip()] for row in lines if "|" in row]
    shared = [len(words & {stem(w) for c in row if not _CELL.match(c) for w in content_words(c)})
              for row in rows]
    best = [row for row, n in zip(rows, shared, strict=True) if n == max(shared, default=0) and n]
    cells = [m for m in map(_CELL.match, best[0] if best else []) if m]
    given = [(number_value(m.group(1)), _unit(m.group(2))) for m in cells]
    return len(best) == 1 and any(v is not None and u in times and _differ(value * times[unit], v * times[u])
                                  for v, u in given)


_TAKES = re.compile(r"\b(?:take|takes|last|lasts)\s+(?:about\s+|around\s+)?(an?|" + NUM[1:-1]
                    + r")\s*-?\s*([a-z]+)", re.IGNORECASE)
_LENGTH_OF = re.compile(NUM + r"\s*-\s*([a-z]+)\s+([a-z]{3,})", re.IGNORECASE)


def another_length(question: str, sentence: str) -> bool:
    """Whether a yes/no question asks if a thing takes a length of time ("does the chainsaw
    induction take an hour") the sentence gives another length of ("a 30-minute induction", or
    with the same verb: "does the spray last 2 years" of "lasts 12 months"): the text gives its
    length, and it is not the one asked."""
    asked = _TAKES.search(question)
    if not _YES_NO.match(question) or not asked:
        return False
    times = _MEASURES[0][0]
    value = 1.0 if asked.group(1).lower() in ("a", "an") else number_value(asked.group(1))
    unit = _unit(asked.group(2))
    named = {stem(w) for w in content_words(question)}
    for given in _LENGTH_OF.finditer(sentence):
        length, other = number_value(given.group(1)), _unit(given.group(2))
        if value is not None and length is not None and unit in times and other in times and \
                stem(given.group(3).lower()) in named and _differ(value * times[unit], length * times[other]):
            return True
    verb = stem(asked.group(0).split()[0].lower())  # "lasts 12 months" of "last 2 years": the same verb
    for given in _TAKES.finditer(sentence):
        length, other = number_value(given.group(1)), _unit(given.group(2))
        if value is not None and length is not None and unit in times and other in times and \
                stem(given.group(0).split()[0].lower()) == verb and \
                _differ(value * times[unit], length * times[other]):
            return True
    return False


def _differ(one: float, other: float) -> bool:
    """Two lengths of time that are not the same one written in other units (a month is read
    as 30 days, so "a year" is "12 months")."""
    return abs(one - other) > 0.05 * max(one, other)
