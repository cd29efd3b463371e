"""The offline retrieval agent (provider `kbsql`, model `retrieval`): a deterministic "model"
that plays the same game as a language model, so an agent answers on a fresh machine with no
key and no network, and its stream has exactly the shape an LLM's has.

Policy, one tool call per turn: kb_list_tool; kb_query_tool with the question as a semantic
search on each listed knowledge base (a follow-up question carries the subject of the earlier
ones, see offline_followup.search_text); when no knowledge base gave rows, sql_db_list_tables and
a few rows of each table. Then it answers extractively: whole sentences of the retrieved
chunks that really answer the question (offline_evidence.py: never a question, never a
passage merely near it), each cited by its chunk_id; or it says plainly that nothing it
found answers, or that a count needs SQL; and one line on how to get written answers from
a language model instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from kbsql.engine.agents.render import parse_table_text
from kbsql.engine.config import OFFLINE_MODEL, OFFLINE_PROVIDER
from kbsql.engine.models.chat import offline_count, offline_evidence, offline_followup, offline_text
from kbsql.engine.models.chat.base import Message, RunControl, ToolCall, ToolSpec, Turn
from kbsql.interface.errors import ProviderError
from kbsql.interface.literals import quote_literal

SEARCH_LIMIT = 20
_FROM = re.compile(r"\bFROM\s+([\w.`\"]+)", re.IGNORECASE)
MAX_KBS = 5
MAX_TABLES = 3
SWITCH_HINT = ("_Offline retrieval agent: sentences quoted from your data, no language model. For "
               "written answers give the agent one, e.g. `ALTER AGENT <name> USING model = "
               "{\"provider\": \"openai\", \"model_name\": \"gpt-4o-mini\", \"api_key\": \"sk-...\"}` "
               "(or `\"ollama\"`; "
               "in Python `client.agents.update(<name>, model={...})`), or set "
               "`KBSQL_DEFAULT_MODEL_PROVIDER`._")
"""The one line every offline answer ends with: what it is, and how to get a real model, in
SQL first (every door reads it: a notebook's %%kbsql, REST, MySQL; `client` exists only in
Python, where the answer named it to CLI and SQL users alike)."""

def search_sql(kb: str, question: str, limit: int = SEARCH_LIMIT) -> str:
    """The semantic search for `question`, its text quoted by the one quoter (so it reads back
    exactly). Quotes around the whole question are dropped first: they mean nothing to a
    search, and a text that starts and ends with both kinds would need a `||` expression."""
    text = question.strip().strip("'\"").strip()
    return f"SELECT * FROM {kb} WHERE content = {quote_literal(text)} LIMIT {limit}"


class OfflineProvider:
    provider = OFFLINE_PROVIDER

    def __init__(self, model: dict[str, Any] | None = None, context: Any = None):
        self.model_name = str((model or {}).get("model_name") or OFFLINE_MODEL)
        self.encoder = _bundled_encoder(context)

    def check(self) -> None:
        """Always reachable (it runs in-process); only the model name can be wrong."""
        if self.model_name != OFFLINE_MODEL:
            raise ProviderError(f"{OFFLINE_PROVIDER} has no model '{self.model_name}'; the offline "
                                f"agent model is '{OFFLINE_MODEL}'", title="Model provider error")

    def chat(self, system: str, messages: list[Message], tools: list[ToolSpec],
             control: RunControl) -> Turn:
        control.check()
        start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        question = messages[start].content if start >= 0 else ""
        earlier = [m.content for m in messages[:max(start, 0)] if m.role == "user"]
        search = offline_followup.search_text(question, earlier)
        calls: dict[str, ToolCall] = {}
        done: list[tuple[ToolCall, str]] = []
        for m in messages[start + 1:]:
            for call in m.tool_calls:
                calls[call.id] = call
            if m.role == "tool" and m.tool_call_id in calls:
                done.append((calls[m.tool_call_id], m.content))
        names = {t.name for t in tools}
        nxt = self._next_call(search, done, names)
        if nxt is not None:
            name, args = nxt
            return Turn("", [ToolCall(f"call_{len(done) + 1}", name, args)])
        return Turn(answer(question, done, search, self.encoder))

    def _next_call(self, question: str, done: list[tuple[ToolCall, str]],
                   names: set[str]) -> tuple[str, dict[str, Any]] | None:
        used = [c.name for c, _ in done]
        if "kb_list_tool" in names and "kb_list_tool" not in used:
            return "kb_list_tool", {}
        queried = {c.arguments.get("query") for c, _ in done if c.name == "kb_query_tool"}
        for kb in _listed(done, "kb_list_tool")[:MAX_KBS]:
            sql = search_sql(kb, question)
            if "kb_query_tool" in names and sql not in queried:
                return "kb_query_tool", {"query": sql}
        if _kb_rows(done) or "sql_db_list_tables" not in names:
            return None
        if "sql_db_list_tables" not in used:
            return "sql_db_list_tables", {}
        queried = {c.arguments.get("query") for c, _ in done if c.name == "sql_db_query"}
        for table in _listed(done, "sql_db_list_tables")[:MAX_TABLES]:
            sql = f"SELECT * FROM {table} LIMIT {SEARCH_LIMIT}"
            if "sql_db_query" in names and sql not in queried:
                return "sql_db_query", {"query": sql}
        return None


def _listed(done: list[tuple[ToolCall, str]], tool: str) -> list[str]:
    for call, observation in done:
        if call.name == tool:
            if observation.startswith("["):
                try:
                    return [str(n) for n in json.loads(observation)]
                except ValueError:
                    return []
            if observation.startswith("Error") or observation.startswith("No tables"):
                return []
            return [n.strip() for n in observation.split(",") if n.strip()]
    return []


def _kb_rows(done: list[tuple[ToolCall, str]]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for call, observation in done:
        if call.name == "kb_query_tool":
            rows += [r for r in parse_table_text(observation) if r.get("chunk_content")]
    return rows


def _bundled_encoder(context: Any) -> Callable[[], Any] | None:
    """The engine's own MiniLM (loaded once per engine, shared with its knowledge bases) with
    the sentence vectors it already computed remembered (`sentence_cache`), or None when the
    weights are not installed or no engine lent its context."""
    from kbsql.engine.models import minilm
    from kbsql.engine.models.chat.sentence_cache import CachedSentences

    if context is None or not minilm.available():
        return None
    def encoder() -> CachedSentences:
        model = context.load_once(minilm.MODEL_NAME, minilm.load_model)  # not inside the next load
        return context.load_once(minilm.MODEL_NAME + ":offline-sentences", lambda: CachedSentences(model))

    return encoder


def answer(question: str, done: list[tuple[ToolCall, str]], search: str | None = None,
           encoder: Callable[[], Any] | None = None) -> str:
    rows = _kb_rows(done)
    searched = _searched_kbs(done)
    if searched and offline_count.asks_to_count(question, [r["chunk_content"] for r in rows],
                                                encoder):
        kb = searched[0]
        return (f"I cannot count or total from a search: this offline agent reads only the best "
                f"{SEARCH_LIMIT} matches of a search, never every row, so any number I gave would be "
                f"wrong. SQL counts the whole knowledge base, for example `SELECT count(DISTINCT id) "
                f"FROM {kb}` (with a WHERE clause on its metadata to narrow it).\n\n" + SWITCH_HINT)
    if rows:
        own = question if search and search != question else None
        return _extract(search or question, rows, searched, encoder, own) + "\n\n" + SWITCH_HINT
    tables = [(c.arguments.get("query", ""), o) for c, o in done
              if c.name == "sql_db_query" and not o.startswith("Error")]
    if tables:
        parts = [f"{sql}:\n{obs.split(chr(10), 1)[-1].strip()}" for sql, obs in tables]
        return ("No knowledge base matched; the connected tables hold:\n\n" + "\n\n".join(parts)
                + "\n\n" + SWITCH_HINT)
    return "I could not find anything about this in the data this agent is connected to."


def _with_leads(best: list[offline_text.Sentence]) -> list[offline_text.Sentence]:
    """Each chosen sentence preceded by its lead, the sentences it refers back to ("It must be
    ..." needs the sentence that says what "it" is), each sentence quoted once; a later answer
    whose sentences would pass MAX_QUOTED is left out (the best one never is), and so is a line
    of a list already quoted whole (offline_text.sentences reads a list both ways); the whole list
    after its line is kept, the line's context."""
    out: list[offline_text.Sentence] = []
    seen: set[str] = set()
    for s in best:
        key = f" {offline_text.sentence_key(s.text)} "
        if any(q.chunk_id == s.chunk_id and key in f" {offline_text.sentence_key(q.text)} " for q in out):
            continue
        lead = [offline_text.Sentence(text, s.chunk_id, s.rank, s.position - len(s.lead) + i)
                for i, text in enumerate(s.lead)]
        new = {offline_text.sentence_key(q.text): q for q in (*lead, s)}
        new = {key: q for key, q in new.items() if key not in seen}
        if out and len(out) + len(new) > offline_text.MAX_QUOTED:
            continue
        seen.update(new)
        out += new.values()
    return out


def _in_reading_order(best: list[offline_text.Sentence]) -> list[offline_text.Sentence]:
    """Best first, but sentences of one chunk that come together keep the chunk's order, so
    "It terminates the loop" follows the sentence it continues, as the text reads."""
    out: list[offline_text.Sentence] = []
    for s in best:
        run = len(out)
        while run and out[run - 1].chunk_id == s.chunk_id:
            run -= 1
        out[run:] = sorted([*out[run:], s], key=lambda x: x.position)
    return out


def _searched_kbs(done: list[tuple[ToolCall, str]]) -> list[str]:
    names = [_FROM.search(str(c.arguments.get("query", ""))) for c, _ in done if c.name == "kb_query_tool"]
    return list(dict.fromkeys(m.group(1) for m in names if m))


def _extract(question: str, rows: list[dict[str, str]], searched: list[str],
             encoder: Callable[[], Any] | None = None, own: str | None = None) -> str:
    """Whole sentences that answer the question (offline_evidence.py), each cited, or a plain
    statement that nothing retrieved answers it; rows arrive best first (by the knowledge
    base's own model, which the judgement does not rely on)."""
    found = offline_text.sentences([(r["chunk_content"], r.get("chunk_id", "")) for r in rows])
    judged = offline_evidence.answers(question, found, offline_text.MAX_SENTENCES, encoder, own=own,
                                      passages=[r["chunk_content"] for r in rows], names=searched)
    best = _in_reading_order(_with_leads([j.sentence for j in judged]))
    if not best:
        where = ", ".join(searched) or "the connected knowledge bases"
        nearest = ", ".join(dict.fromkeys(r.get("chunk_id", "") for r in rows[:3] if r.get("chunk_id")))
        return (f"Nothing in {where} answers this question: the closest passages I found "
                f"({nearest}) do not say what it asks, so I will not quote them as an answer.")
    parts = []  # sentences in a row from one chunk share one citation
    for i, s in enumerate(best):
        last = i + 1 == len(best) or best[i + 1].chunk_id != s.chunk_id
        parts.append(f"{s.text} [{s.chunk_id}]" if last else s.text)
    cited = ", ".join(dict.fromkeys(s.chunk_id for s in best))
    return f"{' '.join(parts)}\n\nSources: {cited}"
