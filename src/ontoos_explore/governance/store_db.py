"""Governance, the registry in PostgreSQL: the same YAML document, one row that every process on every
machine reads (`ONTOOS_REGISTRY=database`).

A registry file is one machine's: processes elsewhere see its changes only
through shared storage. With `ONTOOS_REGISTRY=database` the document lives in
`ontoos_state.registry` of the audit database (the primary: every process of
a deployment already writes there), as the YAML text the file would hold,
with a version that every write increments:

- a change (`add`, `update`: a promotion, an approval, `ontoos queries
  import`) is one transaction that locks the row (`SELECT ... FOR UPDATE`),
  so changes from any process are serialized, and what a change checks is
  what it writes;
- a server reads the version every `POLL_S` (0.25) seconds on a thread of
  its own (`watch()`, from the lifespan of the process that serves, so a
  fork never copies it), and the document when the version moved: `stamp()`
  and `read()` then cost no I/O on the event loop, and a change made
  anywhere is served within a second. While the database cannot be reached,
  the last document read (by this process, or its parent before the fork)
  goes on being served (logged once);
- a row not written yet reads as the seed (the shipped demo registry on the
  demo contract), or as an empty registry.

The statements are static; the document is a parameter.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from ..errors import Codes, ExploreError, InputError
from .store import RegistryFileError, RegistryStore, _dump

log = logging.getLogger("ontoos_explore.registry")

POLL_S = 0.25
LABEL = Path("ontoos_state.registry")  # how messages name the registry
SCHEMA = """
SELECT pg_advisory_xact_lock(7212504301);
CREATE SCHEMA IF NOT EXISTS ontoos_state;
CREATE TABLE IF NOT EXISTS ontoos_state.registry (
  id         integer PRIMARY KEY CHECK (id = 1),
  document   text NOT NULL,
  version    bigint NOT NULL,
  changed_at timestamptz NOT NULL DEFAULT now()
);
"""
VERSION = "SELECT version FROM ontoos_state.registry WHERE id = 1"
DOCUMENT = "SELECT document, version FROM ontoos_state.registry WHERE id = 1"
ENSURE_ROW = "INSERT INTO ontoos_state.registry (id, document, version) VALUES (1, '', 0) ON CONFLICT (id) DO NOTHING"
LOCK_ROW = "SELECT document, version FROM ontoos_state.registry WHERE id = 1 FOR UPDATE"
WRITE = "UPDATE ontoos_state.registry SET document = %s, version = version + 1, changed_at = now() WHERE id = 1"


class RegistryUnavailable(RegistryFileError):
    """The database the registry lives in does not answer (a registry that cannot be read, as callers
    take it, but not the reader's fault: UPSTREAM_UNAVAILABLE, and a hint that says so)."""

    def __init__(self, problem: str) -> None:
        ExploreError.__init__(self, Codes.UPSTREAM_UNAVAILABLE,
                              f"the registry ({LABEL}) cannot be read: {problem}",
                              hint="check that the audit database (ONTOOS_AUDIT_DSN, else ONTOOS_DSN) answers, and "
                                   "try again; nothing was written to it")
        self.path = LABEL
        self.problem = problem


def registry_dsn(settings) -> str | None:
    """Where the registry lives: None for the file (ONTOOS_REGISTRY=file), else the audit database."""
    if settings.registry != "database":
        return None
    dsn = settings.audit_dsn or settings.dsn
    if dsn is None:
        raise InputError(Codes.INVALID_REQUEST, "ONTOOS_REGISTRY=database needs the database it lives in",
                         hint="set ONTOOS_AUDIT_DSN (the primary every process writes to), or ONTOOS_DSN")
    return dsn


class DatabaseStore(RegistryStore):
    """The registry document in `ontoos_state.registry` of `dsn`; `seed`: the file read while no
    document has been written."""

    def __init__(self, dsn: str, seed: Path | None = None) -> None:
        super().__init__(None)
        self.path = LABEL
        self.seed = seed
        self.dsn = dsn
        self._cache: tuple[dict[str, Any], int | None] | None = None  # (document, version) last read
        self._watcher: tuple[int, int] | None = None  # (pid, generation) of the thread that watches
        self._generation = 0
        self._guard = threading.Lock()
        self._down = False

    _shared: dict[tuple[str, Path | None], DatabaseStore] = {}

    @classmethod
    def of(cls, dsn: str, seed: Path | None = None) -> DatabaseStore:
        """The one store of this database in this process (the tools' and the dashboard's alike, so a
        change the dashboard writes is served at once, and one thread watches)."""
        key = (dsn, seed)
        if key not in cls._shared:
            cls._shared[key] = cls(dsn, seed)
        return cls._shared[key]

    def __repr__(self) -> str:
        return "DatabaseStore(ontoos_state.registry)"

    def _connect(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=5, application_name="ontoos-registry")

    def _unavailable(self, e: BaseException) -> RegistryFileError:
        return RegistryUnavailable(f"the database cannot be reached ({type(e).__name__})")

    def _document(self, text: str, version: int) -> tuple[dict[str, Any], int | None]:
        if version == 0:  # the row exists (a change began) but nothing was written yet
            return self._unwritten()
        return self._parse(text.encode("utf-8")), version

    def _unwritten(self) -> tuple[dict[str, Any], int | None]:
        if self.seed is None:
            return {}, None
        data, _ = RegistryStore(self.seed).read()
        return data, None

    def _fetch(self, conn: psycopg.Connection) -> tuple[dict[str, Any], int | None]:
        try:
            row = conn.execute(DOCUMENT).fetchone()
        except psycopg.errors.UndefinedTable:
            return self._unwritten()
        return self._unwritten() if row is None else self._document(*row)

    # ------------------------------------------------------------ reading

    def stamp(self) -> int | None:  # type: ignore[override]
        """The document's version (None: none written): what the watcher last saw, in a serving process;
        else asked now."""
        with self._guard:
            if self._watching():
                return self._cache[1] if self._cache is not None else None
        return self.read()[1]

    def read(self) -> tuple[dict[str, Any], int | None]:  # type: ignore[override]
        with self._guard:
            if self._watching() and self._cache is not None:
                data, version = self._cache
                return copy.deepcopy(data), version  # callers may change what they read
        return self.read_uncached()

    def read_uncached(self) -> tuple[dict[str, Any], int | None]:
        """The document as the database has it now (kept as the last read: what a watcher starts from)."""
        try:
            with self._connect() as conn:
                fetched = self._fetch(conn)
        except psycopg.Error as e:
            raise self._unavailable(e) from None
        with self._guard:
            self._cache = fetched
        return copy.deepcopy(fetched[0]), fetched[1]

    # ------------------------------------------------------------ watching, in a serving process

    def _watching(self) -> bool:
        return self._watcher == (os.getpid(), self._generation)

    def watch(self) -> None:
        """Watch from now on, in this process (a server's lifespan calls it, after any fork: a thread is
        never copied into a worker half-way through a lock): `stamp()` and `read()` then answer from what
        the thread last read, starting with the last document read here (by the parent, before a fork)."""
        with self._guard:
            if self._watching():
                return
            self._generation += 1
            self._watcher = (os.getpid(), self._generation)
            mine = self._watcher
        threading.Thread(target=self._poll, args=(mine,), name="ontoos-registry", daemon=True).start()

    def stop(self) -> None:
        """Stop watching (the thread ends within POLL_S)."""
        with self._guard:
            self._watcher = None

    def _poll(self, mine: tuple[int, int]) -> None:
        conn = None
        while True:
            with self._guard:
                if self._watcher != mine:
                    break
            try:
                if conn is None or conn.closed:
                    conn = self._connect()
                try:
                    row = conn.execute(VERSION).fetchone()
                except psycopg.errors.UndefinedTable:
                    row = None
                seen = None if row is None or row[0] == 0 else row[0]
                with self._guard:
                    known = self._cache[1] if self._cache is not None else None
                    stale = self._cache is None or seen != known
                if stale:
                    fetched = self._fetch(conn)
                    with self._guard:
                        self._cache = fetched
                if self._down:
                    log.warning("the registry's database answers again")
                    self._down = False
            except (psycopg.Error, RegistryFileError) as e:
                if not self._down:
                    log.warning("the registry's database cannot be read (%s): still serving what was read before",
                                type(e).__name__)
                    self._down = True
                if conn is not None:
                    with contextlib.suppress(psycopg.Error):
                        conn.close()
                conn = None
            time.sleep(POLL_S)
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    # ------------------------------------------------------------ writing

    @contextlib.contextmanager
    def _change(self) -> Iterator[dict[str, Any]]:
        """Lock the row, let the caller change the document, write it: one transaction."""
        try:
            conn = self._connect()
        except psycopg.Error as e:
            raise self._unavailable(e) from None
        with conn:
            try:
                with conn.transaction():
                    conn.execute(SCHEMA)
                with conn.transaction():
                    conn.execute(ENSURE_ROW)
                    text, version = conn.execute(LOCK_ROW).fetchone()
                    data, _ = self._document(text, version)
                    yield data
                    conn.execute(WRITE, [_dump(data)])
            except psycopg.Error as e:
                raise self._unavailable(e) from None
        self._refresh_cache()

    def write(self, data: dict[str, Any]) -> None:
        """The whole document (what `ontoos queries import` writes)."""
        with self._change() as current:
            current.clear()
            current.update(data)

    def _refresh_cache(self) -> None:
        """This process's own change is served at once (the watcher would see it within POLL_S)."""
        if self._watching():
            with contextlib.suppress(RegistryFileError):
                self.read_uncached()
