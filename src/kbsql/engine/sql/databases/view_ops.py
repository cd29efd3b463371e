"""`Views` (interface/api.py): MindsDB's `/api/projects/{project}/views` routes over the views
`CREATE VIEW` keeps (view_store.py). Shapes, codes and words are MindsDB's
`namespaces/views.py`: `{id, name, query}`; a missing project or view 404, a name in use 409.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbsql.engine import view_store
from kbsql.engine.sql.databases.view_statements import checked_query
from kbsql.engine.sql.tables.names import find_project
from kbsql.interface.errors import BadRequest, Conflict, NotFound, SqlError

if TYPE_CHECKING:
    from kbsql.engine.sql.session import SqlSession


def _json(record: view_store.ViewRecord) -> dict[str, Any]:
    return {"id": record.id, "name": record.name, "query": record.query}


class ViewOps:
    def __init__(self, session: SqlSession):
        self.session = session

    def _project(self, project: str) -> str:
        found = find_project(self.session, project)
        if found is None:
            raise NotFound(f"Project name {project} does not exist", title="Project not found")
        return found

    def _query(self, query: Any) -> str:
        try:
            return checked_query(str(query))
        except SqlError as exc:
            raise BadRequest(exc.message, title="Error") from None

    def list_views(self, project: str) -> list[dict[str, Any]]:
        return [_json(v) for v in view_store.views(self.session.catalog, self._project(project))]

    def get_view(self, project: str, name: str) -> dict[str, Any]:
        record = view_store.find_view(self.session.catalog, self._project(project), name)
        if record is None:
            raise NotFound(f"View with name {name} does not exist", title="View not found")
        return _json(record)

    def create_view(self, project: str, name: str, query: str) -> dict[str, Any]:
        found = self._project(project)
        if view_store.find_view(self.session.catalog, found, name) is not None:
            raise Conflict(f"View with name {name} already exists.", title="Name conflict")
        view_store.create_view(self.session.catalog, found, name, self._query(query))
        self.session.plans.clear()
        return self.get_view(found, name)

    def put_view(self, project: str, name: str, query: str | None) -> tuple[dict[str, Any], bool]:
        found = self._project(project)
        exists = view_store.find_view(self.session.catalog, found, name) is not None
        if not exists and query is None:
            raise BadRequest('Missing "query" field for new view', title="Wrong argument")
        if query is not None:
            view_store.create_view(self.session.catalog, found, name, self._query(query), replace=True)
            self.session.plans.clear()
        return self.get_view(found, name), not exists

    def delete_view(self, project: str, name: str) -> None:
        found = self._project(project)
        self.get_view(found, name)
        view_store.drop_view(self.session.catalog, found, name)
        self.session.plans.clear()
