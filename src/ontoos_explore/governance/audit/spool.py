"""Governance, audit spool: each queued event also on local disk, until the store holds it.

The writer's queue is memory: a process killed outright (SIGKILL, the OOM
killer, a supervisor's deadline) would take its queued events with it. So
`record()` also appends the event, one JSON line, to a segment file of this
process (`write(2)` on an `O_APPEND` descriptor: once it returns, the bytes
are the kernel's, and they outlive the process; not a power cut, which would
cost an `fsync` per event). The writer tells the spool how many of this
process's events are settled (written, or rejected and recorded as a gap),
in order, and segments wholly settled are deleted; when everything is
settled, none is left.

Each process holds an exclusive `flock` on a lock file of its own for its
life; the kernel releases it however the process ends. A process that
starts claims the files of every owner whose lock it can take (a dead one),
gives their events to its writer first, and deletes them once they are
written. The store's write is idempotent (ON CONFLICT (id) DO NOTHING), so
an event both committed and still spooled (killed between the two) is not
written twice. A line cut short by a crash mid-write, or not an event, is
skipped and counted.

Layout, in the spool directory: `<owner>.lock` and `<owner>.<n>.jsonl`,
where `<owner>` is `<pid>-<random>`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import secrets
from dataclasses import dataclass, field, fields
from pathlib import Path

import orjson
from psycopg.conninfo import conninfo_to_dict

from .events import Event

log = logging.getLogger("ontoos_explore.audit")

SEGMENT_EVENTS = 10_000  # a segment is closed after this many events (and deleted once they are settled)
_FIELDS = tuple(f.name for f in fields(Event))


def directory_for(root: Path, audit_dsn: str) -> Path:
    """The spool of one audit store under `root`: processes writing to the same store (host, port,
    database, user; never the password) share it, and only they, so a claimed event goes where it was
    meant to go."""
    params = conninfo_to_dict(audit_dsn)
    identity = {k: params.get(k) for k in ("host", "hostaddr", "port", "dbname", "user", "service")}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return root / key


def line_of(event: Event) -> bytes:
    """The event as one JSON line (its time in ISO 8601)."""
    try:
        return orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE)  # ~3 µs: the dataclass as it is
    except (TypeError, orjson.JSONEncodeError):  # an unpaired surrogate: escaped, and read back as it was
        record = {name: getattr(event, name) for name in _FIELDS}
        record["at"] = event.at.isoformat()
        return json.dumps(record, ensure_ascii=True).encode("ascii") + b"\n"


def event_of(line: bytes) -> Event | None:
    """The event of a spooled line; None for a line that is not one (cut short by a crash)."""
    try:
        record = json.loads(line)
        if not isinstance(record, dict) or set(record) != set(_FIELDS):
            return None
        record["at"] = dt.datetime.fromisoformat(record["at"])
        return Event(**record)
    except (ValueError, TypeError):
        return None


@dataclass
class Claimed:
    """The events a dead owner left, and its files: `release()` deletes them once the events are written."""

    owner: str
    events: list[Event]
    skipped: int
    files: list[Path]
    _fd: int = field(repr=False)

    def release(self) -> None:
        for path in self.files:
            path.unlink(missing_ok=True)
        os.close(self._fd)

    def abandon(self) -> None:
        """Not written after all: the files stay for the next start, the lock goes."""
        os.close(self._fd)


class Spool:
    """This process's segments in `directory` (made if missing). `append` never raises: a spool that
    cannot be written is given up (logged once), and its files are left for the next start to claim."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.owner = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._lock = directory / f"{self.owner}.lock"
        making = directory / f"{self.owner}.locking"  # not a *.lock until it is locked: no claimer takes it first
        self._lock_fd = os.open(making, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        os.rename(making, self._lock)
        self.appended = 0  # this process's events, in order
        self.broken = False
        self._segment = 0
        self._fd: int | None = None
        self._in_segment = 0
        self._closed: list[tuple[Path, int]] = []  # (segment, the count of appended events it ends at)

    def _path(self, n: int) -> Path:
        return self.directory / f"{self.owner}.{n:06d}.jsonl"

    def append(self, event: Event) -> None:
        if self.broken:
            return
        try:
            if self._fd is None:
                self._segment += 1
                self._fd = os.open(self._path(self._segment), os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC,
                                   0o600)
            line = line_of(event)
            if os.write(self._fd, line) != len(line):  # a full disk can cut a write short
                raise OSError(0, "a short write")
        except OSError as e:
            self.broken = True
            log.error("audit spool %s cannot be written (%s): events are held in memory only from now on",
                      self.directory, e.strerror or type(e).__name__)
            return
        self.appended += 1
        self._in_segment += 1
        if self._in_segment >= SEGMENT_EVENTS:
            self._close_segment()

    def _close_segment(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._closed.append((self._path(self._segment), self.appended))
        self._in_segment = 0

    def settled(self, count: int) -> None:
        """The first `count` events appended are in the store (or recorded as gaps): their segments go."""
        if self.broken:
            return  # what was appended stays for the next start (written again, it is not doubled)
        if count >= self.appended and self._fd is not None:
            self._close_segment()
        keep = []
        for path, end in self._closed:
            if end <= count:
                path.unlink(missing_ok=True)
            else:
                keep.append((path, end))
        self._closed = keep

    def pending_files(self) -> list[Path]:
        return sorted(self.directory.glob(f"{self.owner}.*.jsonl"))

    def close(self) -> None:
        """Stop spooling: segments not settled stay (the next start writes them), and the lock goes with
        them only when none is left."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if not self.pending_files():
            self._lock.unlink(missing_ok=True)
        os.close(self._lock_fd)

    def claim(self) -> list[Claimed]:
        """What dead owners left here (their lock free), oldest segment first, each owner's events in order."""
        out = []
        for lock in sorted(self.directory.glob("*.lock")):
            owner = lock.name[: -len(".lock")]
            if owner == self.owner:
                continue
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:  # claimed and released by another process meanwhile
                continue
            except OSError as e:  # another user's, say: not ours to claim
                log.warning("audit spool: %s cannot be claimed (%s)", lock.name, e.strerror or type(e).__name__)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # its owner is alive (or another process is claiming it)
                os.close(fd)
                continue
            try:
                segments = sorted(self.directory.glob(f"{owner}.*.jsonl"))
                events, skipped = [], 0
                for path in segments:
                    for line in path.read_bytes().splitlines():
                        if not line.strip():
                            continue
                        event = event_of(line)
                        if event is None:
                            skipped += 1
                        else:
                            events.append(event)
            except OSError as e:
                log.warning("audit spool: the files of %s cannot be read (%s); left for a later start", owner,
                            e.strerror or type(e).__name__)
                os.close(fd)
                continue
            out.append(Claimed(owner, events, skipped, [*segments, lock], fd))
        return out


def waiting(directory: Path) -> list[tuple[str, int, bool]]:
    """What the spool holds, without claiming it: (owner, lines in its segments, whether it is alive)."""
    out = []
    for lock in sorted(directory.glob("*.lock")) if directory.is_dir() else []:
        owner = lock.name[: -len(".lock")]
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                alive = False
            except OSError:
                alive = True
            lines = 0
            for path in directory.glob(f"{owner}.*.jsonl"):
                with contextlib.suppress(OSError):
                    lines += sum(1 for line in path.read_bytes().splitlines() if line.strip())
        finally:
            os.close(fd)  # closing drops the shared lock taken to look
        out.append((owner, lines, alive))
    return out
