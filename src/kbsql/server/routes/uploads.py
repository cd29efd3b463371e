"""`/api/files[/{name}]` (rest/files/*.mdx): an uploaded Parquet or CSV file becomes the
table `df.<name>`. Uploading and deleting need the `FileTables` capability of the service;
listing reads `SHOW TABLES FROM df`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.interface.api import FileTables
from kbsql.interface.errors import BadRequest, MissingParameter, NotFound
from kbsql.server.routes.common import api_of, endpoint, in_thread, json_response, not_supported, path


def _file_tables(request: Request) -> FileTables:
    api = api_of(request)
    if not isinstance(api, FileTables):
        raise not_supported("files uploaded as tables")
    return api


async def upload(request: Request) -> Response:
    """`PUT /api/files/{name}`: a Parquet (or CSV) body becomes the table `df.<name>`; a
    multipart form with a `file` part (as mindsdb_sdk uploads, rest/files/upload.mdx)
    too: Parquet by its bytes, else CSV."""
    api, name = _file_tables(request), path(request, "name")
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() == "multipart/form-data":
        raw, content_type = await _form_file(request)
    else:
        raw = await request.body()
    max_table = request.app.state.limits.max_upload_table
    rows = await in_thread(api.register_file, name, raw, content_type, max_table)
    return json_response({"name": name, "table": f"df.{name}", "rows": rows})


async def listing(request: Request) -> Response:
    """`GET /api/files` (rest/files/list.mdx): the uploaded tables."""
    result = await in_thread(api_of(request).query, "SHOW TABLES FROM df", None)
    names = [row[0] for row in result.to_json().get("data", [])]
    return json_response([{"name": n, "table": f"df.{n}"} for n in names])


async def delete(request: Request) -> Response:
    """`DELETE /api/files/{name}` (rest/files/delete.mdx)."""
    api, name = _file_tables(request), path(request, "name")
    if not await in_thread(api.unregister_dataframe, name):
        raise NotFound(f"File with name {name} does not exist", title="File not found")
    return Response(status_code=200)


async def _form_file(request: Request) -> tuple[bytes, str]:
    """The `file` part of a multipart upload and the content type it is read as."""
    try:
        form = await request.form()
    except Exception as exc:  # a malformed multipart body is the client's error
        raise BadRequest(f"The multipart body cannot be read: {exc}", title="Invalid file") from exc
    try:
        upload = form.get("file")
        if upload is None or not hasattr(upload, "read"):
            raise MissingParameter("The multipart body must have a 'file' part")
        raw = await upload.read()
        filename = str(getattr(upload, "filename", "") or "").lower()
    finally:
        await form.close()
    if raw[:4] == b"PAR1" or filename.endswith(".parquet"):
        return raw, "application/octet-stream"
    return raw, "text/csv"


ROUTES = [
    Route("/api/files", endpoint(listing), methods=["GET"]),
    Route("/api/files/", endpoint(listing), methods=["GET"]),
    Route("/api/files/{name}", endpoint(upload), methods=["PUT"]),
    Route("/api/files/{name}", endpoint(delete), methods=["DELETE"]),
]
