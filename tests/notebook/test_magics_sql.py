"""`%%kbsql` / `%kbsql` in a real IPython shell on a real embedded engine (no mocks)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from kbsql.notebook.display import ResultFrame

NASTY = [
    "x'; DROP TABLE t; --",
    "O'Brien' OR '1'='1",
    "a\\' OR 1=1 --",
    "*/ SELECT 1 /*",
    ":other",
    'say "hi"; --',
]


def test_line_and_cell_forms_return_a_dataframe_with_the_result_columns_in_order(cells):
    line = cells.ok("%kbsql SELECT 1 AS a, 'x' AS b, NULL AS c")
    assert isinstance(line, pd.DataFrame)
    assert list(line.columns) == ["a", "b", "c"]
    assert line.shape == (1, 3)
    assert line.iloc[0]["b"] == "x"
    cell = cells.ok("%%kbsql\nSELECT 2 AS z,\n       'two' AS name")
    assert list(cell.columns) == ["z", "name"] and cell.iloc[0].tolist() == [2, "two"]


def test_sql_after_options_is_sent_as_typed(cells):
    frame = cells.ok("%kbsql -l 5 SELECT 'a  b' AS s, '-x' AS t")
    assert frame.iloc[0].tolist() == ["a  b", "-x"]


def test_capture_with_out_option_and_with_double_arrow(cells):
    shown, _ = cells.run("%kbsql -o first SELECT 7 AS n")
    assert shown.result is not None  # -o stores AND shows
    assert cells.ns["first"].iloc[0]["n"] == 7
    result = cells.ok("%kbsql second << SELECT 8 AS n")
    assert result is None  # stored without display
    assert cells.ns["second"].iloc[0]["n"] == 8
    result = cells.ok("%%kbsql third <<\nSELECT 9 AS n, 'nine' AS word")
    assert result is None
    assert cells.ns["third"].shape == (1, 2)
    assert not isinstance(cells.ns["third"], ResultFrame)
    # a statement without rows stores nothing, and says so (NAME kept its old value silently)
    result, out = cells.run("%kbsql third << CREATE PROJECT IF NOT EXISTS stored_nothing")
    assert result.success and "third is not set: the statement returned no rows to store" in out, out
    assert cells.ns["third"].shape == (1, 2)


def test_template_variables_are_pasted_and_bound_variables_are_literals(cells):
    cells.ns["col"] = "answer"
    cells.ns["n"] = 41
    frame = cells.ok("%kbsql SELECT :n + 1 AS {{col}}")
    assert list(frame.columns) == ["answer"]
    assert frame.iloc[0]["answer"] == 42
    cells.ns["cfg"] = {"alias": "nested"}
    assert list(cells.ok("%kbsql SELECT 1 AS {{cfg.alias}}").columns) == ["nested"]


def test_a_templates_semicolon_makes_no_statement_and_every_bind_is_found_first(cells):
    """The cell's statements are those its text holds: a {{name}} whose value held a ';' ran
    what followed it as a statement of its own (the cell printed 'OK.' and a project was
    made), where the parser had refused the one statement. A missing :name in the last
    statement stops the cell before the first one runs."""
    cells.ns["col"] = "1 AS a; CREATE PROJECT injected"
    result, out = cells.run("%kbsql SELECT {{col}}")
    assert not result.success and "single sql statement" in out, out
    result, out = cells.run("%kbsql CREATE PROJECT early; SELECT :typo AS v")
    assert not result.success and "No variable for the parameter :typo" in out, out
    projects = cells.ok("%kbsql SHOW DATABASES")["Database"].tolist()
    assert "injected" not in projects and "early" not in projects, projects


@pytest.mark.parametrize("value", NASTY)
def test_an_injection_attempt_stays_one_literal(cells, value):
    cells.ns["user_text"] = value
    frame = cells.ok("%kbsql SELECT :user_text AS v, 'after' AS w")
    assert frame.shape == (1, 2)
    assert frame.iloc[0].tolist() == [value, "after"]


def test_missing_variable_is_a_short_error_and_no_vars_sends_the_text_as_is(cells):
    result, out = cells.run("%kbsql SELECT :nope AS v")
    assert not result.success
    assert "No variable for the parameter :nope" in out
    assert "Traceback" not in out
    frame = cells.ok("%kbsql --no-vars SELECT '{{x}}' AS v")
    assert frame.iloc[0]["v"] == "{{x}}"


def test_sql_error_shows_the_service_message_without_a_traceback_and_fails_the_cell(cells):
    result, out = cells.run("%kbsql SELEC 1")
    assert not result.success  # "Run all" stops here
    assert "SQL error" in out and "SELEC" in out
    assert "Traceback" not in out and 'File "' not in out
    result, out = cells.run("%config KbSql.short_errors = False\n%kbsql SELEC 1")
    assert not result.success and type(result.error_in_exec).__name__ == "SqlError"


def test_ok_results_print_a_short_confirmation(cells):
    result, out = cells.run("%kbsql USE mindsdb")
    assert result.success and result.result is None
    assert out.strip() == "OK."


def test_display_limit_from_config_shows_few_rows_but_returns_all(cells, tmp_path):
    import sqlite3

    db = tmp_path / "numbers.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE nums (n INTEGER)")
        conn.executemany("INSERT INTO nums VALUES (?)", [(i,) for i in range(25)])
    _require_datasource(cells, "numbers", db)
    cells.ok("%config KbSql.displaylimit = 3")
    frame = cells.ok("%kbsql SELECT n FROM numbers.nums ORDER BY n")
    assert len(frame) == 25  # the full DataFrame is returned
    html = frame._repr_html_()
    assert html.count("</tr>") == 4  # header + 3 rows shown
    # a table wider than the output scrolls inside it, not cut at the panel's edge
    assert html.startswith('<div class="kbsql-table" style="overflow-x:auto;max-width:100%">')
    assert "3 of 25 rows shown" in html and "3 of 25 rows shown" in repr(frame)
    assert len(cells.ok("%kbsql -l 0 SELECT n FROM numbers.nums")._shown()[0]) == 25
    result, out = cells.run("%kbsql -l -1 SELECT n FROM numbers.nums")  # it showed all but the last row
    assert not result.success and "a count of rows, 0 or more (0 shows all), not '-1'" in out, out
    cells.ok("%config KbSql.displaylimit = 10")
    assert "10 of 25 rows shown" in repr(cells.ok("%kbsql SELECT n FROM numbers.nums"))


def test_pyproject_tool_table_sets_defaults(ip, tmp_path, monkeypatch, capsys):
    project = tmp_path / "proj"
    (project / "notebooks").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.kbsql]\ndisplaylimit = 2\nfeedback = false\n")
    monkeypatch.chdir(project / "notebooks")  # the nearest pyproject.toml is one level up
    ip.extension_manager.unload_extension("kbsql")
    ip.extension_manager.load_extension("kbsql")
    ip.run_cell("%config KbSql.displaylimit")
    assert capsys.readouterr().out.strip().endswith("2")
    ip.run_cell("%kbsql USE mindsdb")
    assert "OK" not in capsys.readouterr().out  # feedback = false


def test_help_lists_every_option(ip):
    doc = ip.find_line_magic("kbsql").__doc__
    for option in ("--out", "--connection", "--project", "--limit", "--no-vars", "<<", "{{name}}",
                   ":name"):
        assert option in doc
    agent_doc = ip.find_line_magic("agent").__doc__
    assert "--new" in agent_doc and "AGENT" in agent_doc
    assert "--api-key-env" in ip.find_line_magic("kbsql_connect").__doc__


def test_help_option_shows_each_magics_help(cells):
    """`%kbsql --help`, as a command line is asked: it answered "Unknown option --help",
    `%kbsql_connect --help` "unrecognized arguments: --help", `%kbsql_plot --help` "KIND is
    one of ...". Each prints what `%magic?` shows and the cell succeeds."""
    for line, says in [("%kbsql --help", "--internal-metadata"), ("%kbsql -h", "NAME << SQL"),
                       ("%%kbsql --help\nSELECT 1", "--no-vars"), ("%agent --help", "--new"),
                       ("%agent helper --help", "AGENT question text"),
                       ("%kbsql_connect --help", "--token-env VAR"),
                       ("%kbsql_plot --help", "recall KB --questions VAR")]:
        result, out = cells.run(line)
        assert result.success, (line, out)
        assert says in out and "Unknown option" not in out and not out.startswith("::"), (line, out)


def test_unknown_option_is_a_usage_error(cells):
    result, out = cells.run("%kbsql --bogus SELECT 1")
    assert not result.success and "Unknown option --bogus" in out


def test_use_and_project_option_persist_across_cells(cells):
    from kbsql.notebook.magics import KbSql

    magics = next(c for c in cells.shell.configurables if isinstance(c, KbSql))
    client = magics.manager.get().client
    cells.ok("%kbsql CREATE PROJECT sales")
    result, out = cells.run("%kbsql USE sales")
    assert result.success and "current project: sales" in out
    # a later cell runs in `sales`: an unqualified knowledge base is created and found there
    cells.ok('%kbsql CREATE KNOWLEDGE_BASE leads USING embedding_model = '
             '{"provider": "kbsql", "model_name": "hash-64"}')
    assert cells.ok("%kbsql SELECT * FROM leads").shape == (0, 6)
    assert [kb.name for kb in client.knowledge_bases.list(project="sales")] == ["leads"]
    _, listing = cells.run("%kbsql_connect --list")
    assert "project sales" in listing
    cells.ok("%kbsql --project mindsdb")
    missing, out = cells.run("%kbsql SELECT * FROM leads")
    assert not missing.success and "leads" in out
    assert cells.ok("%kbsql SELECT * FROM sales.leads").shape == (0, 6)
    result, out = cells.run("%kbsql USE nowhere")
    assert not result.success and "nowhere" in out
    result, out = cells.run("%kbsql --project nowhere")
    assert not result.success and "nowhere" in out
    assert client.project == "mindsdb"  # a failed switch keeps the current project


def _require_datasource(cells, name: str, path: Path) -> None:
    result, out = cells.run(
        f"%kbsql CREATE DATABASE {name} WITH ENGINE = 'sqlite', PARAMETERS = {{\"database\": '{path}'}}")
    assert result.success, out


def test_data_source_query_gives_typed_columns(cells, tmp_path):
    import sqlite3

    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, region TEXT, amount REAL)")
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?)",
                         [(1, "north", 10.0), (2, "south", 5.5), (3, "north", 2.5)])
    _require_datasource(cells, "shop", db)
    frame = cells.ok("%%kbsql\nSELECT region, SUM(amount) AS total FROM shop.orders\n"
                     "GROUP BY region ORDER BY region")
    assert list(frame.columns) == ["region", "total"]
    assert frame.shape == (2, 2)
    assert frame["total"].tolist() == [12.5, 5.5]
    cells.ns["region"] = "north' OR '1'='1"
    injected = cells.ok("%kbsql SELECT id FROM shop.orders WHERE region = :region")
    assert injected.shape == (0, 1)  # the value matched nothing: it stayed a literal


def test_nan_for_null_scores_in_the_dataframe():
    from kbsql.interface.results import TableResult
    from kbsql.notebook.display import to_frame

    frame = to_frame(TableResult(["id", "metadata", "relevance", "distance"],
                                 [["1", {"k": 1}, None, None], ["2", {"k": 2}, 0.5, 1.0]]))
    assert frame["relevance"].dtype == "float64" and math.isnan(frame["relevance"][0])
    assert frame["distance"].tolist()[1] == 1.0
    assert frame["metadata"].dtype == object and frame["metadata"][1] == {"k": 2}


def test_a_job_of_several_statements_is_one_statement_of_its_cell(cells):
    """A `;` inside parentheses is the parser's: a cell creating a job of two inserts (jobs.mdx's
    form) was cut there into two statements, and the first failed with 'Syntax error,
    unexpected end of query'. The job is made whole; a `;` after it still ends a statement."""
    cells.ok("%kbsql CREATE TABLE files.runs (a INT)")
    frame = cells.ok("""%%kbsql
CREATE JOB two_inserts (
    INSERT INTO files.runs SELECT 1 AS a;
    INSERT INTO files.runs SELECT 2 AS a
) EVERY 1 hour;
SELECT name, query FROM jobs""")
    assert frame["NAME"].tolist() == ["two_inserts"]  # MindsDB's jobs table names its columns so
    assert frame["QUERY"][0].count("INSERT INTO files.runs") == 2, frame["QUERY"][0]


def test_ctrl_c_in_a_later_statement_names_it(cells, monkeypatch):
    """Ctrl-C during the second of two inserts said 'Interrupted [default: embedded]: nothing
    stored' while the first insert's row was stored; the line names the stopped statement, as
    an SQL error's does, and what it says is true of that statement."""
    from kbsql.notebook.magics import KbSql

    client = next(c for c in cells.shell.configurables if isinstance(c, KbSql)).manager.get().client
    cells.ok("%kbsql CREATE TABLE files.kept (a INT)")
    real, sent = client.sql, []

    def interrupt_the_second(sql, **kwargs):
        sent.append(sql)
        if len(sent) == 2:
            raise KeyboardInterrupt  # as the kernel's interrupt arrives while it runs
        return real(sql, **kwargs)

    monkeypatch.setattr(client, "sql", interrupt_the_second)
    result, out = cells.run("%kbsql INSERT INTO files.kept SELECT 1 AS a; "
                            "INSERT INTO files.kept SELECT 2 AS a")
    monkeypatch.setattr(client, "sql", real)
    assert not result.success
    assert "Interrupted in statement 2 of 2 [default: embedded]: nothing stored" in out, out
    assert cells.ok("%kbsql SELECT a FROM files.kept")["a"].tolist() == [1]


def test_a_comment_on_the_magic_line_is_sql_s(cells):
    """`%%kbsql -- load the data` sent 'load the data' as SQL (a syntax error): the options'
    `--` end marker ate the comment's dashes. The comment now stays a comment."""
    frame = cells.ok("%%kbsql -- load the data\nSELECT 1 AS a")
    assert frame["a"].tolist() == [1]
    frame = cells.ok("%%kbsql -l 3 -- three rows shown\nSELECT 2 AS a")
    assert frame["a"].tolist() == [2]


def test_a_select_before_the_cells_last_statement_says_its_rows_are_not_shown(cells):
    """A cell of two SELECTs showed the second's table alone, as if the first had not run; a
    line now says how many rows it gave and that they are not shown."""
    frame, out = cells.run("%%kbsql\nSELECT 1 AS a UNION ALL SELECT 2 AS a;\nCREATE TABLE files.t1 (a INT);\n"
                           "SELECT 3 AS b")
    assert frame.success and frame.result["b"].tolist() == [3]
    assert ("Statement 1 of 3: 2 rows, not shown (a cell shows its last statement's rows; "
            "give this one a cell of its own)") in out, out
    assert "Statement 2" not in out and "OK, 0 rows affected." in out, out


def test_a_cell_of_comments_alone_says_so(cells):
    """A cell whose statement was commented out failed with the parser's 'Empty input'; with
    -p it switched the project, then failed so."""
    for code in ("%%kbsql\n-- SELECT 1 AS a", "%%kbsql -- load it later\n/* INSERT ... */"):
        result, out = cells.run(code)
        assert not result.success and "No SQL given: only comments (see %kbsql?)" in out, out
        assert "Empty input" not in out, out
    result, out = cells.run("%%kbsql -p mindsdb\n-- USE it")
    assert result.success and "Current project: mindsdb" in out, out
