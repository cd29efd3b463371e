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

A date is read the same way against a date cap ("the full amount is paid by 25 April" of "can
I pay the rest in May"): a month asked after the month of a "by" / "before" date, or a day after
that day of the same month, is past it (round 28, on heldout2-26.json: a synonym read from
WordNet, "rest" / "balance", found that sentence, whose cap then has to be read). Dates are
compared within one year: a month before the cap's is never past it.
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


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_MONTH = r"(" + "|".join(_MONTHS) + r")"
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATE_CAP = re.compile(r"\b(?:by|before|no later than|not after)\s+(?:\w+day\s+)?(?:" + _ORDINAL + r"\s+"
                       + _MONTH + r"|" + _MONTH + r"\s+" + _ORDINAL + r"\b)", re.IGNORECASE)
_ASKED_DATE = re.compile(r"\b(?:" + _ORDINAL + r"\s+(?:of\s+)?" + _MONTH + r"|(?:in|on|by|until|till|during|"
                         r"after|before)\s+" + _MONTH + r"(?:\s+" + _ORDINAL + r")?)\b", re.IGNORECASE)
"""A date asked: "3 May", "on May 3rd", "in May" (a month after a preposition: "may I" is no
date)."""


def _day(day: str | None, month: str) -> int:
    return _MONTHS.index(month.lower()) * 31 + int(day or 0)


def past_the_date(question: str, sentence: str) -> bool:
    """Whether a date the question asks of ("in May", "on 3 May") lies after every date cap of
    the sentence ("paid by 25 April"): past the latest, nothing in it allows that date; a month
    alone is past when it is a later month."""
    caps = [_day(m.group(1), m.group(2)) if m.group(2) else _day(m.group(4), m.group(3))
            for m in _DATE_CAP.finditer(sentence)]
    if not caps:
        return False
    cap = max(caps)
    for m in _ASKED_DATE.finditer(question):
        month, day = (m.group(2), m.group(1)) if m.group(2) else (m.group(3), m.group(4))
        asked = _day(day, month)
        if (asked > cap) if day else (asked // 31 > cap // 31):
            return True
    return False
