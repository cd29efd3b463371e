"""What the sidebar shows: projects with their knowledge bases, agents and jobs (each with its
last run and error), data sources with their tables, and a knowledge-base search. Run by the
Jupyter server with the public kbsql client, so it reads the embedded engine and a server alike.

Only names, columns, counts and model names (provider/model_name) leave this module: model
descriptors may hold api keys and base URLs with credentials, so they stay on the server.
"""

from __future__ import annotations

from typing import Any

from kbsql.client.params import quote_name

SEARCH_LIMIT = 10
_SYSTEM_DATABASES = {"information_schema", "log"}  # log: the job runs, shown with each job


def model_name(model: Any) -> str | None:
    """`provider/model_name` of a descriptor, nothing else (no key, no URL)."""
    if model is None:
        return None
    parts = [p for p in (model.provider, model.model_name) if p]
    return "/".join(parts) or None


def counts(client: Any, project: str, kb: str) -> dict[str, Any]:
    """Stored rows (distinct document ids) and chunks of one knowledge base, by SQL.

    A knowledge base only selects columns, so the count runs over a subquery; on failure
    the counts are None with the error's sentence, never a made-up zero."""
    sql = (f"SELECT count(*) AS chunks, count(DISTINCT id) AS n_rows "
           f"FROM (SELECT id FROM {quote_name(project)}.{quote_name(kb)}) AS t")
    try:
        result = client.sql(sql)
        chunks, rows = result.data[0]
        return {"rows": int(rows), "chunks": int(chunks)}
    except Exception as exc:  # one broken knowledge base must not hide the others
        return {"rows": None, "chunks": None, "count_error": str(exc)}


def knowledge_base(client: Any, project: str, kb: Any) -> dict[str, Any]:
    return {"name": kb.name,
            "content_columns": list(kb.content_columns or []),
            "metadata_columns": list(kb.metadata_columns or []),
            "id_column": kb.id_column or "id",
            "embedding_model": model_name(kb.embedding_model),
            "reranking_model": model_name(kb.reranking_model),
            **counts(client, project, kb.name)}


def agent(item: Any) -> dict[str, Any]:
    data = item.data or {}
    return {"name": item.name, "model": model_name(item.model),
            "knowledge_bases": list(data.get("knowledge_bases", [])),
            "tables": list(data.get("tables", []))}


def jobs(client: Any, project: str) -> list[dict[str, Any]]:
    """The project's jobs (CREATE JOB) with their schedule and last run (`log.jobs_history`).
    A service without jobs (an older kbsql, MindsDB without the table, a server answering
    another shape) lists none rather than failing the whole catalog."""
    try:
        listed = _records(client.sql(
            f"SELECT name AS name, schedule_str AS schedule_str, next_run_at AS next_run_at "
            f"FROM {quote_name(project)}.jobs"))  # aliased: MindsDB answers NAME, ... (upper case)
        runs = _records(client.sql("SELECT name, project, run_start, run_end, error FROM log.jobs_history"))
        last: dict[str, dict[str, Any]] = {}
        for run in runs:  # in run order: the last one stays
            if str(run["project"]).lower() == project.lower():
                last[str(run["name"]).lower()] = run
        out = []
        for job in listed:
            run = last.get(str(job["name"]).lower(), {})
            out.append({"name": job["name"], "schedule": job["schedule_str"],
                        "next_run_at": job["next_run_at"], "last_run": run.get("run_start"), "last_run_end": run.get("run_end"),
                        "last_error": run.get("error")})
        return out
    except Exception:  # any failure or other shape: no jobs shown, the rest still is
        return []


def _records(result: Any) -> list[dict[str, Any]]:
    """A table result's rows by lower-cased column name (KeyError when a column is missing)."""
    names = [str(c).lower() for c in result.column_names]
    return [dict(zip(names, row, strict=True)) for row in result.data]


def datasources(client: Any, projects: list[str]) -> list[dict[str, Any]]:
    """Every database that is not a project (data sources, `df`) with its tables."""
    known = {p.lower() for p in projects} | _SYSTEM_DATABASES
    names = [row[0] for row in client.sql("SHOW DATABASES").data if str(row[0]).lower() not in known]
    out = []
    for name in names:
        try:
            tables = sorted(str(row[0]) for row in client.sql(f"SHOW TABLES FROM {quote_name(name)}").data)
            out.append({"name": name, "tables": tables})
        except Exception as exc:  # an unreachable data source is listed with its error
            out.append({"name": name, "tables": [], "error": str(exc)})
    return out


def fetch_catalog(client: Any) -> dict[str, Any]:
    """Every project with its knowledge bases, agents and jobs, then the data sources."""
    projects = client.projects()
    return {
        "projects": [
            {"name": project,
             "knowledge_bases": [knowledge_base(client, project, kb)
                                 for kb in client.knowledge_bases.list(project=project)],
             "agents": [agent(a) for a in client.agents.list(project=project)],
             "jobs": jobs(client, project)}
            for project in projects
        ],
        "datasources": datasources(client, projects),
    }


def search(client: Any, project: str, kb: str, text: str, limit: int = SEARCH_LIMIT) -> dict[str, Any]:
    """A semantic search on one knowledge base: the hits and the `%%kbsql` SQL that gives them
    (the page offers it as a cell). The text is bound as one literal (`params`)."""
    if not text.strip():
        raise ValueError("Type something to search for")
    limit = max(1, min(int(limit), 100))
    template = f"SELECT * FROM {quote_name(project)}.{quote_name(kb)} WHERE content = :q LIMIT {limit}"
    from kbsql.client.params import bind

    sql = bind(template, {"q": text})
    result = client.sql(sql)
    columns = list(result.column_names)
    hits = []
    for row in result.data:
        record = dict(zip(columns, row, strict=False))
        hits.append({"id": _text(record.get("id")),
                     "chunk_id": _text(record.get("chunk_id")),
                     "content": _text(record.get("chunk_content")),
                     "relevance": _number(record.get("relevance"))})
    return {"sql": sql, "hits": hits}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None
