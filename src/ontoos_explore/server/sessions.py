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
"""

from __future__ import annotations

import hashlib
import hmac
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


def _key(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()


class Sessions:
    """The open sessions. `clock` (seconds, monotonic) is the real one unless a test gives its own."""

    def __init__(self, lifetime_s: float = DEFAULT_HOURS * 3600, *, per_principal: int = 16,
                 max_sessions: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.lifetime_s = lifetime_s
        self.per_principal = per_principal
        self.max_sessions = max_sessions
        self.clock = clock
        self._lock = threading.Lock()
        self._open: dict[bytes, Session] = {}  # sha256(id) -> session, oldest first

    def __len__(self) -> int:
        return len(self._open)

    def open(self, principal: Principal) -> Session:
        """A new session for `principal` (never an id the client chose)."""
        now = self.clock()
        session = Session(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32), now + self.lifetime_s)
        with self._lock:
            for key in [k for k, s in self._open.items() if s.expires <= now]:
                del self._open[key]
            own = [k for k, s in self._open.items() if s.principal.name == principal.name]
            for key in own[: max(0, len(own) - self.per_principal + 1)]:
                del self._open[key]
            while len(self._open) >= self.max_sessions:
                del self._open[next(iter(self._open))]
            self._open[_key(session.id)] = replace(session, id="")  # the table keeps no live cookie
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of this id, else None (an expired one is dropped)."""
        if not session_id or len(session_id) > 200:
            return None
        key = _key(session_id)
        with self._lock:
            session = self._open.get(key)
            if session is not None and session.expires <= self.clock():
                del self._open[key]
                return None
        return session

    def end(self, session_id: str | None) -> Session | None:
        """End a session (logout); the one ended, if it was open."""
        if not session_id:
            return None
        with self._lock:
            return self._open.pop(_key(session_id), None)

    def principal_for(self, session_id: str | None) -> Principal | None:
        session = self.get(session_id)
        return session.principal if session is not None else None
