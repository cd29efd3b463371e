"""A recursive character splitter that keeps true character offsets.

The algorithm is the familiar recursive splitter (the reference's `text_chunking`): split on
the first separator found in the text (paragraph, line, word, then characters), merge the
pieces into chunks of at most `chunk_size` characters with about `chunk_overlap` characters
carried over, and split any piece still too long with the next separators. Pieces here are
spans (start, end) of the original text, never copies, so every chunk knows where it came
from: `text[start:end] == chunk` always holds (chunk_id and metadata rely on it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kbsql.interface.errors import InvalidParameter

DEFAULT_SEPARATORS = ("\n\n", "\n", " ", "")
SOURCE = "TextChunkingPreprocessor"


MAX_CHUNK_SIZE = 10**9  # characters; far above any body the server accepts
MAX_CHUNKS_PER_ROW = 10_000
"""Chunks one text may make: 10 MB of text at the default 1000/200, far above a real
document's; past it the insert fails naming the row (chunk_overlap close to chunk_size
otherwise multiplies storage: 999 of 1000 stores each character 1000 times)."""
_CONF_KEYS = frozenset({"chunk_size", "chunk_overlap", "separators"})
_TOP_KEYS = frozenset({"type", "text_chunking_config", "json_chunking_config"})


def _known_keys(given: dict[str, Any], accepted: frozenset[str], where: str) -> None:
    unknown = sorted(str(k) for k in given if k not in accepted)
    if unknown:
        raise InvalidParameter(f"{where} has unknown key(s) {unknown}; accepted: {sorted(accepted)}")


@dataclass(frozen=True)
class ChunkingConfig:
    chunk_size: int = 1000
    chunk_overlap: int = 200
    separators: tuple[str, ...] = DEFAULT_SEPARATORS

    @classmethod
    def from_preprocessing(cls, preprocessing: dict[str, Any] | None) -> ChunkingConfig:
        """Read `{"type": "text_chunking", "text_chunking_config": {...}}` (the reference's form).

        As a convenience the settings may also sit at the top level
        (`{"chunk_size": 500, "chunk_overlap": 50}`), but not both ways at once. Any other key,
        at either level, is refused naming the accepted ones: a misspelt setting silently
        ignored would leave the user with chunks they did not ask for.
        """
        if not preprocessing:
            return cls()
        if not isinstance(preprocessing, dict):
            raise InvalidParameter("preprocessing must be an object such as {\"type\": \"text_chunking\", "
                                   "\"text_chunking_config\": {\"chunk_size\": 1000}}")
        _known_keys(preprocessing, _TOP_KEYS | _CONF_KEYS, "preprocessing")
        kind = preprocessing.get("type", "text_chunking")
        if kind == "json_chunking":  # its own chunker (json_chunking.py); checked here
            from kbsql.engine.knowledge.json_chunking import JsonChunkingConfig

            JsonChunkingConfig.from_dict(preprocessing.get("json_chunking_config"))
            return cls()
        if kind != "text_chunking":
            raise InvalidParameter(f"preprocessing type {kind!r} is not supported: use 'text_chunking' or "
                                   "'json_chunking'")
        if "json_chunking_config" in preprocessing:
            raise InvalidParameter("json_chunking_config needs \"type\": \"json_chunking\"")
        conf = preprocessing.get("text_chunking_config") or {}
        if not isinstance(conf, dict):
            raise InvalidParameter("preprocessing.text_chunking_config must be an object")
        _known_keys(conf, _CONF_KEYS, "preprocessing.text_chunking_config")
        flat = {k: v for k, v in preprocessing.items() if k in _CONF_KEYS}
        if flat and conf:
            raise InvalidParameter(f"preprocessing sets {sorted(flat)} both at the top level and in "
                                   "text_chunking_config: use one place")
        conf = conf or flat
        size = _whole(conf.get("chunk_size", 1000), "chunk_size")
        overlap = _whole(conf.get("chunk_overlap", 200), "chunk_overlap")
        separators = conf.get("separators") or DEFAULT_SEPARATORS
        if isinstance(separators, str) or not isinstance(separators, list | tuple) or \
                not all(isinstance(s, str) for s in separators):
            raise InvalidParameter("text_chunking_config.separators must be a list of strings")
        separators = tuple(separators)
        if size > MAX_CHUNK_SIZE:
            raise InvalidParameter(f"text_chunking_config.chunk_size {size} is too large: at most "
                                   f"{MAX_CHUNK_SIZE} characters")
        if size < 1 or overlap < 0 or overlap >= size:
            raise InvalidParameter("text_chunking_config needs chunk_size >= 1 and 0 <= chunk_overlap < "
                                   f"chunk_size (got chunk_size {size}, chunk_overlap {overlap})")
        return cls(size, overlap, separators)


def _whole(value: Any, field: str) -> int:
    """A whole number from JSON or SQL (7, 7.0 or "7"); anything else is a clear 400."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
        if number != int(number):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameter(f"text_chunking_config.{field} must be a whole number, "
                               f"not {value!r}") from None
    return int(number)


Span = tuple[int, int]


class TooManyChunks(InvalidParameter):
    """One text would make more chunks than a row may (`MAX_CHUNKS_PER_ROW`)."""


class _Out(list[Span]):
    """The chunks made so far; past `limit` the split stops at once (a 30 KB row with
    chunk_overlap 999 of 1000 made 29,001 chunks and 251 MB on disk before)."""

    def __init__(self, limit: int, config: ChunkingConfig):
        super().__init__()
        self.limit = limit
        self.config = config

    def add(self, span: Span) -> None:
        if len(self) >= self.limit:
            raise TooManyChunks(
                f"the text would make more than {self.limit} chunks (chunk_size "
                f"{self.config.chunk_size}, chunk_overlap {self.config.chunk_overlap}): the most one "
                "row may make. Use a smaller chunk_overlap or a larger chunk_size, or split the text "
                "into several rows")
        self.append(span)


def split_text(text: str, config: ChunkingConfig = ChunkingConfig(),
               limit: int = MAX_CHUNKS_PER_ROW) -> list[Span]:
    """Chunk spans of `text`, each stripped of surrounding whitespace and non-empty; more
    than `limit` chunks is an error (`TooManyChunks`)."""
    spans = _Out(limit, config)
    if len(text) <= config.chunk_size:  # a short text is one chunk whatever the separators
        spans.add((0, len(text)))
    else:
        _split(text, 0, len(text), list(config.separators), config, spans)
    out: list[Span] = []
    for start, end in spans:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            out.append((start, end))
    return out


def _pieces(text: str, start: int, end: int, separator: str) -> Iterator[Span]:
    """Split [start, end) at each separator, the separator staying at the head of the next
    piece (lazily: a long text of short words must not become a list of millions first)."""
    cut = start
    at = text.find(separator, start, end)
    while at != -1:
        if at > cut:
            yield (cut, at)
        cut = at
        at = text.find(separator, at + len(separator), end)
    if end > cut:
        yield (cut, end)


def _split(text: str, start: int, end: int, separators: list[str], config: ChunkingConfig,
           out: _Out) -> None:
    separator = separators[-1]
    rest: list[str] = []
    for i, candidate in enumerate(separators):
        if candidate == "" or text.find(candidate, start, end) != -1:
            separator, rest = candidate, separators[i + 1:]
            break
    if separator == "":  # single characters: the merge of them, computed (no span per character)
        _characters(start, end, config, out)
        return
    small: list[Span] = []
    for piece in _pieces(text, start, end, separator):
        if piece[1] - piece[0] <= config.chunk_size:
            small.append(piece)
            continue
        if small:
            _merge(small, config, out)
            small = []
        if rest:
            _split(text, piece[0], piece[1], rest, config, out)
        else:  # no separator left: hard cut
            for s in range(piece[0], piece[1], config.chunk_size):
                out.add((s, min(s + config.chunk_size, piece[1])))
    if small:
        _merge(small, config, out)


def _characters(start: int, end: int, config: ChunkingConfig, out: _Out) -> None:
    """What `_merge` makes of one-character pieces: windows of chunk_size characters, each
    starting chunk_overlap characters before the previous one ended."""
    step = config.chunk_size - config.chunk_overlap
    s = start
    while True:
        stop = min(s + config.chunk_size, end)
        out.add((s, stop))
        if stop >= end:
            return
        s += step


def _merge(pieces: list[Span], config: ChunkingConfig, out: _Out) -> None:
    """Greedy merge of contiguous pieces into chunks <= chunk_size, keeping <= overlap chars."""
    window: deque[Span] = deque()
    for piece in pieces:
        if window and piece[1] - window[0][0] > config.chunk_size:
            out.add((window[0][0], window[-1][1]))
            while window and (window[-1][1] - window[0][0] > config.chunk_overlap
                              or piece[1] - window[0][0] > config.chunk_size):
                window.popleft()
        window.append(piece)
    if window:
        out.add((window[0][0], window[-1][1]))
