"""Governance, the registry file: the one reader and writer of the named-query YAML.

`RegistryStore(path)` reads the raw entries (the items of `queries:`), adds
one (refusing an id already there), changes an entry
(`update`: checked and written under one lock), lists the origin
fingerprints, and writes the whole file atomically: a temporary file in the
same directory, flushed and fsynced, then `os.replace`d over the registry
(and the directory fsynced), so a reader sees the old file or the new one,
never half of either, and no temporary file is left behind. Changes are
serialized between processes by an advisory lock on the directory (the CLI
and a server's dashboard may both write). A missing file is an empty
registry; a file that is not YAML, or not a mapping with a `queries` list,
is refused naming the file (and line), and nothing is written over it.

`stamp()` is the file's identity and version (device, inode, size, mtime and
ctime in ns), one `stat`: every write replaces the inode, so a change is
seen even within one mtime tick.

`LiveRegistry(store, contract)` is what a server's tools read
(`visible(role)`, `run(...)`): the verified `Registry` built from the store,
re-checked when asked at most every `interval` seconds (0.5): one `stat`,
and a reload and re-verification only when the stamp changed. A change made
by `ontoos queries approve`, another process or the dashboard is therefore
served within a second of being written. A file that cannot be read keeps
the last good registry, and the problem is logged once per version of the
file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import Codes, InputError
from ..names import fold

log = logging.getLogger("ontoos_explore.registry")


class RegistryFileError(InputError):
    """The registry file cannot be read (not YAML, or not `queries:` and a list); names the file and line."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(Codes.INVALID_REQUEST, f"the registry file {path.name} cannot be read: {problem}",
                         hint="fix the YAML (a mapping with a 'queries' list of entries) or move the file away; "
                              "nothing was written to it")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Stamp:
    """A version of the file, from one stat: equal stamps, the same bytes (for atomic writes)."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Stamp:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


DEMO_REGISTRY = Path(__file__).resolve().parent.parent / "data" / "demo_queries.yaml"


DEFAULT_FILE = Path("queries.yaml")  # the `queries` setting's default


UNREACHABLE = "unreachable"  # the stamp of a store that cannot be asked (a database registry away): logged once
UNCHANGED = object()  # what an `update` change returns when the entry is already as asked: nothing is written


class _Unchanged(Exception):
    def __init__(self, entry: dict[str, Any]) -> None:
        self.entry = entry


def default_status(data: dict[str, Any]) -> str:
    """The status of an entry that names none: a file in the authors' format (version: 1) is the reviewed
    registry, where an entry runs unless it says `status: pending` (as promotion writes it); in the older
    format an entry waits for approval."""
    return "approved" if data.get("version") == 1 else "pending"


def store_for(path: str | Path | None, contract_path: str | Path | None,
              database: str | None = None) -> "RegistryStore":
    """The registry of a deployment: the file `path`, or with `database` (a DSN: ONTOOS_REGISTRY=database)
    the document in that database (`store_db.DatabaseStore`). On the embedded demo contract
    (`contract_path` None) with the default file (queries.yaml in the working directory), a file not yet
    written reads as the shipped demo registry, and the first change (a promotion, an approval) writes it
    there with that change; so does a database registry on the demo contract. A file named on purpose
    (--queries, ONTOOS_QUERIES) is only itself."""
    if database is not None:
        from .store_db import DatabaseStore

        return DatabaseStore.of(database, seed=DEMO_REGISTRY if contract_path is None else None)
    demo = contract_path is None and path is not None and Path(path) == DEFAULT_FILE
    return RegistryStore(path, seed=DEMO_REGISTRY if demo else None)


class RegistryStore:
    """The registry YAML at `path` (None: no file, always empty, never written). `seed`: the file read
    in its place while `path` does not exist (never written itself)."""

    def __init__(self, path: str | Path | None, seed: Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.seed = seed if path is not None else None

    def __repr__(self) -> str:
        return f"RegistryStore({str(self.path)!r})"

    # ------------------------------------------------------------ reading

    def stamp(self) -> Stamp | None:
        """The file's current version; None when there is no file."""
        if self.path is None:
            return None
        try:
            return Stamp.of(os.stat(self.path))
        except FileNotFoundError:
            if self.seed is not None:
                with contextlib.suppress(FileNotFoundError):
                    return Stamp.of(os.stat(self.seed))
            return None

    def read(self) -> tuple[dict[str, Any], Stamp | None]:
        """(the whole document, the stamp of the bytes read). The stamp is taken from the open file,
        so it is never newer than what was read: a change after it is seen by the next check."""
        if self.path is None:
            return {}, None
        try:
            with open(self.path, "rb") as f:
                stamp = Stamp.of(os.fstat(f.fileno()))
                raw = f.read()
        except FileNotFoundError:
            if self.seed is None:
                return {}, None
            return RegistryStore(self.seed).read()
        except OSError as e:
            raise RegistryFileError(self.path, e.strerror or type(e).__name__) from None
        return self._parse(raw), stamp

    def _parse(self, raw: bytes) -> dict[str, Any]:
        assert self.path is not None
        try:
            data = yaml.safe_load(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise RegistryFileError(self.path, "it is not UTF-8") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1}: " if mark is not None else ""
            raise RegistryFileError(self.path, f"{where}{getattr(e, 'problem', None) or 'not YAML'}") from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise RegistryFileError(self.path, f"it holds a {type(data).__name__}, not a mapping with 'queries'")
        if data.get("queries") is not None and not isinstance(data["queries"], list):
            raise RegistryFileError(self.path, "'queries' is not a list")
        return data

    def entries(self) -> list[Any]:
        """The raw items of `queries:` (mappings, or whatever else a hand edit left there)."""
        return list(self.read()[0].get("queries") or [])

    def listed(self) -> list[dict[str, Any]]:
        """The entries that are mappings, each a copy with the status it has (`default_status` where the
        file leaves it out): what the dashboard lists."""
        data, _ = self.read()
        status = default_status(data)
        return [{"status": status, **q} for q in data.get("queries") or [] if isinstance(q, dict)]

    def origin_fingerprints(self) -> frozenset[str]:
        """Origin fingerprints already in the registry, whatever their status (a retired or rejected one
        is never offered for promotion again)."""
        return frozenset(str(q["origin_fingerprint"]) for q in self.entries()
                         if isinstance(q, dict) and q.get("origin_fingerprint"))

    # ------------------------------------------------------------ writing

    def add(self, entry: dict[str, Any]) -> None:
        """Append an entry; refused if the registry already has its id (case-insensitively)."""
        ident = str(entry.get("id", ""))
        with self._change() as data:
            queries = data.get("queries")
            if queries is None:
                if not data:  # a new file: in the authors' format
                    data["version"] = 1
                queries = data["queries"] = []
            if any(isinstance(q, dict) and fold(str(q.get("id", ""))) == fold(ident) for q in queries):
                raise InputError(Codes.INVALID_REQUEST, f"the registry already has a query '{ident}'",
                                 hint="choose another --id")
            queries.append(entry)

    def update(self, ident: str, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        """`change(entry)` on the entry with this id (case-insensitively), in place, and the file written,
        all under the lock: what `change` checks is what is written. UNKNOWN_QUERY if there is none;
        nothing is written if `change` raises or returns UNCHANGED. Returns the entry as it stands."""
        try:
            return self._update(ident, change)
        except _Unchanged as e:
            return e.entry

    def _update(self, ident: str, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        with self._change() as data:
            for q in data.get("queries") or []:
                if isinstance(q, dict) and fold(str(q.get("id", ""))) == fold(str(ident)):
                    q.setdefault("status", default_status(data))  # what `change` checks, written out
                    if change(q) is UNCHANGED:
                        raise _Unchanged(q)  # nothing to write: the file stays as it is
                    return q
            raise InputError(Codes.UNKNOWN_QUERY, f"the registry has no query '{str(ident)[:60]}'",
                             hint="ontoos queries list")

    @contextlib.contextmanager
    def _change(self) -> Iterator[dict[str, Any]]:
        """Read, let the caller change the document, write it: all under the lock. Nothing is
        written if the caller raises (or the file cannot be read)."""
        if self.path is None:
            raise InputError(Codes.INVALID_REQUEST, "no registry file is configured",
                             hint="give one with --queries FILE (or ONTOOS_QUERIES)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(self.path.parent):
            data, _ = self.read()
            yield data
            self.write(data)

    def write(self, data: dict[str, Any]) -> None:
        """The whole document, atomically: a temporary file beside the registry (same file system),
        written, flushed and fsynced, then renamed over it; the directory is fsynced after."""
        if self.path is None:
            raise InputError(Codes.INVALID_REQUEST, "no registry file is configured",
                             hint="give one with --queries FILE (or ONTOOS_QUERIES)")
        text = _dump(data).encode("utf-8")
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for any new file
            with os.fdopen(fd, "wb") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, os.stat(self.path).st_mode & 0o7777)  # keep the registry's own mode
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform or file system opens directories
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive advisory lock on the directory (flock), between processes and threads alike;
    where directories cannot be locked, none."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


# ---------------------------------------------------------------- what a running server reads


class LiveRegistry:
    """The verified registry of a store, kept in step with its file (see the module docstring).

    Offers what the tools use of a `Registry`: `visible(role)`, `run(...)`, `entries`,
    `problems`, `contract`; `current()` is the Registry itself, `refresh()` checks now."""

    def __init__(self, store: RegistryStore, contract, *, interval: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from .registry import Registry

        self.store = store
        self.contract = contract
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._current = Registry(contract, {}, [])
        self._stamp: Stamp | None = None
        self._loaded = False  # whether the file as it is (or its absence) has been read
        self._failed: Stamp | None = None  # the version last refused, logged once
        self.error: RegistryFileError | None = None  # why the file as it is now is not served
        self._checked = clock()
        self.refresh()

    def watch(self) -> None:
        """In a serving process (its lifespan): a store that has a watcher of its own starts it."""
        watch = getattr(self.store, "watch", None)
        if watch is not None:
            watch()

    def current(self):
        """The Registry to answer from: re-checked first if `interval` has passed since the last check."""
        now = self._clock()
        if now - self._checked >= self.interval:
            self.refresh()
        return self._current

    def refresh(self) -> bool:
        """Check the file now; reload and re-verify it if it changed. True if a new registry is served."""
        from .registry import Registry

        with self._lock:
            self._checked = self._clock()
            try:
                stamp = self.store.stamp()  # a database registry that cannot be asked: as a file that cannot be read
            except RegistryFileError as e:
                stamp, registry = UNREACHABLE, e
            else:
                if self._loaded and stamp == self._stamp:
                    return False
                try:
                    registry = Registry.load(self.store, self.contract)
                except RegistryFileError as e:
                    registry = e
            if isinstance(registry, RegistryFileError):
                e = registry
                self._stamp, self._loaded, self.error = stamp, True, e
                if stamp != self._failed:
                    self._failed = stamp
                    log.warning("%s; still serving the %d named queries read before", e.message,
                                len(self._current.entries))
                return False
            # The stat came before the read, so it is never newer than the bytes read: a change made
            # in between is seen (and read again) at the next check.
            self._current, self._stamp, self._loaded, self.error, self._failed = registry, stamp, True, None, None
            return True

    # ------------------------------------------------------------ the Registry's interface

    @property
    def entries(self):
        return self.current().entries

    @property
    def problems(self):
        return self.current().problems

    def visible(self, role_name: str):
        return self.current().visible(role_name)

    def entry(self, role_name: str, ident: Any):
        return self.current().entry(role_name, ident)

    async def run(self, explorer, role_name: str, ident: Any, params: Any, require=None):
        return await self.current().run(explorer, role_name, ident, params, require)

    def compiled(self, role_name: str, ident: Any, params: Any, statuses: tuple[str, ...] = ("approved",),
                 offset: int = 0):
        return self.current().compiled(role_name, ident, params, statuses, offset)
