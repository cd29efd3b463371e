"""Secret masking: the one place that decides what a shown secret looks like.

Keys in model descriptors, passwords in data-source parameters and DSNs, credentials in
URLs, and keys a provider echoes back in an error all go through these functions before
they reach a response, a log line, an error or a notebook output.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "******"
SHORT_KEY = 8  # keys shorter than this are masked as whole tokens only (scrub_secret)
SECRET_KEYS = ("password", "passwd", "api_key", "apikey", "secret", "token", "private_key", "key")
SECRET_ENDINGS = ("password", "passwd", "secret", "token")
"""A key ending so is a secret whatever comes before (libpq's `sslpassword`, `dbpassword`)."""
CONNECTION_STRING_KEYS = ("dsn", "url", "uri", "connection_string", "conninfo")
# A password may hold '@', '/' or ':' unencoded: everything up to the last '@' of the URL (a
# run without spaces or quotes) is masked, so no part of such a password shows.
_URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s\"'<>]*@")
_URL_PASSWORD = re.compile(r"(://[^:/@\s\"'<>]*:)(?:[^\s\"'<>]*|[^\"'<>@/]{0,256}?)@")
"""`://user:password@`: the password up to the last `@` of a run without spaces, else (a
password holding a raw newline or space, which libpq is given as it is) up to the next `@`."""
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_SECRET_LIKE = re.compile(r"\b(sk-(?:ant-)?[A-Za-z0-9_\-]{6,})")
_SQL_SECRET = re.compile(r"""(["'`]?)([A-Za-z_][\w.]*)\1(\s*[:=]\s*)"""
                         r"""('(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.)*")""")
"""`"api_key": "..."`, `api_key = '...'` (a USING or PARAMETERS entry): a name and its quoted
value, the value masked when the name is a secret's (`is_secret_key`)."""


def mask_secret(value: Any) -> Any:
    """The masked form of a secret, as knowledge-base responses show api keys."""
    return MASK if value else value


def mask_url(text: str) -> str:
    """`text` with the `user:password@` part of every URL in it masked (`http://***@host`):
    a server URL may carry credentials, and URLs end up in error messages and reprs that a
    notebook prints."""
    return _URL_USERINFO.sub(r"\1***@", str(text))


def mask_secrets(parameters: dict[str, Any] | None) -> dict[str, Any]:
    """Connection parameters with secret values replaced by asterisks (recursively)."""
    out: dict[str, Any] = {}
    for key, value in (parameters or {}).items():
        if isinstance(value, dict):
            out[key] = mask_secrets(value)
        elif is_secret_key(key):
            out[key] = MASK
        elif isinstance(value, str) and key.lower() in CONNECTION_STRING_KEYS:
            out[key] = mask_connection_string(value)
        else:
            out[key] = value
    return out


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(s == lowered or lowered.endswith("_" + s) for s in SECRET_KEYS) or \
        lowered.endswith(SECRET_ENDINGS)


def mask_connection_string(text: str) -> str:
    """A DSN with its password masked: `scheme://user:pw@host` and `password=pw` forms."""
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + "@", text)
    return _KV_PASSWORD.sub(lambda m: m.group(1) + MASK, text)


def mask_sql_text(text: str) -> str:
    """SQL text with the secrets it holds masked: the quoted values of secret keys (a
    `CREATE KNOWLEDGE_BASE ... api_key` or `CREATE DATABASE ... "password"` a job runs),
    URLs' passwords, `password=` pairs and key-shaped words (`sk-...`). A job's statement is
    shown to every user of a server (SHOW JOBS, information_schema.jobs, the jobs routes,
    log.jobs_history): MindsDB shows it as written, which put a creator's key in everyone's
    answers and notebooks."""
    def value(m: re.Match[str]) -> str:
        if not is_secret_key(m.group(2).rsplit(".", 1)[-1]):
            return m.group(0)
        quote = m.group(4)[0]
        return f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{quote}{MASK}{quote}"

    return _SECRET_LIKE.sub(MASK, mask_connection_string(_SQL_SECRET.sub(value, text)))


def scrub_secret(text: str, api_key: str | None) -> str:
    """Error text with a secret masked: a provider (or a proxy in front of it) may echo the
    key it refused, a database driver the password it was given, and this text reaches
    answers, stream error chunks and SQL errors. Anything shaped like an OpenAI/Anthropic
    key (`sk-...`) is masked too. A secret shorter than `SHORT_KEY` is masked where it stands
    as a token of its own, not inside words: an api_key of `k` made every error read
    "(******bsql serve ...)", a password `p` a connection error "o******tions"."""
    if api_key and len(api_key) < SHORT_KEY:
        text = re.sub(rf"(?<![\w-]){re.escape(api_key)}(?![\w-])", MASK, text)
    elif api_key:
        text = text.replace(api_key, MASK)
    return _SECRET_LIKE.sub(MASK, text)
