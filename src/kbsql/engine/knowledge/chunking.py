"""A recursive character splitter that keeps true character offsets.

The algorithm is the familiar recursive splitter (the reference's `text_chunking`): split on
the first separator found in the text (paragraph, line, word, then characters), merge the
pieces into chunks of at most `chunk_size` characters with about `chunk_overlap` characters
carried over, and split any piece still too long with the next separators. Pieces here are
spans (start, end) of the original text, never copies, so every chunk knows where it came
from: `text[start:end] == chunk` always holds (chunk_id and metadata rely on it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbsql.interface.errors import BadRequest

DEFAULT_SEPARATORS = ("\n\n", "\n", " ", "")
SOURCE = "TextChunkingPreprocessor"


MAX_CHUNK_SIZE = 10**9  # characters; far above any body the server accepts
_CONF_KEYS = frozenset({"chunk_size", "chunk_overlap", "separators"})
_TOP_KEYS = frozenset({"type", "text_chunking_config"})


def _known_keys(given: dict[str, Any], accepted: frozenset[str], where: str) -> None:
    unknown = sorted(str(k) for k in given if k not in accepted)
    if unknown:
        raise BadRequest(f"{where} has unknown key(s) {unknown}; accepted: {sorted(accepted)}",
                         title="Invalid parameter")


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
            raise BadRequest("preprocessing must be an object such as {\"type\": \"text_chunking\", "
                             "\"text_chunking_config\": {\"chunk_size\": 1000}}",
                             title="Invalid parameter")
        _known_keys(preprocessing, _TOP_KEYS | _CONF_KEYS, "preprocessing")
        kind = preprocessing.get("type", "text_chunking")
        if kind != "text_chunking":
            raise BadRequest(f"preprocessing type {kind!r} is not supported: use 'text_chunking'",
                             title="Invalid parameter")
        conf = preprocessing.get("text_chunking_config") or {}
        if not isinstance(conf, dict):
            raise BadRequest("preprocessing.text_chunking_config must be an object",
                             title="Invalid parameter")
        _known_keys(conf, _CONF_KEYS, "preprocessing.text_chunking_config")
        flat = {k: v for k, v in preprocessing.items() if k in _CONF_KEYS}
        if flat and conf:
            raise BadRequest(f"preprocessing sets {sorted(flat)} both at the top level and in "
                             "text_chunking_config: use one place", title="Invalid parameter")
        conf = conf or flat
        size = _whole(conf.get("chunk_size", 1000), "chunk_size")
        overlap = _whole(conf.get("chunk_overlap", 200), "chunk_overlap")
        separators = conf.get("separators") or DEFAULT_SEPARATORS
        if isinstance(separators, str) or not isinstance(separators, list | tuple) or \
                not all(isinstance(s, str) for s in separators):
            raise BadRequest("text_chunking_config.separators must be a list of strings",
                             title="Invalid parameter")
        separators = tuple(separators)
        if size > MAX_CHUNK_SIZE:
            raise BadRequest(f"text_chunking_config.chunk_size {size} is too large: at most "
                             f"{MAX_CHUNK_SIZE} characters", title="Invalid parameter")
        if size < 1 or overlap < 0 or overlap >= size:
            raise BadRequest("text_chunking_config needs chunk_size >= 1 and 0 <= chunk_overlap < "
                             f"chunk_size (got chunk_size {size}, chunk_overlap {overlap})",
                             title="Invalid parameter")
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
        raise BadRequest(f"text_chunking_config.{field} must be a whole number, not {value!r}",
                         title="Invalid parameter") from None
    return int(number)


Span = tuple[int, int]


def split_text(text: str, config: ChunkingConfig = ChunkingConfig()) -> list[Span]:
    """Chunk spans of `text`, each stripped of surrounding whitespace and non-empty."""
    if len(text) <= config.chunk_size:  # a short text is one chunk whatever the separators
        spans = [(0, len(text))]
    else:
        spans = _split(text, 0, len(text), list(config.separators), config)
    out: list[Span] = []
    for start, end in spans:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            out.append((start, end))
    return out


def _pieces(text: str, start: int, end: int, separator: str) -> list[Span]:
    """Split [start, end) at each separator, the separator staying at the head of the next piece."""
    if separator == "":
        return [(i, i + 1) for i in range(start, end)]
    pieces = []
    cut = start
    at = text.find(separator, start, end)
    while at != -1:
        if at > cut:
            pieces.append((cut, at))
        cut = at
        at = text.find(separator, at + len(separator), end)
    if end > cut:
        pieces.append((cut, end))
    return pieces


def _split(text: str, start: int, end: int, separators: list[str], config: ChunkingConfig) -> list[Span]:
    separator = separators[-1]
    rest: list[str] = []
    for i, candidate in enumerate(separators):
        if candidate == "" or text.find(candidate, start, end) != -1:
            separator, rest = candidate, separators[i + 1:]
            break
    chunks: list[Span] = []
    small: list[Span] = []
    for piece in _pieces(text, start, end, separator):
        if piece[1] - piece[0] <= config.chunk_size:
            small.append(piece)
            continue
        if small:
            chunks.extend(_merge(small, config))
            small = []
        if rest:
            chunks.extend(_split(text, piece[0], piece[1], rest, config))
        else:  # no separator left: hard cut
            chunks.extend((s, min(s + config.chunk_size, piece[1]))
                          for s in range(piece[0], piece[1], config.chunk_size))
    if small:
        chunks.extend(_merge(small, config))
    return chunks


def _merge(pieces: list[Span], config: ChunkingConfig) -> list[Span]:
    """Greedy merge of contiguous pieces into chunks <= chunk_size, keeping <= overlap chars."""
    out: list[Span] = []
    window: list[Span] = []
    for piece in pieces:
        if window and piece[1] - window[0][0] > config.chunk_size:
            out.append((window[0][0], window[-1][1]))
            while window and (window[-1][1] - window[0][0] > config.chunk_overlap
                              or piece[1] - window[0][0] > config.chunk_size):
                window.pop(0)
        window.append(piece)
    if window:
        out.append((window[0][0], window[-1][1]))
    return out
