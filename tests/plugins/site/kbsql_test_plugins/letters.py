"""Embedding provider `letters`: 26 letter counts per text, deliberately not normalised (the
engine must check and normalise a plugin's vectors itself)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kbsql.interface.errors import ProviderError


class LetterEmbedder:
    batch_size = 16

    def __init__(self, descriptor: dict[str, Any], context: Any):
        self.provider = str(descriptor.get("provider"))
        self.model_name = str(descriptor.get("model_name") or "letters-26")
        self.context = context  # the engine's ProviderContext (a remote provider would use .http)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.ones((len(texts), 26), dtype=np.float64)  # never all zeros
        for row, text in enumerate(texts):
            for ch in text.lower():
                if "a" <= ch <= "z":
                    out[row, ord(ch) - 97] += 3.0
        return out

    def check(self) -> None:
        if self.model_name == "unreachable":
            raise ProviderError("letters model 'unreachable' cannot be reached")
