"""Whether a sentence speaks of the very thing a question asks about: the offline agent's
check for near-topic questions the data does not answer.

The sentence encoder and the answer-kind check (offline_asked.py) see that "Does the K5 have
GPS?" is about the K5 and that "The K5 has a removable battery" is a statement about it; they
cannot see that GPS is named nowhere. So the question's own words are read against the
retrieved passages, whichever model embedded them: a word of the question that no retrieved
passage holds (`absent`: "GPS", "warranty", "8K", "parking") is a feature or detail the data
may simply not have. A sentence then answers only when it names it after all in other words
(a near-synonym under the bundled sentence model: "split" / "separately", "earlier" /
"previous"; never for a number-like word: "8K" is not "4K"), or when it holds at least
`MIN_COVERED` of the question's other specific words (present in the passages but not in most
of them; a topic word most passages share, or an absent word named by a near-synonym, counts
half: "electric underfloor heating" answers
"Can the T3 control electric underfloor heating?" though no passage says "control", while
"The K5 has a removable battery" does not answer "Does the K5 have GPS?").

Words that name no feature (GENERIC: "go", "keep", "happen", "inside", "low", ...) are never
absent; words that only ask or name the asker (ASKING: "need", "take", "he", ...) are never absent
either, but count as any word when a passage holds them.
The threshold and the word list were set on benchmarks/offline_agent/tune.json and
heldout2-5.json ("pay" and "cost" joined GENERIC on heldout2-11.json in round 13; a list's line
must name every absent word, and ITEM_SYNONYM, on heldout2-13.json in round 15); heldout.json and
heldout15.json are never tuned on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbsql.engine.models.chat.offline_text import STOP, Sentence, content_words, stem

SYNONYM = 0.52  # cosine of two words' vectors at which a sentence's word names the absent one
TOPIC_SHARE = 0.3  # a word in this share of the retrieved passages (of 4 or more) is their topic
MIN_COVERED = 2  # specific words a sentence must hold when the question names something absent
HALF = 0.5  # what a topic word held, or an absent one named by a near-synonym, counts of a specific word
GENERIC = frozenset("""go goes going went gone come comes keep keeps kept happen happens happened
run runs running ran inside during between within without one ones own most more less early
small kind kinds something anything everything wrong trouble am work works working use uses
used using low high long short big large little available offer offers provide provides
policy policies rule rules terms procedure process while through too per very his hers put leave
pay pays paid paying cost costs""".split())
"""Words of a question that name no feature or detail, only the asking, or the kind of answer
asked for: their absence from the text says nothing ("How long can I keep a DVD?" is answered
by "DVDs are lent for one week", "What is the refund policy?" by "Refunds are accepted within
30 days", "How much deposit do I pay?" by "Deposit | 25% when you book")."""
ASKING = frozenset("""he she him her himself herself i'm i've i'd i'll we're we've we'd you're you've
they're they've it's that's there's what's whats gets got getting gotten take takes took taken taking
need needs needed""".split())
"""Words of a question that only ask or name who asks, so their absence says nothing either:
pronouns and their contractions name a person the text never does ("what time does he need to be
at school" is answered by "children should arrive by 8:00 am"); "get" (a STOP word) in its other
forms, "take" and "need" ask ("how long do repairs take"). Unlike GENERIC they still count when
a passage holds them: "do I need training to use a chainsaw" shares only "need" with "Some tools
(chainsaws, ...) need a 30-minute induction", where "chainsaw" is not the rare word."""
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Specifics:
    absent: tuple[str, ...]
    """The question's words (as written) that no retrieved passage holds."""
    specific: frozenset[str]
    """Stems of the question's words that some passages hold, but not most of them."""
    topic: frozenset[str] = frozenset()
    """Stems of the question's words that most passages hold (what they share)."""
    unique: frozenset[str] = frozenset()
    """Stems of the question's words that exactly one of four or more passages holds."""


def read(asked: str, wanted: set[str], passages: Sequence[str],
         meta: frozenset[str] = frozenset()) -> Specifics:
    """The absent and specific words of `asked` (the question as the user put it; `wanted`:
    the stems of its subject words; `meta`: words about the data, not its subject) over the
    retrieved `passages` (none: nothing is absent)."""
    if not passages:
        return Specifics((), frozenset())
    held = [{stem(w) for w in content_words(p)} for p in passages]
    absent: list[str] = []
    specific: set[str] = set()
    topic: set[str] = set()
    unique: set[str] = set()
    for written in content_words(asked):
        word = written.removesuffix("'s").removesuffix("'")  # "valve's" is about the valve
        key = stem(word)
        if stem(written) not in wanted or word in GENERIC or word in STOP or word in meta:
            continue
        share = sum(key in h for h in held)
        if not share:
            if word not in ASKING:
                absent.append(word)
        elif len(held) < 4 or share < TOPIC_SHARE * len(held):
            specific.add(key)
            if share == 1 and len(held) >= 4:
                unique.add(key)
        else:
            topic.add(key)
    return Specifics(tuple(dict.fromkeys(absent)), frozenset(specific), frozenset(topic), frozenset(unique))


def speaking(units: list[str], spec: Specifics, model: Any | None,
             items: Sequence[bool] = ()) -> list[bool]:
    """For each sentence (unit) judged an answer: whether it speaks of what the question asks
    (always, when the question names nothing absent). `model` encodes words for the
    near-synonyms; without it only the words themselves count. A line of a list (`items`)
    gives one value for the one thing it names, so it must name every absent word: "Blood
    test, in-house: £85" holds "blood" and "test" but does not answer "a blood test sent to
    an outside lab"."""
    if not spec.absent or not units:
        return [True] * len(units)
    words = [content_words(u) for u in units]
    near = named_by(spec.absent, words, model)
    out = []
    strict = list(items) or [False] * len(units)
    for unit_words, named, item in zip(words, near, strict, strict=True):
        stems = {stem(w) for w in unit_words}
        missing = [a for a in spec.absent if a not in named]
        halves = len(spec.topic & stems) + len(spec.absent) - len(missing)
        covered = len(spec.specific & stems) + HALF * halves
        out.append(not missing or (not item and covered >= MIN_COVERED))
    return out


def named_by(absent: Sequence[str], words: list[list[str]], model: Any | None,
             synonym: float = SYNONYM) -> list[set[str]]:
    """For each unit (its content words), the words of `absent` it names by a near-synonym
    (one encoding of every word involved; a number-like word never has one)."""
    if model is None:
        return [set() for _ in words]
    vocabulary = list(dict.fromkeys([*absent, *(w for ws in words for w in ws)]))
    vectors = dict(zip(vocabulary, np.asarray(model.encode(vocabulary)), strict=True))
    out = []
    for unit_words in words:
        named = set()
        for a in absent:
            if _DIGIT.search(a) or not unit_words:
                continue
            if max(float(vectors[a] @ vectors[w]) for w in unit_words) >= synonym:
                named.add(a)
        out.append(named)
    return out


NEAR = 0.45
"""Cosine of two words at which a sentence's word is near an absent word of the question, short of
a near-synonym ("banging" / "drum" 0.49, "start" / "runs" 0.46): a hint that the sentence speaks
of it, weighed by offline_evidence's NEAR_SLACK."""


def names_nearly(absent: Sequence[str], units: list[str], model: Any | None) -> list[bool]:
    """For each unit: whether it holds, for every `absent` word, a word near it (NEAR; never for
    a number-like word: "8K" is near nothing)."""
    near = named_by(absent, [content_words(u) for u in units], model, NEAR)
    return [bool(absent) and len(n) == len(absent) for n in near]


ITEM_SYNONYM = 0.6
"""Cosine of two words at which a list's line names a question's word ("puppy" / "dog" 0.80,
"older" / "seniors" 0.61; "horse" / "dog" 0.53 is another animal, not a synonym)."""


def names_asked(subject: set[str], asked: list[str], item: Sentence, model: Any | None) -> bool:
    """Whether a line of a list (`item`) names, itself and not only through its heading, one of
    the question's subject stems (`subject`; `asked`: the question's content words) or a
    near-synonym of one ("puppy" / "Dog first course"): a list's line gives one value for the
    thing it names, and its heading is every line's ("Dog monthly fee" under "Pet Health Club"
    does not answer "the Pet Health Club for a horse")."""
    own = content_words(item.text)
    rest = (subject - {stem(w) for w in content_words(" ".join(item.lead))}) or subject
    if rest & {stem(w) for w in own}:
        return True
    return bool(named_by([w for w in asked if stem(w) in rest], [own], model, ITEM_SYNONYM)[0])


def adds_to(answer: Sentence, asked: set[str], spec: Specifics) -> bool:
    """Whether the question (`asked`: its subject stems) is the one a FAQ's `answer` is read
    under with words added that no passage holds: "Can I drive the courtesy car abroad?" of "Who
    can drive the courtesy car?". The FAQ's question lends the answer every other word, so the
    answer must name the added ones itself, as a list's line must; a question that asks more
    than the FAQ's ("can my 22 year old son drive it") is judged by the answer's words as any."""
    if not answer.answers_lead or not spec.absent:
        return False
    held = {stem(w) for w in content_words(" ".join(answer.lead))}
    return asked - {stem(a) for a in spec.absent} <= held


def names_all(words: list[str], kept: Sequence[Any], model: Any | None, synonym: float) -> list[bool]:
    """For each judged sentence (`kept`, its `.sentence.unit`): whether it names every one of
    `words` itself or by a near-synonym (`synonym`): "How much does a checked bag cost for an
    infant?" is not answered by the price of a checked bag, a price for someone else."""
    if not words:
        return [True] * len(kept)
    units = [content_words(j.sentence.unit) for j in kept]
    near = named_by(words, units, model, synonym)
    return [all(stem(w) in {stem(x) for x in ws} or w in n for w in words)
            for ws, n in zip(units, near, strict=True)]
