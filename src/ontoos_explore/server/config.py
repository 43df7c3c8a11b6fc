"""Server configuration: who may call, as which role, how often. YAML -> ServerConfig -> Authenticator.

    rate_limit: {per_second: 5, burst: 20}          # every principal without one of its own
    principals:
      alice:    {role: analyst, token_sha256: "<hex sha256 of the token>"}
      reviewer: {role: admin,   token_sha256: "...", reviewer: true, rate_limit: {per_minute: 120}}
      batch:    {role: viewer,  token_sha256: "...", rate_limit: false}   # no limit

Tokens are never stored, only their SHA-256; a presented token is hashed and
compared with every entry in constant time (hmac.compare_digest, no early
exit), so neither the comparison nor the position of a match shows in the
timing. Every surface resolves its caller through `Authenticator`.

Rate limits are token buckets per principal: a bucket holds `burst` calls
(default: the rate's own number, e.g. 120 for 120 per minute) and refills at
`per_second` or `per_minute`; each tool call takes one, and a call finding
the bucket empty is refused (RATE_LIMITED, EX412) with the seconds until the
next one is possible. With no `rate_limit` anywhere, nothing is limited.

Requests without a valid token are limited per client address
(`auth_failures`, by default 10 per second in bursts of 100; `false` for no
limit): past it they are answered 429 (EX412) instead of 401, and instead
of one audit event each, the trail gets one `AUTH_FLOOD` gap per episode
saying how many there were. A valid token never draws on it.

    auth_failures: {per_second: 1, burst: 20}

A principal holds at most `mcp_sessions` MCP sessions at once (default 64):
one more is refused 429 (EX412, reason MCP_SESSIONS) until one ends.

A principal runs at most `max_in_flight` explorations and named queries at
once (default 4, per principal `max_in_flight` overrides it): one principal
cannot take the whole connection pool from everyone else; one more is
refused 429 (EX412, reason IN_FLIGHT) at once, with a retry hint.

The dashboard (server/governance_routes.py, server/sessions.py):

    session_hours: 8            # a sign-in lasts this long (then sign in again); logout ends it at once
    secure_cookies: false       # true: the session cookie is Secure even when TLS ends at a proxy
                                # (it always is when the server itself is reached over https)
    allow_self_approval: false  # true: a reviewer may approve a query they promoted themselves
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..contract import Contract
from ..errors import ContractError
from ..names import fold

HEX64 = re.compile(r"[0-9a-f]{64}")


class RateLimitConfig(BaseModel):
    """A token bucket: `per_second` or `per_minute` (one of them), and `burst` calls at once."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    per_second: float | None = Field(None, gt=0, allow_inf_nan=False, description="calls per second, on average")
    per_minute: float | None = Field(None, gt=0, allow_inf_nan=False, description="calls per minute, on average")
    burst: int | None = Field(None, ge=1, description="calls at once (the bucket's size)")

    @model_validator(mode="after")
    def _one_rate(self) -> "RateLimitConfig":
        if (self.per_second is None) == (self.per_minute is None):
            raise ValueError("give exactly one of per_second and per_minute")
        return self

    def limit(self) -> "RateLimit":
        if self.per_second is not None:
            return RateLimit(self.per_second, self.burst or max(1, math.ceil(self.per_second)), "second")
        return RateLimit(self.per_minute / 60.0, self.burst or max(1, math.ceil(self.per_minute)), "minute")


class PrincipalConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    role: str
    token_sha256: str = Field(description="hex SHA-256 of the bearer token")
    reviewer: bool = False
    metrics: bool = Field(False, description="may read /metrics from anywhere (loopback may, unless metrics_loopback "
                                             "is false)")
    rate_limit: RateLimitConfig | Literal[False] | None = Field(
        None, description="this principal's limit; false for none; absent for the server's rate_limit")
    max_in_flight: int | None = Field(None, ge=1, description="queries at once; absent: the server's max_in_flight")

    @field_validator("token_sha256")
    @classmethod
    def _hex(cls, v: str) -> str:
        v = v.strip().lower()
        if not HEX64.fullmatch(v):
            raise ValueError("token_sha256 must be 64 hex characters (sha256 of the token)")
        return v


DEFAULT_AUTH_FAILURES = RateLimitConfig(per_second=10, burst=100)
DEFAULT_IN_FLIGHT = 4  # queries one principal runs at once (the pool holds 8 connections by default)


class ServerConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    rate_limit: RateLimitConfig | None = Field(None, description="the limit of every principal without its own")
    auth_failures: RateLimitConfig | Literal[False] | None = Field(
        None, description="requests without a valid token, per client address; absent: 10 per second in bursts "
        "of 100; false: no limit")
    mcp_sessions: int = Field(64, ge=1, description="MCP sessions one principal may hold open at once")
    metrics_loopback: bool = Field(True, description="/metrics answers loopback without a token (false behind a "
                                                     "proxy on the same machine, whose clients all look local)")
    max_in_flight: int = Field(DEFAULT_IN_FLIGHT, ge=1,
                               description="explorations and named queries one principal may run at once")
    session_hours: float = Field(8.0, gt=0, le=24 * 31, allow_inf_nan=False,
                                 description="how long a dashboard sign-in lasts")
    secure_cookies: bool = Field(False, description="the session cookie is Secure even without https here (a TLS proxy)")
    allow_self_approval: bool = Field(False, description="a reviewer may approve a query they promoted")
    principals: dict[str, PrincipalConfig] = {}

    def auth_failure_limit(self) -> "RateLimit | None":
        if self.auth_failures is False:
            return None
        return (self.auth_failures or DEFAULT_AUTH_FAILURES).limit()

    def rate_of(self, pc: PrincipalConfig) -> "RateLimit | None":
        own = pc.rate_limit
        if own is False:
            return None
        chosen = own if own is not None else self.rate_limit
        return chosen.limit() if chosen is not None else None


@dataclass(frozen=True, slots=True)
class RateLimit:
    per_second: float  # the refill rate
    burst: int  # the bucket's size
    unit: str = "second"  # how the configuration said it, for messages

    def describe(self) -> str:
        n = self.per_second * (60 if self.unit == "minute" else 1)
        return f"{n:g} calls per {self.unit} (bursts of {self.burst})"


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    role: str
    reviewer: bool = False
    rate: RateLimit | None = None  # None: not limited
    max_in_flight: int = DEFAULT_IN_FLIGHT  # queries at once
    metrics: bool = False  # may read /metrics


class RateLimiter:
    """Token buckets by key (a principal's name, a client address). Single event loop: no locks
    needed. At most `max_keys` buckets: past it the least recently used goes (it would have
    refilled anyway, unless `max_keys` callers hammer at once)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_keys: int = 10_000) -> None:
        self.clock = clock
        self.max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when counted)

    def take(self, principal: Principal) -> float:
        """Take one call from the principal's bucket: 0.0 if it may go ahead, else the seconds to wait."""
        return 0.0 if principal.rate is None else self.take_key(principal.name, principal.rate)

    def take_key(self, key: str, limit: RateLimit) -> float:
        """Take one call from `key`'s bucket of `limit`: 0.0 to go ahead, else the seconds to wait."""
        now = self.clock()
        tokens, then = self._buckets.pop(key, (float(limit.burst), now))  # re-inserted below: most recent last
        tokens = min(float(limit.burst), tokens + max(0.0, now - then) * limit.per_second)
        if len(self._buckets) >= self.max_keys:
            del self._buckets[next(iter(self._buckets))]
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / limit.per_second

    def tokens(self, key: str) -> float | None:
        """The tokens `key`'s bucket held when it was last counted (None: no bucket)."""
        counted = self._buckets.get(key)
        return None if counted is None else counted[0]

    def __len__(self) -> int:
        return len(self._buckets)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_config(path: str | Path, contract: Contract) -> ServerConfig:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        config = ServerConfig.model_validate(data)
    except OSError as e:
        raise ContractError(f"cannot read server config {p}: {e.strerror or e}", hint="check --config or ONTOOS_CONFIG") from None
    except (yaml.YAMLError, ValidationError) as e:
        first = e.errors(include_url=False)[0] if isinstance(e, ValidationError) else None
        where = ".".join(str(x) for x in first["loc"]) + ": " + first["msg"] if first else "not valid YAML"
        raise ContractError(f"{p}: {where}") from None
    for name, pc in config.principals.items():
        if contract.role(pc.role) is None:
            from ..names import did_you_mean

            hint, _ = did_you_mean(pc.role, sorted(contract.roles), "roles")
            raise ContractError(f"{p}: principals.{name}.role: '{pc.role}' is not a role of the contract", hint=hint)
    return config


OWS = " \t"  # optional whitespace around a token (RFC 9110 5.6.3), nothing else


class Authenticator:
    def __init__(self, config: ServerConfig, contract: Contract) -> None:
        self.failure_limit = config.auth_failure_limit()  # requests without a valid token, per address
        self.metrics_loopback = config.metrics_loopback
        self._entries = [
            (bytes.fromhex(pc.token_sha256),
             Principal(name, contract.role(pc.role).name, pc.reviewer, config.rate_of(pc),
                       pc.max_in_flight or config.max_in_flight, pc.metrics))
            for name, pc in sorted(config.principals.items())
        ]

    def __len__(self) -> int:
        return len(self._entries)

    def authenticate(self, token: str | None) -> Principal | None:
        if not token:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found = None
        for stored, principal in self._entries:
            if hmac.compare_digest(stored, digest):
                found = principal
        return found

    def bearer(self, sent: list[str]) -> Principal | None:
        """The principal of the one `Authorization: Bearer <token>` header sent (`sent`: every such header),
        else None: two headers are ambiguous (a proxy may check one, the app the other)."""
        if len(sent) != 1:
            return None
        scheme, _, token = sent[0].partition(" ")
        return self.authenticate(token.strip(OWS)) if scheme.lower() == "bearer" else None

    def by_name(self, name: str) -> Principal | None:
        return next((p for _, p in self._entries if fold(p.name) == fold(name)), None)
