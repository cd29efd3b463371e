"""JSON encoding of values that tables carry: numpy scalars, dates, decimals, NaN.

Shared by the server (answers) and the HTTP client (rows it sends), so a value crosses
the wire the same way in both directions. NaN and infinities become null: JSON has no
such numbers and a strict parser would reject the whole answer.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import uuid
from typing import Any


def to_jsonable(value: Any) -> Any:
    """A `json.dumps` default: the JSON form of one non-native value."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return None if value != value else value.isoformat()  # pandas' NaT is a "missing" datetime
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    item = getattr(value, "item", None)  # numpy scalar
    if callable(item):
        return clean_floats(item())
    tolist = getattr(value, "tolist", None)  # numpy array
    if callable(tolist):
        return clean_floats(tolist())
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def clean_floats(value: Any) -> Any:
    """Replace NaN and infinities by None, recursively through lists and dicts."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, list):
        return [clean_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: clean_floats(v) for k, v in value.items()}
    return value


def dumps(obj: Any) -> str:
    """Compact JSON, as the reference answers."""
    try:
        return json.dumps(obj, separators=(",", ":"), default=to_jsonable, allow_nan=False)
    except ValueError:  # a NaN somewhere: clean and retry (rare, so not on the fast path)
        return json.dumps(clean_floats(obj), separators=(",", ":"), default=to_jsonable)
