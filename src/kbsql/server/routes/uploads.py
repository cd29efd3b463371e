"""`/api/files[/{name}]` (rest/files/*.mdx), as MindsDB's `namespaces/file.py` answers them.

- `PUT /api/files/{name}` with a multipart form (mindsdb_sdk's `files.tables.create`, the
  GUI): the `file` part becomes the table `files.<name>` (`UploadedFiles`: csv, tsv, json,
  parquet, xlsx, txt, pdf, or one of them zipped), answering 200 with an empty JSON string;
  MindsDB's 400s: "File name cannot contain extension.", "Invalid request parameters" for a
  form field it does not know, "File already exists", "File field is missed", "Wrong file
  source type", and "URL file upload is disabled." for a JSON body naming a URL (this server
  fetches nothing). mindsdb_sdk also sends a `name` field, which MindsDB 26 refuses (its SDK
  uploads then fail); it is accepted here.
- `PUT /api/files/{name}` with a Parquet or CSV body: kbsql's own form, how a remote
  `client.register` sends a DataFrame; it becomes `df.<name>` (`FileTables`).
- `GET /api/files`: `[{name, row_count, columns}]` of the files.
- `DELETE /api/files/{name}`: 200, or 400 "Error deleting file" when there is none.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kbsql.interface.api import FileTables, UploadedFiles
from kbsql.interface.control import Control
from kbsql.interface.errors import BadRequest, Conflict, NotFound, clipped
from kbsql.server.lanes import controlled, owner_key
from kbsql.server.routes.common import (
    capability,
    disconnected,
    endpoint,
    json_response,
    lanes_of,
    path,
    read_body,
)

FORM_FIELDS = {"source_type", "file", "original_file_name", "name"}  # `name`: mindsdb_sdk's
JSON_FIELDS = {"source_type", "source", "original_file_name"}


def _file_tables(request: Request) -> FileTables:
    return capability(request, FileTables, "files uploaded as tables")


def _uploaded_files(request: Request) -> UploadedFiles:
    return capability(request, UploadedFiles, "uploaded files (the files database)")


def _error(title: str, detail: str) -> BadRequest:
    return BadRequest(detail, title=title)


async def upload(request: Request) -> Response:
    name = path(request, "name")
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media == "multipart/form-data":
        return await _upload_form(request, name)
    if media == "application/json":
        return await _upload_json(request)
    api = _file_tables(request)  # kbsql's own: a Parquet or CSV body becomes df.<name>
    raw = await request.body()
    max_table = request.app.state.limits.max_upload_table
    rows = await lanes_of(request).upload.run(api.register_file, name, raw, media, max_table,
                                              owner=owner_key(request.scope))
    return json_response({"name": name, "table": f"df.{name}", "rows": rows})


async def _upload_form(request: Request, name: str) -> Response:
    api = _uploaded_files(request)
    fields, filename, raw = await _read_form(request)
    _check_fields(set(fields) | ({"file"} if filename is not None else set()), FORM_FIELDS)
    _check_source(fields.get("source_type", "file"), filename is not None)
    assert filename is not None and raw is not None
    if PurePath(filename).name != filename or not filename:
        raise _error("Invalid file path", f"Wrong file name: {clipped(filename)}")
    table = name.lower()  # MindsDB keeps files under the lower-case name
    if PurePath(table).suffix:
        raise _error("Error", "File name cannot contain extension.")
    max_table = request.app.state.limits.max_upload_table
    def store() -> None:
        api.upload_file(table, raw, filename, source_file=fields.get("original_file_name") or filename,
                        max_table_bytes=max_table)

    try:  # a client that goes away stops its upload (a PDF's extraction process is killed)
        await controlled(lambda: disconnected(request), Control(), store, lane=lanes_of(request).upload,
                         owner=owner_key(request.scope))
    except Conflict:
        raise _error("File already exists", f"File with name '{table}' already exists") from None
    return json_response("")


async def _upload_json(request: Request) -> Response:
    """MindsDB's JSON form names a URL to fetch: refused as MindsDB refuses it when its
    `url_file_upload` is off (a server fetching URLs for its users reaches their network)."""
    try:
        body = await read_body(request)
    except BadRequest:
        raise _error("Invalid request parameters", "Unexpected parameters in request") from None
    _check_fields(set(body), JSON_FIELDS)
    _check_source(body.get("source_type", "file"), False, body.get("source"))
    raise _error("File field is missed", 'The "field" field is missed in the form')


def _check_fields(given: set[str], allowed: set[str]) -> None:
    unexpected = given - allowed
    if unexpected:
        shown = sorted(allowed - {"name"})
        raise _error("Invalid request parameters", f"Unexpected parameters in request: "
                     f"{clipped(', '.join(sorted(unexpected)))}. Allowed parameters: {', '.join(shown)}")


def _check_source(source_type: Any, has_file: bool, source: Any = None) -> None:
    """MindsDB's checks of the source fields; a URL source is then refused, after a malformed
    URL is named as one ("Invalid URL", MindsDB's title when its URL uploads are on)."""
    if source_type not in ("file", "url"):
        raise _error("Wrong file source type", f'Only "file" and "url" supported as file source, '
                     f'got "{clipped(str(source_type))}"')
    if source_type == "url":
        parsed = urlsplit(source) if isinstance(source, str) else None
        if source is not None and not (parsed and parsed.scheme and parsed.netloc):
            raise _error("Invalid URL", f"The URL is not valid: {clipped(str(source))}")
        raise _error("URL file upload is disabled.", "URL file upload is disabled.")
    if not has_file:
        raise _error("File field is missed", 'The "field" field is missed in the form')


async def _read_form(request: Request) -> tuple[dict[str, str], str | None, bytes | None]:
    """(text fields, the `file` part's name, its bytes) of a multipart body."""
    try:
        form = await request.form()
    except Exception as exc:  # a malformed multipart body is the client's error
        raise _error("Invalid request parameters", f"The multipart body cannot be read: {exc}") from exc
    try:
        fields: dict[str, str] = {}
        filename = raw = None
        for key, value in form.multi_items():
            if hasattr(value, "read"):
                if key != "file":
                    fields[key] = ""  # a file under another name: an unexpected parameter
                    continue
                filename, raw = str(getattr(value, "filename", "") or ""), await value.read()
            else:
                fields[key] = str(value)
        return fields, filename, raw
    finally:
        await form.close()


async def listing(request: Request) -> Response:
    """`GET /api/files` (rest/files/list.mdx): name, row_count and columns of each file."""
    return json_response(await lanes_of(request).catalog.run(_uploaded_files(request).list_files))


async def delete(request: Request) -> Response:
    """`DELETE /api/files/{name}` (rest/files/delete.mdx)."""
    api, name = _uploaded_files(request), path(request, "name")
    try:
        await lanes_of(request).sql.run(api.delete_file, name)
    except NotFound:
        raise _error("Error deleting file", f"There was an error while trying to delete file with "
                     f"name '{name}'") from None
    return json_response("")


ROUTES = [
    Route("/api/files", endpoint(listing), methods=["GET"]),
    Route("/api/files/", endpoint(listing), methods=["GET"]),
    Route("/api/files/{name}", endpoint(upload), methods=["PUT"]),
    Route("/api/files/{name}", endpoint(delete), methods=["DELETE"]),
]
