"""Running a real `ontoos serve --http` for the tests (and the sqlmap scan) that need one.

    port = free_port()
    proc = subprocess.Popen([ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}", ...])
    wait_healthy(proc, port, stderr=lambda: path.read_text())   # ServeError if it exits or never answers
    ...
    stop(proc)                                                  # SIGTERM: a clean shutdown, then kill

Each caller keeps its own configuration and environment; what they shared,
copied four times before, is here: the console script next to this Python,
a free loopback port, the /healthz wait, and the stop that only ever signals
the process it started.
"""

from __future__ import annotations

import contextlib
import http.client
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    """SIGTERM to this process only (uvicorn shuts down cleanly, the audit queue is flushed, then it
    re-raises the signal: -SIGTERM is a clean exit), SIGKILL if it does not end in `timeout`."""
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
    return returncode in (0, -signal.SIGTERM)
