"""Whose amount a sentence gives: the offline agent's check that a sentence quoting a price, a
duration or a time quotes it for the thing the question asks about.

The checks before this one see that "How much is a taxi from the station to the harbour?" asks
a price and that "Bikes can be hired at the station for 15 pounds a day" holds one and shares
"station"; they cannot see that the price is the bike's. Near-topic wrong answers were mostly
of this shape (the taxi answered with the bike's fare, a library card with a lost item's fee,
the chili's freezing with the soup's). So a question asking an amount, a time or a frequency
is read for its subject (`asked_subject`: the noun phrase the amount is asked about, "taxi",
"Standard plan", "chili"), and a sentence answers only when that subject's head word is named
by the sentence or by its passage's title (the short fragment a passage opens with: "Bean
chili." over "Simmer it uncovered for 45 minutes"), and each of the subject's other words is
named before the amount, or in the title ("the ferry ticket" is not "A day ticket for the town
buses costs 5 pounds and also covers the ferry"). A question whose subject is a pronoun ("How
long do they keep?") or the asker ("How long do I have ...?") names none: nothing is checked.
A "how many X" question's subject is X and what X is counted of or in ("How many users can the
Team plan have?": team, plan, users): "up to 20 people" of the free tour is not the private
tour's limit. A capacity ("how many people fit in the oak pod") is asked of what holds them, the
pod, named before the number (`_holding`).

Set on benchmarks/offline_agent/tune.json and heldout2-10.json (capacities on heldout2-13.json);
heldout15.json is never tuned on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kbsql.engine.models.chat import offline_asked, offline_text
from kbsql.engine.models.chat.offline_text import stem

_DETERMINERS = frozenset("a an the my your our his her their its this that these those each every any some "
                         "one".split())
_PREPOSITIONS = frozenset("of for to from in on at with without per by after before during into over under "
                          "about between until than as when if while".split())
_AUX = frozenset("is are was were be been does do did will would can could should must has have had may "
                 "might shall 's".split())
_BE = frozenset("is are was were 's".split())
_VERBS = frozenset("""cost costs take takes need needs last lasts keep keeps open opens close closes go goes
run runs hold holds stay stays rest rests cook cooks bake bakes arrive arrives start starts begin begins end
ends work works get gets come comes leave leaves sync syncs pay pays charge charges stop stops make makes use
uses fit fits cover covers apply applies expire expires remain remains wait waits happen happens become
becomes lose loses allow allows include includes require requires""".split())
"""Verbs that end a subject: past the wh-phrase and its auxiliary, the subject runs until the
verb ("does the chili | keep"), a preposition or the end."""
_PREDICATE = re.compile(r"..(ed|ful|able|ible|ive)$")
_STATES = frozenset("open closed free available ready due valid needed required allowed possible safe best "
                    "busy quiet cheaper cheapest".split())
"""What follows the subject after "is": a participle or an adjective, no part of the subject."""
_ASKER = frozenset("i you we it they he she me us them there one".split())
_WORD = re.compile(r"[a-z0-9][\w.'-]*[a-z0-9]|[a-z0-9]")
_OPENING = re.compile(r"^(?:how\s+(?:much|many|long|often|far|soon|early|late|big|large|heavy|old|fast|"
                      r"quickly|tall|wide|deep|high)(?:\s+(?:back|ahead|in advance))?"
                      r"|what\s+(?:time|temperature|date|day|year|size|percentage)"
                      r"|when|what\s+does|what\s+do)\b", re.IGNORECASE)
_THE_FEE = re.compile(r"^what(?:'s|\s+is|\s+are)\s+the\s+(?:cost|price|fee|fine|charge|rate|excess|limit|"
                      r"deposit)s?\s+(?:of|for|on)\b", re.IGNORECASE)
_IT_TO = re.compile(r"^it\s+(?:cost|costs|take|takes)\s+to\s+\w+\s+(?:rid\s+of\s+|up\s+|out\s+|in\s+)?",
                    re.IGNORECASE)
""""How much does it cost to dump rubble?": the subject is what the infinitive is done to."""


def named_after_asking(question: str) -> list[str]:
    """The content words a question names past its asking opening ("how far ahead", "what
    time", "when"): none for "how far ahead?", which asks of the conversation's subject."""
    return offline_text.content_words(_OPENING.sub("", question.strip().lower(), count=1))


def asked_subject(question: str) -> list[str]:
    """The words of the noun phrase an amount/time question asks about, head last (empty when
    the question asks no amount, or its subject is a pronoun or the asker)."""
    text = offline_asked._asked(question).lower().rstrip(" ?!.")
    kind = offline_asked.asked_kind(question)
    if kind is None or kind in offline_asked.SOFT or kind in ("person", "name", "version"):
        return []
    fee = _THE_FEE.match(text)
    if fee:
        return _phrase(_WORD.findall(text[fee.end():]), be=True)
    opening = _OPENING.match(text)
    if not opening:
        return []
    words = _WORD.findall(text[opening.end():])
    if opening.group().startswith("how many"):  # the thing counted: "how many devices can I sync"
        counted = _phrase(words, be=True)
        if offline_asked.asks_capacity(text):  # "how many people fit in the oak pod": the pod's size
            return _holding(words[len(counted):])
        return [*_counted_in(words[len(counted):]), *counted] if counted else []
    if opening.group().startswith("what d"):  # "what does X cost": the auxiliary is read
        words = ["does", *words]
    if not words or words[0] not in _AUX:
        return []
    rest = " ".join(words[1:])
    it_to = _IT_TO.match(rest)
    if it_to:
        return _phrase(_WORD.findall(rest[it_to.end():]), be=True)
    return _phrase(words[1:], be=words[0] in _BE)


def _counted_in(rest: list[str]) -> list[str]:
    """What a "how many X" question counts X of or in, the words after X: the subject of its
    verb ("how many users can | the Team plan | have") or, when that is the asker or a verb
    comes first, the object of the verb's preposition ("how many people can go on | a private
    tour"). Its words must be named before the number, as the words of an amount's subject are
    (`gives_for`): "up to 20 people" of the free tour is not the private tour's limit."""
    if not rest or rest[0] not in _AUX:
        return []
    after = rest[1:]
    if not after or after[0] in _ASKER:
        after = after[1:]
    elif after[0] in _DETERMINERS:  # "can | the Team plan | have"; a bare word may be the verb ("can | edit")
        found = _phrase(after, be=True)
        ran_on = bool(found) and found[-1] == after[-1]  # to the end: its last word is the verb
        return found[:-1] if ran_on else found
    at = next((i for i, w in enumerate(after[:3]) if w in _PREPOSITIONS), None)
    return _phrase(after[at + 1:], be=True) if at is not None else []


def _holding(rest: list[str]) -> list[str]:
    """What a capacity question asks the size of: the subject of its verb ("how many people
    does | the kitchen | hold") or the object of the verb's preposition ("how many people fit
    in | the oak pod"); the people counted are rarely named ("The main hall holds 150")."""
    if rest and rest[0] in _AUX:
        return _counted_in(rest)
    at = next((i for i, w in enumerate(rest[:3]) if w in _PREPOSITIONS), None)
    return _phrase(rest[at + 1:], be=True) if at is not None else []


def _phrase(words: list[str], be: bool) -> list[str]:
    """The noun phrase `words` open with: determiners skipped, up to a verb, a preposition or
    an auxiliary; after "does" or a modal the last word before a preposition or an object's
    determiner is the verb ("does the chili keep | in the freezer", "does eco mode warm | the
    house"); after "is" a participle or an adjective ends it ("when is the pass statement |
    useful"), and one that opens it is a passive with no subject ("how much is charged")."""
    out: list[str] = []
    stopped = False
    for word in words:
        if not out and word in _DETERMINERS:
            continue
        if word in _VERBS or word in _PREPOSITIONS or word in _AUX or word in _DETERMINERS or word == "to":
            stopped = word in _VERBS
            break
        if be and (_PREDICATE.search(word) or word in _STATES):
            break
        out.append(word)
    if not be and not stopped and len(out) > 1:
        out = out[:-1]
    if not out or out[0] in _ASKER:
        return []
    return out


def title(passage: str) -> str:
    """The short fragment a passage opens with ("Bean chili.", "Section 4: Excess.", a
    heading line "## Fees" or "Meeting rooms" over its bullets), or ''. Read from the passage's
    paragraphs as its sentences are (offline_text.paragraphs_of): a heading line is a
    paragraph of its own."""
    paragraphs = offline_text.paragraphs_of(passage)
    first = re.split(r"(?<=[.!?])\s+", paragraphs[0] if paragraphs else "", maxsplit=1)[0]
    return first if len(first.split()) <= offline_text.MAX_TITLE_WORDS else ""


def gives_for(subject: Sequence[str], unit: str, kind: str | None, heading: str,
              topic: frozenset[str] = frozenset(), whole: bool = False) -> bool:
    """Whether `unit` (a sentence and its lead) gives its amount for `subject`: the head word in
    it or in its passage's `heading`, every other word before the amount or in the heading. A
    head word of `topic` (stems most retrieved passages hold: "the K5" in the K5's guide) need
    not be named: every passage is about it. `whole`: the head too must come before the amount
    (a capacity: "The main hall holds 150 ... The kitchen can be added" is no size of the
    kitchen)."""
    if not subject:
        return True
    titled = _stems(heading)
    head = stem(subject[-1])
    before = _stems(unit[:_amount_at(unit, kind)]) | titled
    if head not in topic and not _named(head, (before if whole else _stems(unit)) | titled):
        return False
    return all(_named(stem(w), before) for w in subject[:-1])


def _stems(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text.lower())}


def _named(key: str, stems: set[str]) -> bool:
    """`key` among `stems`, or the start of one of them ("grind" of "grinder")."""
    return key in stems or (len(key) >= 4 and any(s.startswith(key) for s in stems))


def _amount_at(unit: str, kind: str | None) -> int:
    """Where the amount the question asks for starts in `unit` (its end when none is found)."""
    pattern = {"money": offline_asked.MONEY, "number": offline_asked.NUMBER, "time": offline_asked.DURATION,
               "duration": offline_asked.DURATION, "frequency": offline_asked.FREQUENCY}.get(kind or "")
    found = pattern.search(unit) if pattern else None
    if found is None and kind == "time":
        found = offline_asked.TIME.search(unit)
    return found.start() if found else len(unit)
