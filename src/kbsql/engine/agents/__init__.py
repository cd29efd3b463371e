"""Agents: tools over knowledge bases and tables, model providers, the run loop.

Providers (`model.provider`): `openai` (and any OpenAI-compatible `base_url`), `anthropic`,
`ollama`, and `kbsql` with model `retrieval`: the offline deterministic retrieval agent that is
the default model, so an agent answers with no key and no network.
"""
