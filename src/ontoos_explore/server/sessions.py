"""Server, the dashboard's sign-in sessions: a random id in a cookie -> a principal, held in memory.

`/governance/login` takes a token once and opens a `Session`: a random id
(`secrets.token_urlsafe(32)`, 256 bits) sent as the `ontoos_session` cookie
(HttpOnly, SameSite=Strict, Path=/governance, Secure over TLS), the principal
it signs in, its CSRF token (as random, sent in every form of the pages and
checked on every POST), and an expiry (`session_hours` of the server
configuration, 8 by default). The cookie is never the token: the token is not
kept anywhere, and the id alone is worth nothing after it expires, after
logout (`end`), or after a restart.

The table is keyed by the SHA-256 of the id (a lookup hashes what the cookie
says), so nothing in memory is a live cookie. It is bounded: at most
`per_principal` sessions each (the oldest ends when one more opens) and
`max_sessions` in all (the oldest of everyone's ends). Expired sessions are
dropped when looked up and swept when one opens.

`BearerAuth` (middleware.py) resolves the cookie through
`Governance.principal_for_session`, which asks this table: one place decides
who the caller is, for a bearer header and a session alike.

Given the deployment's secret (`ONTOOS_SECRET`, the same in every process),
a session is also one any process can serve: the id is then a signed token
(its random nonce, the principal's name, the CSRF token and the expiry, in
wall-clock seconds; HMAC-SHA256), and a process that did not open it takes it
into its table when the signature holds, the expiry has not passed, it has
not ended here, and the configuration still names the principal a reviewer.
Signing out ends it in the process that answered (and the browser drops the
cookie); with the shared state on, `on_end` tells the others
(`shared_sessions.py`), which `forget` it within about a second. Without it,
another process would take the same cookie until it expires, which is why it
is HttpOnly, SameSite=Strict and on /governance only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from .config import Principal

COOKIE = "ontoos_session"  # the dashboard's session cookie; read on /governance paths only
DEFAULT_HOURS = 8.0


@dataclass(frozen=True, slots=True)
class Session:
    id: str  # what the cookie holds: only in the object `open` hands back ("" in the table)
    principal: Principal
    csrf: str  # the token every form of this session carries
    expires: float  # on the table's clock

    def csrf_matches(self, presented: str | None) -> bool:
        return isinstance(presented, str) and hmac.compare_digest(self.csrf.encode(), presented.encode("utf-8", "replace"))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _key(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()


class Sessions:
    """The open sessions. `clock` (seconds, monotonic) is the real one unless a test gives its own."""

    def __init__(self, lifetime_s: float = DEFAULT_HOURS * 3600, *, per_principal: int = 16,
                 max_sessions: int = 10_000, clock: Callable[[], float] = time.monotonic,
                 secret: str | None = None, resolve: Callable[[str], Principal | None] | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self.lifetime_s = lifetime_s
        self.per_principal = per_principal
        self.max_sessions = max_sessions
        self.clock = clock
        self._lock = threading.Lock()
        self._open: dict[bytes, Session] = {}  # sha256(id) -> session, oldest first
        # with the deployment's secret: signed ids another process opened are taken (see the module)
        self._key = secret.encode() if secret else None
        self._resolve = resolve
        self._wall = wall
        self._ended: dict[bytes, float] = {}  # sha256(id) -> its wall-clock expiry: ended or dropped here
        # (key, wall-clock expiry) of a signed session signed out here: told to the other processes
        self.on_end: Callable[[bytes, float], None] | None = None

    def __len__(self) -> int:
        return len(self._open)

    def open(self, principal: Principal) -> Session:
        """A new session for `principal` (never an id the client chose)."""
        now = self.clock()
        csrf = secrets.token_urlsafe(32)
        ident = self._signed(principal.name, csrf) if self._key else secrets.token_urlsafe(32)
        session = Session(ident, principal, csrf, now + self.lifetime_s)
        with self._lock:
            self._admit(_key(session.id), session, now)
        return session

    def _admit(self, key: bytes, session: Session, now: float) -> None:
        """Into the table (the lock held), within its bounds: the oldest of the principal's, then of all, go."""
        for k in [k for k, s in self._open.items() if s.expires <= now]:
            del self._open[k]
        self._ended = {k: until for k, until in self._ended.items() if until > self._wall()}
        own = [k for k, s in self._open.items() if s.principal.name == session.principal.name]
        for k in own[: max(0, len(own) - self.per_principal + 1)]:
            self._drop(k)
        while len(self._open) >= self.max_sessions:
            self._drop(next(iter(self._open)))
        self._open[key] = replace(session, id="")  # the table keeps no live cookie

    def _drop(self, key: bytes) -> None:
        self._open.pop(key, None)
        if self._key is not None:  # a signed id dropped here is not taken again here
            self._ended[key] = self._wall() + self.lifetime_s

    def _signed(self, name: str, csrf: str) -> str:
        body = json.dumps({"n": secrets.token_urlsafe(16), "p": name, "c": csrf,
                           "e": round(self._wall() + self.lifetime_s, 3)}, separators=(",", ":")).encode()
        return f"{_b64(body)}.{_b64(hmac.new(self._key, body, hashlib.sha256).digest())}"

    def _taken(self, session_id: str, key: bytes) -> Session | None:
        """A signed session another process opened, if it holds (see the module); the lock held."""
        if self._key is None or self._resolve is None or key in self._ended or session_id.count(".") != 1:
            return None
        body_text, signature = session_id.split(".")
        try:
            body = _unb64(body_text)
            if not hmac.compare_digest(_b64(hmac.new(self._key, body, hashlib.sha256).digest()), signature):
                return None
            d = json.loads(body)
            name, csrf, expires = str(d["p"]), str(d["c"]), float(d["e"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        left = expires - self._wall()
        principal = self._resolve(name) if left > 0 else None
        if principal is None or not principal.reviewer:
            return None
        session = Session("", principal, csrf, self.clock() + min(left, self.lifetime_s))
        self._admit(key, session, self.clock())
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of this id, else None (an expired one is dropped)."""
        if not session_id or len(session_id) > 1000:
            return None
        if not session_id.isascii():
            return None
        key = _key(session_id)
        with self._lock:
            session = self._open.get(key)
            if session is None:
                return self._taken(session_id, key)
            if session.expires <= self.clock():
                self._drop(key)
                return None
        return session

    def end(self, session_id: str | None) -> Session | None:
        """End a session (logout); the one ended, if it was open."""
        if not session_id:
            return None
        key = _key(session_id)
        with self._lock:
            session = self._open.get(key)
            self._drop(key)
        if session is not None and self._key is not None and self.on_end is not None:
            self.on_end(key, self._wall() + max(0.0, session.expires - self.clock()))
        return session

    def forget(self, ended: list[tuple[bytes, float]]) -> int:
        """Sessions another process ended, (key, wall-clock expiry) each: ended here too, and not taken
        again. -> how many were open here."""
        with self._lock:
            found = 0
            for key, until in ended:
                found += self._open.pop(key, None) is not None
                self._ended[key] = until
            return found

    def principal_for(self, session_id: str | None) -> Principal | None:
        session = self.get(session_id)
        return session.principal if session is not None else None
