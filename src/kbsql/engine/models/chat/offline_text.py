"""The offline agent's reading: whole sentences chosen across the retrieved chunks (follow-up
questions are rewritten with the conversation in offline_followup.py; Markdown is first read as
text by offline_markdown.py).

Why this care for a model that is "only" retrieval: its answer is what a new user reads
first. Splitting chunks on every newline gave fragments ("When a timeout occurs,"), the
overlap between chunks gave the same sentence twice, grammar lines gave debris, a passage of
`- ` bullet lines without full stops was one "sentence" of the whole passage (a markdown
`## Heading` glued to the first sentence), a table written as text ("Oak pod | 4 | £85 | 2
nights" under "Pod | Sleeps | Per night | Minimum stay") was debris or one fragment, a list of
short unpunctuated lines ("Cat spay: £95", "Towel hire - £2") was one paragraph with its title,
and a FAQ's answer ("About 45 minutes.") was read without the question it answers.
Everything here is plain deterministic text processing: the same question over the same data
gives the same answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbsql.engine.models.chat import offline_markdown

MAX_SENTENCES = 3
NUMBER_WORDS = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                 "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
                 "eighty ninety hundred thousand million billion half quarter dozen twice once single "
                 "double triple")
NUMBER = re.compile(r"\d|\b(" + "|".join(NUMBER_WORDS.split()) + r")\b", re.IGNORECASE)
"""An amount, in digits or in words (offline_asked reads it too)."""
MAX_QUOTED = 4
"""Sentences an answer quotes at most, leads included; the best answer is quoted whole even
when it and its lead are more."""
MAX_SENTENCE_CHARS = 400
MIN_SENTENCE_WORDS = 4
MIN_FRAGMENT_WORDS = 2
"""A chunk with no whole sentence (a delivery note "Gift wrap requested", a data row) is
quoted whole from this many words: it may be the very answer."""

WORD = re.compile(r"[A-Za-z0-9][\w']*")
STOP = frozenset("""a an and are as at be by can could do does did for from has have how i if in
into is it its of on or so that the this to was were what when where which who why will with
would you your me my we our us about tell please also then them they their there these those
should may might any some all just like get make use set""".split())
"""Words that never make a search or a sentence relevant (`set`, `use`, `get` are too common
in technical text to carry the subject)."""
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Mr.", "Dr.", "No.", "approx.")
_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[`]?[A-Z0-9])")
_CODE_START = re.compile(r"[\"`]\w+[\"`] ")
"""A sentence may open with a quoted name in lower case: `"pass" is a null operation`."""
_REFERS = re.compile(r"(It|Its|This|These|They|Their|Them|That|Those|Such|Otherwise|Thus|Hence|However|"
                     r"He|She|Both|The (?:latter|former|same))\b")
"""A sentence opening with one of these leans on the sentence before it: "It must be either a
subclass or an instance of BaseException" says what must be so only after "Otherwise, raise
evaluates the first expression as the exception object"."""
MAX_LEAD = 2
"""At most this many sentences before a referring one are brought with it (a lead that itself
refers back brings its own predecessor: "Otherwise, ..." after "If there isn't ...")."""
_INTRODUCES = re.compile(r",?\s*(?:for example|for instance|as follows|like this)?\s*:$", re.IGNORECASE)
MIN_INTRO_WORDS = 8
"""A sentence that introduces an example ("It is useful as a placeholder when ..., for
example:") says its piece before the colon: from this many words it is quoted, ended with a
full stop."""
_LABEL = re.compile(r"^\*\*[^*]{1,40}:\*\*\s*")
"""A bold label a sentence may open with: `**Programmer's note:** Variables defined ...`."""
_ASKING = re.compile(r"^(?:Symptoms?|Problems?|Issues?|Faults?|Complaints?|Questions?|Q)\s*:\s")
"""A line that states the asker's side, labelled ("Symptom: The machine shakes when spinning.",
"Problem: ...", "Q: ..."): it restates the question, so it is never the answer; the lines after
it ("Cause: ...", "Fix: ...", "A: ...") are, read under it as a FAQ's answer under its question."""
_DEBRIS = re.compile(r"::=|\|.*\||^[\s\-=+*_#|:]+$|-{3,}|={3,}|\+-{2,}")


