"""Statements of the reference dialect the local engine does not run, each refused with one
line: "not supported by the local engine: <what>" (never a DuckDB or parser message), so a
user reading MindsDB's docs knows at once the feature exists there and not here.
"""

from __future__ import annotations

from mindsdb_sql_parser import ast
from mindsdb_sql_parser.ast import mindsdb as md

from kbsql.interface.errors import NotSupported

PREFIX = "not supported by the local engine: "

_BY_TYPE: dict[type, str] = {
    md.CreateChatBot: "chatbots (CREATE CHATBOT runs a hosted chat integration such as Slack)",
    md.UpdateChatBot: "chatbots (UPDATE CHATBOT)",
    md.DropChatBot: "chatbots (DROP CHATBOT)",
    md.CreateTrigger: "triggers (CREATE TRIGGER)",
    md.DropTrigger: "triggers (DROP TRIGGER)",
    md.CreatePredictor: "ML models (CREATE MODEL)",
    md.CreateAnomalyDetectionModel: "ML models (CREATE ANOMALY DETECTION MODEL)",
    md.RetrainPredictor: "ML models (RETRAIN)",
    md.FinetunePredictor: "ML models (FINETUNE)",
    md.DropPredictor: "ML models (DROP MODEL)",
    md.CreateMLEngine: "ML engines (CREATE ML_ENGINE)",
    md.DropMLEngine: "ML engines (DROP ML_ENGINE)",
    md.CreateSkill: "skills (CREATE SKILL: connect knowledge bases and tables in the agent's data)",
    md.UpdateSkill: "skills (UPDATE SKILL)",
    md.DropSkill: "skills (DROP SKILL)",
    md.Evaluate: "EVALUATE of ML models (EVALUATE KNOWLEDGE_BASE is supported)",
}
_SHOW = {"CHATBOTS": "chatbots (SHOW CHATBOTS)",
         "MODELS": "ML models (SHOW MODELS)",
         "ML_ENGINES": "ML engines (SHOW ML_ENGINES)", "SKILLS": "skills (SHOW SKILLS)",
         "TRIGGERS": "triggers (SHOW TRIGGERS)",
         "HANDLERS": "handlers (SHOW HANDLERS)"}
_DOOR = ("outside the MySQL door: `kbsql serve --mysql-port` answers it per connection, as MySQL "
         "clients ask it")
_MYSQL_SHOW = ("STATUS", "SESSION_STATUS", "GLOBAL_STATUS", "WARNINGS", "ERRORS", "ENGINES", "CHARSET",
               "CHARACTER_SET", "COLLATION", "FUNCTION_STATUS", "PROCEDURE_STATUS")
"""A MySQL client's session questions, answered by the MySQL door (server/mysql/router.py);
README: HTTP and the embedded engine refuse them naming that door (MindsDB answers them on
each door: its test_http.py test_special_queries)."""
_FUNCTIONS = {"llm": "the llm() function", "to_markdown": "the to_markdown() function"}
_TABLES = {"models": "ML models", "models_versions": "ML models", "ml_engines": "ML engines",
           "handlers": "handlers", "chatbots": "chatbots", "skills": "skills", "triggers": "triggers"}
"""Tables MindsDB has for its features that kbsql lacks (a project's `models`, information_schema's
`ml_engines`, ...): read, they are refused as the feature, not reported missing as a typo."""


def unsupported(what: str) -> NotSupported:
    return NotSupported(PREFIX + what)


def refusal(statement: ast.ASTNode) -> NotSupported | None:
    """The one-line refusal for a statement the engine never runs, or None."""
    for kind, what in _BY_TYPE.items():
        if isinstance(statement, kind):
            return unsupported(what)
    if isinstance(statement, ast.Show):
        category = str(statement.category or "").upper().replace(" ", "_")
        if category in _SHOW:
            return unsupported(_SHOW[category])
        if category in _MYSQL_SHOW:
            return unsupported(f"SHOW {category.replace('_', ' ')} {_DOOR}")
    if isinstance(statement, (ast.StartTransaction, ast.CommitTransaction, ast.RollbackTransaction)):
        return unsupported(f"transactions ({statement.to_string().upper()}) {_DOOR}; each statement "
                           "here is its own")
    if isinstance(statement, ast.Set) and str(statement.category or "").lower() in ("names", "charset"):
        return unsupported(f"{statement.to_string()} {_DOOR}")
    if isinstance(statement, ast.Set) and isinstance(statement.name, ast.Identifier) and \
            str(statement.name.parts[-1]).lower() == "show_secrets":  # MindsDB's test_hide_secrets
        return unsupported("SET show_secrets: stored secrets (passwords, API keys) are never shown "
                           "here; information_schema and SHOW answer them masked")
    if isinstance(statement, ast.Select):
        for target in statement.targets or []:
            if isinstance(target, ast.Function) and str(target.op).lower() in _FUNCTIONS:
                return unsupported(_FUNCTIONS[str(target.op).lower()])
    return None


def refuse_last_outside_job(statement: ast.ASTNode, text: str) -> None:
    """Refuse LAST left in a statement a job did not rewrite (jobs/last_values.py): MindsDB
    keeps a LAST per query (the editor's second run sees only new rows); here it is kept per
    job only. Unrefused, DuckDB read it as a column: an error naming a column "last", or, on
    a table holding one, that column compared silently (MindsDB's first run sees no row).
    The tree is walked only when the text holds the word (big VALUES stay cheap)."""
    if "last" not in text.lower():
        return
    from kbsql.engine.sql.tables.sqlglot_render import walk  # sqlglot: only when LAST is written

    if any(isinstance(node, ast.Last) for node in walk(statement)):
        raise unsupported("LAST outside a job (it is kept per job here: `WHERE col > LAST` in "
                          "CREATE JOB's statements; quote `last` to read a column of that name)")


def native_query(source: str, engine: str) -> NotSupported:
    """`FROM source (<text>)`, MindsDB's native query (its SDK writes one for every
    `database.query(...)` it feeds to a table, view or insert), on a source that does not run
    one (tables/native_queries.py: postgres sources do): a DuckDB or SQLite file's SQL would
    run outside the paths this engine confines."""
    return unsupported(f"native queries ({source} (...)) on a {engine} data source (they run on "
                       "postgres sources); write the query in this dialect with the source's tables "
                       f"as {source}.<table>")


def fallback(statement: ast.ASTNode) -> NotSupported:
    """For a statement no handler took: name it, in the same one-line form."""
    text = statement.to_string()
    shown = text if len(text) <= 80 else text[:77] + "..."
    return unsupported(f"{type(statement).__name__} statements ({shown})")


def unsupported_table(database: str, name: str) -> NotSupported | None:
    """The refusal for `database.name` when it is one of MindsDB's feature tables (`_TABLES`)."""
    what = _TABLES.get(name.lower())
    return None if what is None else unsupported(f"{what} ({database}.{name})")
