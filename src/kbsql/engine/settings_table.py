"""Every setting of kbsql, declared once (datasette's `SETTINGS` is the model).

Each `Setting` names its type, default, `kbsql serve` flag, environment variable,
`config.json` key and one line of help. `kbsql serve`'s flags are built from this table
(`cli.py`), `config.json` and `kbsql.connect(settings={...})` are read through it
(`engine/config.py`), and README's table of settings is checked against it
(tests/test_readme.py). One precedence for all: flag given > environment > `config.json` (or
`settings=`, for an embedded engine) > default. Some defaults differ under `kbsql serve`
(`served`): a server shared by others bounds a statement, an embedded notebook does not.

Engine settings (`in_file`) may be given in `config.json`; the server's own (bind, token,
request limits, workers) only by flag or environment. An unknown key or a value of the
wrong type stops the start with one line naming it (and the known key one edit away).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kbsql.engine.spelling import did_you_mean

_SAME: Any = object()


class SettingError(ValueError):
    """A setting with an unknown name or a value of the wrong type; the message is one line."""


@dataclass(frozen=True)
class Setting:
    name: str
    """The `config.json` key, the `connect(settings=...)` key and the `EngineConfig` field."""
    kind: type
    """float, int, str, bool (a flag takes no value), tuple (several strings; a flag repeats)
    or dict (JSON object)."""
    default: Any
    help: str
    flag: str | None = None
    env: str | None = ""
    """'' : KBSQL_<NAME>; None: no variable."""
    in_file: bool = True
    """An engine setting: `config.json` and `settings=` may hold it."""
    served: Any = _SAME
    """The default under `kbsql serve`, when it differs from the embedded one."""
    positive: bool = True
    """A number must be > 0 (False: >= 0, 0 meaning none)."""
    metavar: str | None = None
    shown: str | None = None
    """The default in words, where a value would not say it (`--help`, README)."""

    @property
    def variable(self) -> str | None:
        return f"KBSQL_{self.name.upper()}" if self.env == "" else self.env

    def default_for(self, served: bool) -> Any:
        return self.served if served and self.served is not _SAME else self.default

    def default_text(self, served: bool | None = None) -> str:
        """The default as `--help` (served=True) and README (None: both) say it."""
        if served and self.served is not _SAME:
            return _text(self.served)
        if self.shown:
            return self.shown
        if served is None and self.served is not _SAME:
            return f"embedded: {_text(self.default)}; served: {_text(self.served)}"
        return _text(self.default)

    def check(self, value: Any, where: str) -> Any:
        """`value` (from JSON or a flag) as this setting's type, or a SettingError naming it."""
        if value is None:
            return None
        if self.kind is dict:
            if isinstance(value, dict):
                return dict(value)
            raise SettingError(f"{where}: {self.name} must be a JSON object, not {value!r}")
        if self.kind is tuple:
            if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
                return tuple(value)
            raise SettingError(f"{where}: {self.name} must be a list of strings, not {value!r}")
        if self.kind is str:
            if isinstance(value, str):
                return value
            raise SettingError(f"{where}: {self.name} must be a string, not {value!r}")
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            raise SettingError(f"{where}: {self.name} must be true or false, not {value!r}")
        whole = self.kind is int
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (whole and value != int(value)):
            raise SettingError(f"{where}: {self.name} must be {'a whole' if whole else 'a'} number, "
                               f"not {value!r}")
        if value < 0 or (self.positive and value == 0):
            least = "positive" if self.positive else "0 or more"
            raise SettingError(f"{where}: {self.name} must be {least}, not {value!r}")
        return int(value) if whole else float(value)

    def from_text(self, text: str, where: str) -> Any:
        """An environment variable's text as this setting's value."""
        if self.kind is str:
            return text
        if self.kind is tuple:
            return tuple(part.strip() for part in text.split(",") if part.strip())
        if self.kind is bool and text.lower() in _BOOLS:
            return _BOOLS[text.lower()]
        try:
            value = json.loads(text)
        except ValueError:
            wanted = "a JSON object" if self.kind is dict else "a number"
            raise SettingError(f"{where}: {self.name} must be {wanted}, not {text!r}") from None
        return self.check(value, where)


