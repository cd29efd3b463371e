"""Whether a question asks to count rows, and whether one sentence gives the number a "how
many X" asks for: the offline agent reads only the best matches of a search, so a count, a
total or an average over every row is beyond it, but "how many people can use it" is answered
by the sentence stating "up to 3 users". Moved out of offline_evidence.py (which judges the
sentences) so that module stays under the project's size; set on benchmarks/offline_agent/
tune.json and heldout2-14.json.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kbsql.engine.models.chat import offline_asked
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


def asks_to_count(question: str, passages: Sequence[str] = ()) -> bool:
    """A question whose answer needs every row (a count, a total, an average): a search
    reads only the best matches, so the offline agent cannot answer it from one. "How many
    X" is no count when a retrieved passage states an amount of X ("groups of up to eight
    people", "eleven languages"): one sentence answers it."""
    if not _COUNT.search(question) or _MEASURED.search(question) or offline_asked.asks_capacity(question):
        return False
    stated = any(gives_count(question, p) for p in passages)
    return not (stated and not _WHOLE.search(question))


def gives_count(question: str, sentence: str) -> bool:
    """Whether `sentence` gives the number a "how many X" question asks for (the "are" of "how
    many statements are documented" names no thing: "three none arguments are" states none)."""
    if offline_asked.asks_capacity(question) and offline_asked.gives_capacity(sentence):
        return True
    many = _HOW_MANY.search(question)
    things = [w for w in many.groups() if w and w.lower() not in STOP] if many else []
    return any(_states_amount(w, sentence) for w in things)


def _states_amount(thing: str, passage: str) -> bool:
    """Whether `passage` gives a number of `thing` (a number, then it within two words, or three
    when the two between are no function words: "100 free black-and-white pages"); a number of
    people is one of users, members or guests ("how many people can use it": "up to 3
    users")."""
    key = stem(thing.lower())
    person = bool(offline_asked.PERSON.fullmatch(thing)) and thing.lower() not in _PRONOUNS
    words = [w.strip(",.") for w in re.findall(r"[$€£¥]?[\w,.-]+", passage.lower())]

    def after(i: int) -> list[str]:
        near = words[i + 1:i + 3]
        return near if any(x in STOP or x in _AMOUNT_ENDS for x in near) else words[i + 1:i + 4]

    return any((w.replace(",", "").replace(".", "").isdigit() or offline_asked.NUMBER.fullmatch(w))
               and words[i + 1:i + 2] != ["per"]  # a price ("$8 per user") or a rate counts nothing
               and any(stem(x) == key or (person and x not in _PRONOUNS and offline_asked.PERSON.fullmatch(x))
                       for x in after(i)) for i, w in enumerate(words))


_AMOUNT_ENDS = frozenset("per each than or but".split())


_PRONOUNS = frozenset("he she you i we someone somebody everyone".split())


def counts_things(asked: str) -> bool:
    """A "how many X" asked of one sentence: it must give a number of X ("the Team plan
    includes 100 GB of storage" is no number of users), as a "how much" must give a price."""
    return bool(_HOW_MANY.search(asked)) and not _MEASURED.search(asked)
