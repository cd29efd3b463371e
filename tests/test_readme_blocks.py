"""Every fenced `bash` and `python` block of README.md runs as a user types it, after the two
commands: in a fresh folder whose `.venv` is the running interpreter's environment.

A block is left out only when an HTML comment right above it says so, with its reason:
`<!-- readme-test: skip (why) -->` (a second machine, the network, a browser, a server that
runs until Ctrl-C). The blocks of one section run in order in one shell, python blocks fed to
`.venv/bin/python`, so a section that starts `kbsql serve` in the background (with `&`) has it
for its later blocks; whatever a section started is stopped at its end. README's ports
47334/47335 are swapped for free ones (tests run side by side)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = re.compile(r"<!-- readme-test: skip \((.+?)\) -->\n$")
BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```", re.S | re.M)


def sections() -> dict[str, list[tuple[str, str]]]:
    """Runnable (language, code) blocks by section title; skipped blocks must give a reason."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found: dict[str, list[tuple[str, str]]] = {}
    for match in BLOCK.finditer(text):
        before = text[:match.start()]
        if SKIP.search(before):
            continue
        title = re.findall(r"^##+ (.+)$", before, re.M)[-1]
        found.setdefault(title, []).append((match.group(1), match.group(2)))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def script(blocks: list[tuple[str, str]]) -> str:
    """One bash script: shell blocks as written, python blocks as heredocs; a trap stops
    every background job (a `kbsql serve ... &`) when it ends, however it ends."""
    lines = ["set -euo pipefail",
             "trap 'status=$?; jobs -p | xargs -r kill 2>/dev/null; wait; exit $status' EXIT"]
    for language, code in blocks:
        lines.append(code if language == "bash" else f".venv/bin/python - <<'README_PY'\n{code}README_PY")
    return "\n".join(lines) + "\n"


def test_the_skipped_blocks_are_few_and_say_why():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    reasons = re.findall(r"<!-- readme-test: skip \((.+?)\) -->\n```(?:bash|python)", text)
    assert len(reasons) <= 9 and all(len(r) > 10 for r in reasons), reasons
    markers = re.findall(r"^<!-- readme-test: skip", text, re.M)
    assert len(reasons) == len(markers)  # each marker sits right above its block


@pytest.mark.parametrize("title", sorted(sections()))
def test_readme_section_blocks_run(title: str, tmp_path: Path) -> None:
    blocks = sections()[title]
    if any("mysql -h" in code for _, code in blocks) and shutil.which("mysql") is None:
        pytest.skip("needs the mysql client (apt-get install mariadb-client)")
    http, door = free_port(), free_port()
    text = script(blocks).replace("47334", str(http)).replace("47335", str(door))
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)  # the running venv
    done = subprocess.run(["bash", "-c", text], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
                               **{k: v for k, v in os.environ.items()
                                  if k in ("PYTHONPATH", "LANG", "KBSQL_MODEL_DIR")}})
    log = tmp_path / "kbsql-serve.log"
    assert done.returncode == 0, done.stdout + done.stderr + (log.read_text() if log.exists() else "")
    if "mysql -h" in text:  # the MySQL client found the row through the token server
        assert "Refunds take 5 days." in done.stdout, done.stdout
    with socket.socket() as s:  # the section's server is stopped
        assert s.connect_ex(("127.0.0.1", http)) != 0
