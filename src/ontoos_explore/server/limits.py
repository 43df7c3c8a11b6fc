"""Server, limits on the HTTP surface beyond a principal's rate limit (config.RateLimiter):

- `AuthFloods`: requests without a valid token, per client address. Past the
  server's `auth_failures` limit they are answered 429 (EX412, reason
  AUTH_FLOOD) without an audit event each; each episode becomes one AUTH_FLOOD
  gap in the audit (how many, from where, first and last). With shared limits
  the address's bucket is the deployment's (each process writes its gaps).
- `SessionCaps`: MCP sessions per principal (`mcp_sessions`, default 64), so
  one token cannot hold the SDK's 10,000 for everyone; one more initialize is
  answered 429 (EX412, reason MCP_SESSIONS) until one ends. It also knows
  whose each session is (`owner`), so a session answers only the principal
  that opened it.

`app.build_app` wires both; they keep no state beyond their tables, bounded
by the limiter's 10,000 addresses, 1,000 open episodes, and the configured
principals.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from .. import errors
from ..errors import too_many_sessions  # noqa: F401 (defined there, with every other refusal)
from .config import RateLimit, RateLimiter
from .shared_limits import Unavailable

log = logging.getLogger("ontoos_explore.http")


class AuthFloods:
    """Requests without a valid token, limited per client address (`Authenticator.failure_limit`).
    Past the limit they are answered 429 and counted per episode instead of recorded one by
    one; an episode becomes one `on_gap(n, first, last, address)` (the audit's AUTH_FLOOD gap)
    when the address is next let through, when more than `max_open` are open, or at shutdown.

    `clock` (seconds, monotonic) refills the buckets and `now` (an aware datetime) stamps an
    episode's first and last request; both are the real clocks unless a test gives its own."""

    def __init__(self, limit: RateLimit, on_gap, max_open: int = 1000, *,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)) -> None:
        self.limit = limit
        self.limiter = RateLimiter(clock=clock, max_keys=10_000)
        self.now = now
        self.on_gap = on_gap
        self.max_open = max_open
        self._open: dict[str, list] = {}  # address -> [first, last, count]
        self.shared = None  # a shared_limits.SharedLimits: the deployment's buckets

    async def take(self, address: str) -> float:
        """`admit`, from the deployment's bucket of the address when the limits are shared (`shared`, set by
        the server: `shared_limits.py`), else this process's own."""
        if self.shared is not None:
            try:
                return self._counted(address, await self.shared.take(f"address:{address}", self.limit.burst,
                                                                      self.limit.per_second))
            except Unavailable:
                pass
        return self.admit(address)

    def admit(self, address: str) -> float:
        """One request without a valid token: 0.0 to answer (and record) it as usual, else the
        seconds until the address may be answered so again."""
        return self._counted(address, self.limiter.take_key(address, self.limit))

    def _counted(self, address: str, wait: float) -> float:
        """The episode of an address's refusals (this process's: each process writes its own gaps)."""
        if wait <= 0:
            self._seal(address)
            return 0.0
        now = self.now()
        episode = self._open.get(address)
        if episode is None:
            if len(self._open) >= self.max_open:
                self._seal(next(iter(self._open)))
            episode = self._open[address] = [now, now, 0]
            log.warning("requests without a valid token from %s are over %s: answered 429 and counted",
                        address, self.limit.describe())
        episode[1] = now
        episode[2] += 1
        return wait

    def _seal(self, address: str) -> None:
        episode = self._open.pop(address, None)
        if episode is not None:
            self.on_gap(episode[2], episode[0], episode[1], address)

    def seal_all(self) -> None:
        for address in list(self._open):
            self._seal(address)


class SessionCaps:
    """MCP sessions per principal: at most `cap` open at once, so one token cannot take the SDK's
    10,000 sessions from everyone else. A session counts from the response that gave its id until
    the SDK no longer holds it (`alive`: deleted by the client, idle past its timeout, or gone).

    Each session's principal is kept from that same response (`opened`), before its id reaches
    the client: `owner(id)` names it while the SDK holds the session, None otherwise (unknown,
    ended, or never opened here). The table holds no more ids than the sessions `full` counts."""

    def __init__(self, cap: int, alive) -> None:
        self.cap = cap
        self.alive = alive
        self._open: dict[str, set[str]] = {}  # principal name -> session ids
        self._owner: dict[str, str] = {}  # session id -> principal name

    def full(self, principal: str) -> int:
        """How many sessions `principal` holds when that is the cap already, else 0."""
        ids = self._open.get(principal)
        if not ids:
            return 0
        ended = [sid for sid in ids if not self.alive(sid)]
        ids.difference_update(ended)
        for sid in ended:
            self._owner.pop(sid, None)
        return len(ids) if len(ids) >= self.cap else 0

    def opened(self, principal: str, session_id: str) -> None:
        self._open.setdefault(principal, set()).add(session_id)
        self._owner[session_id] = principal

    def owner(self, session_id: str) -> str | None:
        """The principal that opened `session_id`, while the SDK holds it; else None (and forgotten)."""
        name = self._owner.get(session_id)
        if name is not None and not self.alive(session_id):
            del self._owner[session_id]
            self._open.get(name, set()).discard(session_id)
            return None
        return name


def flooded(wait_s: float) -> dict[str, Any]:
    """The envelope of the FLOODED refusal (`errors.flooded`, where it is defined), for callers that want
    the envelope itself."""
    return errors.flooded(wait_s).to_envelope()
