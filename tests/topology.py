"""A deployment on loopback for the tests: a primary and hot standbys on PostgreSQL's own streaming
replication, made with the PostgreSQL binaries on the machine (no helper of our own replicates).

    primary = Postgres.initdb("primary")                   # initdb, wal_level=replica, TCP on 127.0.0.1
    primary.start()
    standby = primary.basebackup("standby1")               # pg_basebackup -R: a hot standby of it
    standby.start(); standby.wait_replayed(primary)
    dsn = read_dsn([standby, primary], "lake")             # libpq multi-host, prefer-standby
    ...
    standby.stop(); standby.start(); primary.restart()     # what the tests do to it under load

The binaries are those of `pg_ctl` on PATH (PostgreSQL 15 here), else (or with `bin=pgserver_bin()`)
the ones pgserver ships (16: the benchmarks' embedded server's, so their plans compare). As root,
PostgreSQL runs as the unprivileged user pgserver also uses (made if missing): it refuses to run as root.
Each server listens on 127.0.0.1 only, with no Unix socket, in a data directory of `pg_data_dir`'s.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from tests.databases import pg_data_dir
from tests.serving import free_port

PG_USER = "pgserver"  # the system user pgserver runs PostgreSQL as, when started by root
SUPERUSER = "postgres"
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "wal_level": "replica",
    "max_wal_senders": "10",
    "wal_keep_size": "'512MB'",  # a standby stopped for a while catches up from the primary's WAL
    "hot_standby": "on",
    "hot_standby_feedback": "on",  # the primary's vacuum never cancels a standby's read
    "max_connections": "200",
    "shared_buffers": "'64MB'",
    "fsync": "off",  # a test cluster: nothing here must survive the machine
    "log_min_messages": "warning",
}


class TopologyError(RuntimeError):
    """A PostgreSQL step failed: its output says why."""


def pgserver_bin() -> Path:
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def bin_dir() -> Path:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent  # /usr/local/bin/pg_ctl -> /usr/lib/postgresql/15/bin
    return pgserver_bin()


def _system_user() -> str | None:
    """Whom to run PostgreSQL as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
                       check=True, capture_output=True)
    return PG_USER


def _run(bin: Path, args: list[str], timeout: float = 120) -> str:
    user = _system_user()
    done = subprocess.run([str(bin / args[0]), *args[1:]], capture_output=True, text=True, timeout=timeout,
                          user=user, cwd="/")
    if done.returncode != 0:
        raise TopologyError(f"{args[0]} exited with {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def _owned_dir(name: str) -> Path:
    """A new, empty data directory the PostgreSQL user owns."""
    data = pg_data_dir(name)
    data.mkdir(mode=0o700)
    if user := _system_user():
        entry = pwd.getpwnam(user)
        for path in (data.parent, data):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    return data


@dataclass
class Postgres:
    """One PostgreSQL server of the topology (a primary or a standby), by its data directory and port."""

    name: str
    data: Path
    port: int
    bin: Path

    @classmethod
    def initdb(cls, name: str, bin: Path | None = None) -> Postgres:
        data, bin = _owned_dir(name), bin or bin_dir()
        _run(bin, ["initdb", "--auth=trust", "--encoding=utf8", "--no-sync", "-U", SUPERUSER, "-D", str(data)])
        server = cls(name, data, free_port(), bin)
        server._configure(port=str(server.port), **SETTINGS)
        return server

    def basebackup(self, name: str) -> Postgres:
        """A hot standby of this (running) primary: pg_basebackup with -R writes its primary_conninfo
        and standby.signal; it gets a port of its own."""
        data = _owned_dir(name)
        _run(self.bin, ["pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-D", str(data),
              "-R", "-X", "stream", "-c", "fast", "--no-sync"])
        standby = Postgres(name, data, free_port(), self.bin)
        standby._configure(port=str(standby.port))
        return standby

    def _configure(self, **settings: str) -> None:
        """Settings appended to postgresql.auto.conf (the last line of a setting wins)."""
        lines = "".join(f"{k} = {v}\n" for k, v in settings.items())
        path = self.data / "postgresql.auto.conf"
        with open(path, "a", encoding="utf-8") as f:
            f.write(lines)

    @property
    def log(self) -> Path:
        return self.data.parent / "server.log"

    def _pg_ctl(self, *args: str, timeout: float = 120) -> None:
        _run(self.bin, ["pg_ctl", "-D", str(self.data), "-w", "-t", str(int(timeout)), *args], timeout=timeout + 10)

    def start(self) -> Postgres:
        if not self.log.exists():  # the server writes it as its own user
            self.log.touch()
            if user := _system_user():
                entry = pwd.getpwnam(user)
                os.chown(self.log, entry.pw_uid, entry.pw_gid)
        self._pg_ctl("-l", str(self.log), "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop: `fast` (what a supervisor's SIGTERM-like stop does: sessions are ended) or
        `immediate` (a crash)."""
        self._pg_ctl("-m", mode, "stop")

    def restart(self) -> None:
        self._pg_ctl("-m", "fast", "-l", str(self.log), "restart")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def dsn(self, dbname: str = "postgres") -> str:
        return make_conninfo(host="127.0.0.1", port=str(self.port), user=SUPERUSER, dbname=dbname,
                             connect_timeout="3")

    def lsn(self, standby: bool) -> str:
        fn = "pg_last_wal_replay_lsn()" if standby else "pg_current_wal_lsn()"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            return conn.execute(f"SELECT {fn}::text").fetchone()[0]

    def wait_replayed(self, primary: Postgres, timeout: float = 60) -> None:
        """Until this standby has replayed everything the primary had written when asked."""
        target = primary.lsn(standby=False)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn(), autocommit=True) as conn:
                    caught_up = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()[0]
                if caught_up:
                    return
            except psycopg.OperationalError:
                pass  # still starting
            if time.monotonic() > deadline:
                raise TopologyError(f"{self.name} did not replay up to {target} in {timeout:.0f} s")
            time.sleep(0.1)

    def destroy(self) -> None:
        """Stopped whatever state it is in (its directory goes when the test process exits)."""
        if self.running():
            try:
                self.stop("immediate")
            except (TopologyError, subprocess.TimeoutExpired):
                pass


def read_dsn(servers: list[Postgres], dbname: str, balance: bool = False) -> str:
    """A libpq multi-host DSN over `servers`, tried for a standby first, any server otherwise."""
    hosts = ",".join("127.0.0.1" for _ in servers)
    ports = ",".join(str(s.port) for s in servers)
    extra = {"load_balance_hosts": "random"} if balance else {}
    return make_conninfo(host=hosts, port=ports, user=SUPERUSER, dbname=dbname, connect_timeout="2",
                         target_session_attrs="prefer-standby", **extra)
