"""Checks on request bodies, shared by the REST routes and the SQL statements.

Every failure is a `BadRequest` whose detail names the field, so the user sees what to fix
(reference-behaviour.md: `400 {"title": "Missing parameter", ...}`); nothing is stored
until the whole body has passed.
"""

from __future__ import annotations

import re
from typing import Any

from kbsql.engine import outbound
from kbsql.interface.errors import BadRequest, InvalidParameter, MissingParameter, clipped

NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def require_object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise MissingParameter(f"The request body must be a JSON object with a '{what}' object")
    return body


def name(value: Any, what: str) -> str:
    if value is None or value == "":
        raise MissingParameter(f"The {what} name is required")
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise InvalidParameter(f"Invalid {what} name {clipped(repr(value))}: use letters, digits, '_' or "
                               "'-', starting with a letter or '_'")
    if len(value) > 128:  # names end up in file paths, SQL text and notebook tables
        raise InvalidParameter(f"The {what} name is {len(value)} characters long; the limit is 128")
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
        raise InvalidParameter(f"'{field}' must be an object {{provider, model_name, api_key}}")
    provider = value.get("provider")
    if not isinstance(provider, str) or not provider:
        raise MissingParameter(f"'{field}.provider' is required")
    for key in ("base_url", "api_base"):
        if value.get(key) is not None:
            if not isinstance(value[key], str):
                raise InvalidParameter(f"'{field}.{key}' must be a URL string")
            outbound.check_url(value[key], f"'{field}.{key}'")
    return dict(value)


