"""A client that goes away stops the run: the model stream in flight is closed and no
further model or tool call is made."""

from __future__ import annotations

import json
import time

import httpx

from tests.agents.fakes import FakeLLM, text, tools
from tests.agents.streams import agent_url, create_agent


def test_client_disconnect_stops_the_run(server_url: str) -> None:
    long_answer = text("word " * 100)  # ~72 stream events, 0.05 s apart: ~3.6 s
    script = [tools(("kb_list_tool", {})), long_answer, *[tools(("kb_list_tool", {}))] * 5]
    with FakeLLM("openai", script, delay=0.05) as fake:
        assert create_agent(server_url, {
            "name": "slow", "data": {"knowledge_bases": ["mindsdb.*"]},
            "model": {"provider": "openai", "model_name": "m1", "base_url": fake.base_url}},
        ).status_code == 201
        seen = []
        with httpx.stream("POST", agent_url(server_url, "slow"),
                          json={"messages": [{"question": "talk a lot"}]}, timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                if len(seen) == 3:  # start, actions, steps: the second model call is starting
                    deadline = time.monotonic() + 10
                    while fake.events_sent < 16 and time.monotonic() < deadline:
                        time.sleep(0.01)  # disconnect while the long answer is being streamed
                    break
        assert [c.get("type") for c in seen][:1] == ["start"] and "steps" in seen[2]
        time.sleep(1.0)
        sent = fake.events_sent
        time.sleep(1.5)
        assert fake.events_sent == sent, "the provider stream was not closed"
        assert fake.finished_streams == 1  # only the first (tool call) turn ran to its end
        assert fake.chat_calls == 2  # nothing after the call that was in flight
        assert sent < 40
