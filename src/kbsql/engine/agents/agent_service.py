"""Agent operations: create / read / update / delete, and asking an agent.

The REST routes (through `Engine`) and SQL (`CREATE AGENT`, `DROP AGENT`,
`SELECT answer FROM agent`, reached through the `AgentOps` port) share this one
implementation, so both doors validate alike. It holds the catalog, the configuration and
the runtime; the runtime runs the agent's tools through a `RunsSql` port that
`Engine.__init__` connects once the SQL executor exists (SQL and agents need each other).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from kbsql.engine import validate
from kbsql.engine.agents.runtime import AgentRuntime
from kbsql.engine.catalog import AgentRecord, Catalog
from kbsql.engine.config import EngineConfig
from kbsql.engine.models.providers import ModelProviders
from kbsql.engine.ports import RunsSql
from kbsql.engine.views import agent
from kbsql.interface.models import Agent, lifted_params


class AgentService:
    """Implements `kbsql.engine.ports.AgentOps` (and the rest of the agent API)."""

    def __init__(self, catalog: Catalog, config: EngineConfig, sql: RunsSql, models: ModelProviders):
        self.catalog = catalog
        self.config = config
        self.models = models
        self.runtime = AgentRuntime(catalog, config, sql, models)

    def create_agent(self, project: str, body: dict[str, Any]) -> Agent:
        body = lifted_params(validate.require_object(body, "agent"), Agent.PARAMS_FIELDS)
        name = validate.name(body.get("name"), "agent")
        self.catalog.project(project)
        validate.older_agent_format(body)
        # no model: store None, meaning "the configured default", resolved at run time, so
        # the server's own key is never copied into the agent (nor shown, nor kept stale)
        model = validate.model(body.get("model"), "model")
        data = validate.agent_data(body.get("data"))
        prompt = validate.prompt_template(body.get("prompt_template"))
        params = validate.agent_params(body.get("params"))
        self.catalog.check_name_free(project, name, "agent")  # before the model call
        self.runtime.check_model(model or self.config.default_model)
        return self._agent(self.catalog.create_agent(project, name, model, data, prompt, params))

    def _agent(self, record: AgentRecord) -> Agent:
        return agent(record, self.config.default_model)

    def get_agent(self, project: str, name: str) -> Agent:
        return self._agent(self.catalog.agent(project, name))

    def list_agents(self, project: str) -> list[Agent]:
        return [self._agent(r) for r in self.catalog.agents(project)]

    def update_agent(self, project: str, name: str, body: dict[str, Any]) -> Agent:
        """Partial update (contract): the fields sent change, the others stay; a field sent as
        null stays too (mindsdb_sdk sends every field). A new model's descriptor is checked
        for shape here, not reached: the reference answers 200 with the new model, and a
        provider that cannot be reached is reported when the agent runs."""
        body = lifted_params(validate.require_object(body, "agent"), Agent.PARAMS_FIELDS)
        record = self.catalog.agent(project, name)
        validate.older_agent_format(body)
        sent = {k: v for k, v in body.items() if v is not None}
        new_name = validate.name(sent["name"], "agent") if sent.get("name") else record.name
        model = validate.model(sent["model"], "model") if "model" in sent else record.model
        data = validate.agent_data(sent["data"]) if "data" in sent else record.data
        prompt = (validate.prompt_template(sent["prompt_template"]) if "prompt_template" in sent
                  else record.prompt_template)
        # params merge over the stored ones (MindsDB's update); a key sent as null is kept
        params = {**record.params, **validate.agent_params(sent["params"])} if "params" in sent \
            else record.params
        self.catalog.check_name_free(project, new_name, "agent", record.id)
        if model is not None and model != record.model:
            self.models.chat_provider(model)  # a known provider and a model name: a 400 otherwise
        return self._agent(self.catalog.update_agent(record, new_name, model, data, prompt, params))

    def delete_agent(self, project: str, name: str) -> None:
        self.catalog.delete_agent(self.catalog.agent(project, name))

    def complete(self, project: str, agent: str, messages: list[dict[str, Any]],
                 overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """The answer; `overrides` (model, data, prompt_template, already validated) replace
        the stored ones for this question only (`SELECT ... FROM agent ... USING ...`)."""
        validate.messages(messages)  # the same check for HTTP routes, SQL and embedded callers
        record = self.catalog.agent(project, agent)
        if overrides:
            if "params" in overrides:  # USING timeout = n: over the stored params
                overrides = {**overrides, "params": {**record.params, **overrides["params"]}}
            record = dataclasses.replace(record, **overrides)
        return self.runtime.complete(record, messages)

    def stream(self, project: str, agent: str,
               messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        validate.messages(messages)
        return self.runtime.stream(self.catalog.agent(project, agent), messages)
