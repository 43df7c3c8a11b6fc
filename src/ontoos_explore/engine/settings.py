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
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def _cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ontoos-explore")) / "pg"


def _flag(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() not in ("0", "off", "false", "no")


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

    @classmethod
    def from_env(cls, dsn: str | None = None, env: dict[str, str] | None = None, **overrides) -> "Settings":
        env = os.environ if env is None else env
        return cls(
            dsn=dsn or env.get("ONTOOS_DSN") or None,
            data_dir=Path(env["ONTOOS_DATA_DIR"]) if env.get("ONTOOS_DATA_DIR") else _cache_dir(),
            pool_max=int(env.get("ONTOOS_POOL_MAX", 8)),
            pool_timeout_s=float(env.get("ONTOOS_POOL_TIMEOUT", 5)),
            query_roles=_flag(env.get("ONTOOS_QUERY_ROLES"), True),
            role_prefix=env.get("ONTOOS_ROLE_PREFIX", "ontoos_q_"),
            heavy_max_cost=float(env.get("ONTOOS_HEAVY_MAX_COST", 1_000_000)),
            cost_cache_s=float(env.get("ONTOOS_COST_CACHE", 300)),
            audit_dsn=env.get("ONTOOS_AUDIT_DSN") or None,
            audit=_flag(env.get("ONTOOS_AUDIT"), True),
            **overrides,
        )
