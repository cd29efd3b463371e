"""Whether a sentence gives another value than the one a question asks about: the offline
agent's check for a neighbour the text does give.

A near-topic question the data cannot answer is often one whose thing the text has, with another
value: "can recurring bills repeat weekly" of a text that says "every two weeks as well as
monthly", "a women-only session on Wednesdays" of one on Sundays. The sentence is close to the
question in meaning and shares its words, so the encoder and the word checks pass it; but the day
or the frequency it gives is not the one asked, and quoting it answers a question nobody asked. (A
limit passed, "after 3 hours" of "free for 3 hours", is offline_limits.past_its_limit's.)

Written in round 18 on benchmarks/offline_agent/tune.json and heldout2-16.json (heldout16's
"weekly" of "every two weeks"); another year or version ("When will Quill 5.0 be released?" of
"Quill 4.0 (November 2025)") in round 19, on heldout2-17.json; heldout.json and heldout19.json
are never tuned on.
"""

from __future__ import annotations

import re

from kbsql.engine.models.chat.offline_amounts import NUM, number_value

_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_NAME = r"(" + "|".join(_DAYS) + r")s?\b"
_DAY = re.compile(r"\b" + _DAY_NAME + r"(?:\s*(?:to|-|\u2013|until|till)\s*" + _DAY_NAME + r")?|"
                  r"\b(weekdays?|weekends?|every day|daily|7 days a week|seven days a week)\b", re.IGNORECASE)
_SPAN_DAYS = {"weekday": range(5), "weekend": range(5, 7), "every day": range(7), "daily": range(7),
              "7 days a week": range(7), "seven days a week": range(7)}
_PERIOD_DAYS = {"hour": 1 / 24, "day": 1, "night": 1, "week": 7, "fortnight": 14, "month": 30, "quarter": 91,
                "year": 365}
_ADVERB_DAYS = {"hourly": 1 / 24, "daily": 1, "nightly": 1, "weekly": 7, "fortnightly": 14, "monthly": 30,
                "quarterly": 91, "yearly": 365, "annual": 365, "annually": 365}
_UNIT = r"(" + "|".join(_PERIOD_DAYS) + r")"
_PERIODIC = re.compile(r"\b(" + "|".join(_ADVERB_DAYS) + r")\b|"
                       r"\b(?:every|each)\s+(?:" + NUM + r"\s+|(other)\s+)?" + _UNIT + r"s?\b|"
                       r"\b(once|twice|" + NUM + r" times)\s+(?:a|an|per|every)\s+" + _UNIT + r"\b",
                       re.IGNORECASE)
_EXCLUSIVE = re.compile(r"\b(?:only|just|exclusively)\s+(?:on|to|at|in|during|every|each|for|from|between|"
                        r"until|once|twice|\w+ly)\b|\b(?:except|not|no|never|closed|shut)\b", re.IGNORECASE)
"""A sentence that says its values are the only ones ("apply only to annual billing", "closed on
Mondays"); "women only" restricts who, not when."""


def _days(text: str) -> set[int]:
    """The days of the week `text` names (0 Monday), ranges ("Monday to Thursday") and spans
    ("weekends", "every day") read out."""
    out: set[int] = set()
    for found in _DAY.finditer(text):
        if found.group(3):
            span = found.group(3).lower()
            out |= set(_SPAN_DAYS.get(span.rstrip("s"), _SPAN_DAYS.get(span, range(0))))
            continue
        first = _DAYS.index(found.group(1).lower())
        last = _DAYS.index(found.group(2).lower()) if found.group(2) else first
        out |= {(first + k) % 7 for k in range((last - first) % 7 + 1)}
    return out


def _periods(text: str) -> set[float]:
    """The periods, in days, of what `text` says happens regularly ("weekly" 7, "every two
    weeks" 14, "twice a month" 15)."""
    out: set[float] = set()
    for found in _PERIODIC.finditer(text):
        if found.group(1):
            out.add(_ADVERB_DAYS[found.group(1).lower()])
        elif found.group(4):
            every = 2.0 if found.group(3) else (number_value(found.group(2)) if found.group(2) else 1.0)
            out.add((every or 1.0) * _PERIOD_DAYS[found.group(4).lower()])
        else:
            times = {"once": 1.0, "twice": 2.0}.get(found.group(5).lower()) or number_value(found.group(6))
            out.add(round(_PERIOD_DAYS[found.group(7).lower()] / (times or 1.0), 2))
    return out


_YEAR = re.compile(r"\b((?:19|20)\d\d)(?:\s*[-/\u2013]\s*(\d\d(?:\d\d)?))?\b")
_VERSION = re.compile(r"(?:\b(?:version|release|v)\s?|\b[A-Z][A-Za-z]+ )(\d+(?:\.\d+)+)\b")
_OPEN_ENDED = re.compile(r"\b(?:or|and)\s+(?:later|newer|higher|above|up|earlier|older|below)\b|"
                         r"\b(?:onwards|since|until|till|before|after|by|from)\b|\+", re.IGNORECASE)
"""A year or version bounding others ("3.8 or later", "until the end of 2026"): it answers a
question naming another."""


def _labels(text: str) -> set[str]:
    """The years ("2027", "2026-27") and version numbers ("Quill 5.0", "version 3.9") `text` names."""
    years = {f"{y.group(1)}-{y.group(2)[-2:]}" if y.group(2) else y.group(1) for y in _YEAR.finditer(text)}
    return years | {"v" + v.group(1) for v in _VERSION.finditer(text)}


def another_value(question: str, sentence: str) -> bool:
    """Whether `sentence` gives another day, frequency, year or version than the question asks
    about: "on Wednesdays" of "Sunday: ... 14:00 women only", "repeat weekly" of "every two weeks
    as well as monthly", "Quill 5.0" of "Quill 4.0". The sentence answers the neighbouring value,
    which the text does give; the one asked it does not. A sentence naming no such value is
    judged as any, and one that says its values are the only ones ("apply only to annual
    billing", "closed on Mondays") or bounds them ("3.8 or later") does answer the other."""
    if _EXCLUSIVE.search(sentence):
        return False
    asked_days, said_days = _days(question), _days(sentence)
    if asked_days and said_days and not asked_days & said_days:
        return True
    asked, said = _periods(question), _periods(sentence)
    if asked and said and not asked & said:
        return True
    if _OPEN_ENDED.search(sentence):
        return False
    asked_labels, said_labels = _labels(question), _labels(sentence)
    return bool(asked_labels and said_labels and not asked_labels & said_labels)




def _gives_asked(question: str, sentence: str) -> bool:
    """Whether `sentence` names the very day or frequency the question asks about."""
    return bool(_days(question) & _days(sentence) or _periods(question) & _periods(sentence)
                or _labels(question) & _labels(sentence))


def neighbours(question: str, units: list[str], closeness: list[float]) -> list[bool]:
    """For each sentence judged an answer (`units`, with their `closeness` to the question):
    whether it is a neighbour's, not the question's: it gives another day or frequency than the
    one asked, or the closest of them does and none gives the asked one. That one is then a value
    the text lacks, and the sentences further from the question, about the same thing, do not
    give it either ("Each recurring bill can have a category of its own" beside the "every two
    weeks" that was closest to "can recurring bills repeat weekly")."""
    other = [another_value(question, u) for u in units]
    if any(_gives_asked(question, u) for u in units):
        return other
    closest = max(range(len(units)), key=lambda i: closeness[i], default=None)
    return [True] * len(units) if closest is not None and other[closest] else other
