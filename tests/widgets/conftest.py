"""Fixtures of the widget tests (scripted streams live in `streams.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.widgets.streams import scripted_chunks


@pytest.fixture
def chunks() -> list[dict[str, Any]]:
    return scripted_chunks()
