"""Server, a dashboard sign-out every process of a deployment honours.

A signed session (`sessions.py`) is served by any process with the
deployment's secret; signing out ends it in the process that answered. With
the shared state on (`ONTOOS_SHARED_LIMITS`), that process also writes the
session's key (the SHA-256 of its id, never the id) and its expiry to
`ontoos_state.ended_sessions`, on the state connection of the shared limits,
and every process reads the keys ended since it last looked, once a second
(`SignOuts.follow`), and ends them in its own table too: a cookie signed out
anywhere is refused everywhere within about a second. Rows go once their
session would have expired anyway.

While the state database cannot be asked the sign-out is this process's
only, as without shared state (logged); the ones written meanwhile are read
when it answers again.
"""

from __future__ import annotations

import asyncio
import logging
import time

from .sessions import Sessions
from .shared_limits import SharedLimits, Unavailable

log = logging.getLogger("ontoos_explore.sessions")

END = ("INSERT INTO ontoos_state.ended_sessions (key, until) VALUES ($1, to_timestamp($2)) "
       "ON CONFLICT (key) DO NOTHING RETURNING true")
# `at` is the time of the insert, not of its commit: read again a margin back, so a row committed just after a
# later one was read is not missed (ending a session twice is ending it once)
ENDED_SINCE = ("SELECT key, extract(epoch FROM until)::float8, extract(epoch FROM at)::float8 "
               "FROM ontoos_state.ended_sessions WHERE at > to_timestamp($1) - interval '5 seconds'")
SWEEP = "WITH gone AS (DELETE FROM ontoos_state.ended_sessions WHERE until < now() RETURNING 1) SELECT count(*) FROM gone"
FOLLOW_S = 1.0
SWEEP_S = 600.0


class SignOuts:
    def __init__(self, shared: SharedLimits, sessions: Sessions) -> None:
        self.shared = shared
        self.sessions = sessions
        self._since = time.time()
        self._swept = 0.0
        self._writing: set[asyncio.Task] = set()
        sessions.on_end = self.ended

    def ended(self, key: bytes, until: float) -> None:
        """A session ended here: written for the others, without holding up the sign-out's answer."""
        task = asyncio.ensure_future(self._write(key, until))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    async def _write(self, key: bytes, until: float) -> None:
        try:
            await self.shared.ask(END, [key, until])
        except Unavailable:
            log.warning("a dashboard sign-out could not be shared (the state database is away): it holds in this "
                        "process only")

    async def poll(self) -> int:
        """The sessions ended elsewhere since the last look, ended here: how many were new here."""
        try:
            rows = await self.shared.ask(ENDED_SINCE, [self._since])
            if time.monotonic() - self._swept > SWEEP_S:
                self._swept = time.monotonic()
                await self.shared.ask(SWEEP, [])
        except Unavailable:
            return 0
        if rows:
            self._since = max(self._since, max(at for _, _, at in rows))
        return self.sessions.forget([(bytes(key), until) for key, until, _ in rows])

    async def follow(self) -> None:
        """`poll` once a second until cancelled (the server's lifespan runs it)."""
        while True:
            await self.poll()
            await asyncio.sleep(FOLLOW_S)

    async def settled(self) -> None:
        while self._writing:
            await asyncio.gather(*self._writing, return_exceptions=True)
