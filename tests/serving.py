"""Running a real `ontoos serve --http` for the tests (and the sqlmap scan) that need one.

    port = free_port()
    proc = subprocess.Popen([ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}", ...])
    wait_healthy(proc, port, stderr=lambda: path.read_text())   # ServeError if it exits or never answers
    ...
    stop(proc)                                                  # SIGTERM: a clean shutdown, then kill

Each caller keeps its own configuration and environment; what they shared,
copied four times before, is here: the console script next to this Python,
a free loopback port, the /healthz wait, and the stop that only ever signals
the process it started. `Server` is such a process with what its tests check
on every answer (`assert_clean`) and at the end (`stop_cleanly`: a clean exit,
no traceback on stderr), so a module-scoped server fixture checks its own
shutdown in its teardown instead of in a test that must run last.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ontoos_explore.engine.demo_data import SECRET_MARKER  # in every secret value of the demo lakehouse


class ServeError(RuntimeError):
    """The server exited before it was healthy, or never answered /healthz."""


def ontoos_executable() -> str:
    """The `ontoos` console script of this environment (next to sys.executable), else on PATH."""
    beside = Path(sys.executable).with_name("ontoos")
    if beside.exists():
        return str(beside)
    found = shutil.which("ontoos")
    if not found:
        raise ServeError("the ontoos console script is not installed (pip install -e .)")
    return found


# Ports for test servers come from below the kernel's ephemeral range (32768-60999 by default), so an
# outgoing connection (a client's own end) can never take one between free_port() and the server's
# bind; each pytest-xdist worker has a range of its own, so two workers never hand out the same one.
PORTS_FROM, PORTS_PER_WORKER = 12_000, 4_000
_handed_out: set[int] = set()


def _port_range() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... ("" without xdist)
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    start = PORTS_FROM + (index % 5) * PORTS_PER_WORKER
    return range(start, start + PORTS_PER_WORKER)


def free_port() -> int:
    """A loopback port nothing listens on, from this worker's range, not handed out before here."""
    ports = _port_range()
    first = random.randrange(len(ports))  # another session on the machine starts elsewhere in the range
    for i in range(len(ports)):
        port = ports[(first + i) % len(ports)]
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise ServeError(f"no free loopback port in {ports.start}-{ports.stop - 1}")


def wait_healthy(proc: subprocess.Popen, port: int, *, stderr: Callable[[], str], name: str = "ontoos serve",
                 timeout: float = 90, host: str = "127.0.0.1", interval: float = 0.05) -> None:
    """Until GET /healthz answers 200; ServeError (with the end of its stderr) if the process exits
    first or `timeout` passes. The process is left running either way: the caller stops it."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ServeError(f"{name} exited with {proc.returncode} before it was healthy:\n{stderr()[-3000:]}")
        with contextlib.suppress(OSError):
            conn = http.client.HTTPConnection(host, port, timeout=2)
            try:
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    return
            finally:
                conn.close()
        if time.monotonic() > deadline:
            raise ServeError(f"{name} did not answer /healthz in {timeout:.0f} s:\n{stderr()[-3000:]}")
        time.sleep(interval)


def stop(proc: subprocess.Popen, timeout: float = 20) -> int | None:
    """SIGTERM to this process only (it drains, flushes the audit queue and exits 0), SIGKILL if it does
    not end in `timeout`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    return proc.returncode


def clean_exit(returncode: int | None) -> bool:
    """The exit status of a graceful shutdown on SIGTERM."""
    return returncode == 0


@dataclass
class Server:
    """A started `ontoos serve --http`; `forbidden`: strings no response body may contain;
    `audit_dsn`: where it writes its audit (a database of its own when the test gave one)."""

    name: str
    host: str
    port: int
    proc: subprocess.Popen
    workdir: Path
    stderr_path: Path
    forbidden: list[str] = field(default_factory=list)
    audit_dsn: str | None = None
    returncode: int | None = None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int | None:
        """SIGTERM (see `stop`); the exit status, also when called again."""
        if self.returncode is None:
            self.returncode = stop(self.proc)
        return self.returncode

    def stop_cleanly(self) -> None:
        """Stop, and fail unless the shutdown was clean and stderr holds no traceback."""
        rc = self.stop()
        err = self.stderr()
        assert "Traceback" not in err, f"the {self.name} server logged a traceback:\n{err[-4000:]}"
        assert clean_exit(rc), f"the {self.name} server exited with {rc}:\n{err[-4000:]}"

    def wait_healthy(self) -> Server:
        """Until /healthz answers; the test fails (with the server's stderr) if it never does."""
        import pytest

        try:
            wait_healthy(self.proc, self.port, host=self.host, stderr=self.stderr, name=f"the {self.name} server")
        except ServeError as e:
            self.stop()
            pytest.fail(str(e))
        return self


def pg_socket_dir(dsn: str) -> str | None:
    """The socket directory of a DSN over a Unix socket (a server path no answer may name)."""
    from psycopg.conninfo import conninfo_to_dict

    host = conninfo_to_dict(dsn).get("host") or ""
    return host if host.startswith("/") else None


def assert_clean(srv: Server, body: str, request_text: str = "", label: str = "") -> None:
    """No traceback, no SQL, no server path or DSN, no secret value in a response body."""
    assert "Traceback" not in body, f"{label}: a traceback in the body: {body[:500]}"
    if "SELECT" not in request_text:  # the caller's own text may be echoed in a syntax error
        assert "SELECT" not in body, f"{label}: SQL in the body: {body[:500]}"
    assert SECRET_MARKER not in body, f"{label}: a secret value in the body"
    for s in srv.forbidden:
        assert s not in body, f"{label}: the body names {s!r}: {body[:500]}"
