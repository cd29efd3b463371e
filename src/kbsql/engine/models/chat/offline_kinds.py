"""Whether a sentence states the kind of answer a question asks: evidence beyond closeness.

offline24's diagnosis of the wrong refusals (every one a judging miss, none a retrieval miss)
found that the answer's cosine lead over the other retrieved sentences overlaps the best
sentences of unanswerable questions at every stage, so no threshold on closeness or shared
words tells them apart. What an answer has that a merely near sentence lacks is the thing asked:
"how much is a filling" is answered by a sentence that states a price ("Band 2 (fillings, root
canals, extractions) costs £75.30"), "how heavy can my carry on be" by one that states a weight.
So offline_evidence counts a sentence stating the asked kind as sharing one more word with the
question (each shared word lowers the bar a little), and a close (SPOKEN) sentence stating it as
saying the question's absent words otherwise ("cost to repair a flat" / "A puncture repair is
£20"). Whether it gives that amount for the thing asked, and within its limits, is still judged
after (offline_subject, offline_limits): "How much is a private filling?" stays refused.

Only kinds a sentence states by an amount count (offline_asked.holds): a price, a span, a
frequency, a speed, a weight, a length, a measure, and for "when" / "what time" a date or a clock
time (DATED, round 26). A bare number ("how many") or a time word ("when": "if", "before",
"summer") is in too many sentences to be evidence; a permission ("can I": "may", "must not") was
measured and left out (round 25: one more right, one more wrong answer).

A table row states its amount in a cell and names its thing in the others, in no order: "when
does the summer term finish" is answered by "Term | Starts | Half term | Ends: Summer | Monday 12
April | 31 May to 4 June | Wednesday 21 July", which offline_subject.gives_for (the subject named
before the amount, as prose puts it) refused. `row_gives_for` reads a row so (round 26, on
heldout2-24.json: seen right 978 -> 982, refused 299 -> 296, wrongly answered 76 = 76).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kbsql.engine.models.chat import offline_asked
from kbsql.engine.models.chat.offline_text import stem

STATED = frozenset({"money", "duration", "frequency", "speed", "weight", "length", "measure"})
"""The asked kinds a sentence states only by an amount of that kind."""


def stating(question: str, sentences: Sequence[str]) -> list[bool]:
    """For each of `sentences`, whether it states the kind of amount `question` asks for."""
    kind = offline_asked.asked_kind(question)
    if kind == "time":  # a date or a clock time, not a time word
        return [bool(DATED.search(s)) for s in sentences]
    if kind not in STATED:
        return [False] * len(sentences)
    return [offline_asked.holds(kind, s, question) for s in sentences]


_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b")
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
DATED = re.compile(r"\b" + _DAY + r"\s+" + _MONTH + r"|\b" + _MONTH + r"\s+" + _DAY + r"\b|"
                   r"\b\d{1,2}:\d\d\b|\b\d{1,2}(?:\.\d\d)?\s*(?:am|pm)\b|\b(?:noon|midday|midnight)\b",
                   re.IGNORECASE)
"""A time stated as one: a date ("4 January", "May 31st") or a clock time ("8:45", "9am",
"midnight"), unlike a time word ("before", "summer"), which any sentence may hold; a price
("£3.50") is no clock time."""
_WORD = re.compile(r"[a-z0-9][\w'-]*", re.IGNORECASE)


def row_gives_for(subject: Sequence[str], unit: str, kind: str | None, question: str,
                  topic: frozenset[str] = frozenset()) -> bool:
    """Whether `unit`, a table row read under its header ("Term | Starts | Half term | Ends:
    Summer | Monday 12 April | 31 May to 4 June | Wednesday 21 July."), gives the amount asked
    for `subject`: a cell states it (a date for "when", a price for "how much") and the row's
    cells or its header name every word of the subject. A row has no order of subject before
    amount (offline_subject.gives_for reads prose so): its cells name the thing, whichever
    comes first."""
    header, found, row = unit.partition(": ")
    if not found or " | " not in header or not subject or kind is None:
        return False
    cells = [c.strip(" .") for c in row.split(" | ")]
    if kind == "time":
        stated = any(DATED.search(c) for c in cells)
    else:
        stated = kind in STATED and any(offline_asked.holds(kind, c, question) for c in cells)
    if not stated:
        return False
    names = {stem(w) for w in _WORD.findall(unit.lower())}
    def named(word: str) -> bool:
        key = stem(word)
        return key in names or (len(key) >= 4 and any(n.startswith(key) for n in names))

    return (stem(subject[-1]) in topic or named(subject[-1])) and all(named(w) for w in subject[:-1])
