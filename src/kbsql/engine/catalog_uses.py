"""What still uses a project or a data source: the reasons DROP DATABASE is refused.

Dropping a data source that a knowledge base stores its chunks in, or whose tables an agent
reads, would leave that knowledge base or agent broken, to fail later with a confusing
error; dropping a project would take its knowledge bases (chunks included) and agents with
it. Neither loses anything silently: the statement is refused with one line naming what uses
the database, as MindsDB refuses to drop a project that still holds models, views, knowledge
bases or agents (its projects page: "if your project stores at least one model, it cannot be
removed"; `Project.delete` in mindsdb/interfaces/database/projects.py checks all four).

The catalog calls these inside the deleting transaction, so no other session or server can
add a user between the check and the delete. Records are read structurally (the catalog's
`KbRecord` / `AgentRecord`), which keeps this module free of an import of the catalog.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from kbsql.interface.errors import Conflict


class _Kb(Protocol):
    project_name: str
    name: str
    spec: dict[str, Any]


class _Agent(Protocol):
    project_name: str
    name: str
    data: dict[str, Any]


def _source_of(entry: object) -> str:
    """`crm.customers`, `crm.*`, `` `crm`.customers `` -> `crm` (lower case)."""
    return str(entry).partition(".")[0].strip().strip("`\"").lower()


def _listing(kind: str, names: list[str]) -> str:
    plural = "knowledge bases" if kind == "knowledge base" else f"{kind}s"
    quoted = ", ".join(f"'{n}'" for n in names)
    return f"{kind} {quoted}" if len(names) == 1 else f"{plural} {quoted}"


def refuse_datasource_drop(name: str, kbs: Iterable[_Kb], agents: Iterable[_Agent]) -> None:
    """Raise Conflict when a knowledge base stores its chunks in data source `name` or an agent
    reads its tables (`data.tables`)."""
    key = name.lower()
    storing = [f"{k.project_name}.{k.name}" for k in kbs
               if str(k.spec.get("vector_database") or "").lower() == key]
    reading = [f"{a.project_name}.{a.name}" for a in agents
               if any(_source_of(e) == key for e in (a.data or {}).get("tables") or [])]
    if storing:
        verb = "stores its chunks" if len(storing) == 1 else "store their chunks"
        also = f" (and {_listing('agent', reading)} reads its tables)" if reading else ""
        raise Conflict(f"Cannot drop database '{name}': {_listing('knowledge base', storing)} "
                       f"{verb} there{also}; drop the knowledge base first", title="Database in use")
    if reading:
        verb = "reads its tables" if len(reading) == 1 else "read its tables"
        raise Conflict(f"Cannot drop database '{name}': {_listing('agent', reading)} {verb} "
                       f"(data.tables); drop the agent or ALTER AGENT its data first",
                       title="Database in use")


def refuse_project_drop(name: str, kbs: Iterable[_Kb], agents: Iterable[_Agent]) -> None:
    """Raise Conflict when project `name` still holds knowledge bases or agents."""
    held = []
    kb_names = [k.name for k in kbs]
    agent_names = [a.name for a in agents]
    if kb_names:
        held.append(_listing("knowledge base", kb_names))
    if agent_names:
        held.append(_listing("agent", agent_names))
    if held:
        raise Conflict(f"Cannot drop project '{name}': it contains {' and '.join(held)}; "
                       "drop them first (DROP KNOWLEDGE_BASE, DROP AGENT)", title="Project not empty")
