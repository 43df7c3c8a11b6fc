"""runtime.py: where the database is, on real PostgreSQL servers.

- With a DSN the database is used as it is, and its query roles must exist: `check_roles`
  refuses a missing one with EX906 (DATABASE_SETUP) naming it and the command that makes it,
  an unreachable server with EX601 (never its address), and checks nothing with
  ONTOOS_QUERY_ROLES off.
- With no DSN, `prepare_embedded` starts the embedded server in the data directory (and reuses
  it the next time, data kept), and applies the contract's grants.
- `open_explorer` is an Explorer over a pool that is closed when the block ends.
"""

from __future__ import annotations

import warnings

import psycopg
import pytest

from ontoos_explore.engine import embedded
from ontoos_explore.engine.settings import Settings
from ontoos_explore.errors import ExploreError
from ontoos_explore.runtime import check_roles, open_explorer, prepare_embedded, resolve_dsn
from tests import sleepy_lake


def refusal(fn, *args) -> ExploreError:
    with pytest.raises(ExploreError) as caught:
        fn(*args)
    return caught.value


def test_the_roles_the_contract_needs_are_there(pg_dsn, demo):
    check_roles(pg_dsn, demo, Settings(dsn=pg_dsn, role_prefix="ontoos_q_"))  # conftest granted them
    assert resolve_dsn(Settings(dsn=pg_dsn, role_prefix="ontoos_q_"), demo) == pg_dsn


def test_a_missing_role_is_ex906_naming_it_and_the_command_that_makes_it(pg_dsn, demo):
    settings = Settings(dsn=pg_dsn, role_prefix="ontoos_nobody_")
    err = refusal(check_roles, pg_dsn, demo, settings)
    first = "ontoos_nobody_" + next(iter(demo.roles))
    assert (err.code, err.subtype, err.type) == ("EX906", "DATABASE_SETUP", "internal")
    assert err.message == f"the database has no role {first} for the contract's roles"
    assert "ontoos grants" in err.hint and "--apply" in err.hint and "ONTOOS_QUERY_ROLES=off" in err.hint
    assert refusal(resolve_dsn, settings, demo).code == "EX906"  # resolve_dsn checks a DSN it is given


def test_one_role_missing_of_several_is_enough(pg_dsn, demo):
    extra = sleepy_lake.contract("nowhere")  # roles hasty and patient, never granted under this prefix
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS ontoos_part_hasty")
        conn.execute("CREATE ROLE ontoos_part_hasty NOLOGIN")
    try:
        err = refusal(check_roles, pg_dsn, extra, Settings(dsn=pg_dsn, role_prefix="ontoos_part_"))
        assert err.message == "the database has no role ontoos_part_patient for the contract's roles"
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP ROLE IF EXISTS ontoos_part_hasty")


def test_an_unreachable_server_is_ex601_without_its_address(demo, tmp_path):
    dsn = f"postgresql://postgres@/postgres?host={tmp_path}&connect_timeout=2"
    err = refusal(check_roles, dsn, demo, Settings(dsn=dsn))
    assert (err.code, err.subtype) == ("EX601", "UPSTREAM_UNAVAILABLE")
    assert str(tmp_path) not in err.message + (err.hint or "")


def test_with_query_roles_off_nothing_is_checked(demo, tmp_path):
    dsn = f"postgresql://postgres@/postgres?host={tmp_path}&connect_timeout=2"  # nothing listens: not even tried
    assert check_roles(dsn, demo, Settings(dsn=dsn, query_roles=False)) is None
    assert resolve_dsn(Settings(dsn=dsn, query_roles=False), demo) == dsn


def test_no_dsn_starts_the_embedded_server_in_the_data_dir_grants_and_reuses_it(tmp_path):
    data_dir = tmp_path / "embedded"
    schema, prefix = "rt", "ontoos_rt_"
    contract = sleepy_lake.contract(schema)
    bare = Settings(data_dir=data_dir, query_roles=False)
    dsn = resolve_dsn(bare, contract, load_demo=False)
    try:
        assert (data_dir / "PG_VERSION").exists()  # a cluster made there
        sleepy_lake.install(dsn, schema, "ontoos_rt_other_")  # its tables (granted to other roles)
        # started again with grants on: the same server, its data kept, the contract's roles made
        again = prepare_embedded(Settings(data_dir=data_dir, role_prefix=prefix), contract, load_demo=False)
        assert again == dsn
        with psycopg.connect(dsn) as conn:
            assert conn.execute(f"SELECT count(*) FROM {schema}.things").fetchone()[0] == 500
        check_roles(dsn, contract, Settings(dsn=dsn, role_prefix=prefix))
        with psycopg.connect(dsn) as conn:  # and granted: the role reads the contract's table, not its secret
            conn.execute(f"SET ROLE {prefix}patient")
            assert conn.execute(f"SELECT count(id) FROM {schema}.things").fetchone()[0] == 500
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT token FROM {schema}.things LIMIT 1")
    finally:
        _stop(data_dir)


def _stop(data_dir) -> None:
    import pgserver

    server = embedded.start(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pgserver.pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)


@pytest.mark.anyio
async def test_open_explorer_answers_and_closes_its_pool(pg_dsn, demo):
    settings = Settings(dsn=pg_dsn, pool_max=1, pool_timeout_s=1)
    async with open_explorer(demo, settings, pg_dsn) as explorer:
        answer = await explorer.explore("explore workloads fields name limit 2", "analyst")
        assert answer.ok and answer.envelope["meta"]["rows"] == 2
        pool = explorer.executor.pool
        assert not pool.closed
    assert pool.closed
    after = await explorer.explore("explore workloads fields name limit 2", "analyst")
    assert after.envelope["error"]["code"] == "EX601"  # an answer still, never an exception
