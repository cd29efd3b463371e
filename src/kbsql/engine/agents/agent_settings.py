"""Limits of one agent run.

Limits can be changed in the data directory's config.json (`agent_max_iterations`,
`agent_wall_time_s`) because a slow local model may need more time than a hosted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_ITERATIONS = 12
WALL_TIME_S = 300.0


@dataclass
class RunLimits:
    max_iterations: int = MAX_ITERATIONS
    wall_time_s: float = WALL_TIME_S

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> RunLimits:
        return cls(int(extra.get("agent_max_iterations") or MAX_ITERATIONS),
                   float(extra.get("agent_wall_time_s") or WALL_TIME_S))
