"""The lanes belong to the app: HTTP's catalog routes run on the app's catalog lane (the one
the MySQL door uses too, and `serve` closes), not on a pool made once per process.

The app is built in this process over a real engine, with lanes whose thread names are its
own, so the threads that served each route can be read off `threading.enumerate()`."""

from __future__ import annotations

import threading
from pathlib import Path

from starlette.testclient import TestClient

from kbsql.engine import Engine
from kbsql.server.app import build_app
from kbsql.server.lanes import CATALOG_WAIT_S, MODEL_WAIT_S, SQL_WAIT_S, UPLOAD_WAIT_S, Lane, Lanes

CATALOG_ROUTES = ("/api/status", "/api/projects", "/api/projects/mindsdb",
                  "/api/projects/mindsdb/knowledge_bases", "/api/projects/mindsdb/agents",
                  "/api/databases", "/api/files")


def lanes_named(tag: str) -> Lanes:
    return Lanes(Lane(f"sql-{tag}", 2, SQL_WAIT_S), Lane(f"model-{tag}", 2, MODEL_WAIT_S),
                 Lane(f"catalog-{tag}", 2, CATALOG_WAIT_S), Lane(f"upload-{tag}", 2, UPLOAD_WAIT_S))


def threads_of(lane: Lane) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(f"kbsql-{lane.name}_")]


def test_catalog_routes_run_on_the_apps_catalog_lane(tmp_path: Path) -> None:
    engine = Engine(tmp_path / "data")
    mine, other = lanes_named("a"), lanes_named("b")
    build_app(engine, bind_host="127.0.0.1", lanes=other)  # a second app in the same process
    try:
        with TestClient(build_app(engine, bind_host="127.0.0.1", lanes=mine),
                        base_url="http://127.0.0.1") as http:
            for route in CATALOG_ROUTES:
                answer = http.get(route)
                assert answer.status_code == 200, (route, answer.text)
            assert http.post("/api/sql/query", json={"query": "SELECT 1"}).json()["type"] == "table"
        assert threads_of(mine.catalog), "the catalog routes ran on no thread of the app's catalog lane"
        assert threads_of(mine.sql)  # the SQL route on the app's SQL lane
        assert threads_of(other.catalog) == [] and threads_of(other.sql) == []  # nothing shared
    finally:
        mine.close()
        other.close()
        engine.close()


def test_a_freed_slot_goes_to_the_user_waiting_with_fewest_not_back_to_the_flood() -> None:
    """`--sql-workers 2` (one slot a user): A and B each run a statement, A queues three more,
    then C queues one. A's slot, once free, goes to C, who has none and was never served, not
    to A's calls queued first (first in, first out made C wait behind A's whole flood)."""
    import asyncio

    async def scenario() -> list[str]:
        lane = Lane("sql-fair", 2, SQL_WAIT_S)
        order: list[str] = []
        release: dict[str, asyncio.Event] = {}

        async def statement(owner: str, name: str) -> None:
            async with lane.slot(owner):
                order.append(name)
                release[name] = asyncio.Event()
                await release[name].wait()

        tasks = [asyncio.create_task(statement("A", "a1")), asyncio.create_task(statement("B", "b1"))]
        await asyncio.sleep(0)
        for name in ("a2", "a3", "a4"):
            tasks.append(asyncio.create_task(statement("A", name)))
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(statement("C", "c1")))
        await asyncio.sleep(0)
        for done in ("a1", "b1", "c1", "a2", "a3", "a4"):  # each ends once it has started
            while done not in release:
                await asyncio.sleep(0.01)
            release[done].set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        lane.close()
        return order

    order = asyncio.run(scenario())
    assert order.index("c1") < order.index("a2"), order


def test_calls_naming_no_owner_do_not_jump_ahead_of_a_named_one() -> None:
    """Some calls name no owner (an upload's raw body, a knowledge base's rows): they count as
    one owner in the order: B, queued before five of them while A and C run, gets the second
    slot freed (the unnamed calls, never served, the first), not a slot after all five."""
    import asyncio

    async def scenario() -> list[str]:
        lane = Lane("sql-unnamed", 2, SQL_WAIT_S)
        order: list[str] = []
        release: dict[str, asyncio.Event] = {}

        async def call(owner: str | None, name: str) -> None:
            async with lane.slot(owner):
                order.append(name)
                release[name] = asyncio.Event()
                await release[name].wait()

        tasks = [asyncio.create_task(call("B", "b0"))]
        await asyncio.sleep(0)
        release["b0"].set()  # B has been served once
        await asyncio.gather(*tasks)
        tasks = [asyncio.create_task(call("A", "a1")), asyncio.create_task(call("C", "c1"))]
        await asyncio.sleep(0)  # both slots taken
        tasks.append(asyncio.create_task(call("B", "b1")))
        await asyncio.sleep(0)
        for n in range(5):
            tasks.append(asyncio.create_task(call(None, f"n{n}")))
        await asyncio.sleep(0)
        while len(order) < 9 or not all(e.is_set() for e in release.values()):  # end each in start order
            started = [name for name in order if not release[name].is_set()]
            if started:
                release[started[0]].set()
            await asyncio.sleep(0.01)
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        lane.close()
        return order

    order = asyncio.run(scenario())
    assert order.index("b1") <= order.index("n1"), order
