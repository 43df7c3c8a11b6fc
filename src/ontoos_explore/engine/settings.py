"""Engine, deployment settings: where the database is and how to use it.

The settings are one record for the whole deployment, declared and read in
`ontoos_explore/settings.py` (flags override environment variables, which
override the defaults; a bad value is refused with EX907 naming the
variable); `Settings` is re-exported here for the engine's callers. The rows
the engine reads:

| setting | env | flag | default | takes | meaning |
|---|---|---|---|---|---|
| dsn | ONTOOS_DSN | --dsn | none: the embedded server | a PostgreSQL connection string | PostgreSQL to explore |
| data_dir | ONTOOS_DATA_DIR | | the user's cache dir | the path of a directory (made if missing) | where the embedded server keeps its data |
| pool_min | ONTOOS_POOL_MIN | | 1 | an integer >= 0 | connections each pool keeps open (at most pool_max) |
| pool_max | ONTOOS_POOL_MAX | | 8 | an integer >= 1 | connections per process |
| pool_timeout_s | ONTOOS_POOL_TIMEOUT | | 5 | a number > 0 | seconds to wait for a free connection before UPSTREAM_UNAVAILABLE |
| query_roles | ONTOOS_QUERY_ROLES | | on | on or off | SET LOCAL ROLE to the contract role's database role |
| role_prefix | ONTOOS_ROLE_PREFIX | | ontoos_q_ | letters, digits and _, at most 32, not starting with a digit | prefix of those database roles |
| cost_cache_s | ONTOOS_COST_CACHE | | 300 | a number >= 0 | seconds the planner's cost estimate of an exploration (same SQL, values and role) is reused; 0: every call |
"""

from __future__ import annotations

from ..settings import Settings, SettingError, read

__all__ = ["Settings", "SettingError", "read"]

ENGINE_SETTINGS = ("dsn", "data_dir", "pool_min", "pool_max", "pool_timeout_s", "query_roles", "role_prefix",
                   "cost_cache_s")
