"""Every `kbsql serve` option is a setting of the one table (engine/settings_table.py), so
its environment variable, config.json key, default and help cannot drift from the flag."""

from __future__ import annotations

import re
import subprocess
import sys

from kbsql.engine.settings_table import SETTINGS


def flags_in(help_text: str) -> set[str]:
    return set(re.findall(r"^\s{2}(--[a-z][a-z-]+)", help_text, re.M))


def test_the_flag_reader_sees_flags() -> None:  # the check itself can fail
    assert flags_in("options:\n  -h, --help  show\n  --port PORT  the port\n    --not-a-flag") == {"--port"}


def test_the_table_covers_every_serve_flag() -> None:
    shown = subprocess.run([sys.executable, "-m", "kbsql.cli", "serve", "--help"], capture_output=True,
                           text=True, timeout=60, check=True).stdout
    declared = {s.flag for s in SETTINGS if s.flag}
    assert flags_in(shown) - {"--help"} == declared
    assert len({s.name for s in SETTINGS}) == len(SETTINGS)  # one name per setting
    assert len(declared) == len([s for s in SETTINGS if s.flag])
