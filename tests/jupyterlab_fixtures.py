"""JupyterLab in a subprocess (loopback, random token, its own settings) and headless
Chromium driving it: fixtures shared by the widget and labextension browser tests. One
JupyterLab server and one Chromium serve the browser tests one after another (each test its
own folder, workspace and page; kernels, settings and storage reset after it)."""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 800}
"""A laptop screen: the panels are checked at JupyterLab's default widths on it."""
ARTIFACTS_ENV = "KBSQL_TEST_ARTIFACTS"
ROOT = Path(__file__).resolve().parents[1]
JUPYTER_SITE = ROOT / "tests" / "jupyter_site"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                    reason=f"{CHROMIUM} is absent (Debian: apt-get install chromium)")


def jupyter_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a Jupyter process a test starts: tests/jupyter_site first on its
    PYTHONPATH (its sitecustomize spares each such process ~3 CPU-s of grammar building at
    import, see there)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(JUPYTER_SITE), env.get("PYTHONPATH", "")) if p)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At most one JupyterLab + Chromium test runs at once, across pytest-xdist's workers (a
    lock file in the run's shared temp folder): two of them side by side on 2 cores starve
    each other's page past its timeouts, while beside any other test they keep their pace."""
    import fcntl

    path = tmp_path_factory.getbasetemp().parent / "kbsql-browser-tests.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


HIDDEN_ENV = ("KBSQL_TOKEN", "KBSQL_API_KEY", "TEAM_TOKEN")
"""Not passed to the shared Jupyter server: it must know no token of its own (test_lab_fit's
notebook-token test; the others hand theirs through settings or the notebook)."""
NOTIFY = Path("@jupyterlab") / "apputils-extension" / "notification.jupyterlab-settings"


@dataclass(frozen=True)
class Lab:
    """A test's view of the shared JupyterLab: its url and token, its own folder `root` (a
    fresh sub-folder of the server's root) and workspace. Unpacks as (url, token, root)."""

    url: str
    token: str
    root: Path
    server_root: Path
    log: Path
    """The shared server's log (all tests' lines: the secret checks read it whole)."""

    def __iter__(self) -> Iterator[Any]:
        return iter((self.url, self.token, self.root))

    def __getitem__(self, index: int) -> Any:
        return tuple(self)[index]

    def path(self, name: str = "") -> str:
        """`name` (in this test's folder) as the server sees it: relative to its root."""
        return (self.root / name).relative_to(self.server_root).as_posix()

    def page_url(self, name: str) -> str:
        """The notebook `name` opened in this test's own workspace (JupyterLab restores a
        workspace's tabs and layout: another test's must not show up)."""
        return f"{self.url}/lab/workspaces/{self.root.name}/tree/{self.path(name)}?token={self.token}"


