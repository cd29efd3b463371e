"""Limits of one agent run.

Limits can be changed as settings (`agent_max_iterations`, `agent_wall_time_s`: config.json,
`connect(settings=...)`, the environment; engine/settings_table.py) because a slow local
model may need more time than a hosted one.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbsql.engine.config import EngineConfig

MAX_ITERATIONS = 12
WALL_TIME_S = 300.0


@dataclass
class RunLimits:
    max_iterations: int = MAX_ITERATIONS
    wall_time_s: float = WALL_TIME_S

    @classmethod
    def of(cls, config: EngineConfig) -> RunLimits:
        return cls(config.agent_max_iterations, config.agent_wall_time_s)
