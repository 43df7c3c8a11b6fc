"""Engine, the embedded default: a local PostgreSQL (pgserver) under the user's cache.

With no DSN, the CLI and the server start PostgreSQL 16 from the `pgserver`
wheel in `Settings.data_dir`, load the demo lakehouse once, and reuse both
on the next start (about 0.6 s to start an existing cluster).
"""

from __future__ import annotations

from pathlib import Path


def start(data_dir: Path, keep_running: bool = False):
    """Start (or attach to) the embedded server; returns a pgserver.PostgresServer.

    `keep_running=False` stops it when the last process using it exits."""
    import warnings

    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime dir, which warns on machines without XDG_RUNTIME_DIR
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pgserver

        return pgserver.get_server(data_dir, cleanup_mode=None if keep_running else "stop")


def dsn_of(server) -> str:
    return server.get_uri()
