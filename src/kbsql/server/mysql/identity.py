"""Who may use the MySQL door: the HTTP server's settings, and its lockout.

- Authentication off (a loopback server without --token, --user or --password): any user
  name, any password or none, as HTTP needs no token there.
- `--user/--password`: MySQL's `mysql_native_password` with that user and password.
- `--token`: the token is the password, with any user name (both may be set).

The password never crosses the wire: the client answers a fresh 20-byte challenge with a
scramble of it (`mysql_native_password`), checked here against each password the settings
allow. A wrong password gets MySQL's access-denied error (1045) after the same delay as a
failed HTTP login, and counts toward the same per-address lockout (`throttle.py`, one
`FailureThrottle` shared with the HTTP server): while an address is locked every login from
it is refused before its password is looked at. A login without a password is refused but
not counted, as an HTTP request without credentials is not; an unknown user name is refused
like a wrong password (the answer never tells which was wrong). On a server with a token and
no login, the refusal ends ": wrong token" (or, without a password, says the token is the
password), as HTTP tells a wrong token from a missing one.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
from collections.abc import Callable, Sequence
from hashlib import sha1
from typing import Any

from mysql_mimic.auth import (
    AuthInfo,
    AuthPlugin,
    AuthState,
    Forbidden,
    IdentityProvider,
    NativePasswordAuthPlugin,
    Success,
    User,
)

from kbsql.server.auth import FAILED_LOGIN_DELAY_S, AuthSettings
from kbsql.server.lanes import owner_of
from kbsql.server.throttle import FailureThrottle

log = logging.getLogger("kbsql.server")

NATIVE = NativePasswordAuthPlugin.name
NONCE_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"  # mysql_mimic's


def fresh_nonce(size: int = 20) -> bytes:
    """A login challenge of `size` letters and digits from the OS's random source.

    Why not mysql_mimic's `utils.nonce`: it builds a `SystemRandom` per character, ~0.2 ms
    of the shared event loop per connection, a third of what a connection that never logs
    in costs (a flood of them stalled HTTP). Bytes >= 248 are dropped, so each of the 62
    characters is equally likely (248 = 4 x 62)."""
    out = bytearray()
    while len(out) < size:
        out.extend(NONCE_CHARS[b % 62] for b in os.urandom(2 * size) if b < 248)
    return bytes(out[:size])


def scramble_matches(password: str, scramble: bytes, nonce: bytes) -> bool:
    """Whether `scramble` is SHA1(password) XOR SHA1(nonce + SHA1(SHA1(password)))."""
    if len(scramble) != 20:
        return False
    stage1 = sha1(password.encode("utf-8")).digest()
    expected = bytes(a ^ b for a, b in zip(stage1, sha1(nonce + sha1(stage1).digest()).digest(),
                                            strict=True))
    return hmac.compare_digest(expected, scramble)


class DoorPassword(NativePasswordAuthPlugin):
    """`mysql_native_password` against the server's settings, for one client address."""

    def __init__(self, settings: AuthSettings, throttle: FailureThrottle, client: str, host: str,
                 admit: Callable[[str | None], str | None] | None = None):
        self.settings = settings
        self.throttle = throttle
        self.client = client
        self.host = host
        self.admit = admit
        """Takes a logged-in connection's place for an owner, or answers why there is none
        (the door's `--mysql-max-connections`); asked once the password matched."""
        self.release: Callable[[str | None], None] | None = None
        """Gives an owner's place back: a COM_CHANGE_USER to another credential moves it."""
        self.moved: Callable[[str | None], None] | None = None
        """Told the new owner after a COM_CHANGE_USER (the connection's statements follow it)."""
        self.admitted = False
        self.owner: str | None = None
        """Whose statements these are, for the lanes' fair share (`lanes.owner_of`): the
        credential the login matched, so a token is one owner on both doors; None when the
        server has no authentication."""

    def passwords(self, username: str) -> list[str]:
        allowed = []
        user = (self.settings.user or "").encode()
        if self.settings.login_enabled and hmac.compare_digest(username.encode(), user):
            allowed.append(self.settings.password or "")
        if self.settings.token:
            allowed.append(self.settings.token)
        return allowed

    async def auth(self, auth_info: AuthInfo | None = None) -> AuthState:  # type: ignore[override]
        if auth_info and auth_info.handshake_plugin_name == self.name and auth_info.handshake_auth_data:
            nonce = auth_info.handshake_auth_data.rstrip(b"\x00")  # reused from the handshake
        else:
            nonce = fresh_nonce()
            auth_info = yield nonce + b"\x00"
        assert auth_info is not None
        username, scramble = auth_info.username, auth_info.data
        if not self.settings.enabled:
            yield self._success(username)
            return
        # checked and counted with no await in between: parallel guesses cannot all pass
        wait = self.throttle.retry_after(self.client)
        if wait is not None:
            yield Forbidden(f"Too many failed logins or wrong tokens from this address: try again "
                            f"in {wait} s")
            return
        matched = [p for p in self.passwords(username) if scramble_matches(p, scramble, nonce)]
        if matched:
            yield self._success(username, owner_of(matched[0].encode("utf-8")))
            return
        if scramble:
            self.throttle.failed(self.client)
            log.warning("failed MySQL login for user %r from %s", username, self.client)
            await asyncio.sleep(FAILED_LOGIN_DELAY_S)
        yield Forbidden(f"Access denied for user '{username}'@'{self.host}' "
                        f"(using password: {'YES' if scramble else 'NO'}){self.what_was_wrong(scramble)}")

    def _success(self, username: str, owner: str | None = None) -> Success | Forbidden:
        """The login, if the door has room for another connection of its owner.

        A COM_CHANGE_USER logs in again on the same connection: it keeps its one place (the
        same credential) or moves it to the new owner. Each took a new place and none was given
        back, so a client re-authenticating its connections (as connection pools do when they
        hand one out again) used up its credential's share for good: after 127 on one
        connection, closed, the token had one MySQL login left, until a restart."""
        if self.admitted and owner == self.owner:
            return Success(username)
        refusal = self.admit(owner) if self.admit is not None else None
        if refusal is not None:
            log.warning("MySQL login of %r from %s refused: %s", username, self.client, refusal)
            return Forbidden(refusal)
        if self.admitted and self.release is not None:
            self.release(self.owner)
        self.owner, self.admitted = owner, True
        if self.moved is not None:
            self.moved(owner)
        return Success(username)

    def what_was_wrong(self, scramble: bytes) -> str:
        """On a server whose only credential is its token, a refused password can only be a
        wrong token (said, and no more); one without a password is told the token is the
        password. With a login too, MySQL's words stand: which of the two was meant is not
        known, and the answer must not tell a user name that exists."""
        if not self.settings.token or self.settings.login_enabled:
            return ""
        return ": wrong token" if scramble else ": this server's token is the password"


class DoorIdentity(IdentityProvider):
    """The identity provider of one connection: every user name exists (so none can be
    probed); `DoorPassword` decides."""

    def __init__(self, plugin: DoorPassword):
        self.plugin = plugin

    def get_plugins(self) -> Sequence[AuthPlugin]:
        return [self.plugin]

    async def get_user(self, username: str) -> Any:
        return User(name=username, auth_plugin=NATIVE)
