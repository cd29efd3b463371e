"""`PUT /api/handlers/byom/{name}`, MindsDB's BYOM upload (namespaces/handlers.py), as
mindsdb_sdk's `ml_engines.create_byom(name, code, requirements)` sends it: a multipart form of
a model's Python code and its requirements, to be installed and run inside the server.

Refused in one line naming the feature, as `CREATE ML_ENGINE` is in SQL (engine/sql/
refusals.py): kbsql runs no ML engines, and running uploaded code is what a shared server must
not do. The request guard lets this one PUT carry multipart/form-data, so the client reads
this line instead of a 415 about its content type; the body is never read.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.server.guard import BYOM_PREFIX
from kbsql.server.routes.common import endpoint, not_supported


async def put_byom(request: Request) -> Response:
    raise not_supported("BYOM models (ml_engines.create_byom: uploading a model's Python code to run "
                        "in the server); kbsql runs no ML engines (CREATE ML_ENGINE is refused too)")


ROUTES = [Route(BYOM_PREFIX + "{name}", endpoint(put_byom), methods=["PUT"])]
