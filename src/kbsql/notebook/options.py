"""Leading options of a magic line, parsed by the magic's own argparse parser, with the rest
of the line (SQL, a question) left exactly as typed. Shared by `%kbsql`, `%agent`,
`%kbsql_plot` and (`--help`) `%kbsql_connect`."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring

_TOKEN = re.compile(r"\s*(\S+)")
HELP = ("-h", "--help")


def shows_help(text: str, func: Any) -> bool:
    """`%kbsql --help` (or -h), typed as a command line's help is asked for: prints what
    `%kbsql?` shows (the magic's usage, its text and options) and says so, so the magic does
    nothing else. A newcomer's `%kbsql --help` answered "Unknown option --help", and
    `%kbsql_connect --help` "unrecognized arguments: --help"."""
    match = _TOKEN.match(text)
    if match is None or match.group(1) not in HELP:
        return False
    doc = (func.__doc__ or "").strip()
    print(textwrap.dedent(doc.removeprefix("::").strip("\n")))  # the reST marker IPython adds
    return True


def split_options(line: str, func: Any, sql: bool = False) -> tuple[Any, str]:
    """Parse the leading options of `line` with the magic's argparse parser and return
    (args, the rest of the line untouched). `--` ends the options; with `sql` it is also
    where the SQL starts, as a comment (`%%kbsql -- load the data`: the words after it were
    sent as SQL, a syntax error)."""
    parser = func.parser
    takes_value = {s: a.nargs != 0 for a in parser._actions for s in a.option_strings}
    tokens: list[str] = []
    pos = 0
    while (match := _TOKEN.match(line, pos)) is not None:
        token = match.group(1)
        if token == "--":  # explicit end of options
            pos = match.start(1) if sql else match.end()
            break
        option = token.split("=", 1)[0]
        if not re.match(r"^--?[A-Za-z]", token):
            break
        if option not in takes_value:
            raise UsageError(f"Unknown option {option} (see %{func.__name__}?)")
        tokens.append(token)
        pos = match.end()
        if takes_value[option] and "=" not in token:
            value = _TOKEN.match(line, pos)
            if value is None:
                raise UsageError(f"Option {option} needs a value")
            tokens.append(value.group(1))
            pos = value.end()
    return parse_argstring(func, " ".join(tokens)), line[pos:].strip()


def starts_with_option(text: str, func: Any) -> bool:
    """Whether `text` opens with one of the magic's own options (`--new`, `-c`, `--project=x`)
    or with what can only be a mistyped one (`--bogus`: two dashes and a letter), which
    `split_options` then refuses. `%agent helper --new What next?` means the option: read as
    the question, "--new" went to the agent as words and the conversation was not started
    over; `%agent helper --nwe hi` asked the agent "--nwe hi". A question that opens with
    two dashes is asked after `--` (`%agent helper -- --verbose does what?`)."""
    match = _TOKEN.match(text)
    if match is None:
        return False
    token = match.group(1)
    options = {s for a in func.parser._actions for s in a.option_strings}
    return token == "--" or token.split("=", 1)[0] in options or re.match(r"--[A-Za-z]", token) is not None


KEY_OPTIONS = ("--api-key-env", "--token-env")
KEY_WORDS = ("--api", "--key", "--token", "--password", "--secret")
KEY_ON_THE_LINE = ("%kbsql_connect takes no key or token on its line (a line stays in the notebook "
                   "and its history; what followed the option is not shown): put it in an "
                   "environment variable and name that with --token-env VAR or --api-key-env VAR, "
                   "or use --ask-key")


def refuse_key_options(line: str) -> None:
    """`%kbsql_connect URL --api-key sk-...` or `--token t` (kbsql.connect's own word): argparse
    read either as an abbreviation of --api-key-env / --token-env, and the key came back in
    "The environment variable sk-... is not set". An option that is not one of ours but
    names a key, or abbreviates one of ours, is refused without echoing the line."""
    for word in line.split():
        option = word.split("=", 1)[0].lower()
        if not option.startswith("--") or option in KEY_OPTIONS:
            continue
        if option.startswith(KEY_WORDS) or any(o.startswith(option) for o in KEY_OPTIONS):
            raise UsageError(KEY_ON_THE_LINE)


ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
"""An environment variable's name as they are written (KBSQL_TOKEN, OPENAI_API_KEY)."""


def shown_env_name(name: str) -> str:
    """`name` (given to --api-key-env) as an error may show it: a name written as variables
    are, else not at all (it may be the key itself, typed where its variable's name goes)."""
    return name if ENV_NAME.fullmatch(name) else "named there (not shown: it may be a key)"
