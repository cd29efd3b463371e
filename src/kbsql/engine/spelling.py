"""'Did you mean ...?' for a misspelt name: the known names near it.

Near is one edit (one character inserted, deleted or replaced, or two neighbours swapped:
`tickets_kb` for `tickest_kb`), letters compared without case, as names are, or a `_word`
added or left out (`tickets` for `tickets_kb`). No nearer: a hint that guesses further than
that is more often wrong than right, and a wrong hint is worse than none. The hint goes
into SQL error messages, which are free text and cross HTTP unchanged, so a notebook sees it
embedded and remote alike; REST problem details keep the reference's exact sentence
(`NotFound.hint` carries it for the SQL path).
"""

from __future__ import annotations

from collections.abc import Iterable


def one_edit_apart(a: str, b: str) -> bool:
    """True when `a` and `b` (compared without case) differ by exactly one edit."""
    a, b = a.lower(), b.lower()
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    if len(a) < len(b):  # one inserted in b
        return a[first:] == b[first + 1:]
    if a[first + 1:] == b[first + 1:]:  # one replaced
        return True
    return (first + 1 < len(a) and a[first] == b[first + 1] and a[first + 1] == b[first]
            and a[first + 2:] == b[first + 2:])  # two neighbours swapped


def affixed(a: str, b: str) -> bool:
    """True when one name is the other with a `_word` added before or after (`tickets` and
    `tickets_kb`, `docs_300` and `docs`): the same thing named with or without its kind or
    variant, a near name as sure as one edit. Names under 3 letters are not guessed at."""
    short, long = sorted((a.lower(), b.lower()), key=len)
    return len(short) >= 3 and (long.startswith(short + "_") or long.endswith("_" + short))


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'docs'?)` when known names are one edit away from `name`, or it with a
    `_word` added or taken off, else ''."""
    close = sorted({k for k in known if one_edit_apart(name, k) or affixed(name, k)}, key=str.lower)
    if not close:
        return ""
    shown = [f"'{k}'" for k in close[:3]]
    return f" (did you mean {' or '.join(shown)}?)"
