"""The run loop: ask the model, run the tools it picks, feed back the observations, repeat
until it answers. Bounded by a number of model calls and by wall time; when the bound on
calls is reached the model is asked once more without tools so it must answer.

It yields plain events; the runtime turns them into stream chunks. Nothing here knows HTTP.
A streaming provider's text arrives as `Delta`s while the model writes (the answer's tokens,
or the model's words before the tools it then asks for: the `Actions` that follow say which).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from kbsql.engine.agents.tools import Toolbox, tool_input
from kbsql.engine.models.chat.base import Message, Provider, RunControl, Turn, TurnStream, stream_turn
from kbsql.interface.stream import action


@dataclass
class Actions:
    actions: list[dict[str, Any]]


@dataclass
class Step:
    action: dict[str, Any]
    observation: str


@dataclass
class Delta:
    """A piece of the model's text as it arrived (leading blanks of a turn dropped)."""

    text: str


@dataclass
class Output:
    text: str
    streamed: bool = False
    """True when the text already went out as `Delta`s (the stream sends no whole copy)."""


Event = Actions | Step | Delta | Output


def deltas(turn: TurnStream) -> Generator[Delta, None, tuple[Turn, bool]]:
    """The turn's text pieces as `Delta`s (the first one left-stripped, blank ones skipped),
    then the whole `Turn` and whether any piece went out."""
    started = False
    while True:
        try:
            piece = next(turn)
        except StopIteration as stop:
            return stop.value, started
        if not started:
            piece = piece.lstrip()
        if piece:
            started = True
            yield Delta(piece)


def run(provider: Provider, system: str, messages: list[Message], toolbox: Toolbox,
        control: RunControl, max_iterations: int) -> Iterator[Event]:
    messages = list(messages)
    specs = toolbox.specs()
    for iteration in range(max_iterations + 1):
        control.check()
        tools = specs if iteration < max_iterations else []
        turn, streamed = yield from deltas(stream_turn(provider, system, messages, tools, control))
        if not turn.tool_calls or not tools:
            yield Output(turn.text.strip(), streamed)
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
