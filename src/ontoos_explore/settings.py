"""Deployment settings: one typed, frozen record, read once at start.

Deployment settings are not the contract: the contract (a governed document
of its own) says what exists and who may read what; these say where
PostgreSQL and the files are, and how connections, the audit and the servers
behave. Every setting is one row of `SETTINGS` (name, environment variable,
default, what it takes, what it means); `read()` builds the `Settings` record
from them: a flag overrides the variable, which overrides the default; an
unset or empty variable is the default. Every value is checked as it is read:
a value that does not parse, or is out of range, is refused with EX907
(SETTING_INVALID) naming the variable (or flag) and saying what it takes,
never read as something else, and never confused with an invalid contract
(EX902). A DSN is never echoed in a refusal (it may hold a password).

The README's settings table is `markdown_table()`'s rendering of `SETTINGS`
(a test holds the README to it).

The registry defaults to `queries.yaml` in the working directory for the CLI
and the servers alike, so `ontoos promote` and `ontoos queries approve` write
the file `ontoos serve` (started in the same directory) serves; a server that
finds no file serves no named queries (on the demo contract, the shipped demo
registry), and picks the file up when it appears.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .errors import Codes, ExploreError


class SettingError(ExploreError):
    """A deployment setting that cannot be used (EX907), naming the variable or flag."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(Codes.SETTING_INVALID, message, hint=hint)


# ---------------------------------------------------------------- kinds: how a value's text is read


@dataclass(frozen=True, slots=True)
class Kind:
    """What a setting takes (`takes`, for hints and the table) and how its text is read:
    `parse(text)` gets the stripped, non-empty text and returns the value, or raises ValueError."""

    takes: str
    parse: Callable[[str], Any]
    example: str = ""  # for the hint of a refusal


_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_ON, _OFF = ("on", "true", "yes", "1"), ("off", "false", "no", "0")


def integer(low: int, high: int | None = None) -> Kind:
    takes = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def parse(text: str) -> int:
        if not _INTEGER.match(text):  # ASCII digits only: not 2.5, 1_000, or a full-width digit
            raise ValueError()
        value = int(text)
        if value < low or (high is not None and value > high):
            raise ValueError()
        return value

    return Kind(takes, parse)


def number(low: float, *, low_ok: bool = False) -> Kind:
    def parse(text: str) -> float:
        if not _NUMBER.match(text):  # no nan, inf, hex or underscores
            raise ValueError()
        value = float(text)
        if not math.isfinite(value) or value < low or (value == low and not low_ok):
            raise ValueError()
        return value

    return Kind(f"a number {'>=' if low_ok else '>'} {low:g}", parse)


def _flag(text: str) -> bool:
    word = text.lower()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise ValueError()


FLAG = Kind("on or off", _flag)


