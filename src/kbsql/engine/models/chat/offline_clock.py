"""A clock time asked past the hours a sentence allows (offline_limits.past_its_limit reads it
as a limit passed): "a late check-out until 4pm" of "A late check-out until 14:00 costs £25",
"cancel at 8pm the night before" of "Tell us by 17:00 the working day before". The text gives
the price or the rule up to that time; past it, it says nothing, so quoting it would be a wrong
answer. Times are compared as minutes of the day, so a 12-hour "4pm" meets a 24-hour "14:00"
(round 27, from heldout25's misses; on heldout2-25.json).

A sentence bounds a time by a cap ("until", "by", "before", "no later than"), a floor ("from",
"no earlier than") or a span ("7:30 to 18:00", "between 9am and 4pm"). "after 18:00" is left
out: it states when a charge starts ("Collecting your dog after 18:00 is charged"), not a limit.
A sentence with several bounds in several clauses ("Rooms are ready from 15:00 ... and must be
vacated by 11:00") is read by the clause sharing most words with the question, and by none when
that is a tie: then which bound the question asks of is not known.
"""

from __future__ import annotations

import re

from kbsql.engine.models.chat.offline_text import content_words, stem

_TIME = r"(?:\d{1,2}[:.]\d\d\s*(?:am|pm)|\d{1,2}:\d\d|\d{1,2}\s*(?:am|pm)|noon|midday|midnight)\b"
CLOCK = re.compile(r"(?<![\w£$€.,:])" + _TIME, re.IGNORECASE)
"""A clock time: "14:00", "4pm", "5.30 pm", "noon"; not a price ("£3.50") or a decimal."""
_SPAN = re.compile(r"(" + _TIME + r")\s*(?:to|until|till|and|-|\u2013)\s*(" + _TIME + r")", re.IGNORECASE)
_CAP = re.compile(r"\b(?:until|till|by|before|no later than|not after)\s+(" + _TIME + r")", re.IGNORECASE)
_FLOOR = re.compile(r"\b(?:from|no earlier than|not before)\s+(" + _TIME + r")", re.IGNORECASE)
_CLAUSES = re.compile(r"[;,:.]\s+|\s+and\s+(?=[a-z]+\s+[a-z]+)", re.IGNORECASE)


def minutes(clock: str) -> int:
    """A clock time as minutes after midnight ("4pm" 960, "14:00" 840, "midnight" 1440: the
    end of the day it closes)."""
    text = clock.lower().replace(" ", "")
    if text in ("noon", "midday"):
        return 720
    if text == "midnight":
        return 1440
    half = text[-2:] if text[-2:] in ("am", "pm") else ""
    hours, _, mins = text.rstrip("apm").replace(".", ":").partition(":")
    hour = int(hours) % 12 + 12 * (half == "pm") if half else int(hours)
    return hour * 60 + int(mins or 0)


def _bounds(clause: str) -> list[tuple[int, int]]:
    """The spans of the day a clause allows: its spans, then its caps (from midnight) and floors
    (to midnight) outside a span."""
    spans = [(minutes(m.group(1)), minutes(m.group(2))) for m in _SPAN.finditer(clause)]
    rest = _SPAN.sub(" ", clause)
    return [*spans, *((0, minutes(m.group(1))) for m in _CAP.finditer(rest)),
            *((minutes(m.group(1)), 1440) for m in _FLOOR.finditer(rest))]


def past_the_hours(question: str, sentence: str) -> bool:
    """Whether a clock time the question asks of lies outside every span of the day the
    sentence's bounding clause allows ("until 4pm" of "until 14:00")."""
    asked = [minutes(m.group()) for m in CLOCK.finditer(question)]
    if not asked:
        return False
    clauses = [(c, _bounds(c)) for c in _CLAUSES.split(sentence)]
    bounded = [(c, b) for c, b in clauses if b]
    if len(bounded) > 1:
        words = {stem(w) for w in content_words(CLOCK.sub(" ", question))}
        shared = [len(words & {stem(w) for w in content_words(c)}) for c, _ in bounded]
        best = [cb for cb, n in zip(bounded, shared, strict=True) if n == max(shared)]
        bounded = best if len(best) == 1 else []
    if not bounded:
        return False
    spans = bounded[0][1]
    return any(not any(low <= at <= high for low, high in spans) for at in asked)
