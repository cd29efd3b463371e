"""The run loop: ask the model, run the tools it picks, feed back the observations, repeat
until it answers. Bounded by a number of model calls and by wall time; when the bound on
calls is reached the model is asked once more without tools so it must answer.

It yields plain events; the runtime turns them into stream chunks. Nothing here knows HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kbsql.engine.agents.tools import Toolbox, tool_input
from kbsql.engine.models.chat.base import Message, Provider, RunControl
from kbsql.interface.stream import action


@dataclass
class Actions:
    actions: list[dict[str, Any]]


@dataclass
class Step:
    action: dict[str, Any]
    observation: str


@dataclass
class Output:
    text: str


Event = Actions | Step | Output


def run(provider: Provider, system: str, messages: list[Message], toolbox: Toolbox,
        control: RunControl, max_iterations: int) -> Iterator[Event]:
    messages = list(messages)
    specs = toolbox.specs()
    for iteration in range(max_iterations + 1):
        control.check()
        tools = specs if iteration < max_iterations else []
        turn = provider.chat(system, messages, tools, control)
        if not turn.tool_calls or not tools:
            yield Output(turn.text.strip())
            return
        acts = [action(call.name, tool_input(call.arguments),
                       turn.text.strip() or
                       f"Invoking: `{call.name}` with `{tool_input(call.arguments)}`")
                for call in turn.tool_calls]
        yield Actions(acts)
        messages.append(Message("assistant", turn.text, list(turn.tool_calls)))
        for call, act in zip(turn.tool_calls, acts, strict=True):
            control.check()
            observation = toolbox.run(call.name, call.arguments)
            yield Step(act, observation)
            messages.append(Message("tool", observation, tool_call_id=call.id, name=call.name))
