"""The recursive splitter: sizes, overlap, separators and true offsets."""

from __future__ import annotations

import itertools
import random

import pytest

from kbsql.engine.knowledge.chunking import ChunkingConfig, split_text
from kbsql.interface.errors import BadRequest


def _check(text: str, config: ChunkingConfig) -> list[tuple[int, int]]:
    spans = split_text(text, config)
    for start, end in spans:
        chunk = text[start:end]
        assert 0 < len(chunk) <= config.chunk_size
        assert chunk == chunk.strip()
    # everything but whitespace is covered, in order
    covered = set()
    for start, end in spans:
        covered.update(range(start, end))
    assert all(text[i].isspace() for i in range(len(text)) if i not in covered)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)
    return spans


def test_real_text_at_several_sizes(topics) -> None:
    for name in ("import", "typesseq", "if", "string-methods"):
        for size, overlap in ((1000, 200), (300, 50), (120, 0), (50, 10)):
            _check(topics[name], ChunkingConfig(size, overlap))


def test_paragraphs_first_then_lines_then_words() -> None:
    text = "alpha beta gamma\n\ndelta epsilon\nzeta eta theta iota"
    spans = split_text(text, ChunkingConfig(20, 0))
    assert [text[s:e] for s, e in spans] == ["alpha beta gamma", "delta epsilon", "zeta eta theta iota"]


def test_overlap_is_carried_over() -> None:
    text = " ".join(f"w{i:03d}" for i in range(200))
    spans = _check(text, ChunkingConfig(100, 30))
    for (_, e1), (s2, _) in itertools.pairwise(spans):
        assert s2 < e1 and e1 - s2 <= 30  # overlap, bounded by chunk_overlap


def test_unbreakable_text_is_cut_hard_and_unicode_offsets_are_characters() -> None:
    text = "東京" * 700 + "\n\nend"
    spans = _check(text, ChunkingConfig(500, 0))
    assert text[spans[-1][0]:spans[-1][1]] == "end"
    assert max(e - s for s, e in spans) == 500


def test_random_texts_keep_every_invariant() -> None:
    rng = random.Random(7)
    alphabet = ["word", "longerword", " ", " ", "\n", "\n\n", "é", "x" * 40]
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        size = rng.randint(5, 120)
        _check(text, ChunkingConfig(size, rng.randint(0, size - 1)))


def test_preprocessing_config_is_read_and_checked() -> None:
    config = ChunkingConfig.from_preprocessing(
        {"type": "text_chunking", "text_chunking_config": {"chunk_size": 64, "chunk_overlap": 8,
                                                           "separators": ["\n", " "]}})
    assert config == ChunkingConfig(64, 8, ("\n", " "))
    assert ChunkingConfig.from_preprocessing(None) == ChunkingConfig(1000, 200)
    with pytest.raises(BadRequest, match="chunk_overlap"):
        ChunkingConfig.from_preprocessing({"text_chunking_config": {"chunk_size": 10, "chunk_overlap": 10}})
    with pytest.raises(BadRequest, match="not supported"):
        ChunkingConfig.from_preprocessing({"type": "contextual"})
