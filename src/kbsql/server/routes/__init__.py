"""The HTTP routes, one module per resource: `status` (status and projects),
`knowledge_bases`, `agents` (and their completions), `sql`, `uploads` (files as tables), `databases`,
`project_views` and `tree` (the object tree mindsdb_sdk reads).
Each exposes `ROUTES`; `server/app.build_app` assembles them. Every route reads the service
from `request.app.state.api` (`common.api_of`), typed on `ServiceApi` plus the optional
capabilities the backend declares (`interface/api.py`)."""
