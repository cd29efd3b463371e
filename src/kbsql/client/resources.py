"""`client.knowledge_bases` and `client.agents`: the resource calls, project-scoped.

Each method is one call of the service interface with keyword arguments named as the
contract names the fields; `project=` overrides the client's current project.
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from kbsql.client.bars import ProgressOption
from kbsql.interface.api import INSERT_BATCH_ROWS, ServiceApi
from kbsql.interface.models import Agent, KnowledgeBase
from kbsql.interface.progress import OnProgress

if TYPE_CHECKING:
    import pandas as pd


_UNSET: Any = object()

class Scoped(Protocol):
    """What a resource needs from its client: the API, and the project a call defaults to
    (the client's current one, which `USE` may change between calls)."""

    @property
    def api(self) -> ServiceApi: ...

    def project_of(self, project: str | None) -> str: ...

    def on_progress(self, progress: ProgressOption) -> OnProgress | None: ...


def _drop_unset(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not _UNSET and v is not None}


class KnowledgeBases:
    def __init__(self, client: Scoped):
        self._client = client

    def create(self, name: str, *, embedding_model: dict[str, Any] | None = None,
               reranking_model: dict[str, Any] | None = None,
               storage: dict[str, str] | None = None,
               content_columns: list[str] | None = None,
               metadata_columns: list[str] | None = None,
               id_column: str | None = None,
               preprocessing: dict[str, Any] | None = None,
               project: str | None = None) -> KnowledgeBase:
        body = _drop_unset(name=name, embedding_model=embedding_model,
                           reranking_model=reranking_model, storage=storage,
                           content_columns=content_columns, metadata_columns=metadata_columns,
                           id_column=id_column, preprocessing=preprocessing)
        return self._client.api.create_knowledge_base(self._client.project_of(project), body)

    def get(self, name: str, *, project: str | None = None) -> KnowledgeBase:
        return self._client.api.get_knowledge_base(self._client.project_of(project), name)

    def list(self, *, project: str | None = None) -> list[KnowledgeBase]:
        return self._client.api.list_knowledge_bases(self._client.project_of(project))

    def delete(self, name: str, *, project: str | None = None) -> None:
        self._client.api.delete_knowledge_base(self._client.project_of(project), name)

    def insert(self, name: str, rows: pd.DataFrame | Iterable[dict[str, Any]], *,
               project: str | None = None, batch_size: int = INSERT_BATCH_ROWS,
               progress: ProgressOption = None) -> int:
        """Insert rows (a DataFrame or dicts); returns how many rows went in.

        Embedded, the engine takes the rows in one call (it batches and reports its
        progress by phase); remote, rows go in batches of `batch_size` per request and the
        bar moves per batch. `progress`: None shows a bar from 1,000 rows, True/False
        always/never, or a factory of bars (see `kbsql.client.bars`); bars are drawn by
        the client's front end (a notebook's or tqdm, with `kbsql.connect`).
        """
        sent, stored = self._client.api.insert_into_knowledge_base(
            self._client.project_of(project), name, rows, batch_size=batch_size,
            progress=self._client.on_progress(progress))
        if sent is not None and stored < sent:
            warnings.warn(f"{sent - stored} of {sent} rows had no content (null, NaN or blank) "
                          f"and were skipped; stored documents with their ids were kept",
                          stacklevel=2)
        return stored


class Agents:
    def __init__(self, client: Scoped):
        self._client = client

    def create(self, name: str, *, model: dict[str, Any] | None = None,
               data: dict[str, builtins.list[str]] | None = None, prompt_template: str | None = None,
               project: str | None = None) -> Agent:
        body = _drop_unset(name=name, model=model, data=data, prompt_template=prompt_template)
        return self._client.api.create_agent(self._client.project_of(project), body)

    def get(self, name: str, *, project: str | None = None) -> Agent:
        return self._client.api.get_agent(self._client.project_of(project), name)

    def list(self, *, project: str | None = None) -> list[Agent]:
        return self._client.api.list_agents(self._client.project_of(project))

    def update(self, name: str, *, new_name: str | None = None,
               model: dict[str, Any] | None = None, data: dict[str, builtins.list[str]] | None = None,
               prompt_template: str | None = None, project: str | None = None) -> Agent:
        """Partial update: only the fields given change."""
        body = _drop_unset(name=new_name, model=model, data=data, prompt_template=prompt_template)
        return self._client.api.update_agent(self._client.project_of(project), name, body)

    def delete(self, name: str, *, project: str | None = None) -> None:
        self._client.api.delete_agent(self._client.project_of(project), name)

    @staticmethod
    def messages(question: str,
                 history: Iterable[dict[str, str]] = ()) -> builtins.list[dict[str, str]]:
        """The contract's `messages`: earlier question/answer pairs, then the new question."""
        return [*({"question": h["question"], "answer": h.get("answer", "")} for h in history),
                {"question": question, "answer": ""}]

    def completion(self, name: str, question: str, *, history: Iterable[dict[str, str]] = (),
                   project: str | None = None) -> str:
        """Ask and return the answer text."""
        body = self._client.api.complete(self._client.project_of(project), name,
                                         self.messages(question, history))
        return body["message"]["content"]

    def stream(self, name: str, question: str, *, history: Iterable[dict[str, str]] = (),
               project: str | None = None) -> Iterator[dict[str, Any]]:
        """Yield the completion stream's chunks (start, actions, steps, output, end); a
        MindsDB 26.1 server's come in these shapes too, with its progress notes as kind
        `context` (`kbsql.interface.stream.normalize_chunk`)."""
        return self._client.api.stream(self._client.project_of(project), name,
                                       self.messages(question, history))
