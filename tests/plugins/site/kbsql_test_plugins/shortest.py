"""Reranker `shortest`: prefers shorter documents (score 1 / (1 + words))."""

from __future__ import annotations

from typing import Any


class ShortestFirst:
    def __init__(self, descriptor: dict[str, Any], context: Any):
        self.model_name = str(descriptor.get("model_name") or "shortest")

    def score(self, query: str, documents: list[str]) -> list[float]:
        return [1.0 / (1.0 + len(d.split())) for d in documents]

    def check(self) -> None:
        pass
