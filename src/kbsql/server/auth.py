"""Authentication of `kbsql serve`: a bearer token, and MindsDB's login flow.

Why: a server reachable by others must not let anyone read stored keys or change knowledge
bases. Two ways in, both ending in `Authorization: Bearer <token>` on every request:

- the server's own token (`kbsql serve --token T` or `$KBSQL_TOKEN`), given to clients
  (`kbsql.connect(url, token=...)`, `$KBSQL_TOKEN`, `%kbsql_connect URL --token-env VAR`,
  the JupyterLab extension);
- `POST /api/login` with `{"username", "password"}` (what mindsdb_sdk's
  `connect(url, login=..., password=...)` sends) when the server was started with
  `--user` and `--password`: it answers `{"token": <session token>}`, which the SDK then
  sends as a bearer token. The same answer sets MindsDB's `session` cookie (`HttpOnly`,
  `SameSite=Lax`, `Secure` when the request came over TLS), which every route accepts as
  it accepts the token: MindsDB's JavaScript SDK logs in and then sends only that cookie.
  `POST /api/logout` ends the session (cookie or bearer) and clears the cookie. Session
  tokens live in memory (a restart logs everyone out; the SDKs log in again on a 401).

The server token is also accepted in `X-Api-Key`, which mindsdb_sdk's
`connect(url, api_key=...)` sends.

Only paths under `/api/` are guarded; `/api/status` stays open (clients probe it, and it
says `auth.http_auth_enabled`). Anything else is not a route and answers 404, which is also
what mindsdb_sdk needs to fall back from `/cloud/login` to `/api/login`. Tokens are compared
in constant time and never logged. Failed logins and wrong tokens are counted per client
address (`throttle.py`): too many in a minute and that address gets 429 for a minute.
A plain ASGI middleware, like `guard.py`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from kbsql.server.guard import App, Receive, Scope, Send, send_problem
from kbsql.server.lanes import OWNER, owner_of
from kbsql.server.throttle import FailureThrottle, client_key

log = logging.getLogger("kbsql.server")

OPEN_PATHS = frozenset({"/api/status"})
LOGIN_PATH = "/api/login"
LOGOUT_PATH = "/api/logout"
SESSION_COOKIE = "session"  # MindsDB's (Flask's SESSION_COOKIE_NAME)
SESSION_TTL_S = 24 * 3600
MAX_SESSIONS = 10_000
FAILED_LOGIN_DELAY_S = 0.5  # slows password guessing without blocking other requests
MAX_LOGIN_BODY = 64 * 1024
NEEDS_TOKEN = ("This server needs a token: send 'Authorization: Bearer <token>' "
               "(kbsql.connect(url, token=...) or $KBSQL_TOKEN)")
LOGIN_TOO = ("; or log in: POST /api/login with {\"username\", \"password\"} and send the token it "
             "answers (mindsdb_sdk.connect(url, login=..., password=...) does)")
NEEDS_LOGIN = ("This server needs a login: POST /api/login with {\"username\", \"password\"} and send "
               "the token it answers as 'Authorization: Bearer <token>' (mindsdb_sdk.connect(url, "
               "login=..., password=...) does)")
WRONG_TOKEN = "Wrong token"  # says no more: not which part, not how near


@dataclass(frozen=True)
class AuthSettings:
    """What the server accepts. No token and no user: authentication is off (loopback only).
    The secrets stay out of the repr (Starlette's `Middleware` repr shows its arguments)."""

    token: str | None = field(default=None, repr=False)
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def enabled(self) -> bool:
        return bool(self.token) or self.login_enabled

    @property
    def login_enabled(self) -> bool:
        return bool(self.user) and bool(self.password)


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


class Sessions:
    """Tokens handed out by `/api/login`, each valid for SESSION_TTL_S; the oldest go first
    past MAX_SESSIONS so repeated logins cannot grow memory without bound."""

    def __init__(self) -> None:
        self._tokens: OrderedDict[str, float] = OrderedDict()

    def issue(self) -> str:
        token = secrets.token_urlsafe(32)
        self._tokens[token] = time.monotonic() + SESSION_TTL_S
        while len(self._tokens) > MAX_SESSIONS:
            self._tokens.popitem(last=False)
        return token

    def valid(self, token: str) -> bool:
        expiry = self._tokens.get(token)
        if expiry is None:
            return False
        if expiry < time.monotonic():
            self._tokens.pop(token, None)
            return False
        return True

    def end(self, token: str) -> None:
        self._tokens.pop(token, None)


class TokenAuth:
    """ASGI middleware: 401 problem+json for an /api request without a valid bearer token,
    and the `/api/login` route; 429 for an address with too many failed credentials."""

    def __init__(self, app: App, *, settings: AuthSettings,
                 throttle: FailureThrottle | None = None):
        self.app = app
        self.settings = settings
        self.sessions = Sessions()
        self.throttle = throttle if throttle is not None else FailureThrottle()  # an empty one is falsy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.settings.enabled:
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == LOGIN_PATH:
            await self.login(scope, receive, send)
            return
        if path == LOGOUT_PATH:
            await self.logout(scope, send)
            return
        if path.startswith("/api/") and path not in OPEN_PATHS:
            # no credentials at all is a client that has not logged in: never counted
            credentialed = self.presents_credentials(scope)
            client = client_key(scope.get("client"))
            if credentialed and await self.refused_as_locked(client, send):
                return
            secret = self.authorized(scope)
            if secret is None:
                if credentialed:
                    self.throttle.failed(client)
                # and closed: a connection kept open past a refusal would count toward no
                # one's share of --max-http-connections (connection_shares.py)
                await send_problem(send, 401, "Unauthorized",
                                   WRONG_TOKEN if self.presents_token(scope) else self.needs(),
                                   [(b"www-authenticate", b'Bearer realm="kbsql"'),
                                    (b"connection", b"close")])
                return
            scope[OWNER] = owner_of(secret.encode("utf-8"))
        await self.app(scope, receive, send)

    def needs(self) -> str:
        """What a request without credentials is told: the ways in this server has (a client
        of a login-only server was told to send a token it was never given)."""
        if not self.settings.token:
            return NEEDS_LOGIN
        return NEEDS_TOKEN + (LOGIN_TOO if self.settings.login_enabled else "")

    def presents_credentials(self, scope: Scope) -> bool:
        """An `Authorization` header, or an `X-Api-Key` on a server that has a token (on a
        login-only server that header is not looked at, so it cannot be guessed)."""
        for name, _ in scope.get("headers") or []:
            name = name.lower()
            if name == b"authorization" or (name == b"x-api-key" and self.settings.token):
                return True
        return False

    def presents_token(self, scope: Scope) -> bool:
        """A token was sent (`Authorization: Bearer <something>`, or `X-Api-Key` on a server
        with a token): refused, it was the wrong one, which the answer says; anything else
        (no header, another scheme, an empty bearer) is told how to send one."""
        for name, value in scope.get("headers") or []:
            name = name.lower()
            if name == b"x-api-key" and self.settings.token:
                return True
            if name == b"authorization":
                scheme, _, credential = value.decode("latin-1").strip().partition(" ")
                if scheme.lower() == "bearer" and credential.strip():
                    return True
        return False

    async def refused_as_locked(self, client: str, send: Send) -> bool:
        """Answer 429 with Retry-After when `client` is locked (see throttle.py), before any
        password or token is looked at: even a right one, which must not be learnable."""
        wait = self.throttle.retry_after(client)
        if wait is None:
            return False
        await send_problem(send, 429, "Too Many Requests",
                           f"Too many failed logins or wrong tokens from this address: try again "
                           f"in {wait} s",
                           [(b"retry-after", str(wait).encode("ascii")), (b"connection", b"close")])
        return True

    def authorized(self, scope: Scope) -> str | None:
        """The secret of whoever the request is (None: refused): the server token (bearer or
        `X-Api-Key`), or the login's password for a session token as bearer or the `session`
        cookie `/api/login` set. Its digest is the lanes' fair-share owner (`lanes.OWNER`):
        every session of the login user is one owner, as its MySQL logins are (the door's
        owner is the password too), and a header the check did not read names nobody. The
        owner was the first Authorization / X-Api-Key header's digest, so a cookie session
        had no share at all and a valid cookie beside a made-up bearer value was a new owner
        per request. A stale cookie (after a restart, a logout) is a plain 401 and is not
        counted as a failure: browsers resend it on every call, and a session token (256
        random bits) cannot be guessed anyway."""
        login = self.settings.password or ""
        cookie = _session_cookie(scope)
        if cookie is not None and self.sessions.valid(cookie):
            return login
        for name, value in scope.get("headers") or []:
            if name.lower() == b"x-api-key" and self.settings.token:  # mindsdb_sdk's api_key=
                return self.settings.token if _same(value.decode("latin-1").strip(), self.settings.token) \
                    else None
            if name.lower() == b"authorization":
                scheme, _, credential = value.decode("latin-1").strip().partition(" ")
                credential = credential.strip()
                if scheme.lower() != "bearer" or not credential:
                    return None
                if self.settings.token and _same(credential, self.settings.token):
                    return self.settings.token
                return login if self.sessions.valid(credential) else None
        return None

    async def login(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`POST /api/login` `{"username", "password"}` -> `{"token": ...}`."""
        if scope.get("method") != "POST":
            await send_problem(send, 405, "Method not allowed", f"{scope.get('method')} {LOGIN_PATH}")
            return
        if not self.settings.login_enabled:
            await send_problem(send, 404, "Not found",
                               "Login is not enabled on this server: use its token, or start it "
                               "with --user and --password")
            return
        body = await _read_small(receive, MAX_LOGIN_BODY)
        # checked after the body's await and counted below before the delay's, with no await
        # between: parallel guesses cannot all pass the check before any of them is counted
        client = client_key(scope.get("client"))
        if await self.refused_as_locked(client, send):
            return
        try:
            credentials = json.loads(body) if body is not None else None
        except (ValueError, UnicodeDecodeError):
            credentials = None
        if not isinstance(credentials, dict):
            await send_problem(send, 400, "Invalid JSON",
                               "The login body must be a JSON object {username, password}")
            return
        user = credentials.get("username", credentials.get("email"))
        password = credentials.get("password")
        if isinstance(user, str) and isinstance(password, str) and \
                _same(user, self.settings.user or "") & _same(password, self.settings.password or ""):
            token = self.sessions.issue()
            payload = json.dumps({"token": token}).encode("utf-8")
            await _send_json(send, payload, _cookie_header(scope, token, SESSION_TTL_S))
            return
        log.warning("failed login for user %r", user if isinstance(user, str) else None)
        self.throttle.failed(client)
        await asyncio.sleep(FAILED_LOGIN_DELAY_S)
        await send_problem(send, 401, "Unauthorized", "Wrong username or password",
                           [(b"connection", b"close")])  # not kept uncounted (connection_shares)

    async def logout(self, scope: Scope, send: Send) -> None:
        """`POST /api/logout`, MindsDB's: the session presented (cookie or bearer) ends and
        the cookie is cleared; the server's own token is not a session and stays valid."""
        if scope.get("method") != "POST":
            await send_problem(send, 405, "Method not allowed", f"{scope.get('method')} {LOGOUT_PATH}")
            return
        presented = [_session_cookie(scope), _bearer(scope)]
        for token in presented:
            if token:
                self.sessions.end(token)
        await _send_json(send, b'""', _cookie_header(scope, "", 0))


def _header_values(scope: Scope, wanted: bytes) -> list[str]:
    return [value.decode("latin-1") for name, value in scope.get("headers") or [] if name.lower() == wanted]


def _session_cookie(scope: Scope) -> str | None:
    """The value of the request's `session` cookie, if it sent one."""
    for header in _header_values(scope, b"cookie"):
        for pair in header.split(";"):
            key, sep, value = pair.strip().partition("=")
            if sep and key == SESSION_COOKIE and value.strip():
                return value.strip().strip('"')
    return None


def _bearer(scope: Scope) -> str | None:
    for header in _header_values(scope, b"authorization"):
        scheme, _, credential = header.strip().partition(" ")
        if scheme.lower() == "bearer" and credential.strip():
            return credential.strip()
    return None


def _cookie_header(scope: Scope, token: str, max_age: int) -> tuple[bytes, bytes]:
    """MindsDB's `session` cookie: HttpOnly (page scripts cannot read it), SameSite=Lax
    (another site's form cannot post with it), Secure when the request came over TLS
    (directly, or through a trusted proxy's X-Forwarded-Proto)."""
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    value = f"{SESSION_COOKIE}={token}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"
    return (b"set-cookie", value.encode("latin-1"))


async def _send_json(send: Send, payload: bytes, *extra: tuple[bytes, bytes]) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode("ascii")), *extra]})
    await send({"type": "http.response.body", "body": payload})


async def _read_small(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` bytes (a login body is tiny)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)

