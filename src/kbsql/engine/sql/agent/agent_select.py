"""`SELECT ... FROM agent WHERE question = '...' [USING ...]` beyond the plain answer
(docs/mindsdb_sql/agents/agent_syntax.mdx, agent.mdx):

- `USING model = {...}, data = {...}, prompt_template = '...', timeout = n` overrides the
  stored agent for this one question (nothing is saved);
- selecting other columns than `answer` / `question` (`SELECT customer_name,
  avg_number_of_orders FROM my_agent WHERE question = ...`) asks the model for rows with
  exactly those columns, as a JSON array of objects; an answer that is not such an array is
  an error naming the columns, never a row of nulls. The offline retrieval agent answers
  with extracts only, so it refuses custom columns.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mindsdb_sql_parser import ast

from kbsql.engine import validate
from kbsql.engine.sql.refusals import unsupported
from kbsql.interface.errors import SqlError

PLAIN = {"answer", "question"}
USING_KEYS = {"model", "data", "prompt_template", "timeout", "mode"}
_OPENERS = re.compile(r"[\[{]")


def custom_columns(targets: list[Any]) -> list[tuple[str, str]]:
    """(column, name shown) of the selected names that are not `answer` / `question`, in
    order; [] for a plain ask."""
    out = []
    for target in targets or []:
        if isinstance(target, ast.Star):
            continue
        if not isinstance(target, ast.Identifier):
            raise unsupported(f"selecting {target.to_string()} from an agent (select columns by name)")
        name = str(target.parts[-1])
        if name.lower() not in PLAIN:
            out.append((name, str(target.alias.parts[-1]) if target.alias is not None else name))
    return out


def overrides_of(using: dict[str, Any] | None) -> dict[str, Any]:
    """The stored fields a `USING` clause replaces for this one question (validated)."""
    if not using:
        return {}
    params = {str(k).lower(): v for k, v in using.items()}
    unknown = set(params) - USING_KEYS
    if unknown:
        raise SqlError(f"SELECT FROM an agent takes USING {sorted(USING_KEYS)}, not {sorted(unknown)}")
    changes: dict[str, Any] = {}
    if "model" in params:
        changes["model"] = validate.model(params["model"], "model")
    if "data" in params:
        changes["data"] = validate.agent_data(params["data"])
    if "prompt_template" in params:
        changes["prompt_template"] = validate.prompt_template(params["prompt_template"])
    run_params = validate.agent_params({k: params[k] for k in validate.AGENT_PARAMS if k in params})
    if run_params:
        changes["params"] = run_params
    return changes


def question_of(where: Any, agent: str) -> str:
    """The text of `question = '...'`, the one condition an agent read takes."""
    if isinstance(where, ast.BinaryOperation) and where.op == "=" and len(where.args) == 2:
        left, right = where.args
        if isinstance(right, ast.Identifier) and isinstance(left, ast.Constant):
            left, right = right, left
        if isinstance(left, ast.Identifier) and str(left.parts[-1]).lower() == "question" and \
                isinstance(right, ast.Constant) and isinstance(right.value, str):
            return right.value
    raise SqlError(f"Ask agent {agent} one question: SELECT answer FROM {agent} WHERE question = '...'")


def ask(agents: Any, project: str, name: str, statement: ast.Select) -> tuple[list[str], list[list[Any]]]:
    """(column names, rows) of `SELECT ... FROM agent WHERE question = '...' [USING ...]`."""
    question = question_of(statement.where, name)
    overrides = overrides_of(getattr(statement, "using", None))
    columns = custom_columns(statement.targets)
    if columns:
        return structured(agents, project, name, statement, question, overrides)
    reply = agents.complete(project, name, [{"question": question, "answer": ""}], overrides)
    answer = ((reply or {}).get("message") or {}).get("content")
    names, values = [], []
    for target in statement.targets:
        if isinstance(target, ast.Star):
            names += ["question", "answer"]
            values += [question, answer]
        else:
            column = str(target.parts[-1])
            names.append(str(target.alias.parts[-1]) if target.alias is not None else column)
            values.append(answer if column.lower() == "answer" else question)
    return names, [values]


def structured(agents: Any, project: str, name: str, statement: ast.Select, question: str,
               overrides: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """`SELECT col_a, col_b FROM agent WHERE question = ...`: the model is asked for rows of
    those columns as JSON and its answer is validated whole (every row has every column, each
    a single value) before any row is returned; `question` may be selected beside them and
    carries the question."""
    targets = statement.targets
    if any(isinstance(t, ast.Star) or str(t.parts[-1]).lower() == "answer" for t in targets):
        raise SqlError(f"Select either answer or your own columns from agent {name}, not both "
                       f"(the model answers rows of {[c for c, _ in custom_columns(targets)]})")
    asked = [c for c, _ in custom_columns(targets)]
    model = overrides.get("model") or agents.get_agent(project, name).to_json().get("model")
    if is_offline(model):
        raise unsupported(f"custom output columns {asked} with the offline retrieval agent (it "
                          "answers with extracts; give the agent a language model)")
    reply = agents.complete(project, name, [{"question": structured_question(question, asked),
                                             "answer": ""}], overrides)
    rows = parse_rows(((reply or {}).get("message") or {}).get("content") or "", asked)
    names, picks = [], []
    for target in targets:
        column = str(target.parts[-1])
        names.append(str(target.alias.parts[-1]) if target.alias is not None else column)
        picks.append(None if column.lower() == "question" else asked.index(column))
    return names, [[question if i is None else row[i] for i in picks] for row in rows]


def is_offline(model: dict[str, Any] | None) -> bool:
    return model is not None and str(model.get("provider", "")).lower() == "kbsql"


def structured_question(question: str, columns: list[str]) -> str:
    return (f"{question}\n\nAnswer only with a JSON array of objects, one object per result row, "
            f"each with exactly these keys: {json.dumps(columns)}, each value a single string, "
            f"number or null; [] when no row answers. No text around the JSON.")


def first_json(text: str) -> Any:
    """The first JSON array or object in a model's answer (prose or a ```json fence around
    it allowed), or None."""
    decoder = json.JSONDecoder()
    for at in [m.start() for m in _OPENERS.finditer(text)][:50]:
        try:
            value, _ = decoder.raw_decode(text, at)
        except ValueError:
            continue
        if isinstance(value, list | dict):
            return value
    return None


def parse_rows(answer: str, columns: list[str]) -> list[list[Any]]:
    """Rows of the requested columns from a model's JSON answer, checked whole: an answer that
    is not a list of objects, a row without one of the columns, or a cell that is not a single
    value fails in one line (never a half-filled table). `[]` is no rows."""
    data = first_json(answer or "")
    if isinstance(data, dict):
        data = [data]
    said = (answer or "")[:200]
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise SqlError(f"The agent did not answer with rows of the columns {columns}: {said!r}")
    rows = []
    for number, item in enumerate(data, start=1):
        lowered = {str(k).lower(): v for k, v in item.items()}
        missing = [c for c in columns if c.lower() not in lowered]
        if missing:
            raise SqlError(f"The agent's answer has no column(s) {missing} in row {number}: {said!r}")
        row = [lowered[c.lower()] for c in columns]
        nested = [c for c, v in zip(columns, row, strict=True) if isinstance(v, dict | list)]
        if nested:
            raise SqlError(f"The agent's answer has more than one value in column(s) {nested} "
                           f"of row {number}: {said!r}")
        rows.append(row)
    return rows
