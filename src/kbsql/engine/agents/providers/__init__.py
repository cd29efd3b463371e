"""Model providers: `make_provider(model)` picks one from the agent's model descriptor."""

from __future__ import annotations

from typing import Any

from kbsql.engine.agents.agent_settings import PROVIDER_ALIASES
from kbsql.engine.agents.providers.base import Provider
from kbsql.interface.errors import InvalidParameter, MissingParameter


def make_provider(model: dict[str, Any]) -> Provider:
    """The provider for a model descriptor; an unknown provider name is a 400."""
    name = str(model.get("provider") or "").lower()
    kind = PROVIDER_ALIASES.get(name)
    if kind is None:
        raise InvalidParameter(f"not supported by the local engine: the model provider "
                               f"'{model.get('provider')}' for an agent (the reference has more); use one of "
                               f"{', '.join(sorted(PROVIDER_ALIASES))}")
    if kind != "offline" and not model.get("model_name"):
        raise MissingParameter(f"'model.model_name' is required for provider '{name}'")
    if kind == "openai":
        from kbsql.engine.agents.providers.openai import OpenAIProvider
        return OpenAIProvider(model)
    if kind == "anthropic":
        from kbsql.engine.agents.providers.anthropic import AnthropicProvider
        return AnthropicProvider(model)
    if kind == "ollama":
        from kbsql.engine.agents.providers.ollama import OllamaProvider
        return OllamaProvider(model)
    from kbsql.engine.agents.providers.offline import OfflineProvider
    return OfflineProvider(model)