def stem(word: str) -> str:
    """A crude plural/tense fold so `timeouts`/`timeout`, `closing`/`closes`,
    `leave`/`leaving`, `assert`/`assertions` and `batteries`/`battery` meet (final `e`s go too)."""
    if word.endswith("ies") and len(word) >= 6:
        return word[:-3] + "y"
    for suffix in ("ions", "ion", "ing", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # `swimming`/`swim`, `stopped`/`stop` (not `spelling`, `passed`)
            break
    while word.endswith("e") and len(word) >= 4:  # `employee`/`employees`, `degree`/`degrees`
        word = word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning, in order, without repeats; a hyphenated word is
    also read joined ("Wi-Fi" holds "wifi", "e-mail" "email"), as people type it."""
    seen: dict[str, None] = {}
    lowered = text.lower()
    for word in WORD.findall(lowered):
        if word not in STOP and len(word) > 1:
            seen.setdefault(word, None)
    for joined in _HYPHENATED.findall(lowered):
        seen.setdefault(joined.replace("-", ""), None)
    return list(seen)


_HYPHENATED = re.compile(r"(?<![\w-])[a-z]+(?:-[a-z]+)+(?![\w-])")


@dataclass(frozen=True)
class Sentence:
    text: str
    chunk_id: str
    rank: int
    """Retrieval rank of its chunk (0 = best match)."""
    position: int
    lead: tuple[str, ...] = ()
    """The sentences just before it in its chunk that it refers back to (empty unless it opens
    with a referring word): judged and quoted with it, so "It ..." never stands alone."""
    item: bool = False
    """A line of a line list (`Item`): one value for the one thing it names."""

    @property
    def answers_lead(self) -> bool:
        """A FAQ's answer, read under the question it answers (`_with_leads`): the question lends
        it the topic's words ("Who can drive the courtesy car?"), so only the answer itself can
        name a word the user adds ("abroad")."""
        return any(asks(t) for t in self.lead)

    @property
    def unit(self) -> str:
        """The text judged and quoted: the sentence after its lead."""
        return " ".join((*self.lead, self.text))


def asks(sentence: str) -> bool:
    """A question, or a line labelled as the asker's side (`restates`): never quoted as an
    answer, the lead of the answer after it."""
    return sentence.rstrip("\"')]` ").endswith("?") or restates(sentence)


def restates(sentence: str) -> bool:
    """A line labelled as the asker's side ("Symptom: Clothes come out very wet."): what the
    user asks, in the text's words, so its closeness to the question is that of the entry it
    opens (offline_evidence._closeness)."""
    return bool(_ASKING.match(sentence))


def refers_back(sentence: str) -> bool:
    return bool(_REFERS.match(sentence.lstrip("\"'(`[")))


def _with_leads(paragraphs: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The whole sentences of a chunk's paragraphs, each with the sentences before it that it
    leans on. A paragraph may open with "It ..." about the one before ("break" may only occur
    in a loop. / It terminates the nearest enclosing loop), so a lead crosses paragraphs; it
    never crosses a part that is not a whole sentence (a title, code, a line ending in ':').
    A table row is a statement whose lead is its table's header ("Pod | Sleeps | Per night |
    Minimum stay:"): judged with it ("minimum stay in the family lodge") and quoted under it, so
    the reader sees what each cell is."""
    out: list[tuple[str, tuple[str, ...]]] = []
    run: list[str] = []  # the whole sentences since the last part that was not one
    header: list[str] = []  # the cells of the table the rows read now belong to
    heading = ""  # the last title line: the heading a list's items are read under
    for paragraph in paragraphs:
        if isinstance(paragraph, Item):
            out.append((paragraph, (heading + ":",) if heading else ()))
            run = []
            continue
        if _is_title(paragraph):
            heading = paragraph
        cells = paragraph.split(" | ") if _ROW.match(paragraph) else []
        if cells and len(cells) == len(header) and len(paragraph) <= MAX_SENTENCE_CHARS:
            out.append((_item_closed(paragraph), (" | ".join(header) + ":",)))
            continue
        header, run = cells, [] if cells else run
        if cells:
            continue
        for text in map(_closed, _split(paragraph)):
            if not is_whole(text):
                run = []
                continue
            run.append(text)
            start = k = len(run) - 1
            while start > 0 and k - start < MAX_LEAD and refers_back(run[start]):
                start -= 1
            asked = [i for i in range(max(k - MAX_LEAD, 0), k) if asks(run[i])]
            if asked and not asks(text):  # a FAQ's answer: judged and quoted under its question
                start = min(start, asked[-1])
            out.append((text, tuple(run[start:k])))
    return out


def paragraphs_of(chunk: str, lists: bool = True) -> list[str]:
    """Paragraphs with their lines joined (a chunk wraps lines inside sentences), table and
    grammar lines dropped; such a line ends a paragraph, so a title underlined with `***`
    does not glue itself to the sentence after it. A line is a paragraph of its own, not a
    wrapped piece of the one before, when it is a markdown heading (`## Fees`), a bullet
    (`- The Snug seats 4`), a capitalised line after a bullet, or the line after a short
    unpunctuated first line (a title: "Opening hours" over "We are open ..."): joined, a
    passage of bullet lines with no full stops was one "sentence" of a whole passage, too
    long to quote and too diluted to be close to any question. A block of short lines without
    punctuation (`_is_line_list`) is read line by line: each an Item, or a heading."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", offline_markdown.plain(chunk)):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        if lists and _is_line_list(lines):
            out += [_listed(line) for line in lines]
            continue
        kept: list[str] = []
        item = False  # `kept` is a bullet's text
        raw = block.splitlines()
        parent, depth = "", 0  # a bullet ending in ':' and its indent: its sub-bullets carry it
        for n, line in enumerate(ln.strip() for ln in raw):
            if not line:
                continue
            indent = len(raw[n]) - len(raw[n].lstrip())
            parent = parent if indent > depth else ""
            if _parent(raw, n):  # "- Rabbits:" over indented bullets: said by each of them
                if kept:
                    out.append(_bullet(" ".join(kept), lists) if item else " ".join(kept))
                kept, item = [], False
                parent, depth = _MARKED.sub("", line, count=1).rstrip(":"), indent
                continue
            row = bool(_ROW.match(line))
            debris = not row and bool(_DEBRIS.search(line))
            marked = _MARKED.match(line)
            if kept and (debris or marked or row or (item and line[:1].isupper()) or
                         (n == 1 and _is_title(kept[0]) and line[:1].isupper())):
                out.append(_bullet(" ".join(kept), lists) if item else " ".join(kept))
                kept, item = [], False
            if row:
                out.append(" | ".join(_CELL.split(line)))
                continue
            if debris:
                continue
            if marked:
                item = marked.group(1) is not None  # a heading stands alone, a bullet is a statement
                line = f"{parent}: " * (item and bool(parent)) + line[marked.end():]
            kept.append(line)
        if kept:
            out.append(_bullet(" ".join(kept), lists) if item else " ".join(kept))
    return out


def _parent(lines: list[str], n: int) -> bool:
    """Whether line `n` is a bullet that ends in ':' with bullets indented under it ("- Rabbits:"
    over "  - myxomatosis and RHD2 in one combined jab"): each sub-bullet is read and quoted
    with it ("Rabbits: myxomatosis and RHD2 in one combined jab"), since it names what they are
    about; quoted alone it says nothing, and under it a sub-bullet names nothing."""
    line = lines[n].strip()
    marked = _MARKED.match(line)
    if not marked or marked.group(1) is None or not line.endswith(":") or \
            len(line.split()) - 1 > MAX_TITLE_WORDS:
        return False
    after = next((ln for ln in lines[n + 1:] if ln.strip()), "")
    indent = len(lines[n]) - len(lines[n].lstrip())
    sub = _MARKED.match(after.strip())
    return bool(sub and sub.group(1) is not None and len(after) - len(after.lstrip()) > indent)


def _bullet(text: str, lists: bool) -> str:
    """A bullet's text as a statement; one that is no whole sentence ("Mon-Fri: 07:00-22:00")
    is, in the list reading, an Item of its own under its heading, as a line list's line is."""
    closed = _item_closed(text)
    return Item(closed) if lists and not is_whole(closed) else closed


class Item(str):
    """A line of a line list ("Cat spay: £95", "Saturday and Sunday - 8 am to 8 pm"): a statement
    of its own however short, read under the heading line above it (`_with_leads`)."""


MIN_LIST_LINES = 3
_OPENS = re.compile(r"^[A-Z0-9£$€]")
_STOPS = (".", "!", "?")


def _is_line_list(lines: list[str]) -> bool:
    """A block of short lines, each opening like a statement and most ending without
    punctuation, and no bullet, heading mark or table row among them: a price list, a
    timetable, opening hours. Joined, such lines were one "sentence" of the whole passage (or
    refused as none); wrapped prose has lines opening in lower case."""
    if len(lines) < MIN_LIST_LINES or not all(_OPENS.match(ln) for ln in lines):
        return False
    if any(_MARKED.match(ln) or _ROW.match(ln) or _DEBRIS.search(ln) for ln in lines):
        return False
    open_ = [ln for ln in lines[1:] if not ln.endswith(_STOPS)]
    return len(open_) >= 2 and 2 * len(open_) >= len(lines) - 1 and \
        all(len(ln) <= MAX_SENTENCE_CHARS for ln in open_)


def _listed(line: str) -> str:
    """One line of a line list: a sentence as written, a heading ("Mountain boats", "Extras:")
    as a title, any other line an Item."""
    if line.endswith(_STOPS):
        return line
    if _is_heading(line):
        return line.rstrip(":")
    return Item(_item_closed(line))


MAX_HEADING_WORDS = 4


def _is_heading(line: str) -> bool:
    """A list's heading line: a few words, no amount, no label or separator of a value."""
    return len(line.split()) <= MAX_HEADING_WORDS and not re.search(r": | - ", line) and \
        not NUMBER.search(line)


_ROW = re.compile(r"^[^|\s](?:[^|]*\S)?(?:\s+\|\s+\S(?:[^|]*\S)?)+$")
"""A table line written as text: cells between ` | ` ("Oak pod | 4 | £85 | 2 nights"), with no
outer pipes (a grid table of the docs is still debris; a Markdown table's rows are rewritten
so by offline_markdown.plain). Each is a paragraph: the first of a run is the header its rows
are read with (`_with_leads`)."""
_CELL = re.compile(r"\s+\|\s+")
_MARKED = re.compile(r"^(?:#{1,6}|([-*\u2022]))\s+")
"""A markdown heading's `#`s, or a bullet (group 1)."""
MAX_TITLE_WORDS = 8


def _is_title(line: str) -> bool:
    """A short line that ends without punctuation: a title, not a sentence wrapped over lines."""
    return len(line.split()) <= MAX_TITLE_WORDS and line[-1:].isalnum()


def _item_closed(text: str) -> str:
    """A bullet's text, ended with a full stop where it ends without one: each bullet is a
    statement ("Day pass: £25, any open desk from 8 am to 6 pm")."""
    return text + "." if text[-1:].isalnum() or text[-1:] in ")%" else text


def _closed(text: str) -> str:
    """A sentence that introduces an example, ended where its words end."""
    if text.endswith(":") and len(text.split()) >= MIN_INTRO_WORDS:
        return _INTRODUCES.sub("", text) + "."
    return text


def _split(paragraph: str) -> list[str]:
    protected = paragraph
    for i, abbr in enumerate(_ABBREVIATIONS):
        protected = protected.replace(abbr, f"\x00{i}\x00")
    parts = _SPLIT.split(protected)
    restore = []
    for part in parts:
        for i, abbr in enumerate(_ABBREVIATIONS):
            part = part.replace(f"\x00{i}\x00", abbr)
        restore.append(" ".join(part.split()))
    return restore


def is_whole(sentence: str) -> bool:
    """Starts like a sentence (or with a quoted name), ends like one, is long enough to say
    something, and is words (not code, numbers or a table row). Markdown's bold may open or
    close it ("**Developer**: $29 per month, ...", "... is **not supported**."): a sentence
    opening in bold was never quoted (round 20)."""
    if len(sentence) > MAX_SENTENCE_CHARS or len(sentence.split()) < MIN_SENTENCE_WORDS:
        return False
    first = _LABEL.sub("", sentence).lstrip("\"'(`[*")[:1]
    if not first or not (first.isupper() or first.isdigit() or _CODE_START.match(sentence)):
        return False
    if sentence.rstrip("\"')]`*")[-1:] not in (".", "!", "?"):
        return False
    letters = sum(c.isalpha() or c.isspace() for c in sentence)
    return letters / len(sentence) >= 0.6


def sentence_key(text: str) -> str:
    """One sentence's identity across overlapping chunks (its words, lower-cased)."""
    return " ".join(WORD.findall(text.lower()))


def sentences(chunks: list[tuple[str, str]]) -> list[Sentence]:
    """Whole sentences of the chunks (content, chunk_id), best chunk first, each sentence
    once: chunks overlap, so the same sentence often ends one and starts the next. A chunk
    of one paragraph with no whole sentence (a data row, a note) stands as one, trimmed; a
    longer one without any is a title and grammar, not an answer."""
    seen: set[str] = set()
    out: list[Sentence] = []
    for rank, (content, chunk_id) in enumerate(chunks):
        paragraphs = paragraphs_of(content)  # grammar and table lines dropped
        read = _with_leads(paragraphs)
        whole = len(read)  # whole sentences of the prose reading
        if any(isinstance(p, Item) for p in paragraphs):  # a list is also read as prose, as before
            paragraphs = paragraphs_of(content, lists=False)
            prose = _with_leads(paragraphs)
            read, whole = read + prose, len(prose)
        for position, (text, lead) in enumerate(read):  # a lead's position is just before its sentence's
            key = sentence_key(text)
            if key in seen:
                continue
            seen.add(key)
            out.append(Sentence(text, chunk_id, rank, position, lead, isinstance(text, Item)))
        flat = " ".join(" ".join(paragraphs).split())
        titled = len(paragraphs) == 2 and _is_title(paragraphs[0])  # a title over one paragraph
        if not whole and (len(paragraphs) == 1 or titled) and len(flat.split()) >= MIN_FRAGMENT_WORDS and \
                sum(c.isalpha() or c.isspace() for c in flat) >= 0.6 * len(flat):
            cut = flat if len(flat) <= MAX_SENTENCE_CHARS else \
                flat[:MAX_SENTENCE_CHARS].rsplit(" ", 1)[0] + " …"
            out.append(Sentence(cut, chunk_id, rank, 0))
    return out
