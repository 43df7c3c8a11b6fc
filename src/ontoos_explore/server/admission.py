"""Server, admission: whether a principal's call may go ahead now (its rate limit, its calls in flight).

`Admission.admit(principal, querying)` takes one call from the principal's
rate limit and, for a call that queries, one of its `max_in_flight` slots:
a `Ticket`, which says the seconds to wait (0: go ahead) and whether a slot
is free. `running(ticket)` holds the slot while the call runs
(`too_many_in_flight` when none was free) and gives it back after; `done`
gives back one a call never used (it failed before it ran).

Both are this process's own (`config.RateLimiter`, a count per principal),
unless `shared` is given (`shared_limits.py`): then they hold across every
process of the deployment, the token and the slot taken in one round trip,
the slot given back without holding up the answer (so a caller at its most
is asked once more, `AGAIN_S` later, before it is refused); while the state
database cannot be asked, the process's own limits apply.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..errors import too_many_in_flight
from .config import Principal, RateLimiter
from .shared_limits import SharedLimits, Unavailable

AGAIN_S = 0.005  # a caller at its most in flight is asked once more after this long (shared limits only)


@dataclass(slots=True)
class Ticket:
    principal: Principal
    wait_s: float = 0.0  # > 0: refused by the rate limit, for this long
    shared: bool = False  # the slot below is the deployment's (else this process counts)
    slot: tuple[int, int] | None = None  # the shared slot taken with the token
    querying: bool = False  # admitted as a call that queries (a slot asked for)
    used: bool = False
    remaining: float | None = None  # the principal's bucket after this call (None: not rate limited, or unknown)


class Admission:
    def __init__(self, limiter: RateLimiter | None = None, shared: SharedLimits | None = None) -> None:
        self.limiter = limiter if limiter is not None else RateLimiter()
        self.shared = shared
        self.in_flight: dict[str, int] = {}  # principal name -> its calls running here (one event loop: no lock)
        self._releasing: set[asyncio.Task] = set()

    async def admit(self, principal: Principal, querying: bool = False, rate: bool = True) -> Ticket:
        """The principal's rate limit (unless `rate` is False: taken already) and, when `querying`, a slot."""
        limit = principal.rate if rate else None
        if self.shared is not None and (limit is not None or querying):
            try:
                if limit is None:
                    slot = await self.shared.acquire(principal.name, principal.max_in_flight)
                    return Ticket(principal, 0.0, True, slot if slot is not None else await self._again(principal),
                                  True)
                key = f"principal:{principal.name}"
                if not querying:
                    wait, tokens = await self.shared.take_counted(key, limit.burst, limit.per_second)
                    return Ticket(principal, wait, True, remaining=tokens)
                wait, slot, tokens = await self.shared.take_and_acquire(key, limit.burst, limit.per_second,
                                                                        principal.name, principal.max_in_flight)
                if wait <= 0 and slot is None:
                    slot = await self._again(principal)
                return Ticket(principal, wait, True, slot, True, remaining=tokens)
            except Unavailable:
                pass
        if limit is None:
            return Ticket(principal, querying=querying)
        wait = self.limiter.take(principal)
        return Ticket(principal, wait, querying=querying, remaining=self.limiter.tokens(principal.name))

    async def _again(self, principal: Principal) -> tuple[int, int] | None:
        """Every slot held: once more after a beat, since the slot of a call that has just answered goes
        back after its answer (in another process, maybe a little after this caller's next call arrives)."""
        await asyncio.sleep(AGAIN_S)
        return await self.shared.acquire(principal.name, principal.max_in_flight)

    async def take(self, principal: Principal) -> float:
        """One call from the principal's rate limit: 0.0 to go ahead, else the seconds to wait."""
        return (await self.admit(principal)).wait_s

    @contextlib.asynccontextmanager
    async def running(self, ticket: Ticket) -> AsyncIterator[None]:
        """The ticket's slot while the block runs; ExploreError when it has none free."""
        principal = ticket.principal
        cap = principal.max_in_flight
        here = self.in_flight.get(principal.name, 0)
        ticket.used = True
        if (ticket.shared and ticket.slot is None) or (not ticket.shared and here >= cap):
            raise too_many_in_flight(principal.name, cap)  # at once: no wait for a connection the pool may not have
        self.in_flight[principal.name] = here + 1
        try:
            yield
        finally:
            left = self.in_flight[principal.name] - 1
            if left:
                self.in_flight[principal.name] = left
            else:
                del self.in_flight[principal.name]
            self._give_back(ticket)

    def done(self, ticket: Ticket | None) -> None:
        """The call of `ticket` has ended: a slot it took and never used goes back."""
        if ticket is not None and not ticket.used:
            ticket.used = True
            self._give_back(ticket)

    async def settled(self) -> None:
        """Until every slot given back has reached the database (a shutdown, a benchmark)."""
        while self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)

    def _give_back(self, ticket: Ticket) -> None:
        if ticket.slot is None or self.shared is None:
            return
        slot, ticket.slot = ticket.slot, None
        task = asyncio.ensure_future(self.shared.release(ticket.principal.name, slot))  # not holding up the answer
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)
