"""`current_setting()` of the server's paths and secrets, refused before DuckDB runs it.

Why: DuckDB's `current_setting('secret_directory')` (and `temp_directory`, `home_directory`,
`extension_directory`, log and profile paths) showed any token holder where the server keeps
its data and DuckDB its stored secrets. Settings that say how queries run (`threads`,
`memory_limit`, `TimeZone`) stay readable; a name that is not a literal cannot be checked,
so it is refused too. One line, kind permission-denied.

A function named with a database or schema (`src.f()`) is refused the same way: DuckDB looks
it up in that catalog, and a macro stored in an attached DuckDB file (under an --allow-path
root, made by anyone who can write there) runs its own SQL here, where nothing checks it:
`CREATE MACRO leak() AS (SELECT content FROM read_text('/etc/...'))` read any file on the
machine, the data directory's included, through `SELECT kbsql_ds_3.leak()` (the attached
name is in DuckDB's "did you mean" hint). The attached file's views are refused for the same
reason (DuckSession._refuse_duckdb_view); its tables stay readable.
"""

from __future__ import annotations

from sqlglot import exp

from kbsql.interface.errors import KINDS, SqlError

_PRIVATE_WORDS = ("directory", "path", "secret", "home", "file", "extension", "custom_user_agent",
                  "allowed_", "log")
_KIND = next(k for k in KINDS if k.endswith("permission-denied"))


def refuse_setting_reads(tree: exp.Expression) -> None:
    """Raise the one-line SqlError when `tree` reads a setting naming a path or a secret."""
    for node in tree.find_all(exp.Func):
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        if name not in ("current_setting", "getvariable"):
            continue
        args = node.expressions if isinstance(node, exp.Anonymous) else [node.this]
        literal = args[0] if args and isinstance(args[0], exp.Literal) and args[0].is_string else None
        setting = literal.this.lower() if literal is not None else None
        if setting is None or any(word in setting for word in _PRIVATE_WORDS):
            shown = f"'{literal.this}'" if literal is not None else "a computed name"
            raise SqlError(f"{name}({shown}) is not shown here: it may name the server's paths or "
                           "secrets (settings that say how queries run, such as 'threads', are)",
                           kind=_KIND)


def refuse_qualified_functions(tree: exp.Expression) -> None:
    """Raise the one-line SqlError when `tree` calls a function through a name with a dot
    (`catalog.f()`, `schema.f()`, `value.f()`): built-in functions are called by their name."""
    for node in tree.find_all(exp.Dot):
        if isinstance(node.expression, exp.Func):
            called = node.expression.name if isinstance(node.expression, exp.Anonymous) \
                else node.expression.sql_name()
            raise SqlError(f"{node.this.sql()}.{called}() is not called here: call functions by "
                           f"their name alone ({called}(...)); functions stored in a data source "
                           "run their own SQL unchecked, and custom Python functions (MindsDB's "
                           "BYOF, functions/custom_functions.mdx) are not supported by the local "
                           "engine", kind=_KIND)
