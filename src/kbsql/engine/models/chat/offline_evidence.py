"""Which retrieved sentences really answer a question: the offline agent's judgement.

A search always returns its nearest rows, answer or not; quoting them as an answer was the
offline agent's worst habit ("What do customers say about refunds?" answered with a
customer's question, a question about pizza answered with Python grammar). So a sentence is
quoted only when it is a statement (never a question), and either shares a content word
with the question and is close to it in meaning, or is very close in meaning alone.
Closeness is the cosine of the question and the sentence under the bundled sentence
encoder (all-MiniLM-L6-v2, the default embedding model, loaded once per process), whatever
model the knowledge base itself uses. Without that model (not installed) the judgement is
lexical only: most of the question's content words must be in the sentence.

The thresholds were set on tests/agents/data/offline_questions.json (questions the data
answers and questions it does not, over Python's docs and a support-ticket table): answers
scored 0.41-0.79, the best sentence for an unanswerable question at most 0.37. A question
whose answer the search ranks below look-alikes ("how do I make a function change a
module-level variable?" finds `import` before `global`) is then refused rather than answered
with the look-alike: the honest failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbsql.engine.models.chat.offline_text import Sentence, content_words, stem

CLOSE = 0.40  # cosine at which a sentence sharing a content word with the question answers it
VERY_CLOSE = 0.55  # cosine at which it answers on meaning alone
LEXICAL_SHARE = 0.6  # without the encoder: share of the question's content words it must hold
META = frozenset("""say says said tell told mention mentions mentioned complain complaint complaints
ask asks asked people customer customers user users anyone someone somebody there thing things
problem problems issue issues know explain describe documented document docs""".split())
"""Words about the data rather than the subject ("what do customers say about refunds"):
they neither make a sentence relevant nor must be in it."""
_COUNT = re.compile(r"\b(how many|how much in total|number of|count|total|in all|on average|average)\b",
                    re.IGNORECASE)


def asks_to_count(question: str) -> bool:
    """A question whose answer needs every row (a count, a total, an average): a search
    reads only the best matches, so the offline agent cannot answer it from one."""
    return bool(_COUNT.search(question))


def subject_words(text: str) -> set[str]:
    return {stem(w) for w in content_words(text) if w not in META}


@dataclass(frozen=True)
class Judged:
    sentence: Sentence
    closeness: float  # cosine to the question (0 without the encoder)
    shared: int  # subject words shared with the question


def answers(question: str, found: list[Sentence], limit: int,
            encoder: Callable[[], Any] | None = None) -> list[Judged]:
    """The sentences of `found` that answer `question`, best first (at most `limit`).
    `encoder()` gives the sentence encoder (the engine's loaded MiniLM); without one, shared
    subject words alone decide."""
    statements = [s for s in found if not s.text.rstrip("\"')]` ").endswith("?")]
    if not statements:
        return []
    subject = subject_words(question)
    shared = [len(subject & subject_words(s.text)) for s in statements]
    model = encoder() if encoder is not None else None
    if model is None:
        need = max(1, round(LEXICAL_SHARE * len(subject)))
        kept = [Judged(s, 0.0, n) for s, n in zip(statements, shared, strict=True) if subject and n >= need]
        return sorted(kept, key=lambda j: (-j.shared, j.sentence.rank, j.sentence.position))[:limit]
    vectors = model.encode([question, *(s.text for s in statements)])
    closeness = (vectors[1:] @ vectors[0]).tolist()
    kept = [Judged(s, c, n) for s, c, n in zip(statements, closeness, shared, strict=True)
            if c >= VERY_CLOSE or (n and c >= CLOSE)]
    # closeness decides; a shared subject word is worth a little (the sentence names the thing)
    return sorted(kept, key=lambda j: (-(j.closeness + 0.05 * j.shared), j.sentence.rank,
                                       j.sentence.position))[:limit]
