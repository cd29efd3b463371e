"""How the offline agent reads an amount: a number as written ("10", "2,500", "five"), its unit,
and the units of one measure (offline_limits reads limits with them, offline_lengths other values
of the same thing)."""

from __future__ import annotations

import re

from kbsql.engine.models.chat.offline_text import NUMBER_WORDS

NUM = r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?|" + "|".join(NUMBER_WORDS.split()) + r")"
VALUES = {w: float(i) for i, w in enumerate("zero one two three four five six seven eight nine ten eleven "
                                             "twelve thirteen fourteen fifteen sixteen seventeen eighteen "
                                             "nineteen twenty".split())}
DAY = 86400.0
MEASURES = (({"sec": 1.0, "second": 1.0, "min": 60.0, "minute": 60.0, "hr": 3600.0, "hour": 3600.0,
              "day": DAY, "night": DAY, "week": 7 * DAY, "fortnight": 14 * DAY, "month": 30 * DAY,
              "year": 365 * DAY}, 60.0),
            ({"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}, 1e3))
"""Units of one measure, their size in its smallest, and how many times larger a neighbouring
unit is at most: a limit in days bounds an ask in weeks, one in hours does not (a room "booked
for 1 to 3 hours at a time, up to 7 days ahead" says nothing of 1 week ahead by its hours)."""


def number_value(number: str) -> float | None:
    """A number as written ("10", "2.5", "five"), None for a word that is no plain number."""
    return float(number.replace(",", "")) if number[0].isdigit() else VALUES.get(number.lower())


def unit(word: str) -> str:
    """A unit word without its plural s, lower case ("Days" -> "day")."""
    return word.lower().rstrip("s") or word.lower()


CELL = re.compile(r"^\s*" + NUM + r"\s*-?\s*([a-z]+)\s*$", re.IGNORECASE)
"""A table cell holding one amount and its unit (`| 7 days |`)."""
YES_NO = re.compile(r"^\s*(?:will|would|can|could|do|does|is|are|may|might|should|shall)\b", re.IGNORECASE)
