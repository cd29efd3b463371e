"""The near-duplicate corpus of issue 17, shared by the benchmarks and the recall test.

Real corpora repeat themselves (boilerplate, quoted mail, versions of one page), and
near-duplicates are what breaks a graph index tuned on clean data. Documents are the
paragraphs of Python's own docs (`pydoc_data.topics`, always installed) in a fixed order,
each repeated with one unique token appended, so a corpus of any size is deterministic
and thousands of rows share a paragraph but none is identical. Queries are paragraphs
(whole ones and their first halves) with a fresh unique token, as a user looking for
"this text" writes them. Recall is measured against exact search over the same vectors,
tie-aware (a result scoring at least the exact 10th score is a hit: near-duplicates tie)
and strict (ids must match).
"""

from __future__ import annotations

import functools
import random
import re

import numpy as np

# one chunk per document (the longest paragraph has 4,676 characters), so the rows' vectors
# are exactly the documents' and a baseline can be fed the same ones
ONE_CHUNK = {"text_chunking_config": {"chunk_size": 8000, "chunk_overlap": 0}}


@functools.cache
def paragraphs() -> list[str]:
    import pydoc_data.topics

    seen, out = set(), []
    for name in sorted(pydoc_data.topics.topics):
        for part in re.split(r"\n\s*\n", pydoc_data.topics.topics[name]):
            text = " ".join(part.split())
            if len(text) >= 40 and text not in seen:
                seen.add(text)
                out.append(text)
    return out


def documents(n: int, start: int = 0) -> list[str]:
    """Documents start .. start+n-1: paragraph i % P plus the unique token `u<i>`."""
    paras = paragraphs()
    return [f"{paras[i % len(paras)]} u{i}x" for i in range(start, start + n)]


def queries(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    paras = paragraphs()
    out = []
    for q in range(count):
        words = rng.choice(paras).split()
        if q % 2:
            words = words[:max(3, len(words) // 2)]
        out.append(" ".join(words) + f" q{q}z")
    return out


def recall_at_k(got_ids: list[np.ndarray], got_scores: list[np.ndarray], exact_ids: np.ndarray,
                exact_scores: np.ndarray, k: int = 10, eps: float = 1e-5) -> tuple[float, float]:
    """(tie-aware, strict) mean recall@k of approximate results against exact ones.

    Tie-aware: a returned id counts when its true score is at least the exact k-th score
    minus `eps` (`got_scores` must be the exact scores of the returned ids). Strict: ids
    in the exact top-k list."""
    ties, strict = [], []
    for ids, scores, e_ids, e_scores in zip(got_ids, got_scores, exact_ids, exact_scores, strict=True):
        kth = float(e_scores[min(k, len(e_scores)) - 1])
        top = min(k, len(e_ids))
        ties.append(min(top, int(np.sum(np.asarray(scores[:k]) >= kth - eps))) / top)
        strict.append(len(set(np.asarray(ids[:k]).tolist()) & set(e_ids[:k].tolist())) / top)
    return float(np.mean(ties)), float(np.mean(strict))
