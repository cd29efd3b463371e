"""Chat model providers: OpenAI-compatible, Anthropic, Ollama and the offline agent.

A name becomes one of them through the engine's chat-provider registry
(`engine/models/providers.py`: `ModelProviders.chat_provider`, entry-point group `kbsql.llm_providers`).
"""
