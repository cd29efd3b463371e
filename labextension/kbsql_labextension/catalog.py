"""What the sidebar lists: the projects, knowledge bases and agents of a kbsql server.

Run by the Jupyter server, not the browser: a kbsql server sends no CORS headers, so the
browser cannot ask it directly. Only names and column lists leave this module: model
descriptors (which may hold api keys) are never forwarded to the page.
"""

from __future__ import annotations

from typing import Any


def fetch_catalog(url: str) -> dict[str, Any]:
    """Every project of the server at `url` with its knowledge bases and agents."""
    import kbsql  # the kbsql client; imported late so the bundle installs without it

    with kbsql.connect(url) as client:
        projects = []
        for project in client.projects():
            kbs = client.knowledge_bases.list(project=project)
            agents = client.agents.list(project=project)
            projects.append({
                "name": project,
                "knowledge_bases": [
                    {"name": kb.name, "content_columns": list(kb.content_columns or []),
                     "metadata_columns": list(kb.metadata_columns or [])}
                    for kb in kbs
                ],
                "agents": [
                    {"name": agent.name,
                     "knowledge_bases": list(agent.data.get("knowledge_bases", [])),
                     "tables": list(agent.data.get("tables", []))}
                    for agent in agents
                ],
            })
    return {"url": url, "projects": projects}