def _file(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_file():
        raise ValueError("a directory, not a file" if path.is_dir() else "no such file")
    return path


def _file_or_none(text: str) -> Path:
    path = Path(text).expanduser()
    if path.is_dir():
        raise ValueError("a directory, not a file")
    return path


def _directory(text: str) -> Path:
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError("not a directory")
    return path


def _directory_or_off(text: str) -> Path | None:
    return None if text.lower() in _OFF else _directory(text)


FILE = Kind("the path of a file that exists", _file)
NEW_FILE = Kind("the path of a file (it need not exist yet)", _file_or_none)
DIRECTORY = Kind("the path of a directory (made if missing)", _directory)
DIRECTORY_OR_OFF = Kind("the path of a directory (made if missing), or off", _directory_or_off)


def _name(pattern: str, takes: str, example: str = "") -> Kind:
    compiled = re.compile(pattern)

    def parse(text: str) -> str:
        if not compiled.fullmatch(text):
            raise ValueError()
        return text

    return Kind(takes, parse, example)


# A libpq connection string: a URI, or key=value pairs (values bare or single-quoted). psycopg is
# not imported to check it (a third of a second for a command that may never connect); what this
# lets through, libpq refuses when connecting, answered as UPSTREAM_UNAVAILABLE without the text.
_CONNINFO = re.compile(r"\s*(postgres(ql)?://\S*|([A-Za-z_]+\s*=\s*('([^'\\]|\\.)*'|[^\s']+)\s*)+)\s*")
DSN = _name(_CONNINFO.pattern, "a PostgreSQL connection string",
            "postgresql://user@host:5432/dbname, or key=value pairs: host=/run/postgresql dbname=lake")
ROLE_PREFIX = _name(r"[A-Za-z_][A-Za-z0-9_]{0,31}", "letters, digits and _, at most 32, not starting with a digit")
VERSION = _name(r"[0-9]+(\.[0-9]+){0,3}", "a version: numbers separated by dots", "0.2.0")
SECRET = _name(r"\S{16,1024}", "at least 16 characters, no spaces (e.g. openssl rand -hex 32)")
ROLE = Kind("a role of the contract (checked there: EX501 names the roles)", str)  # who asks: the contract's to judge


# ---------------------------------------------------------------- the table


@dataclass(frozen=True, slots=True)
class Setting:
    """One row: the record's field, its variable, its default (or `computed` when it is read),
    what it takes, what it means, the flag that overrides it, and whether its value may be shown."""

    name: str
    env: str
    default: Any
    kind: Kind
    help: str
    flag: str | None = None
    shown_default: str | None = None  # the default as the table says it, when not the value itself
    computed: Callable[[], Any] | None = None  # a default worked out when the settings are read
    secret: bool = False  # never echoed (a DSN may hold a password)

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        if isinstance(self.default, float) and self.default.is_integer():
            return str(int(self.default))
        return str(self.default)

    def refusal(self, source: str, raw: str, reason: str = "") -> SettingError:
        shown = source if self.secret else f"{source}={raw[:200]!r}"  # a path may be long; a flood is cut
        why = " (its value is not shown: it may hold a password)" if self.secret else f": {reason}" if reason else ""
        example = f", e.g. {self.kind.example}" if self.kind.example else ""
        return SettingError(f"{shown} is not a valid setting{why}",
                            hint=f"{source} takes {self.kind.takes}{example} ({self.help}); "
                                 f"unset it for the default ({self.default_text()})")


def _own_version() -> str:
    from . import __version__

    return __version__


def _cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ontoos-explore")) / "pg"


def _spool_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ontoos-explore")) / "audit-spool"


SETTINGS: tuple[Setting, ...] = (
    Setting("dsn", "ONTOOS_DSN", None, DSN, "PostgreSQL to explore", flag="--dsn",
            shown_default="none: the embedded server", secret=True),
    Setting("data_dir", "ONTOOS_DATA_DIR", None, DIRECTORY, "where the embedded server keeps its data",
            shown_default="the user's cache dir", computed=_cache_dir),
    Setting("pool_min", "ONTOOS_POOL_MIN", 1, integer(0), "connections each pool keeps open (at most pool_max)"),
    Setting("pool_max", "ONTOOS_POOL_MAX", 8, integer(1), "connections per process"),
    Setting("pool_timeout_s", "ONTOOS_POOL_TIMEOUT", 5.0, number(0),
            "seconds to wait for a free connection before UPSTREAM_UNAVAILABLE"),
    Setting("query_roles", "ONTOOS_QUERY_ROLES", True, FLAG, "SET LOCAL ROLE to the contract role's database role"),
    Setting("role_prefix", "ONTOOS_ROLE_PREFIX", "ontoos_q_", ROLE_PREFIX, "prefix of those database roles"),
    Setting("cost_cache_s", "ONTOOS_COST_CACHE", 300.0, number(0, low_ok=True),
            "seconds the planner's cost estimate of an exploration (same SQL, values and role) is reused; "
            "0: every call"),
    Setting("audit_dsn", "ONTOOS_AUDIT_DSN", None, DSN, "where the audit schema ontoos_audit lives",
            shown_default="the exploration database", secret=True),
    Setting("audit", "ONTOOS_AUDIT", True, FLAG, "record every request"),
    Setting("audit_queue_max", "ONTOOS_AUDIT_QUEUE_MAX", 100_000, integer(1),
            "audit events held in memory while the store is slow or away"),
    Setting("audit_queue_mb", "ONTOOS_AUDIT_QUEUE_MB", 64.0, number(0),
            "MiB of event text held so (past either bound, events are dropped and counted)"),
    Setting("audit_spool", "ONTOOS_AUDIT_SPOOL", None, DIRECTORY_OR_OFF,
            "servers keep each audit event here on local disk too until the store has it, so a process killed "
            "outright loses none (the next start on this machine writes them); off: memory only",
            shown_default="the user's cache dir", computed=_spool_dir),
    Setting("body_timeout_s", "ONTOOS_BODY_TIMEOUT", 30.0, number(0),
            "seconds an HTTP request body may take to arrive (then 408)"),
    Setting("header_timeout_s", "ONTOOS_HEADER_TIMEOUT", 10.0, number(0),
            "seconds an HTTP request's line and headers may take to arrive, from the connection's start or the "
            "previous answer (then 408, or closed if nothing came)"),
    Setting("connections_per_client", "ONTOOS_CONNECTIONS_PER_CLIENT", 64, integer(1),
            "HTTP connections one client address may hold open at once (past it: 429 as it opens); behind a "
            "proxy, every client has the proxy's address"),
    Setting("drain_timeout_s", "ONTOOS_DRAIN_TIMEOUT", 30.0, number(0),
            "on SIGTERM or SIGINT, seconds a server waits for the requests in flight (new ones get 503 and "
            "Retry-After meanwhile) before it stops"),
    Setting("mcp_stateless", "ONTOOS_MCP_STATELESS", False, FLAG,
            "MCP over HTTP keeps no sessions, so any process of a deployment answers any request (handshake-era "
            "clients too; no tools/list_changed stream then); on with serve --workers N > 1"),
    Setting("shared_limits", "ONTOOS_SHARED_LIMITS", False, FLAG,
            "principals' rate limits and in-flight caps hold across every process of a deployment together, kept "
            "in the audit database (ONTOOS_AUDIT_DSN: the primary); on with serve --workers N > 1"),
    Setting("log_format", "ONTOOS_LOG_FORMAT", "text", _name(r"text|json", "text or json"),
            "servers' stderr: text, or JSON lines (with one line per request and its exploration id)"),
    Setting("queries", "ONTOOS_QUERIES", Path("queries.yaml"), NEW_FILE,
            "the named-query registry, for the CLI and the servers alike; a missing file: no named queries (on the "
            "demo contract: the shipped demo registry, until it is written)",
            flag="--queries"),
    Setting("registry", "ONTOOS_REGISTRY", "file", _name(r"file|database", "file or database"),
            "where the named-query registry lives: the file (ONTOOS_QUERIES), or the audit database "
            "(ONTOOS_AUDIT_DSN, else ONTOOS_DSN), where every process on every machine reads the same one "
            "(ontoos queries import FILE writes a file's entries there)"),
    Setting("drift_interval_s", "ONTOOS_DRIFT_INTERVAL", 300.0, number(0, low_ok=True),
            "servers compare the contract with the database every this many seconds (0: only at start and on "
            "NOTIFY ontoos_reload)"),
    Setting("secret", "ONTOOS_SECRET", None, SECRET,
            "signs the cursors to a truncated answer's next page; give every process of one deployment the same",
            shown_default="none: a random one per process (its cursors die with it; a warning at start)",
            secret=True),
    Setting("cursor_ttl_s", "ONTOOS_CURSOR_TTL", 900, integer(1),
            "seconds a cursor to the next page stays valid (then RESULT_EXPIRED)"),
    Setting("min_cli_version", "ONTOOS_MIN_CLI_VERSION", None, VERSION,
            "the oldest CLI this server's answers expect (_notice.min_cli_version); an older one warns",
            shown_default="this version", computed=_own_version),
    Setting("promote_uses", "ONTOOS_PROMOTE_USES", 5, integer(1), "promotion candidates: answered at least this often"),
    Setting("promote_principals", "ONTOOS_PROMOTE_PRINCIPALS", 2, integer(1), "... by at least this many principals"),
    Setting("promote_days", "ONTOOS_PROMOTE_DAYS", 14, integer(1, 3650), "... within this many days"),
    Setting("contract", "ONTOOS_CONTRACT", None, FILE, "the contract YAML", flag="--contract",
            shown_default="the demo contract"),
    Setting("config", "ONTOOS_CONFIG", None, FILE,
            "the HTTP server's configuration (principals, token hashes, limits)", flag="--config",
            shown_default="none: no principals"),
    Setting("role", "ONTOOS_ROLE", None, ROLE, "the contract role of the CLI and of serve --stdio", flag="--role",
            shown_default="none"),
    Setting("debug", "ONTOOS_DEBUG", False, FLAG,
            "the CLI shows tracebacks of internal errors and the database driver's logs"),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
_D = {s.name: s.default for s in SETTINGS}


@dataclass(frozen=True, slots=True)
class Settings:
    """The deployment settings (the table above); `read()` builds one from flags and the environment.
    Constructed directly, every field not given is its default (`data_dir` stays None)."""

    dsn: str | None = _D["dsn"]
    data_dir: Path | None = _D["data_dir"]
    pool_min: int = _D["pool_min"]
    pool_max: int = _D["pool_max"]
    pool_timeout_s: float = _D["pool_timeout_s"]
    query_roles: bool = _D["query_roles"]
    role_prefix: str = _D["role_prefix"]
    cost_cache_s: float = _D["cost_cache_s"]
    audit_dsn: str | None = _D["audit_dsn"]
    audit: bool = _D["audit"]
    audit_queue_max: int = _D["audit_queue_max"]
    audit_queue_mb: float = _D["audit_queue_mb"]
    audit_spool: Path | None = _D["audit_spool"]
    body_timeout_s: float = _D["body_timeout_s"]
    header_timeout_s: float = _D["header_timeout_s"]
    connections_per_client: int = _D["connections_per_client"]
    drain_timeout_s: float = _D["drain_timeout_s"]
    mcp_stateless: bool = _D["mcp_stateless"]
    shared_limits: bool = _D["shared_limits"]
    log_format: str = _D["log_format"]
    queries: Path | None = _D["queries"]
    registry: str = _D["registry"]
    drift_interval_s: float = _D["drift_interval_s"]
    secret: str | None = _D["secret"]
    cursor_ttl_s: int = _D["cursor_ttl_s"]
    min_cli_version: str | None = _D["min_cli_version"]
    promote_uses: int = _D["promote_uses"]
    promote_principals: int = _D["promote_principals"]
    promote_days: int = _D["promote_days"]
    contract: Path | None = _D["contract"]
    config: Path | None = _D["config"]
    role: str | None = _D["role"]
    debug: bool = _D["debug"]

    @classmethod
    def from_env(cls, dsn: str | None = None, env: Mapping[str, str] | None = None, **flags: Any) -> Settings:
        """`read(env, dsn=dsn, **flags)`: kept for the callers written before `read`."""
        return read(env, dsn=dsn, **flags)


assert [f.name for f in fields(Settings)] == [s.name for s in SETTINGS], "Settings and SETTINGS disagree"


# ---------------------------------------------------------------- reading


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def read_one(name: str, raw: Any, source: str | None = None) -> Any:
    """One setting's value from its text (stripped; empty or None: the default), or SettingError
    naming `source` (the variable, unless a flag gave the value)."""
    s = BY_NAME[name]
    text = None if raw is None else _text(raw).strip()
    if not text:
        return s.computed() if s.computed is not None else s.default
    try:
        return s.kind.parse(text)
    except ValueError as e:
        raise s.refusal(source or s.env, _text(raw), str(e)) from None  # str(e): the kind's reason, if any


def read(env: Mapping[str, str] | None = None, /, **flags: Any) -> Settings:
    """The settings: each from its flag (a keyword argument named after the setting, None when
    not given), else its environment variable (`env`, by default `os.environ`), else its default."""
    env = os.environ if env is None else env
    unknown = sorted(set(flags) - set(BY_NAME))
    if unknown:
        raise TypeError(f"no setting {unknown[0]!r}")
    values = {}
    for s in SETTINGS:
        given = flags.get(s.name)
        if given is not None and _text(given).strip():
            values[s.name] = read_one(s.name, given, s.flag or s.name)
        else:
            values[s.name] = read_one(s.name, env.get(s.env), s.env)
    if values["pool_min"] > values["pool_max"]:
        raise SettingError(f"ONTOOS_POOL_MIN={values['pool_min']} is more than ONTOOS_POOL_MAX={values['pool_max']}",
                           hint="the pool keeps at most ONTOOS_POOL_MAX connections: lower ONTOOS_POOL_MIN "
                                "or raise ONTOOS_POOL_MAX")
    return Settings(**values)


def markdown_table(rows: tuple[Setting, ...] = SETTINGS) -> str:
    """The settings as the Markdown table this module's docstring and the README show."""
    lines = ["| setting | env | flag | default | takes | meaning |", "|---|---|---|---|---|---|"]
    for s in rows:
        cells = (s.name, s.env, s.flag or "", s.default_text(), s.kind.takes, s.help)
        lines.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
    return "\n".join(lines)