def string_list(value: Any, field: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidParameter(f"'{field}' must be a list of column names")
    return list(value)


def optional_string(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidParameter(f"'{field}' must be a non-empty string")
    return value


def storage(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value.get(k)
                                              for k in ("database", "table")):
        raise InvalidParameter("'storage' must be an object {database, table}")
    return {"database": value["database"], "table": value["table"]}


def preprocessing(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidParameter("'preprocessing' must be an object")
    # checked with the very parser inserts use, so a setting that would break every later
    # insert is refused at CREATE / ALTER instead
    from kbsql.engine.knowledge.chunking import ChunkingConfig

    ChunkingConfig.from_preprocessing(value)
    return dict(value)


KB_INSERT_OPTIONS = ("kb_no_upsert", "kb_skip_existing")
"""Keys MindsDB's KnowledgeBaseInputParams takes at create and no create reads (they are
options of an insert: `INSERT ... USING kb_skip_existing = true`): accepted, as there."""


def kb_create_params(value: Any) -> None:
    """The `params` of a knowledge base's create (REST `params`, or what SQL's USING leaves
    once its fields are read): MindsDB's KnowledgeBaseInputParams forbids any other key
    ("Problem with knowledge base parameters: Parameter 'chunk_size' is not allowed"), and a
    key accepted here and read by nothing would be a setting silently ignored. Sparse vectors
    (`is_sparse = true`, `vector_size`) are refused in one line: the store here is dense."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise InvalidParameter("'params' must be an object of knowledge base parameters")
    for key, item in value.items():
        dense = (key == "is_sparse" and not item) or (key == "vector_size" and item is None)
        if key in KB_INSERT_OPTIONS or dense:
            continue
        if key in ("is_sparse", "vector_size"):
            raise InvalidParameter(f"not supported by the local engine: sparse vectors ({key} = {item!r}); "
                                   "a knowledge base here stores its embedding model's dense vectors")
        raise InvalidParameter(f"Problem with knowledge base parameters: Parameter '{key}' is not allowed "
                               "(a knowledge base takes embedding_model, reranking_model, "
                               "metadata_columns, content_columns, id_column and preprocessing; "
                               "chunking is set in preprocessing)")


def agent_data(value: Any) -> dict[str, list[str]]:
    """An agent's `data`: `knowledge_bases` and `tables`, lists of names. Any other key is
    refused as MindsDB's AgentParamsData refuses it (extra = forbid): dropped, it would leave
    the agent without the data it was given (mindsdb_sdk's own docstring writes
    `data={'knowledge_base': 'my_kb'}`)."""
    if value is None:
        return {"knowledge_bases": [], "tables": []}
    if not isinstance(value, dict):
        raise InvalidParameter("'data' must be an object {knowledge_bases, tables}")
    for key in value:
        if key not in ("knowledge_bases", "tables"):
            raise InvalidParameter(f"Problem with agent parameters: Parameter 'data.{key}' is not allowed "
                                   "(an agent's data takes knowledge_bases and tables, lists of names)")
    out = {}
    for key in ("knowledge_bases", "tables"):
        items = value.get(key) or []
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise InvalidParameter(f"'data.{key}' must be a list of strings")
        out[key] = list(items)
    return out


def prompt_template(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidParameter("'prompt_template' must be a string")
    return value


AGENT_PARAMS = ("timeout", "mode")
AGENT_MODES = ("text",)


def agent_params(value: Any) -> dict[str, Any]:
    """An agent's `params` (agent_syntax.mdx): `timeout`, the seconds it has to answer, and
    `mode`. MindsDB's AgentParams refuses any other key the same way; `mode = 'sql'` (its
    SQL-shaped answers) is refused in one line, not stored and ignored. A key set to null
    is left out (an update then keeps what was stored, as MindsDB merges params)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidParameter("'params' must be an object such as {\"timeout\": 10}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in AGENT_PARAMS:
            raise InvalidParameter(f"Problem with agent parameters: Parameter '{key}' is not allowed "
                                   f"(an agent's params are {', '.join(AGENT_PARAMS)})")
        if item is None:
            continue
        if key == "timeout":
            if isinstance(item, bool) or not isinstance(item, int | float) or not 0 < item <= 86400:
                raise InvalidParameter(f"Problem with agent parameters: 'timeout' must be a number of "
                                       f"seconds from 1 to 86400, not {item!r}")
            out[key] = item
        elif item not in AGENT_MODES:
            raise InvalidParameter(f"not supported by the local engine: agent mode {item!r} (kbsql agents "
                                   "answer in text: mode 'text')")
        else:
            out[key] = item
    return out


def older_agent_format(body: dict[str, Any]) -> None:
    """MindsDB's older agent body put `model_name` / `provider` beside the fields; here the
    model is the `model` object, and the older form is refused rather than run on another
    model than the one named. Its `skills` (MindsDB's docs/openapi.yml still documents them)
    are refused too: dropped, the agent would answer without the data they named."""
    flat = {k: body[k] for k in ("model_name", "provider") if body.get(k) is not None}
    if flat:
        raise InvalidParameter("The agent's model goes in \"model\": {\"provider\": ..., "
                               "\"model_name\": ...}; "
                               f"{', '.join(sorted(flat))} beside it is MindsDB's older agent "
                               "format, not accepted")
    if any(str(k).lower() == "skills" and v for k, v in body.items()):  # also USING SKILLS = [...]
        raise InvalidParameter("not supported by the local engine: an agent's skills (connect knowledge "
                               "bases and tables in \"data\": {\"knowledge_bases\": [...], "
                               "\"tables\": [...]})")


def rows(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise InvalidParameter("'rows' must be a list of objects (column -> value)")
    return value


MESSAGE_ROLES = ("user", "assistant")


def messages(value: Any) -> list[dict[str, Any]]:
    """Agent `messages`: a non-empty list of `{question, answer}` or `{role, content}` objects
    with string fields (an answer may be null). One check for `/completions`, its stream and
    embedded callers, so they all refuse the same bodies; the detail names the bad item."""
    if value is None:
        raise MissingParameter("'messages' is required: a list of {question, answer} objects")
    if not isinstance(value, list) or not value:
        raise InvalidParameter("'messages' must be a non-empty list of {question, answer} objects")
    for i, item in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(item, dict):
            raise InvalidParameter(f"'{where}' must be an object {{question, answer}} or {{role, content}}")
        if "question" in item or "answer" in item:
            if not isinstance(item.get("question"), str):
                raise InvalidParameter(f"'{where}.question' must be a string")
            if item.get("answer") is not None and not isinstance(item["answer"], str):
                raise InvalidParameter(f"'{where}.answer' must be a string")
        elif "role" in item or "content" in item:
            if item.get("role") not in MESSAGE_ROLES:
                raise InvalidParameter(f"'{where}.role' must be one of {', '.join(MESSAGE_ROLES)}")
            if not isinstance(item.get("content"), str):
                raise InvalidParameter(f"'{where}.content' must be a string")
        else:
            raise InvalidParameter(f"'{where}' must have 'question' (and 'answer') or 'role' and 'content'")
    return value
