"""Knowledge service (placeholder until the knowledge-base data path lands)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kbsql.engine.catalog import KbRecord
from kbsql.engine.config import EngineConfig
from kbsql.interface.errors import BadRequest


class KnowledgeService:
    def __init__(self, data_dir: Path, config: EngineConfig):
        self.root = data_dir / "knowledge_bases"
        self.config = config

    def storage_dir(self, record: KbRecord) -> Path:
        return self.root / str(record.id)

    def check_models(self, spec: dict[str, Any]) -> None:
        """Raise ProviderError when the embedding or reranking model cannot be reached."""

    def create_storage(self, record: KbRecord) -> None:
        self.storage_dir(record).mkdir(parents=True, exist_ok=True)

    def drop_storage(self, record: KbRecord) -> None:
        shutil.rmtree(self.storage_dir(record), ignore_errors=True)

    def insert(self, record: KbRecord, rows: Any, progress: bool | None = None) -> int:
        raise BadRequest("Inserting into knowledge bases is not available yet")

    def close(self) -> None:
        pass
