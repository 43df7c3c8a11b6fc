"""Engine, the embedded default: a local PostgreSQL (pgserver) under the user's cache.

With no DSN, the CLI and the server start PostgreSQL 16 from the `pgserver`
wheel in `Settings.data_dir`, load the demo lakehouse once, and reuse both
on the next start (about 0.6 s to start an existing cluster).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HANDLES = ".handle_pids.json"  # pgserver's list of the processes using the server: the last one out stops it


def start(data_dir: Path, keep_running: bool = False):
    """Start (or attach to) the embedded server; returns a pgserver.PostgresServer.

    `keep_running=False` stops it when the last process using it exits (normally: the servers' signal
    handling lets `atexit` run). A process that was killed cannot take itself off pgserver's list of
    users, and the server would then never be stopped again: the dead are forgotten first."""
    import warnings

    data_dir.mkdir(parents=True, exist_ok=True)
    forget_the_dead(data_dir)
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime dir, which warns on machines without XDG_RUNTIME_DIR
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pgserver

        return pgserver.get_server(data_dir, cleanup_mode=None if keep_running else "stop")


def dsn_of(server) -> str:
    return server.get_uri()


def forget_the_dead(data_dir: Path) -> list[int]:
    """Take the processes that are gone off the server's list of users; the pids forgotten."""
    path = data_dir / HANDLES
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(pids, list):
        return []
    alive = [p for p in pids if isinstance(p, int) and _alive(p)]
    if alive != pids:
        path.write_text(json.dumps(alive))
    return [p for p in pids if p not in alive]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    try:  # a zombie (exited, not yet reaped) is gone for this purpose
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True