_BOOLS = {"1": True, "true": True, "yes": True, "on": True,
          "0": False, "false": False, "no": False, "off": False}


def _text(value: Any) -> str:
    if value in (None, ()):
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _half_the_cores() -> int:
    """Half the machine's cores (at least 1): the served SQL engine's threads, and the PDF
    extractions at once (each a process at a core). Work given every core leaves none for the
    next user's `SELECT 1` (bench_isolation: two heavy statements and DuckDB's shared workers
    kept both cores busy)."""
    return max(1, (os.cpu_count() or 2) // 2)


def _fair_share_mb() -> int:
    """A quarter of the machine's memory (at least 256 MB): the served SQL engine's limit."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 4 << 30
    return int(max(256, total // 4 // (1 << 20)))


SETTINGS: tuple[Setting, ...] = (
    # --- the engine's: config.json, settings=, the environment and (served) a flag ----------
    Setting("statement_timeout", float, None, "longest an SQL statement runs before it is "
            "interrupted, in seconds (0: none); a request may ask for less with 'timeout'",
            "--statement-timeout", served=120.0, positive=False, metavar="SECONDS"),
    Setting("sql_memory_mb", int, None, "memory limit of the SQL engine in MB; it spills to disk "
            "beyond", "--sql-memory-mb", served=_fair_share_mb(), metavar="MB",
            shown="embedded: DuckDB's 80% of RAM; served: a quarter of the machine's memory"),
    Setting("sql_spill_mb", int, None, "most the SQL engine may spill into the data directory's tmp, in MB",
            "--sql-spill-mb", positive=False, metavar="MB",
            shown="4x the memory limit, at most a quarter of the free disk and what leaves "
                  "disk_reserve_mb free"),
    Setting("sql_threads", int, None, "threads one SQL statement may use (DuckDB's worker "
            "threads)", "--sql-threads", served=_half_the_cores(), metavar="N",
            shown="embedded: every core; served: half the cores (at least 1)"),
    Setting("model_timeout", float, None, "longest one model call (embedding, chat, rerank) may "
            "take, in seconds", "--model-timeout", served=120.0, metavar="SECONDS",
            shown="embedded: the providers' own; served: 120"),
    Setting("model_answer_mb", int, 8, "most one model answer (an agent's turn, streamed) may "
            "send, in MB; the call fails beyond", "--model-answer-mb", metavar="MB"),
    Setting("model_concurrency", int, 16, "model calls in flight to one model host (then 503)",
            "--model-concurrency", metavar="N"),
    Setting("allowed_model_hosts", tuple, None, "hosts model calls may go to (HOST[:PORT]; '*': any "
            "public host); a flag repeats, the variable separates them with commas",
            "--allow-model-host", metavar="HOST[:PORT]",
            shown="anywhere; with a token or a public bind '*'"),
    Setting("allowed_source_hosts", tuple, None, "hosts postgres and pgvector data sources may "
            "connect to (HOST[:PORT]; '*': any public host); a flag repeats, the variable "
            "separates them with commas", "--allow-source-host", metavar="HOST[:PORT]",
            shown="anywhere; with a token or a public bind '*'"),
    Setting("source_connect_timeout", float, 10.0, "longest a postgres data source's connection "
            "attempt may take, in seconds (its own connect_timeout is cut to it): libpq's wait "
            "cannot be interrupted, so it holds a worker after its client has left",
            "--source-connect-timeout", metavar="SECONDS"),
    Setting("max_chunks_per_row", int, 10_000, "chunks one inserted row may make (the insert "
            "fails beyond)", "--max-chunks-per-row", metavar="N"),
    Setting("max_upload_decoded_mb", int, 64, "most an uploaded file may decode to, in MB: an "
            "archive's file, a workbook's XML and cell text, a PDF's text (400 beyond)",
            "--max-upload-decoded-mb", metavar="MB"),
    Setting("disk_reserve_mb", int, 256, "free space on the data directory's disk an upload, "
            "a registered DataFrame or a knowledge-base insert must leave, in MB: the catalog, "
            "the query log and jobs keep room to write (507 beyond; 0: none)",
            "--disk-reserve-mb", positive=False, metavar="MB"),
    Setting("max_upload_columns", int, 4096, "columns an uploaded table may have (400 beyond)",
            "--max-upload-columns", metavar="N"),
    Setting("max_upload_cells", int, 10_000_000, "cells (rows x columns) an uploaded table may "
            "have, counted before it is read (400 beyond)", "--max-upload-cells", metavar="N"),
    Setting("pdf_timeout", float, 60.0, "seconds an uploaded PDF's text extraction may take, in "
            "a process of its own killed then (400 beyond)", "--pdf-timeout", metavar="SECONDS"),
    Setting("pdf_workers", int, _half_the_cores(), "uploaded PDFs whose text is extracted at once "
            "(each a process taking a core), shared fairly between users; more wait within their "
            "--pdf-timeout, then 503",
            "--pdf-workers", metavar="N", shown="half the cores (at least 1)"),
    Setting("pdf_cpu_per_mb", float, 60.0, "CPU-seconds an uploaded PDF's text extraction may take "
            "per MB of the file, at least 2 (a few KB of costly pages parsed for 35 CPU-s); 400 "
            "beyond", "--pdf-cpu-per-mb", metavar="SECONDS"),
    Setting("upload_processes", int, 0, "uploaded files (csv, tsv, json, parquet, xlsx, txt, an "
            "archive of one) parsed at once, each in a process of its own killed at "
            "--upload-timeout or when its client leaves, shared fairly between users; more wait "
            "within their --upload-timeout, then 503 (0: in the server's own threads)",
            "--upload-processes", served=_half_the_cores(), positive=False, metavar="N",
            shown="embedded: 0; served: half the cores (at least 1)"),
    Setting("upload_timeout", float, 60.0, "seconds the parse of an uploaded file in its process "
            "may take, its wait for a process included (400 beyond)", "--upload-timeout",
            metavar="SECONDS"),
    Setting("background_inserts", int, 2, "INSERT ... SELECT ... USING batch_size statements "
            "running at once in the background; more wait their turn", "--background-inserts",
            metavar="N"),
    Setting("jobs_poll_s", float, 5.0, "seconds between two looks for due job runs (CREATE JOB); 0: "
            "this process runs no jobs ('kbsql jobs run' from cron does)", "--jobs-poll-s",
            positive=False, metavar="SECONDS"),
    Setting("job_workers", int, 2, "job runs (CREATE JOB) running at once in this process; one "
            "job creator's runs take at most half, the rest wait their turn", "--job-workers",
            metavar="N"),
    Setting("jobs_history_rows", int, 10000, "job runs kept in log.jobs_history, the newest (each "
            "job's last run is always kept); older ones are deleted as runs end",
            "--jobs-history-rows", metavar="N"),
    Setting("value_check_nodes", int, 50_000, "expression nodes the per-value size checks may add "
            "to one SQL statement (each copies its operands: eight nested replace() need more); "
            "a statement needing more is refused in one line", "--value-check-nodes", metavar="N"),
    Setting("long_statement_tokens", int, 1000, "SQL tokens above which a statement is long: its "
            "parse and compile (pure Python, holding the interpreter lock) wait for one of "
            "long_statement_slots, so that long statements cannot slow every other user's; 0: no "
            "statement is long", "--long-statement-tokens", positive=False, metavar="N"),
    Setting("long_statement_slots", int, 1, "long statements parsed and compiled at once, shared "
            "fairly between users; more wait within their statement timeout, then 503",
            "--long-statement-slots", metavar="N"),
    Setting("edit_distance_cells", int, 250_000, "character pairs one levenshtein, "
            "damerau_levenshtein or editdist3 call may compare (the product of its texts' lengths: "
            "a statement's deadline cannot stop one; jaro_similarity and jaro_winkler_similarity "
            "500 times as many, a substring search (contains, strpos, LIKE, replace) whose needle "
            "is not a short literal 40,000 times), refused in one line beyond",
            "--edit-distance-cells", metavar="N"),
    Setting("jobs_time_scale", float, 1.0, "for tests: every job period (EVERY) is multiplied by it "
            "(1/60: a minute lasts a second)"),
    Setting("read_only_sources", bool, False, "refuse writes to connected data sources (CREATE "
            "TABLE, INSERT, UPDATE, DELETE, DROP TABLE in a duckdb, sqlite or postgres source); "
            "files and df stay writable", "--read-only-sources"),
    Setting("llm_log_rows", int, 500, "language-model calls (agents' turns, chat rerankers') kept "
            "in memory for log.llm_log, the newest; 0 keeps none", "--llm-log-rows", positive=False,
            metavar="N"),
    Setting("agent_max_iterations", int, 12, "tool calls one agent run may make"),
    Setting("agent_wall_time_s", float, 300.0, "seconds one agent run may take (an agent's "
            "params.timeout shortens its own)"),
    Setting("max_variables", int, 1000, "names one user's SET @name may keep (each credential of a "
            "server, or the embedded engine, has its own; SET @name = NULL frees one); more is "
            "refused", "--max-variables", metavar="N"),
    Setting("max_variables_mb", int, 16, "most one user's SET @name values may hold in all, in MB "
            "(characters); more is refused", "--max-variables-mb", metavar="MB"),
    Setting("agent_join_max_rows", int, 100, "distinct questions a query joining an agent with a "
            "table (JOIN my_agent a ON a.question = t.col) may ask, all its agent joins together, one "
            "model call each; more is refused", "--agent-join-max-rows", metavar="N"),
    Setting("default_model", dict, None, "the agents' default model descriptor; "
            "$KBSQL_DEFAULT_MODEL_PROVIDER, _NAME, _API_KEY and _BASE_URL set its keys",
            env=None, shown="the offline retrieval agent"),
    Setting("default_embedding_model", dict, None, "the knowledge bases' default embedding model "
            "descriptor", env=None, shown="the bundled all-MiniLM-L6-v2"),
    Setting("catalog_url", str, None, "postgresql:// URL of a catalog shared by several servers; "
            "prefer the variable: a password in argv is visible to other users", "--catalog",
            env="KBSQL_CATALOG_URL", metavar="URL", shown="catalog.sqlite in the data directory"),
    # --- the server's: a flag or the environment ---------------------------------------------
    Setting("data_dir", str, ".kbsql", "data directory (config.json lives there)", "--data-dir",
            env="KBSQL_HOME", in_file=False, metavar="DIR"),
    Setting("host", str, "127.0.0.1", "address to bind", "--host", in_file=False),
    Setting("port", int, 47334, "HTTP port (0 picks one)", "--port", in_file=False, positive=False),
    Setting("mysql_port", int, None, "also serve MySQL's wire protocol on this port, as MindsDB does "
            "on 47335 (0 picks one)", "--mysql-port", in_file=False, positive=False, metavar="PORT",
            shown="off"),
    Setting("log_level", str, "warning", "uvicorn's log level", "--log-level", in_file=False,
            metavar="LEVEL"),
    Setting("allow_origin", tuple, (), "a browser origin (scheme://host:port) allowed to call the "
            "server besides loopback ones; repeatable", "--allow-origin", in_file=False, metavar="URL"),
    Setting("token", str, None, "require 'Authorization: Bearer TOKEN' on every /api route but "
            "/api/status; needed to bind beyond loopback", "--token", in_file=False),
    Setting("user", str, None, "user name for POST /api/login (MindsDB's login); with --password",
            "--user", in_file=False),
    Setting("password", str, None, "password for POST /api/login (the variable keeps it out of "
            "the process list)", "--password", in_file=False),
    Setting("allow_path", tuple, (), "a folder file-based data sources (files, sqlite, duckdb) may "
            "read; repeatable; with a token or a public bind only these are allowed", "--allow-path",
            in_file=False, metavar="DIR"),
    Setting("max_body_mb", float, 64.0, "largest request body in MB (413 beyond)", "--max-body-mb",
            in_file=False, metavar="MB"),
    Setting("max_sql_kb", float, 1024.0, "largest SQL text in KB, refused before parsing",
            "--max-sql-kb", in_file=False, metavar="KB"),
    Setting("max_head_kb", float, 64.0, "largest request head (request line and headers) in KB, "
            "counted before parsing (431 beyond)", "--max-head-kb", in_file=False, metavar="KB"),
    Setting("max_headers", int, 200, "most header lines in one request head, counted before "
            "parsing (431 beyond)", "--max-headers", in_file=False, metavar="N"),
    Setting("http_unread_mb", float, 256.0, "MB all HTTP connections together may hold in answers "
            "their clients do not read, and all MySQL ones apart; past it the ones waiting longest "
            "are closed",
            "--http-unread-mb", in_file=False, metavar="MB"),
    Setting("http_write_timeout", float, 60.0, "seconds an HTTP client may leave its answer unread "
            "(its socket full) before its connection is closed; a stream's model call ends with it",
            "--http-write-timeout", in_file=False, metavar="SECONDS"),
    Setting("timeout", float, 30.0, "seconds for a request head to arrive and longest pause "
            "inside a body (408 beyond)", "--timeout", in_file=False, metavar="SECONDS"),
    Setting("shutdown_timeout", float, 30.0, "seconds requests in flight get to finish after "
            "SIGTERM/SIGINT", "--shutdown-timeout", in_file=False, metavar="SECONDS"),
    Setting("sql_workers", int, 32, "SQL statements run at once (more wait, then 503)",
            "--sql-workers", in_file=False, metavar="N"),
    Setting("model_workers", int, 32, "requests that may call a model (completions, inserts, "
            "creating a knowledge base or agent) run at once (then 503)", "--model-workers",
            in_file=False, metavar="N"),
    Setting("upload_workers", int, 8, "file uploads handled at once, each waiting for its parse "
            "or PDF process (--upload-processes, --pdf-workers) in a pool of its own, never an SQL "
            "worker; one credential holds at most half (more wait, then 503)", "--upload-workers",
            in_file=False, metavar="N"),
    Setting("max_pending_connections", int, 256, "connections per door (HTTP, MySQL) that have "
            "not yet sent a request head or logged in; one more closes the oldest (at most a quarter "
            "of the descriptor limit)", "--max-pending-connections", in_file=False, metavar="N"),
    Setting("flood_closes", int, 32, "connections of one address block (IPv4 /24, loopback /8, "
            "IPv6 /64) the pending cap may close within a second on a door; past it the block's new "
            "connections are closed at accept until it stops, 0 = never", "--flood-closes",
            in_file=False, positive=False, metavar="N"),
    Setting("flood_hold", float, 1.0, "seconds a flooding address block's new connections stay "
            "closed at accept after it went below --flood-closes", "--flood-hold", in_file=False,
            metavar="SECONDS"),
    Setting("flood_pause_rate", int, 500, "connections closed at accept a second past which a door "
            "stops accepting for 0.1 s, 0 = never", "--flood-pause-rate", in_file=False,
            positive=False, metavar="N"),
    Setting("mysql_idle_timeout", float, 900.0, "seconds a MySQL connection may wait between "
            "commands before it is closed", "--mysql-idle-timeout", in_file=False, metavar="SECONDS"),
    Setting("mysql_write_timeout", float, 60.0, "seconds a MySQL client may leave its answer unread "
            "before its connection is closed", "--mysql-write-timeout", in_file=False, metavar="SECONDS"),
    Setting("mysql_max_prepared", int, 64, "prepared statements one MySQL connection may keep",
            "--mysql-max-prepared", in_file=False, metavar="N"),
    Setting("mysql_max_connections", int, 256, "logged-in MySQL connections at once (at most a "
            "quarter of the process's descriptors), one user at most half; a login past either is "
            "refused", "--mysql-max-connections", in_file=False, metavar="N"),
    Setting("max_http_connections", int, 512, "HTTP connections kept open at once once a request "
            "came on them (at most a quarter of the process's descriptors), one user at most half; "
            "a request on one past either answers 503 and the connection is closed",
            "--max-http-connections", in_file=False, metavar="N"),
    Setting("mysql_max_cursors", int, 4, "open cursors (each holding a result) one MySQL connection "
            "may keep", "--mysql-max-cursors", in_file=False, metavar="N"),
    Setting("mysql_held_mb", float, 16.0, "MB one MySQL connection's prepared statements and their "
            "long data may hold", "--mysql-held-mb", in_file=False, metavar="MB"),
    Setting("mysql_total_held_mb", float, 64.0, "MB all MySQL connections' prepared statements and "
            "long data may hold together", "--mysql-total-held-mb", in_file=False, metavar="MB"),
    Setting("forwarded_allow_ips", tuple, (), "proxies (comma-separated IPs, repeatable) whose "
            "X-Forwarded-For names the client", "--forwarded-allow-ips",
            in_file=False, metavar="IPS"),
)

BY_NAME: Mapping[str, Setting] = {s.name: s for s in SETTINGS}
FILE_KEYS = tuple(s.name for s in SETTINGS if s.in_file)


def unknown_key(key: str, known: Iterable[str], where: str) -> SettingError:
    """The one line for a key no setting has: the nearest known one, else the list."""
    known = tuple(known)
    hint = did_you_mean(key, known) or f" (the settings: {', '.join(known)})"
    return SettingError(f"{where}: unknown setting '{key}'{hint}")


def resolve(given: Mapping[str, Any], file_values: Mapping[str, Any], *, served: bool,
            environ: Mapping[str, str], where: str, names: Iterable[str]) -> dict[str, Any]:
    """The value of each setting in `names`: given (a flag, not None) > environment >
    `file_values` (config.json, or `settings=`) > default. `file_values` holds only engine
    settings (an unknown key is a SettingError naming `where`); every value is checked."""
    for key in file_values:
        if key not in BY_NAME or not BY_NAME[key].in_file:
            raise unknown_key(key, FILE_KEYS, where)
    out: dict[str, Any] = {}
    for name in names:
        setting = BY_NAME[name]
        variable = setting.variable
        if given.get(name) is not None:
            out[name] = setting.check(given[name], setting.flag or name)
        elif variable and environ.get(variable, "").strip():
            out[name] = setting.from_text(environ[variable].strip(), f"${variable}")
        elif name in file_values:
            out[name] = setting.check(file_values[name], where)
        else:
            out[name] = setting.default_for(served)
    return out


def markdown() -> str:
    """README's table of settings (tests/test_readme.py checks README holds exactly this)."""
    rows = ["| setting | in config.json | `kbsql serve` flag | environment | default | what |",
            "| --- | --- | --- | --- | --- | --- |"]
    for s in SETTINGS:
        rows.append(f"| `{s.name}` | {'yes' if s.in_file else 'no'} | {f'`{s.flag}`' if s.flag else ''} | "
                    f"{f'`{s.variable}`' if s.variable else ''} | {s.default_text()} | {s.help} |")
    return "\n".join(rows) + "\n"
