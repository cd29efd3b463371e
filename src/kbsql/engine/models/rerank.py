"""The built-in rerankers: score (query, document) pairs in [0, 1]; the score becomes the relevance.

Registered by name in the reranker registry (`engine/models/providers.py`, entry-point group
`kbsql.rerankers`) as factories `(descriptor, context) -> Reranker`. Two wire formats:
- a rerank endpoint (Cohere / Jina / vLLM / Infinity style), `POST {base_url}/rerank` with
  `{model, query, documents, top_n}` answering `{"results": [{index, relevance_score}]}`:
  providers `cohere`, `jina`, `vllm`, `rerank`, `infinity`, or any OpenAI-compatible one
  with `"endpoint": "rerank"` (`RerankApi`);
- otherwise an OpenAI-compatible chat model (`POST {base_url}/chat/completions`) asked, per
  document, for a relevance score between 0 and 1 (the answer's first number is the score).
Both go through the engine's pooled client (`context.http`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from kbsql.engine.models.model_context import ProviderContext, openai_base
from kbsql.interface.errors import ProviderError

_NUMBER = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")
PROMPT = ("Rate how relevant the document is to the query, as a number between 0 (unrelated) and 1 "
          "(answers it). Answer with the number only.\n\nQuery: {query}\n\nDocument: {document}")


class Reranker(Protocol):
    """What a search asks of a reranker (a plugin's too): one score in [0, 1] per document,
    in the documents' order; `check` raises `ProviderError` when it cannot be reached."""

    def score(self, query: str, documents: list[str]) -> list[float]: ...

    def check(self) -> None: ...


RerankerFactory = Callable[[dict[str, Any], ProviderContext], Reranker]
"""What `kbsql.rerankers` registers: `(reranking_model descriptor, context) -> Reranker`."""


class _Remote:
    def __init__(self, descriptor: dict[str, Any], context: ProviderContext):
        self.provider = str(descriptor.get("provider") or "")
        self.model_name = str(descriptor.get("model_name") or "")
        self.api_key = descriptor.get("api_key")
        self.http = context.http
        self.llm_log = context.llm_log
        self.what = f"Reranking provider '{self.provider}' model '{self.model_name}'"

    def check(self) -> None:
        self.score("kbsql reranker check", ["kbsql"])

    def score(self, query: str, documents: list[str]) -> list[float]:
        raise NotImplementedError


class RerankApi(_Remote):
    """A native `/rerank` endpoint at `base_url` (which it must name)."""

    def __init__(self, descriptor: dict[str, Any], context: ProviderContext):
        super().__init__(descriptor, context)
        self.base_url = str(descriptor.get("base_url") or "").rstrip("/")
        if not self.base_url:
            raise ProviderError(f"{self.what} needs a base_url")

    def score(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        answer = self.http.post_json(f"{self.base_url}/rerank",
                                     {"model": self.model_name, "query": query, "documents": documents,
                                      "top_n": len(documents)}, self.api_key, self.what)
        scores = [0.0] * len(documents)
        try:
            for item in answer["results"]:
                scores[int(item["index"])] = float(item.get("relevance_score", item.get("score")))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ProviderError(f"{self.what} answered without rerank results ({exc!r})") from exc
        return scores


class ChatReranker(_Remote):
    """An OpenAI-compatible chat model asked for a score per document."""

    def __init__(self, descriptor: dict[str, Any], context: ProviderContext):
        super().__init__(descriptor, context)
        self.base_url = openai_base(descriptor)

    def score(self, query: str, documents: list[str]) -> list[float]:
        return [self._chat(query, d) for d in documents]

    def _chat(self, query: str, document: str) -> float:
        body = {"model": self.model_name, "temperature": 0, "max_tokens": 8,
                "messages": [{"role": "user", "content": PROMPT.format(query=query, document=document)}]}
        recording = self.llm_log.start(f"{self.provider}/{self.model_name}", body["messages"],
                                       str(self.api_key) if self.api_key else None)  # log.llm_log
        try:
            answer = self.http.post_json(f"{self.base_url}/chat/completions", body, self.api_key, self.what)
            text = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, TypeError, IndexError) as exc:
            recording.finish(None, None, False)
            raise ProviderError(f"{self.what} answered without a chat message ({exc!r})") from exc
        except BaseException:
            recording.finish(None, None, False)
            raise
        recording.finish(text, answer.get("usage") if isinstance(answer, dict) else None, True)
        match = _NUMBER.search(text)
        if match is None:
            lowered = text.strip().lower()
            return 1.0 if lowered.startswith("yes") else 0.0
        return min(1.0, max(0.0, float(match.group())))


def chat_reranker(descriptor: dict[str, Any], context: ProviderContext) -> _Remote:
    """An OpenAI-compatible provider: its chat model scores, unless the descriptor says
    `"endpoint": "rerank"` (a server that also serves the native rerank API)."""
    if descriptor.get("endpoint") == "rerank":
        return RerankApi(descriptor, context)
    return ChatReranker(descriptor, context)
