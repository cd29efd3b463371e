"""Checks on request bodies, shared by the REST routes and the SQL statements.

Every failure is a `BadRequest` whose detail names the field, so the user sees what to fix
(reference-behaviour.md: `400 {"title": "Missing parameter", ...}`); nothing is stored
until the whole body has passed.
"""

from __future__ import annotations

import re
from typing import Any

from kbsql.interface.errors import BadRequest

NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def require_object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest(f"The request body must be a JSON object with a '{what}' object",
                         title="Missing parameter")
    return body


def name(value: Any, what: str) -> str:
    if value is None or value == "":
        raise BadRequest(f"The {what} name is required", title="Missing parameter")
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise BadRequest(f"Invalid {what} name {value!r}: use letters, digits, '_' or '-', "
                         "starting with a letter or '_'", title="Invalid parameter")
    if len(value) > 128:  # names end up in file paths, SQL text and notebook tables
        raise BadRequest(f"The {what} name is {len(value)} characters long; the limit is 128",
                         title="Invalid parameter")
    from kbsql.engine.catalog import RESERVED_NAMES  # the catalog owns the namespace

    if value.lower() in RESERVED_NAMES:
        raise BadRequest(f"'{value}' is a reserved name (SQL reads "
                         f"{', '.join(sorted(RESERVED_NAMES))} as built-in databases): "
                         f"choose another {what} name", title="Reserved name")
    return value


def model(value: Any, field: str) -> dict[str, Any] | None:
    if value is None or value is False:  # `reranking_model = false` turns reranking off (create.mdx)
        return None
    if not isinstance(value, dict):
        raise BadRequest(f"'{field}' must be an object {{provider, model_name, api_key}}",
                         title="Invalid parameter")
    provider = value.get("provider")
    if not isinstance(provider, str) or not provider:
        raise BadRequest(f"'{field}.provider' is required", title="Missing parameter")
    return dict(value)


def string_list(value: Any, field: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BadRequest(f"'{field}' must be a list of column names", title="Invalid parameter")
    return list(value)


def optional_string(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BadRequest(f"'{field}' must be a non-empty string", title="Invalid parameter")
    return value


def storage(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value.get(k)
                                              for k in ("database", "table")):
        raise BadRequest("'storage' must be an object {database, table}", title="Invalid parameter")
    return {"database": value["database"], "table": value["table"]}


def preprocessing(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadRequest("'preprocessing' must be an object", title="Invalid parameter")
    # checked with the very parser inserts use, so a setting that would break every later
    # insert is refused at CREATE / ALTER instead
    from kbsql.engine.knowledge.chunking import ChunkingConfig

    ChunkingConfig.from_preprocessing(value)
    return dict(value)


def agent_data(value: Any) -> dict[str, list[str]]:
    if value is None:
        return {"knowledge_bases": [], "tables": []}
    if not isinstance(value, dict):
        raise BadRequest("'data' must be an object {knowledge_bases, tables}",
                         title="Invalid parameter")
    out = {}
    for key in ("knowledge_bases", "tables"):
        items = value.get(key) or []
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise BadRequest(f"'data.{key}' must be a list of strings", title="Invalid parameter")
        out[key] = list(items)
    return out


def prompt_template(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest("'prompt_template' must be a string", title="Invalid parameter")
    return value


def rows(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise BadRequest("'rows' must be a list of objects (column -> value)",
                         title="Invalid parameter")
    return value


MESSAGE_ROLES = ("user", "assistant")


def messages(value: Any) -> list[dict[str, Any]]:
    """Agent `messages`: a non-empty list of `{question, answer}` or `{role, content}` objects
    with string fields (an answer may be null). One check for `/completions`, its stream and
    embedded callers, so they all refuse the same bodies; the detail names the bad item."""
    if value is None:
        raise BadRequest("'messages' is required: a list of {question, answer} objects",
                         title="Missing parameter")
    if not isinstance(value, list) or not value:
        raise BadRequest("'messages' must be a non-empty list of {question, answer} objects",
                         title="Invalid parameter")
    for i, item in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(item, dict):
            raise BadRequest(f"'{where}' must be an object {{question, answer}} or {{role, content}}",
                             title="Invalid parameter")
        if "question" in item or "answer" in item:
            if not isinstance(item.get("question"), str):
                raise BadRequest(f"'{where}.question' must be a string", title="Invalid parameter")
            if item.get("answer") is not None and not isinstance(item["answer"], str):
                raise BadRequest(f"'{where}.answer' must be a string", title="Invalid parameter")
        elif "role" in item or "content" in item:
            if item.get("role") not in MESSAGE_ROLES:
                raise BadRequest(f"'{where}.role' must be one of {', '.join(MESSAGE_ROLES)}",
                                 title="Invalid parameter")
            if not isinstance(item.get("content"), str):
                raise BadRequest(f"'{where}.content' must be a string", title="Invalid parameter")
        else:
            raise BadRequest(f"'{where}' must have 'question' (and 'answer') or 'role' and 'content'",
                             title="Invalid parameter")
    return value
