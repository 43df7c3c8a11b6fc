"""Server, workers: `ontoos serve --http HOST:PORT --workers N`, N processes answering on one socket.

The supervisor (the process the command started) binds the socket, starts
the embedded PostgreSQL if there is no DSN, then forks N workers. Each is a
whole server (`connections.serve`: its own event loop, pools, audit writer
and drain) accepting from the one listening socket, so the kernel spreads
the connections over them. The supervisor serves nothing itself:

- SIGTERM or SIGINT is passed to every worker (each drains, as one server
  does; `lifecycle.py`), and it waits for them all; then it exits 0, and an
  embedded PostgreSQL it started is stopped (it is the one process on
  pgserver's list: workers end with `os._exit`, which runs no `atexit`).
- A worker that dies while nothing is stopping is replaced at once; one
  that dies more than `MAX_RESTARTS` times within `RESTART_WINDOW_S` ends
  the whole server (exit 1), since something is wrong that restarting will
  not mend (the database, the configuration).

Workers are in a process group of their own, so a terminal's Ctrl-C reaches
them only through the supervisor, once. What all processes must agree on is
shared through the database or the files (the registry file; the secret for
cursors), never through memory: with more than one worker, MCP over HTTP is
stateless (no sessions to lose between processes).
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable

from .logs import say

log = logging.getLogger("ontoos_explore.server")

HANDLED = (signal.SIGTERM, signal.SIGINT)
MAX_RESTARTS = 5
RESTART_WINDOW_S = 30.0


def supervise(n: int, work: Callable[[int], int], lines: list[str] | None = None,
              on_exit: Callable[[int], None] | None = None) -> int:
    """Fork `n` workers, each running `work(index)` (its exit status), and keep them running until a
    signal stops them (see the module); `on_exit(pid)` after each worker ends. The supervisor's exit status."""
    if threading.active_count() > 1:  # a fork copies only the forking thread: the others' locks stay held
        log.warning("forking workers with %d threads running", threading.active_count())
    children: dict[int, int] = {}  # pid -> worker index
    stopping: list[int] = []  # the signals received
    failed = False

    def on_signal(sig: int, frame) -> None:
        stopping.append(sig)
        for pid in list(children):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def spawn(index: int) -> None:
        # a signal between the fork and the child's table entry would miss the child (the supervisor) or
        # run the supervisor's handler in it (the child): both held until each side is ready
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.setpgid(0, 0)
                for sig in HANDLED:
                    signal.signal(sig, signal.SIG_DFL)  # until its server installs its own
                signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)
                code = work(index)
            except BaseException:  # noqa: BLE001 - a worker must end here, whatever happened
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children[pid] = index
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    restarts: collections.deque[float] = collections.deque()
    try:
        for index in range(n):
            spawn(index)
        say(f"{n} workers (pids {', '.join(map(str, children))})")
        for line in lines or ():
            say(line.removeprefix("ontoos: "))
        while children:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            index = children.pop(pid, None)
            if index is not None and on_exit is not None:
                on_exit(pid)
            if index is None or stopping:
                continue
            now = time.monotonic()
            restarts.append(now)
            while restarts and now - restarts[0] > RESTART_WINDOW_S:
                restarts.popleft()
            code = os.waitstatus_to_exitcode(status)
            if len(restarts) > MAX_RESTARTS:
                say(f"worker {pid} exited with {code}, the {len(restarts)}th in {RESTART_WINDOW_S:g} s: "
                    "stopping the server", "ERROR")
                failed = True
                on_signal(signal.SIGTERM, None)
                continue
            say(f"worker {pid} exited with {code}; starting another", "WARNING")
            spawn(index)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 1 if failed else 0