class LabServer:
    """One JupyterLab subprocess shared by the browser tests one after another (a start and
    stop cost ~4-7 CPU-s and seconds of wall: once per run instead of once per test)."""

    def __init__(self, home: Path) -> None:
        self.root, self.home, self.log = home / "root", home / "jupyter", home / "jupyterlab.log"
        self.root.mkdir()
        self.token, port = secrets.token_hex(16), free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.settings = self.home / "settings"
        env = {**jupyter_env(), "JUPYTER_RUNTIME_DIR": str(self.home / "runtime"),
               "JUPYTERLAB_SETTINGS_DIR": str(self.settings),
               "JUPYTERLAB_WORKSPACES_DIR": str(self.home / "workspaces"),
               "JUPYTER_CONFIG_DIR": str(self.home / "config")}
        for name in HIDDEN_ENV:
            env.pop(name, None)
        (self.settings / NOTIFY).parent.mkdir(parents=True)
        (self.settings / NOTIFY).write_text('{"fetchNews": "false"}')  # no news popup
        # kbsql's extension is what these tests drive: jupysql-plugin (pulled in by jupysql, which
        # tests/mysql runs) declares no support for this JupyterLab and throws on load, so it is off
        (self.home / "config" / "labconfig").mkdir(parents=True)
        (self.home / "config" / "labconfig" / "page_config.json").write_text(
            '{"disabledExtensions": {"jupysql-plugin": true}}')
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser",
                 "--expose-app-in-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
                 "--ServerApp.port_retries=0",
                 f"--ServerApp.token={self.token}", f"--ServerApp.root_dir={self.root}",
                 "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                status = httpx.get(f"{self.url}/api/status", params={"token": self.token}, timeout=2)
                if status.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("JupyterLab did not start: " + self.log.read_text())
            time.sleep(0.2)

    def reset(self) -> None:
        """What one test leaves behind goes: its sessions and kernels (shut down) and the user
        settings it changed (the theme, kbsql's connection); its folder and workspace stay."""
        params = {"token": self.token}
        for kind in ("sessions", "kernels"):
            for each in httpx.get(f"{self.url}/api/{kind}", params=params, timeout=30).json():
                httpx.delete(f"{self.url}/api/{kind}/{each['id']}", params=params, timeout=30)
        for path in self.settings.rglob("*.jupyterlab-settings"):
            if path != self.settings / NOTIFY:
                path.unlink()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Shared:
    """The shared JupyterLab and Chromium, started by the first test that asks and stopped
    once the next test does not use them (pytest_runtest_teardown below): a live sync
    Playwright keeps an asyncio loop marked running in this thread, which breaks
    asyncio.run/nbclient in any later test on the worker."""

    lab: LabServer | None = None
    playwright: Any = None
    context: Any = None

    @classmethod
    def stop_browser(cls) -> None:
        if cls.playwright is not None:
            playwright, cls.playwright, cls.context = cls.playwright, None, None
            playwright.stop()  # closes the browser too

    @classmethod
    def stop_lab(cls) -> None:
        if cls.lab is not None:
            lab, cls.lab = cls.lab, None
            lab.stop()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    uses = set(getattr(nextitem, "fixturenames", ()))
    if not uses & {"browser_page", "chromium"}:
        Shared.stop_browser()
    if "jupyterlab" not in uses:
        Shared.stop_lab()


def pytest_sessionfinish() -> None:
    Shared.stop_browser()
    Shared.stop_lab()


@pytest.fixture
def jupyterlab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
               one_at_a_time: None) -> Iterator[Lab]:
    """The shared JupyterLab (loopback, random token, its own settings; started by the first
    test that asks) seen from a fresh folder of its root: notebook paths the server is given
    are `lab.path(name)`, pages open at `lab.page_url(name)`. Reset after the test."""
    if Shared.lab is not None and Shared.lab.proc.poll() is not None:  # died: the next test starts one
        Shared.stop_lab()
    if Shared.lab is None:
        Shared.lab = LabServer(tmp_path_factory.mktemp("jupyterlab"))
    server = Shared.lab
    slug = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:40].strip("-")
    root = Path(tempfile.mkdtemp(prefix=f"{slug}-", dir=server.root))
    try:
        yield Lab(server.url, server.token, root, server.root, server.log)
    finally:
        server.reset()


@pytest.fixture
def chromium(one_at_a_time: None) -> Any:
    """The shared headless Debian Chromium's one browser context (Playwright never downloads
    its own; started once, so JupyterLab's bundle is fetched and compiled once)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (Debian: apt-get install chromium)")
    if Shared.context is not None and not Shared.context.browser.is_connected():  # crashed
        Shared.stop_browser()
    if Shared.context is None:
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
        try:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            Shared.context = browser.new_context(viewport=VIEWPORT)
        except BaseException:
            playwright.stop()
            raise
        Shared.playwright = playwright
    return Shared.context


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Any]:
    """A fresh page of the shared browser, 1280x800; closed after the test, its origin's
    localStorage and sessionStorage emptied (the chat keeps conversations there)."""
    page = chromium.new_page()
    try:
        yield page
    finally:
        try:
            if page.url.startswith("http"):
                page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
        finally:
            page.close()


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """Where a browser test saves its screenshots for people to look at: `$KBSQL_TEST_ARTIFACTS`
    (CI sets it to keep them) else `test-artifacts/` of the checkout (git-ignored), one folder
    per test, emptied when the test starts."""
    import shutil

    base = Path(os.environ.get(ARTIFACTS_ENV) or ROOT / "test-artifacts")
    folder = base / request.node.name.replace("/", "_").replace("[", "-").rstrip("]")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder
