"""`%load_ext kbsql`: the `%%kbsql`/`%kbsql`, `%kbsql_connect` and `%agent` magics.

Each magic parses its options, makes one client call (`client.sql(query, params=...)` or
`client.agents.stream(...)`) and shows the answer, so anything a notebook does, a script
can do with the client alone. Settings are traitlets on the `KbSql` class (`%config KbSql`)
with defaults from `[tool.kbsql]` in the nearest pyproject.toml.

Options come first on the magic's line and the SQL follows as raw text (quotes and all),
so `%kbsql -o df SELECT 'a b'` keeps the SQL exactly as typed.
"""

from __future__ import annotations

import argparse
import getpass
import re
import warnings
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Dict, Int, Unicode
from traitlets.config import Configurable

from kbsql.interface.errors import KbsqlError
from kbsql.interface.results import OkResult, TableResult
from kbsql.interface.sqltext import statements
from kbsql.notebook import agent as agent_flow
from kbsql.notebook import follow
from kbsql.notebook.cell_params import collect_params, expand_template, strip_comment
from kbsql.notebook.connections import DEFAULT_API_KEY_ENV, Connection, ConnectionManager, mask_url
from kbsql.notebook.display import (
    ResultFrame,
    default_limit_note,
    interrupted,
    ok_message,
    short_error,
    to_frame,
)
from kbsql.notebook.options import refuse_key_options, shows_help, split_options, starts_with_option
from kbsql.notebook.pyproject_config import pyproject_settings

_CAPTURE = re.compile(r"^\s*([A-Za-z_]\w*)\s*<<\s*(.*)$", re.DOTALL)
_TOKEN = re.compile(r"\s*(\S+)")
_AGENT_LINE = re.compile(r"^(\s*)(?:([A-Za-z_]\w*)\s*=\s*)?%agent\s+(\S.*\?)\s*$")


def _rows(text: str) -> int:
    """`-l N`: a count of rows (`-l -1` showed all but the last row)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a count of rows, 0 or more (0 shows all), not {text!r}")
    return value


def keep_question_marks(lines: list[str]) -> list[str]:
    """Input transformer: `%agent a What is it?` is a question, not IPython's `obj?` help.

    IPython reads a line ending in `?` as a help request for the last word, which would
    swallow most questions; this rewrites such `%agent` lines into the explicit magic call
    before that rule runs. `%agent?` (help on the magic itself) is left alone."""
    if lines and lines[0].lstrip().startswith("%%"):
        return lines  # a cell magic's body is its own text
    out = []
    for line in lines:
        match = _AGENT_LINE.match(line.rstrip("\n"))
        if match:
            indent, target, args = match.groups()
            call = f"get_ipython().run_line_magic('agent', {args!r})"
            line = f"{indent}{target + ' = ' if target else ''}{call}\n"
        out.append(line)
    return out


@magics_class
class KbSql(Magics, Configurable):
    """SQL and agents of a kbsql service (the embedded engine or a server) in IPython."""

    matcher: Any = None  # the %%kbsql Tab completer, set by load_ipython_extension
    before_cell: Any = None  # its pre_run_cell callback (quiet_second_load)

    displaylimit = Int(10, allow_none=True, help="Rows shown of a result; 0 or None shows all. "
                       "The returned DataFrame always has every row.").tag(config=True)
    short_errors = Bool(True, help="Show errors as the service's message without a Python "
                        "traceback.").tag(config=True)
    feedback = Bool(True, help="Print a confirmation for statements without rows.").tag(config=True)
    variables = Bool(True, help="Expand {{name}} templates and bind :name parameters from the "
                     "notebook's variables.").tag(config=True)
    connections = Dict(help="Named connections: alias -> URL or data directory.").tag(config=True)
    default_connection = Unicode("", help="URL, data directory or alias that the first query "
                                 "uses; empty means the embedded engine.").tag(config=True)
    project = Unicode("", help="Project of new connections (default: the service's default "
                      "project).").tag(config=True)
    api_key_env = Unicode(DEFAULT_API_KEY_ENV, help="Environment variable holding the API key "
                          "sent to servers.").tag(config=True)
    auth_header = Unicode("Authorization", help="Header carrying the API key.").tag(config=True)
    auth_scheme = Unicode("Bearer", help="Prefix of the API key in that header.").tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any):
        Configurable.__init__(self, config=shell.config if shell is not None else None)
        Magics.__init__(self, shell=shell, **kwargs)
        self._apply_pyproject()
        self.manager = ConnectionManager()
        if shell is not None:
            shell.configurables.append(self)

    def _apply_pyproject(self) -> None:
        """`[tool.kbsql]` values, except those already set by the user's IPython config."""
        explicit = set(self.config.get("KbSql", {})) if self.config else set()
        for key, value in pyproject_settings().items():
            if not self.has_trait(key) or not self.trait_metadata(key, "config"):
                warnings.warn(f"kbsql: unknown setting {key!r} in [tool.kbsql]", stacklevel=2)
            elif key not in explicit:
                setattr(self, key, value)

    def _sync_manager(self) -> ConnectionManager:
        m = self.manager
        m.named, m.api_key_env = dict(self.connections), self.api_key_env
        m.auth_header, m.auth_scheme = self.auth_header, self.auth_scheme
        m.default_project = self.project or None
        if m.current is None and self.default_connection:
            m.connect(self.default_connection)
        return m

    def _connection(self, alias: str | None) -> Connection:
        return self._sync_manager().get(alias or None)

    def _fail(self, exc: BaseException, conn: Connection | None = None, at: str = "") -> None:
        """The cell fails with `exc` in one line; `at` names the statement of several that
        failed (those before it ran, those after it did not)."""
        if self.short_errors:
            raise short_error(exc, self._where(conn), at) from None
        raise exc

    def _interrupted(self, exc: KeyboardInterrupt, conn: Connection | None, sql: str | None,
                     at: str = "") -> None:
        """Ctrl-C: one line saying what was kept, and the cell fails (Run All stops); `at`
        names the statement of several that was stopped (those before it ran)."""
        if not self.short_errors:
            raise exc
        remote = conn is not None and not conn.client.api.embedded
        raise interrupted(exc, self._where(conn), remote=remote, sql=sql, at=at) from None

    def _where(self, conn: Connection | None) -> str | None:
        """`alias: place` of the connection that answered (None before one opened)."""
        if conn is None:
            return None
        return f"{conn.alias}: {'embedded' if conn.client.api.embedded else mask_url(conn.target or '')}"

    # %kbsql / %%kbsql ---------------------------------------------------------------------
    @magic_arguments()
    @argument("-o", "--out", metavar="NAME", help="Also store the full DataFrame in variable NAME.")
    @argument("-c", "--connection", metavar="ALIAS", help="Run on this connection (default: the "
              "current one).")
    @argument("-p", "--project", metavar="NAME", help="Switch to this project (like USE NAME); "
              "it stays current in later cells.")
    @argument("-l", "--limit", type=_rows, metavar="N", help="Rows shown for this cell "
              "(overrides KbSql.displaylimit; 0 shows all).")
    @argument("--no-vars", action="store_true",
              help="Send the text as is: no {{name}} templates, no :name parameters.")
    @argument("--full", action="store_true",
              help="Show long text whole (by default it is cut, with a click to expand).")
    @argument("--internal-metadata", action="store_true",
              help="Also show the metadata keys kbsql writes itself (chunk_index, start_char, "
                   "...), hidden by default.")
    @no_var_expand  # `{{name}}` and `$` are ours, not IPython's `{var}` expansion
    @line_cell_magic
    def kbsql(self, line: str, cell: str | None = None) -> Any:
        """Run SQL and return the result as a pandas DataFrame.

        %kbsql [options] SQL              (line form)
        %%kbsql [options] [NAME <<]       (cell form; the cell body is the SQL)
        NAME << SQL                       store the DataFrame in NAME and show nothing

        {{name}} pastes a variable's text (trusted input: table or column names);
        :name binds a variable as one quoted literal (safe for any value, e.g. user text).
        A statement without rows prints a short confirmation; an error prints the service's
        message and fails the cell. Several statements (separated by `;`) run in order; the
        last one's result is shown (an earlier one's rows are counted, not shown), and an error
        stops the cell at its statement.
        Settings: %config KbSql (displaylimit, connections, ...).
        Connections: %kbsql_connect; agents: %agent.
        """
        if shows_help(line, self.kbsql):
            return None
        args, rest = split_options(strip_comment(line), self.kbsql, sql=True)
        text = rest if cell is None else f"{rest}\n{cell}"
        capture = _CAPTURE.match(text)
        target, sql = (capture.group(1), capture.group(2)) if capture else (None, text)
        sql = sql.strip()
        conn = None
        at = ""
        try:
            conn = self._connection(args.connection)
            written = statements(sql)
            if args.project:
                conn.client.api.get_project(args.project)  # a missing project fails here, not later
                conn.client.project = args.project
                if not written:
                    print(f"Current project: {args.project}")
                    return None
            if not written:  # the parser's answer to comments alone was 'Empty input'
                raise UsageError("No SQL given" + (": only comments" if sql else "") + " (see %kbsql?)")
            namespace = self.shell.user_ns if self.shell is not None else {}
            expand = self.variables and not args.no_vars
            # the statements are those the cell's text holds: a {{name}}'s value is pasted into
            # its statement after the split, so a ';' in it makes no statement of its own
            parts = [expand_template(part, namespace) if expand else part for part in written]
            # every :name is found before the first statement runs (a typo stops the cell whole)
            binds = [collect_params(part, namespace) if expand else None for part in parts]
            for number, (sql, params) in enumerate(zip(parts, binds, strict=True), start=1):
                at = f"statement {number} of {len(parts)}" if len(parts) > 1 else ""
                before = conn.client.project
                result = conn.client.sql(sql, params=params)
                if follow.is_background(result):  # INSERT ... USING batch_size: until it ends
                    result = follow.follow(conn.client, result)
                if number < len(parts):  # only the last statement's result is shown (jupysql's way)
                    self._present(result, before, args, None, shown=False, at=at)
        except KbsqlError as exc:
            return self._fail(exc, conn, at)
        except KeyboardInterrupt as exc:
            return self._interrupted(exc, conn, sql, at)
        return self._present(result, before, args, target)

    def _present(self, result: Any, before: str, args: Any, target: str | None, shown: bool = True,
                 at: str = "") -> Any:
        """Show (print or return) a statement's result; `shown` False: a statement before a
        cell's last (`at` names it), whose confirmation is printed and whose rows are not kept,
        which one line says: a cell of two SELECTs showed the second's table alone, as if
        the first had not run."""
        if isinstance(result, OkResult):
            if self.feedback:
                print(ok_message(result, before))
            if args.out and self.shell is not None and shown:
                self.shell.user_ns[args.out] = result
            if target and shown:  # `NAME << INSERT ...`: say so rather than leave NAME as it was
                print(f"{target} is not set: the statement returned no rows to store")
            return None
        if not shown:  # a statement before the cell's last: its rows are counted, not kept
            if isinstance(result, TableResult):
                rows = len(result.data)
                print(f"{at.capitalize()}: {rows:,} row{'' if rows == 1 else 's'}, not shown (a cell shows "
                      "its last statement's rows; give this one a cell of its own)")
            return None
        if not isinstance(result, TableResult):  # pragma: no cover - the client raises on errors
            return result
        frame = to_frame(result)
        for name in (args.out, target):
            if name and self.shell is not None:
                self.shell.user_ns[name] = frame
        if target:
            return None
        limit = args.limit if args.limit is not None else self.displaylimit
        notes = [default_limit_note(result.default_limit)] if result.default_limit else []
        return ResultFrame.wrap(frame, limit, notes=notes, full=args.full,
                                internal_metadata=args.internal_metadata)

    # %kbsql_connect ------------------------------------------------------------------------
    @magic_arguments()
    @argument("target", nargs="?", help="A server URL, a data directory, or an alias (open or "
              "from KbSql.connections). Empty: the embedded engine on ./.kbsql or $KBSQL_HOME.")
    @argument("-a", "--alias", help="Name of this connection (default: host:port or the folder name).")
    @argument("-p", "--project", help="Project to start in.")
    @argument("--api-key-env", metavar="VAR", help="Read the API key from this environment "
              "variable (default: KbSql.api_key_env, used when set).")
    @argument("--token-env", metavar="VAR", help="Read the server's token (kbsql serve --token) "
              "from this environment variable; the same as --api-key-env.")
    @argument("--ask-key", action="store_true", help="Prompt for the API key (getpass; not echoed, "
              "not stored).")
    @argument("--list", action="store_true", help="List the connections; * marks the current one.")
    @argument("--close", metavar="ALIAS", help="Close this connection.")
    @line_magic
    def kbsql_connect(self, line: str) -> None:
        """Open, switch, list or close connections. Keys are never printed or stored."""
        if shows_help(line, self.kbsql_connect):
            return
        refuse_key_options(strip_comment(line))
        args = parse_argstring(self.kbsql_connect, strip_comment(line))
        manager = self._sync_manager()
        try:
            if args.close:
                manager.close(args.close)
                print(f"Closed {args.close}.")
            elif args.list:
                print("\n".join(manager.describe()))
            else:
                key = None
                if args.ask_key:
                    shown = mask_url(args.target) if args.target else "the server"
                    key = getpass.getpass(f"API key for {shown}: ") or None
                conn = manager.connect(args.target or None, alias=args.alias, api_key=key,
                                       api_key_env=args.api_key_env or args.token_env,
                                       project=args.project,
                                       key_kind="token" if args.token_env else "api key")
                # a server that does not answer is kept (it may be starting), never "Connected"
                print(f"Not answering: {conn.describe()} ({conn.note})" if conn.note
                      else f"Connected: {conn.describe()}")
        except KbsqlError as exc:
            self._fail(exc)

    # %agent / %%agent ----------------------------------------------------------------------
    @magic_arguments()
    @argument("--new", action="store_true", help="Forget this agent's conversation and start over.")
    @argument("-c", "--connection", metavar="ALIAS", help="Ask on this connection.")
    @argument("-p", "--project", metavar="NAME", help="Project of the agent (default: current).")
    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> Any:
        """Ask an agent; the answer streams live and is returned as a string.

        %agent [options] AGENT question text
        %%agent [options] AGENT           (the cell body is the question)
        (the options may also follow AGENT: %agent AGENT --new question)

        Follow-up questions carry the conversation so far; --new starts over.
        """
        if shows_help(line, self.agent):
            return None
        args, rest = split_options(strip_comment(line), self.agent)
        name, _, question = rest.partition(" ")
        if shows_help(question, self.agent):  # %agent helper --help
            return None
        if starts_with_option(question, self.agent):  # %agent AGENT --new question
            late, question = split_options(question, self.agent)
            for key, value in vars(late).items():
                if value:
                    setattr(args, key, value)
        question = question.strip() if cell is None else f"{question}\n{cell}".strip()
        if not name:
            raise UsageError("Name the agent: %agent AGENT question (see %agent?)")
        conn = None
        try:
            conn = self._connection(args.connection)
            return agent_flow.ask(conn, name, question, project=args.project, new=args.new)
        except KbsqlError as exc:
            return self._fail(exc, conn)
        except KeyboardInterrupt as exc:
            return self._interrupted(exc, conn, None)


_LOAD_AGAIN = re.compile(r"^\s*%load_ext\s+kbsql\s*(#.*)?$", re.M)


def quiet_second_load(ipython: Any) -> Any:
    """A `pre_run_cell` callback: before a cell that loads kbsql while it is loaded (Run All
    a second time), kbsql is taken out of IPython's set of loaded extensions. IPython would
    otherwise answer that `%load_ext` with "already loaded. To reload it, use: %reload_ext
    kbsql", an output the first run did not have; loading is idempotent (the first magics
    stay), and IPython puts the name back when the load returns, so `%unload_ext` works."""
    def before(info: Any) -> None:
        if _LOAD_AGAIN.search(getattr(info, "raw_cell", None) or ""):
            ipython.extension_manager.loaded.discard("kbsql")
    return before


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics once per shell (loading twice keeps the first instance)."""
    if any(isinstance(c, KbSql) for c in ipython.configurables):
        return
    from kbsql.notebook.completer import make_matcher
    from kbsql.notebook.plot_magic import KbSqlPlot

    magics = KbSql(shell=ipython)
    ipython.register_magics(magics)
    ipython.register_magics(KbSqlPlot(magics, shell=ipython))
    magics.matcher = make_matcher(lambda: magics._connection(None).client)
    ipython.Completer.custom_matchers.append(magics.matcher)
    ipython.input_transformers_cleanup.append(keep_question_marks)
    magics.before_cell = quiet_second_load(ipython)
    ipython.events.register("pre_run_cell", magics.before_cell)


def unload_ipython_extension(ipython: Any) -> None:
    """Close the connections and remove the magics."""
    for magics in [c for c in ipython.configurables if isinstance(c, KbSql)]:
        magics.manager.close_all()
        ipython.configurables.remove(magics)
        matcher = getattr(magics, "matcher", None)
        if matcher in ipython.Completer.custom_matchers:
            ipython.Completer.custom_matchers.remove(matcher)
        before = getattr(magics, "before_cell", None)
        if before in ipython.events.callbacks["pre_run_cell"]:
            ipython.events.unregister("pre_run_cell", before)
    if keep_question_marks in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(keep_question_marks)
    registry = ipython.magics_manager.registry
    registry.pop("KbSql", None)
    registry.pop("KbSqlPlot", None)
    for kind, names in (("line", ("kbsql", "kbsql_connect", "agent", "kbsql_plot")),
                        ("cell", ("kbsql", "agent"))):
        for name in names:
            ipython.magics_manager.magics[kind].pop(name, None)
