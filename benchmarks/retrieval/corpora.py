"""The offline corpora of the retrieval evaluation (benchmarks/bench_retrieval.py).

Three kinds of text a user puts in a knowledge base, all built on this machine, nothing
downloaded:
- `pydoc`: Python's documentation topics (`pydoc_data.topics`, shipped with CPython): long
  reference pages of prose and grammar.
- `stdlib`: one page per standard-library module, its docstring followed by the first
  paragraph of the docstring of each public function and class (what `help(module)` shows
  first): terse API prose.
- `tickets`: a support-ticket table of a small shop (like notebooks/search-your-own-csv),
  short complaints in customers' own words, several per problem, generated from
  tickets.json with a fixed seed.

Questions live in questions/*.json beside this file, written as people ask them
(paraphrased, not copied from the answer), each naming its answer documents. A pydoc
answer is widened to the topics that contain its text word for word (`compound` holds the
`for` statement's page, `specialnames` the `customization` one): both are the right answer,
and their chunks tie.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import json
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPORA = ("pydoc", "stdlib", "tickets")
SETS = ("pydoc", "stdlib", "tickets", "heldout")  # heldout: never tuned on, reported apart

STDLIB_MODULES = """abc argparse array ast asyncio base64 bisect bz2 calendar cmath cmd codecs
collections colorsys configparser contextlib copy csv dataclasses datetime decimal difflib dis
doctest enum fileinput fnmatch ftplib functools gc getopt getpass gettext gzip hashlib heapq
html inspect io ipaddress itertools json keyword locale logging lzma marshal math mimetypes
operator os pathlib pdb pickle pkgutil platform plistlib pprint pyclbr queue random re sched
secrets select selectors shelve shutil signal site smtplib socket socketserver sqlite3 ssl
statistics string struct subprocess sys sysconfig tarfile tempfile textwrap threading time
timeit tokenize traceback types typing unicodedata unittest urllib.parse uuid warnings wave
weakref xml.etree.ElementTree zipfile zlib""".split()


@dataclass
class Question:
    set: str
    corpus: str
    question: str
    answers: list[str]
    note: str = ""


@dataclass
class Corpus:
    name: str
    rows: list[dict[str, Any]]  # {"id", "content", ...metadata}
    aliases: dict[str, list[str]] = field(default_factory=dict)  # answer key -> document ids

    def answer_ids(self, keys: list[str]) -> list[str]:
        out: list[str] = []
        for key in keys:
            for doc in self.aliases.get(key, [key]):
                if doc not in out:
                    out.append(doc)
        return out


@functools.cache
def pydoc() -> Corpus:
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    rows = [{"id": name, "content": text} for name, text in sorted(topics.items())]
    aliases = {name: [name, *containers(name, topics)] for name in topics}
    return Corpus("pydoc", rows, aliases)


def containers(name: str, topics: dict[str, str]) -> list[str]:
    """Other topics holding `name`'s text word for word (three probes of 200 characters)."""
    text = topics[name]
    n = len(text)
    probes = [text[int(n * f):int(n * f) + 200] for f in (0.3, 0.5, 0.7)] if n > 400 else [text[n // 3:]]
    return sorted(other for other, body in topics.items() if other != name and all(p in body for p in probes))


def _first_paragraph(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n\n")[0].strip()


def module_page(name: str) -> str:
    """A module's docstring, then `member: first paragraph` of its public functions and classes."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        module = importlib.import_module(name)
    lines = [f"Module {name}", "", inspect.cleandoc(module.__doc__ or "")]
    names = getattr(module, "__all__", None) or [k for k in dir(module) if not k.startswith("_")]
    top = name.split(".")[0]
    members = []
    for key in sorted(names):
        value = getattr(module, key, None)
        if not (inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value)):
            continue
        home = str(getattr(value, "__module__", "") or "")
        if home and not (home.startswith(top) or home.startswith("_")):
            continue  # imported from elsewhere (typing.Any in another module's namespace)
        paragraph = _first_paragraph(value.__doc__)
        if paragraph:
            members.append(f"{key}: {' '.join(paragraph.split())}")
    if members:
        lines += ["", "Functions and classes:", *members]
    return "\n".join(lines).strip()


@functools.cache
def stdlib() -> Corpus:
    return Corpus("stdlib", [{"id": name, "content": module_page(name)} for name in STDLIB_MODULES])


@functools.cache
def tickets(seed: int = 24) -> Corpus:
    """The ticket table: every problem of tickets.json filed once per phrasing, some twice,
    with an order number and some of the things customers add around a complaint."""
    spec = json.loads((HERE / "tickets.json").read_text(encoding="utf-8"))
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    aliases: dict[str, list[str]] = {}
    filings = []
    for problem in spec["problems"]:
        for text in problem["texts"]:
            for _ in range(2 if rng.random() < 0.3 else 1):
                filings.append((problem, text))
    rng.shuffle(filings)
    for problem, text in filings:
        ticket = str(1000 + len(rows))
        parts = [text]
        if rng.random() < 0.5:
            parts.insert(0, rng.choice(spec["openers"]))
        if rng.random() < 0.5:
            parts.append(rng.choice(spec["closers"]).format(order=rng.randint(10000, 99999)))
        rows.append({"id": ticket, "content": " ".join(parts), "category": problem["category"],
                     "priority": rng.choice(("low", "normal", "high"))})
        aliases.setdefault(problem["key"], []).append(ticket)
    return Corpus("tickets", rows, aliases)


def corpus(name: str) -> Corpus:
    return {"pydoc": pydoc, "stdlib": stdlib, "tickets": tickets}[name]()


def questions(set_name: str) -> list[Question]:
    data = json.loads((HERE / "questions" / f"{set_name}.json").read_text(encoding="utf-8"))
    return [Question(set_name, q.get("corpus", data.get("corpus", "")), q["question"], list(q["answers"]),
                     q.get("note", "")) for q in data["questions"]]
