"""An agent joined with a table: one question per distinct value, as MindsDB answers

    SELECT t.q, a.answer FROM files.questions t JOIN my_agent a ON a.question = t.q

(MindsDB's tests/unit/executor/test_agent.py test_openai_provider). Before the query runs,
the values the join would ask are read by the same query with the agent's table one row
joined ON TRUE (its other joins and the WHERE conditions that do not name the agent kept, so
a filtered table asks only its rows, read as the query reads them); each distinct value is
asked once, and the agent's reference becomes a frame of (question, answer) that DuckDB joins
as any table. Each question is one model call: more distinct questions than
`agent_join_max_rows` (all the statement's agent joins together) are refused in one line,
never cut.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from kbsql.engine.sql.tables.sqlglot_render import conjuncts
from kbsql.interface.errors import LimitExceeded, SqlError

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Resolved

RunRows = Callable[[exp.Select], pa.Table]
"""Compiles and runs a SELECT tree of the statement (its tables not yet rewritten)."""


def question_source(join: exp.Join, alias: str) -> exp.Expression | None:
    """The other side of `alias.question = <expr>` in the join's ON (None: no such condition,
    or the question is a literal, which the one-question path answers)."""
    for condition in conjuncts(join.args.get("on")):
        if not isinstance(condition, exp.EQ):
            continue
        for own, other in ((condition.left, condition.right), (condition.right, condition.left)):
            if _is_question(own, alias) and not _names(other, alias) and \
                    other.find(exp.Column) is not None:
                return other
    return None


def answer_frame(session: SqlSession, join: exp.Join, target: Resolved, source: exp.Expression,
                 run_rows: RunRows, limit: int, before: int = 0) -> pa.Table:
    """Ask the agent each distinct value `source` takes in the query without the agent; the
    (question, answer) table the join reads. `before`: questions the statement's other agent
    joins asked already (`limit` bounds them all)."""
    table = join.this
    alias = table.alias_or_name.lower()
    if join.side in ("RIGHT", "FULL") or join.kind == "CROSS":
        raise SqlError(f"Agent {target.name} can be joined only as the right side of JOIN or "
                       f"LEFT JOIN ... ON {alias}.question = <a column of the table>")
    select = join.parent
    assert isinstance(select, exp.Select)
    questions = select.copy()
    # the agent's place is kept, by one row joined ON TRUE: the other tables are read as in the
    # query itself (a knowledge base alone in a SELECT would be a search capped at its LIMIT,
    # and a join's search is not: 150 of 300 rows were asked with the agent's join popped)
    for other in questions.args.get("joins") or []:
        if isinstance(other.this, exp.Table) and other.this.alias_or_name.lower() == alias:
            other.set("this", exp.Subquery(this=exp.select(exp.alias_(exp.Literal.number(1), "one")),
                                           alias=exp.TableAlias(this=exp.to_identifier(alias))))
            other.set("on", exp.true())
            other.set("side", None)
    where = questions.args.get("where")
    kept = [c for c in conjuncts(where.this if where is not None else None) if not _names(c, alias)]
    questions.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    for key in ("group", "having", "order", "limit", "offset", "qualify", "windows"):
        questions.set(key, None)
    questions.set("expressions", [exp.alias_(source.copy(), "question")])
    questions.set("distinct", exp.Distinct())
    room = max(0, limit - before)
    questions.set("limit", exp.Limit(expression=exp.Literal.number(room + 1)))
    values = run_rows(questions).column("question")
    if len(values) > room:
        others = f" ({before} by its other agent joins)" if before else ""
        raise LimitExceeded(f"The query asks agent {target.name} more than {limit} questions{others} "
                            f"(one model call each): at most {limit} (agent_join_max_rows); filter the "
                            "table or join a subquery with a LIMIT")
    asked = [v for v in values.to_pylist() if v is not None]
    answers = []
    for value in asked:
        reply = session.agents.complete(target.database, target.name,
                                        [{"question": str(value), "answer": ""}])
        answers.append(((reply or {}).get("message") or {}).get("content"))
    kind = values.type if len(asked) else pa.string()
    return pa.table({"question": pa.array(asked, type=kind), "answer": pa.array(answers, pa.string())})


def _is_question(node: exp.Expression, alias: str) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() == "question" and \
        node.table.lower() == alias


def _names(node: exp.Expression, alias: str) -> bool:
    return any(c.table.lower() == alias for c in node.find_all(exp.Column))


def joined_agents(tree: exp.Expression, resolve: Callable[[exp.Table], Resolved | None]
                  ) -> list[tuple[exp.Join, Resolved, exp.Expression]]:
    """The joins of an agent on a column of another table, innermost SELECT first (a
    subquery's agent is asked before the query reading it is compiled)."""
    found = []
    for join in reversed(list(tree.find_all(exp.Join))):
        table = join.this
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            continue
        target = resolve(table)
        if target is None or target.kind != "agent":
            continue
        source = question_source(join, table.alias_or_name.lower())
        if source is not None:
            found.append((join, target, source))
    return found


def frame_reference(name: str, table: exp.Table) -> exp.Table:
    """The agent's reference replaced by the frame `name`, under the alias the user wrote."""
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name))
    return exp.Table(this=exp.to_identifier(name), alias=alias.copy())
