"""Rerankers: score (query, document) pairs in [0, 1]; the score becomes the relevance.

Two wire formats, chosen by the `reranking_model` descriptor:
- a rerank endpoint (Cohere / Jina / vLLM / Infinity style), `POST {base_url}/rerank` with
  `{model, query, documents, top_n}` answering `{"results": [{index, relevance_score}]}`:
  providers `cohere`, `jina`, `vllm`, `rerank`, or any descriptor with `"endpoint": "rerank"`;
- otherwise an OpenAI-compatible chat model (`POST {base_url}/chat/completions`) asked, per
  document, for a relevance score between 0 and 1 (the answer's first number is the score).
"""

from __future__ import annotations

import re
from typing import Any

from kbsql.engine.knowledge import remote
from kbsql.engine.providers import CHAT_RERANKERS, RERANK_APIS
from kbsql.interface.errors import BadRequest, ProviderError

RERANK_PROVIDERS = RERANK_APIS
# chat models asked for a score: OpenAI or anything speaking its API at `base_url`
CHAT_PROVIDERS = CHAT_RERANKERS
_NUMBER = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")
PROMPT = ("Rate how relevant the document is to the query, as a number between 0 (unrelated) and 1 "
          "(answers it). Answer with the number only.\n\nQuery: {query}\n\nDocument: {document}")


class Reranker:
    def __init__(self, descriptor: dict[str, Any]):
        self.provider = str(descriptor.get("provider") or "")
        self.model_name = str(descriptor.get("model_name") or "")
        self.api_key = descriptor.get("api_key")
        provider = self.provider.lower()
        if provider not in RERANK_PROVIDERS | CHAT_PROVIDERS:
            # never guess: an unknown name (a typo, 'anthropic') would send its key to OpenAI
            raise BadRequest(f"Reranking provider '{self.provider}' is not supported: use one of "
                             f"{', '.join(sorted(RERANK_PROVIDERS | CHAT_PROVIDERS))}",
                             title="Invalid parameter")
        self.rerank_endpoint = provider in RERANK_PROVIDERS or descriptor.get("endpoint") == "rerank"
        if self.rerank_endpoint:
            self.base_url = str(descriptor.get("base_url") or "").rstrip("/")
            if not self.base_url:
                raise ProviderError(f"Reranking provider '{self.provider}' model '{self.model_name}' "
                                    "needs a base_url")
        else:
            self.base_url = remote.openai_base(descriptor)
        self.what = f"Reranking provider '{self.provider}' model '{self.model_name}'"

    def score(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        if self.rerank_endpoint:
            return self._rerank(query, documents)
        return [self._chat(query, d) for d in documents]

    def check(self) -> None:
        self.score("kbsql reranker check", ["kbsql"])

    def _rerank(self, query: str, documents: list[str]) -> list[float]:
        answer = remote.post_json(f"{self.base_url}/rerank",
                                  {"model": self.model_name, "query": query, "documents": documents,
                                   "top_n": len(documents)}, self.api_key, self.what)
        scores = [0.0] * len(documents)
        try:
            for item in answer["results"]:
                scores[int(item["index"])] = float(item.get("relevance_score", item.get("score")))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ProviderError(f"{self.what} answered without rerank results ({exc!r})") from exc
        return scores

    def _chat(self, query: str, document: str) -> float:
        body = {"model": self.model_name, "temperature": 0, "max_tokens": 8,
                "messages": [{"role": "user", "content": PROMPT.format(query=query, document=document)}]}
        answer = remote.post_json(f"{self.base_url}/chat/completions", body, self.api_key, self.what)
        try:
            text = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, TypeError, IndexError) as exc:
            raise ProviderError(f"{self.what} answered without a chat message ({exc!r})") from exc
        match = _NUMBER.search(text)
        if match is None:
            lowered = text.strip().lower()
            return 1.0 if lowered.startswith("yes") else 0.0
        return min(1.0, max(0.0, float(match.group())))
