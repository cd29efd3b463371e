"""Whether a question asks to count rows, and whether one sentence gives the number a "how
many X" asks for: the offline agent reads only the best matches of a search, so a count, a
total or an average over every row is beyond it, but "how many people can use it" is answered
by the sentence stating "up to 3 users". Moved out of offline_evidence.py (which judges the
sentences) so that module stays under the project's size; set on benchmarks/offline_agent/
tune.json and heldout2-14.json. A number of the thing in the text's own word for it ("how many
kids": "up to three children") counts since round 21 (on heldout2-19.json).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from kbsql.engine.models.chat import offline_asked, offline_specific
from kbsql.engine.models.chat.offline_text import STOP, stem

_COUNT = re.compile(r"\b(how many|how much in total|number of|count(?!\s+(?:as|towards?|against|for)\b)|"
                    r"total|in all|on average|average)\b", re.IGNORECASE)
"""A request to count ("count", but not the verb of "do viewers count as seats")."""

_MEASURED = re.compile(r"\bhow many (seconds|minutes|hours|days|nights|weeks|months|years|times|euros|"
                       r"dollars|cents|pounds|metres|meters|kilometres|kilometers|miles|percent|degrees)\b",
                       re.IGNORECASE)
"""A "how many" that asks for an amount one sentence states ("how many days of leave"), not
a count of rows."""


_HOW_MANY = re.compile(r"\bhow many ([\w-]+)(?: ([\w-]+))?", re.IGNORECASE)
""""how many X" or "how many X Y": the thing counted ("how many grind settings": settings)."""
_WHOLE = re.compile(r"\b(total|in all|on average|average|altogether)\b", re.IGNORECASE)


def asks_to_count(question: str, passages: Sequence[str] = (),
                  encoder: Callable[[], Any] | None = None) -> bool:
    """A question whose answer needs every row (a count, a total, an average): a search
    reads only the best matches, so the offline agent cannot answer it from one. "How many
    X" is no count when a retrieved passage states an amount of X ("groups of up to eight
    people", "eleven languages"), or of a word the model `encoder` gives reads as X ("how many kids": "up to
    three children"): one sentence answers it."""
    if not _COUNT.search(question) or _MEASURED.search(question) or offline_asked.asks_capacity(question):
        return False
    stated = any(gives_count(question, p) for p in passages) or \
        _named_count(question, passages, encoder() if encoder and _things(question) else None)
    return not (stated and not _WHOLE.search(question))


def gives_count(question: str, sentence: str, model: Any = None) -> bool:
    """Whether `sentence` gives the number a "how many X" question asks for (the "are" of "how
    many statements are documented" names no thing: "three none arguments are" states none),
    with `model` also a number of a near-synonym of X ("how many backups": "the last 7 copies")."""
    if offline_asked.asks_capacity(question) and offline_asked.gives_capacity(sentence):
        return True
    things = _things(question)
    return any(_states_amount(w, sentence) for w in things) or _named_count(question, [sentence], model)


def counts_its_subject(question: str, subject: Sequence[str], sentence: str, model: Any = None) -> bool:
    """Whether `sentence` gives a number of what "how many" asks about, the question's subject,
    in the text's own word for it ("how many kids can one parent look after": "one adult for up
    to three children"): that word names the subject. A sentence counting the asked word itself
    ("takes up to 20 people" of "how many people can go on a private tour") is judged as before:
    it must name the rest of the subject."""
    things = _things(question)
    return bool(subject) and stem(subject[-1]) in {stem(w) for w in things} and \
        not any(_states_amount(w, sentence) for w in things) and _named_count(question, [sentence], model)


def _things(question: str) -> list[str]:
    many = _HOW_MANY.search(question)
    return [w for w in many.groups() if w and w.lower() not in STOP] if many else []


COUNT_SYNONYM = 0.55
"""Cosine of two words at which a number of the text's word counts the asked thing: above
offline_specific.SYNONYM (0.52), since a count refused sends the user to SQL, where the count is
right, while one answered from a near word is wrong ("how many statements are documented" /
"clause" 0.53); "backups" / "copies" is 0.56, "kids" / "children" 0.88."""


def _named_count(question: str, passages: Sequence[str], model: Any) -> bool:
    """Whether a passage gives a number of a word `model` reads as a near-synonym of the thing
    "how many" asks about (offline_specific.named_by: "kids" / "children", "backups" /
    "copies"): a user rarely counts in the text's words. Only the words right after numbers are
    encoded, so this costs a few words."""
    things = _things(question)
    counted = sorted({w for p in passages for w in _after_numbers(p)})
    if model is None or not things or not counted:
        return False
    return bool(offline_specific.named_by(things, [counted], model, COUNT_SYNONYM)[0])


def _after_numbers(passage: str) -> list[str]:
    """The words a number in `passage` counts (those `_states_amount` reads after it)."""
    words = [w.strip(",.;:*") for w in re.findall(r"[$€£¥]?[\w,.-]+", passage.lower())]
    return [x for i, w in enumerate(words)
            if (w.replace(",", "").replace(".", "").isdigit() or offline_asked.NUMBER.fullmatch(w))
            and words[i + 1:i + 2] != ["per"] for x in _counted(words, i) if x.isalpha() and x not in STOP]


def _counted(words: list[str], i: int) -> list[str]:
    near = words[i + 1:i + 3]
    return near if any(x in STOP or x in _AMOUNT_ENDS for x in near) else words[i + 1:i + 4]


def _states_amount(thing: str, passage: str) -> bool:
    """Whether `passage` gives a number of `thing` (a number, then it within two words, or three
    when the two between are no function words: "100 free black-and-white pages"); a number of
    people is one of users, members or guests ("how many people can use it": "up to 3
    users")."""
    key = stem(thing.lower())
    person = bool(offline_asked.PERSON.fullmatch(thing)) and thing.lower() not in _PRONOUNS
    words = [w.strip(",.") for w in re.findall(r"[$€£¥]?[\w,.-]+", passage.lower())]
    return any((w.replace(",", "").replace(".", "").isdigit() or offline_asked.NUMBER.fullmatch(w))
               and words[i + 1:i + 2] != ["per"]  # a price ("$8 per user") or a rate counts nothing
               and any(stem(x) == key or (person and x not in _PRONOUNS and offline_asked.PERSON.fullmatch(x))
                       for x in _counted(words, i)) for i, w in enumerate(words))


_AMOUNT_ENDS = frozenset("per each than or but".split())


_PRONOUNS = frozenset("he she you i we someone somebody everyone".split())


def counts_things(asked: str) -> bool:
    """A "how many X" asked of one sentence: it must give a number of X ("the Team plan
    includes 100 GB of storage" is no number of users), as a "how much" must give a price."""
    return bool(_HOW_MANY.search(asked)) and not _MEASURED.search(asked)
