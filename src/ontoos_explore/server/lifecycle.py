"""Server, lifecycle: the listening socket, the lines said at start, and a shutdown that loses nothing.

- `listen(host, port)`: the socket, bound before anything else starts; an
  address in use (or not this machine's) is `ListenError`, which the CLI says
  in one line and exits 1 (uvicorn would print its own message and exit 3).
- `Drain` and `Draining` (ASGI middleware, outermost): on the first SIGTERM or
  SIGINT the process drains. `/readyz` answers 503 (`draining: true`) so a
  balancer stops sending; every new request but `/healthz` is answered 503
  SHUTTING_DOWN with `Retry-After: 1` and `Connection: close` (recorded in the
  audit like any refusal); the requests in flight finish. A stream (an MCP
  GET) is not waited for: it ends with the server.
- `GracefulServer` (uvicorn's Server): stops once nothing is in flight or the
  drain timeout (`ONTOOS_DRAIN_TIMEOUT`, 30 s) has passed, then shuts down as
  uvicorn does (listeners closed, connections ended) and runs the app's
  lifespan exit (the audit queue flushed, the pools closed). A second signal
  stops waiting for the requests in flight (the lifespan exit still runs); a
  third stops at once. The signal is not raised again afterwards (uvicorn
  would, and the default SIGTERM action ends the process before `atexit`):
  the process exits 0, and an embedded PostgreSQL it started is stopped
  (`engine/embedded.py`).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

import uvicorn

from ..envelope import Answer
from ..errors import shutting_down
from .logs import say

log = logging.getLogger("ontoos_explore.server")

OPEN_WHILE_DRAINING = ("/healthz", "/readyz")  # alive, and saying it is not ready


class ListenError(OSError):
    """The server cannot listen on the address it was given."""


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on host:port (IPv4 or IPv6, as the host resolves), inheritable by workers."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        raise ListenError(f"cannot listen on {host}:{port}: '{host}' is not an address of this machine") from None
    try:
        sock = socket.create_server((host, port), family=family, backlog=backlog)
    except OSError as e:
        why = "the address is in use (another server?)" if e.errno == 98 else (e.strerror or str(e))
        raise ListenError(f"cannot listen on {host}:{port}: {why}") from None
    sock.set_inheritable(True)
    return sock


def start_lines(host: str, port: int, dashboard: bool = True) -> list[str]:
    """What the server says once it listens: one line per address it serves."""
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    lines = [f"ontoos: REST {base}/api/v1/explore (and /api/v1/catalog, /healthz, /readyz)",
             f"ontoos: MCP {base}/mcp (streamable HTTP)"]
    if dashboard:
        lines.append(f"ontoos: dashboard {base}/governance")
    return lines


class Drain:
    """One process's shutdown: whether it drains, since when, and how many requests are in flight."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self.since: float | None = None
        self.in_flight = 0

    @property
    def draining(self) -> bool:
        return self.since is not None

    def begin(self) -> None:
        if self.since is None:
            self.since = time.monotonic()
            say(f"draining (pid {os.getpid()}): {self.in_flight} requests in flight, new ones answered 503 "
                f"(at most {self.timeout_s:g} s)")

    def left_s(self) -> float:
        return 0.0 if self.since is None else max(0.0, self.timeout_s - (time.monotonic() - self.since))

    def done(self) -> bool:
        """Draining, and nothing is in flight any more (or the timeout has passed)."""
        return self.since is not None and (self.in_flight == 0 or self.left_s() == 0.0)


class Draining:
    """ASGI middleware: counts the requests in flight, and while draining answers new ones 503."""

    def __init__(self, app, drain: Drain, on_refusal=None) -> None:
        self.app = app
        self.drain = drain
        self.on_refusal = on_refusal  # (error, path) -> the Answer, recorded in the audit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if self.drain.draining and path not in OPEN_WHILE_DRAINING:
            from .rest import answer_response  # the one HTTP shape of an answer (Retry-After from its wait)

            e = shutting_down()
            answer = Answer.refusal(e) if self.on_refusal is None else self.on_refusal(e, path)
            return await answer_response(answer, {"Connection": "close"})(scope, receive, send)
        if path == "/mcp" and scope.get("method") == "GET":  # a stream: open until the client or the server ends it
            return await self.app(scope, receive, send)
        self.drain.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= 1


class GracefulServer(uvicorn.Server):
    """uvicorn's Server with the drain: see the module."""

    def __init__(self, config: uvicorn.Config, drain: Drain, lines: list[str] | None = None) -> None:
        super().__init__(config)
        self.drain = drain
        self.lines = lines or []
        self.signals = 0

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            for line in self.lines:
                say(line.removeprefix("ontoos: "))

    def handle_exit(self, sig: int, frame: Any) -> None:  # uvicorn's signal handler; never raised again
        self.signals += 1
        if self.signals == 1 and self.started:
            self.drain.begin()
        elif self.signals <= 2:
            self.should_exit = True  # the lifespan's exit still runs: the audit is flushed
        else:
            self.should_exit = self.force_exit = True

    async def on_tick(self, counter: int) -> bool:
        if self.drain.done():
            self.should_exit = True
        if self.should_exit:  # what is left of the drain, for the connections uvicorn then waits for
            self.config.timeout_graceful_shutdown = max(1, int(self.drain.left_s()) if self.drain.draining else 1)
        return await super().on_tick(counter)
