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
frequency, a speed, a weight, a length, a measure. A bare number ("how many") or a time word
("when": "if", "before") is in too many sentences to be evidence; a permission ("can I": "may",
"must not") was measured and left out (round 25: one more right, one more wrong answer).
"""

from __future__ import annotations

from collections.abc import Sequence

from kbsql.engine.models.chat import offline_asked

STATED = frozenset({"money", "duration", "frequency", "speed", "weight", "length", "measure"})
"""The asked kinds a sentence states only by an amount of that kind."""


def stating(question: str, sentences: Sequence[str]) -> list[bool]:
    """For each of `sentences`, whether it states the kind of amount `question` asks for."""
    kind = offline_asked.asked_kind(question)
    if kind not in STATED:
        return [False] * len(sentences)
    return [offline_asked.holds(kind, s, question) for s in sentences]
