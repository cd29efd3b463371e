"""`preprocessing = {"type": "json_chunking", "json_chunking_config": {...}}`
(docs/mindsdb_sql/knowledge_bases/insert_data.mdx, "Chunking Data / JSON"), as MindsDB's
JSONChunkingPreprocessor chunks: a JSON list gives one chunk per item, an object one chunk
(`chunk_by_object`) or one per field, nested objects flattened to `a.b: value` lines
(`flatten_nested`, `nested_delimiter`), fields kept or dropped (`include_fields`,
`exclude_fields`), values copied into the chunk's metadata for filtering (`metadata_fields`
with dot paths, `extract_all_primitives`, else the top-level primitive fields).

Content that is not JSON (nor a Python literal) is an error naming the row: the reference
stores an "Error processing document" chunk instead, which would be a silent wrong row here.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any

from kbsql.interface.errors import InvalidParameter

SOURCE = "JSONChunkingPreprocessor"
_BOOLS = ("flatten_nested", "include_metadata", "chunk_by_object", "extract_all_primitives")
_LISTS = ("exclude_fields", "include_fields", "metadata_fields")
_STRINGS = ("nested_delimiter", "content_column")


@dataclass(frozen=True)
class JsonChunkingConfig:
    flatten_nested: bool = True
    include_metadata: bool = True
    chunk_by_object: bool = True
    exclude_fields: tuple[str, ...] = ()
    include_fields: tuple[str, ...] = ()
    metadata_fields: tuple[str, ...] = ()
    extract_all_primitives: bool = False
    nested_delimiter: str = "."
    content_column: str = "content"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, conf: Any) -> JsonChunkingConfig:
        if conf is None:
            return cls()
        if not isinstance(conf, dict):
            raise InvalidParameter("preprocessing.json_chunking_config must be an object")
        unknown = sorted(set(conf) - set(_BOOLS) - set(_LISTS) - set(_STRINGS))
        if unknown:
            raise InvalidParameter(f"preprocessing.json_chunking_config has unknown key(s) {unknown}; "
                                   f"accepted: {sorted((*_BOOLS, *_LISTS, *_STRINGS))}")
        values: dict[str, Any] = {}
        for key in _BOOLS:
            if key in conf:
                if not isinstance(conf[key], bool):
                    raise InvalidParameter(f"json_chunking_config.{key} must be true or false")
                values[key] = conf[key]
        for key in _LISTS:
            if key in conf:
                items = conf[key]
                if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                    raise InvalidParameter(f"json_chunking_config.{key} must be a list of field names")
                values[key] = tuple(items)
        for key in _STRINGS:
            if key in conf:
                if not isinstance(conf[key], str) or not conf[key]:
                    raise InvalidParameter(f"json_chunking_config.{key} must be a non-empty string")
                values[key] = conf[key]
        return cls(**values)


def parse(value: Any, where: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        try:
            return ast.literal_eval(value)
        except (SyntaxError, ValueError):
            raise InvalidParameter(f"{where} is not JSON (json_chunking needs JSON content)") from None


def chunks(value: Any, config: JsonChunkingConfig, where: str) -> list[tuple[str, dict[str, Any]]]:
    """(text, metadata to add) for each chunk of one JSON value."""
    data = parse(value, where)
    if isinstance(data, list):
        out = []
        for item in data:
            if isinstance(item, dict):
                out.append(_from_dict(item, config))
            else:
                text = json.dumps(item) if isinstance(item, list) else str(item)
                out.append((text, {"field_value": item} if config.extract_all_primitives else {}))
        return out
    if isinstance(data, dict):
        if config.chunk_by_object:
            return [_from_dict(data, config)]
        fields = {k: v for k, v in data.items() if _kept_top(k, config)}
        return [(_field_text(k, v), {"field_name": k, **_metadata(data, config)}) for k, v in fields.items()]
    return [(str(data), {"field_value": data} if config.extract_all_primitives else {})]


def _kept_top(key: str, config: JsonChunkingConfig) -> bool:
    return (not config.include_fields or key in config.include_fields) and key not in config.exclude_fields


def _from_dict(data: dict[str, Any], config: JsonChunkingConfig) -> tuple[str, dict[str, Any]]:
    if config.flatten_nested:
        flat = _filter(flatten(data, config.nested_delimiter), config)
        lines = [f"{k}: {_text(v)}" for k, v in flat.items() if v is not None and v != []]
        text = "\n".join(lines)
    else:
        text = json.dumps({k: v for k, v in data.items() if _kept_top(k, config)}, indent=2, default=str)
    return text, _metadata(data, config)


def _filter(flat: dict[str, Any], config: JsonChunkingConfig) -> dict[str, Any]:
    d = config.nested_delimiter
    if config.include_fields:
        flat = {k: v for k, v in flat.items()
                if any(k == f or k.startswith(f + d) for f in config.include_fields)}
    for excluded in config.exclude_fields:
        flat = {k: v for k, v in flat.items() if k != excluded and not k.startswith(excluded + d)}
    return flat


def flatten(data: dict[str, Any], delimiter: str, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{delimiter}{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, delimiter, name))
        elif isinstance(value, list) and value and all(isinstance(i, dict) for i in value):
            for i, item in enumerate(value):
                out.update(flatten(item, delimiter, f"{name}[{i}]"))
        else:
            out[name] = value
    return out


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _field_text(key: str, value: Any) -> str:
    if isinstance(value, dict | list):
        return f"{key}: {json.dumps(value, default=str)}"
    return f"{key}: {value}"


def _primitive(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _metadata(data: dict[str, Any], config: JsonChunkingConfig) -> dict[str, Any]:
    flat = flatten(data, config.nested_delimiter)
    if config.metadata_fields:
        return {f: flat[f] for f in config.metadata_fields if f in flat and _primitive(flat[f])}
    if config.extract_all_primitives:
        return {k: v for k, v in flat.items() if _primitive(v)}
    return {k: v for k, v in data.items() if _primitive(v)}


def metadata_keys(spec: dict[str, Any]) -> tuple[str, ...]:
    """The metadata keys a knowledge base's json_chunking writes by name (`metadata_fields`,
    dot paths such as `info.category`), so a filter written `info.category = 'x'` reads that
    key rather than a column `category` of a table `info`."""
    preprocessing = spec.get("preprocessing") or {}
    if not isinstance(preprocessing, dict) or preprocessing.get("type") != "json_chunking":
        return ()
    config = preprocessing.get("json_chunking_config") or {}
    fields = config.get("metadata_fields") if isinstance(config, dict) else None
    return tuple(f for f in fields or [] if isinstance(f, str))
