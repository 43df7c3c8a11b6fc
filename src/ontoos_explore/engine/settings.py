"""Engine, deployment settings: where the database is and how to use it.

Deployment settings are not the contract: the contract says what exists and
who may read what; these say where PostgreSQL is and how connections behave.
Flags override environment variables, which override the defaults.

| setting | env | default | meaning |
|---|---|---|---|
| dsn | ONTOOS_DSN | None | PostgreSQL to use; None starts the embedded one |
| data_dir | ONTOOS_DATA_DIR | user cache dir | where the embedded server keeps its data |
| pool_max | ONTOOS_POOL_MAX | 8 | connections per process |
| pool_timeout_s | ONTOOS_POOL_TIMEOUT | 5 | wait for a free connection before UPSTREAM_UNAVAILABLE |
| query_roles | ONTOOS_QUERY_ROLES | on | SET LOCAL ROLE to the contract role's database role |
| role_prefix | ONTOOS_ROLE_PREFIX | ontoos_q_ | prefix of those database roles |
| heavy_max_cost | ONTOOS_HEAVY_MAX_COST | 1000000 | cost ceiling for heavy datasets when the role sets none |
| cost_cache_s | ONTOOS_COST_CACHE | 300 | how long the planner's cost estimate of an exploration (same SQL, values and role) is reused; 0: every call |
| audit_dsn | ONTOOS_AUDIT_DSN | the exploration database | where the audit schema `ontoos_audit` lives |
| audit | ONTOOS_AUDIT | on | record every request |
| audit_queue_max | ONTOOS_AUDIT_QUEUE_MAX | 100000 | audit events held in memory while the store is slow or away |
| audit_queue_mb | ONTOOS_AUDIT_QUEUE_MB | 64 | MiB of event text held so (governance/audit.py: past either, dropped and counted) |

A number that does not parse, or is out of range, is refused naming the
variable (ContractError, EX902), never read as something else.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ContractError


def _cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ontoos-explore")) / "pg"


def _flag(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() not in ("0", "off", "false", "no")


def _number(env, name: str, default: float, cast=float, low: float = 0.0, low_ok: bool = False):
    """A numeric setting from `env`: `cast` of its text, above `low` (or equal, if `low_ok`)."""
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = cast(raw.strip())
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value < low or (value == low and not low_ok):
        kind = "an integer" if cast is int else "a number"
        raise ContractError(f"{name}={raw[:40]!r} is not a valid setting",
                            hint=f"{name} takes {kind} {'>=' if low_ok else '>'} {low:g}; unset it for the default")
    return value


@dataclass(frozen=True, slots=True)
class Settings:
    dsn: str | None = None
    data_dir: Path | None = None
    pool_min: int = 1
    pool_max: int = 8
    pool_timeout_s: float = 5.0
    query_roles: bool = True
    role_prefix: str = "ontoos_q_"
    heavy_max_cost: float = 1_000_000.0
    cost_cache_s: float = 300.0
    audit_dsn: str | None = None
    audit: bool = True
    audit_queue_max: int = 100_000
    audit_queue_mb: float = 64.0

    @classmethod
    def from_env(cls, dsn: str | None = None, env: dict[str, str] | None = None, **overrides) -> "Settings":
        env = os.environ if env is None else env
        return cls(
            dsn=dsn or env.get("ONTOOS_DSN") or None,
            data_dir=Path(env["ONTOOS_DATA_DIR"]) if env.get("ONTOOS_DATA_DIR") else _cache_dir(),
            pool_max=_number(env, "ONTOOS_POOL_MAX", 8, int, 1, low_ok=True),
            pool_timeout_s=_number(env, "ONTOOS_POOL_TIMEOUT", 5.0),
            query_roles=_flag(env.get("ONTOOS_QUERY_ROLES"), True),
            role_prefix=env.get("ONTOOS_ROLE_PREFIX", "ontoos_q_"),
            heavy_max_cost=_number(env, "ONTOOS_HEAVY_MAX_COST", 1_000_000.0),
            cost_cache_s=_number(env, "ONTOOS_COST_CACHE", 300.0, low_ok=True),
            audit_dsn=env.get("ONTOOS_AUDIT_DSN") or None,
            audit=_flag(env.get("ONTOOS_AUDIT"), True),
            audit_queue_max=_number(env, "ONTOOS_AUDIT_QUEUE_MAX", 100_000, int, 1, low_ok=True),
            audit_queue_mb=_number(env, "ONTOOS_AUDIT_QUEUE_MB", 64.0),
            **overrides,
        )
