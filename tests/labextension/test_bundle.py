"""The committed JupyterLab bundle: current with its sources, small, and installed.

The bundle under labextension/kbsql_labextension/labextension is prebuilt and committed so
that installing kbsql needs no Node.js; these checks stop it from silently going stale.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

EXT = Path(__file__).resolve().parents[2] / "labextension"
BUNDLE = EXT / "kbsql_labextension" / "labextension"
INSTALL_HINT = "install it with: pip install ./labextension"


def source_hash() -> str:
    """The hash labextension/stamp.mjs writes after a build (same files, same framing)."""
    files = ["package.json", "tsconfig.json"]
    files += [f"src/{p.name}" for p in (EXT / "src").iterdir()]
    files += [f"style/{p.name}" for p in (EXT / "style").iterdir()]
    files += [f"schema/{p.name}" for p in (EXT / "schema").iterdir()]
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0".encode())
        digest.update((EXT / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def test_committed_bundle_is_built_from_the_current_sources():
    stamped = (BUNDLE / "source-hash.txt").read_text().strip()
    assert stamped == source_hash(), "the bundle is stale: cd labextension && npm run build"


def test_bundle_loads_its_entry_and_reuses_jupyterlabs_codemirror():
    meta = json.loads((BUNDLE / "package.json").read_text())
    assert meta["name"] == "kbsql-labextension"
    assert (BUNDLE / meta["jupyterlab"]["_build"]["load"]).is_file()
    # CodeMirror's core, Lezer and the Python parser come from JupyterLab at run time (shared
    # singletons); only the SQL language (for the MindsDB words) is bundled, ~80 KB. A
    # bundled second CodeMirror would add ~500 KB and break highlighting (two tag sets).
    size = sum(p.stat().st_size for p in (BUNDLE / "static").iterdir())
    assert size < 200_000, size


def test_installed_extension_is_listed_enabled_and_current():
    installed = Path(sysconfig.get_path("data")) / "share/jupyter/labextensions/kbsql-labextension"
    if not installed.is_dir():
        pytest.fail(f"kbsql-labextension is not installed in {sys.prefix}; {INSTALL_HINT}")
    assert (installed / "source-hash.txt").read_text() == (BUNDLE / "source-hash.txt").read_text(), (
        f"the installed bundle is older than the repository's; {INSTALL_HINT}")
    out = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                         capture_output=True, text=True, timeout=60)
    listing = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # drop the colours
    line = next((ln for ln in listing.splitlines() if "kbsql-labextension" in ln), "")
    assert re.search(r"kbsql-labextension v0\.1\.0 +enabled +OK", line), listing


def test_chat_hides_the_same_metadata_keys_as_the_notebook():
    """observation.ts copies the engine's internal metadata keys and score columns (TypeScript
    cannot import them): a key added to the contract must be hidden in the chat too."""
    from kbsql.interface.results import KB_INTERNAL_METADATA, SCORE_COLUMNS

    source = (EXT / "src" / "observation.ts").read_text()

    def quoted_set(name: str) -> set[str]:
        found = re.search(rf"const {name} = new Set\(\[(.*?)\]\)", source, re.S)
        assert found, name
        return set(re.findall(r"'([^']+)'", found.group(1)))

    assert quoted_set("INTERNAL_METADATA") == set(KB_INTERNAL_METADATA)
    assert quoted_set("SCORE_COLUMNS") == set(SCORE_COLUMNS)
