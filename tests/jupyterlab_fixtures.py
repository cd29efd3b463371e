"""JupyterLab in a subprocess (loopback, random token, its own settings) and headless
Chromium driving it: fixtures shared by the widget and labextension browser tests."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def jupyterlab(tmp_path: Path, one_at_a_time: None) -> Iterator[tuple[str, str, Path]]:
    """JupyterLab on a free loopback port with a random token; yields (url, token, root)."""
    root = tmp_path / "root"
    root.mkdir()
    token, port = secrets.token_hex(16), free_port()
    home = tmp_path / "jupyter"
    env = {**jupyter_env(), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_CONFIG_DIR": str(home / "config")}
    notify = home / "settings" / "@jupyterlab" / "apputils-extension"
    notify.mkdir(parents=True)
    (notify / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')  # no news popup
    # kbsql's extension is what these tests drive: jupysql-plugin (pulled in by jupysql, which
    # tests/mysql runs) declares no support for this JupyterLab and throws on load, so it is off
    (home / "config" / "labconfig").mkdir(parents=True)
    (home / "config" / "labconfig" / "page_config.json").write_text(
        '{"disabledExtensions": {"jupysql-plugin": true}}')
    log_path = tmp_path / "jupyterlab.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", "--expose-app-in-browser",
             f"--port={port}", "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0",
             f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}",
             "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/api/status", params={"token": token}, timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start: " + log_path.read_text())
                time.sleep(0.2)
            yield url, token, root
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def browser_page(one_at_a_time: None):
    """A fresh page in headless Debian Chromium (Playwright never downloads its own), 1280x800."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport=VIEWPORT)
        finally:
            browser.close()


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
