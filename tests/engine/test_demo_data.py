"""Demo lakehouse: generated rows and the loaded schema agree with the demo contract.

Expectations come from the contract (datasets, columns, types, secret flags,
enum values, relations, always-filters), not from the generator: a column
renamed on one side only, an enum value the contract does not know, a secret
that loses its marker or a marker that leaks into a readable column fails
here. The database is the embedded PostgreSQL (pgserver) in a temporary
directory, or the one named by ONTOOS_TEST_DSN (its schema `lake` is replaced).
"""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import psycopg
import pytest
from psycopg import sql

from ontoos_explore.engine import demo_data
from ontoos_explore.engine.demo_data import COLUMNS, SECRET_MARKER, SNAPSHOT

# What each contract type may be in PostgreSQL (information_schema.columns.data_type) and in Python.
PG_TYPES = {
    "text": {"text"}, "enum": {"text"}, "integer": {"integer", "bigint"}, "numeric": {"numeric"},
    "boolean": {"boolean"}, "date": {"date"}, "timestamp": {"timestamp with time zone"},
}
PY_TYPES = {
    "text": (str,), "enum": (str,), "integer": (int,), "numeric": (Decimal, int), "boolean": (bool,),
    "date": (dt.date,), "timestamp": (dt.datetime,),
}
# Rough row counts at scale 1 (the generator's brief); each must be met within a third.
TARGETS = {"gitlab_projects": 200, "gitlab_repo_stats": 200, "k8s_workloads": 800, "k8s_containers": 2500,
           "container_images": 1000, "code_archives": 1500, "code_table_refs": 20000, "databases": 300,
           "db_tables": 6000, "config_entries": 8000, "hosts": 150}


@pytest.fixture(scope="module")
def rows():
    return demo_data.generate()


@pytest.fixture(scope="module")
def dsn(tmp_path_factory):
    """ONTOOS_TEST_DSN, or a fresh embedded server for this module."""
    if os.environ.get("ONTOOS_TEST_DSN"):
        yield os.environ["ONTOOS_TEST_DSN"]
        return
    pgserver = pytest.importorskip("pgserver")
    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def conn(dsn):
    """A connection to a database holding the demo at scale 1, seed 7."""
    with psycopg.connect(dsn, autocommit=True) as c:
        demo_data.load(c)
        yield c


def datasets(contract):
    return list(contract.datasets.values())


def column_values(rows, ds, column):
    i = COLUMNS[ds.table_name].index(column)
    return [r[i] for r in rows[ds.table_name]]


def scalar(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def table_sql(ds):
    return sql.Identifier(ds.schema_name, ds.table_name)


# ---------------------------------------------------------------- generate()


def test_generate_is_deterministic(rows):
    assert demo_data.generate(1.0, 7) == rows
    other = demo_data.generate(1.0, 8)
    assert set(other) == set(rows)
    for table in rows:
        assert other[table] != rows[table], f"{table} ignores the seed"


def test_row_counts_near_targets_and_linear_in_scale(rows):
    for table, target in TARGETS.items():
        assert target * 2 / 3 <= len(rows[table]) <= target * 4 / 3, (table, len(rows[table]))
    double = demo_data.generate(2.0)
    for table in rows:
        assert 1.7 <= len(double[table]) / len(rows[table]) <= 2.3, (table, len(double[table]), len(rows[table]))
    tenth = demo_data.generate(0.1)
    for table in rows:
        assert 3 <= len(tenth[table]) < len(rows[table]), (table, len(tenth[table]))


def test_generate_refuses_a_non_positive_scale():
    with pytest.raises(ValueError):
        demo_data.generate(0)


def test_generated_tables_and_columns_are_the_contracts(demo, rows):
    assert set(rows) == {ds.table_name for ds in datasets(demo)}
    for ds in datasets(demo):
        assert ds.schema_name == demo_data.SCHEMA
        assert COLUMNS[ds.table_name] == tuple(ds.columns), ds.name
        assert all(len(r) == len(ds.columns) for r in rows[ds.table_name]), ds.name


def test_generated_values_have_the_contract_types(demo, rows):
    for ds in datasets(demo):
        for name, col in ds.columns.items():
            values = [v for v in column_values(rows, ds, name) if v is not None]
            assert values, f"{ds.name}.{name} is always null"
            bad = [v for v in values if not isinstance(v, PY_TYPES[col.type])
                   or (col.type == "integer" and isinstance(v, bool))
                   or (col.type == "date" and isinstance(v, dt.datetime))
                   or (col.type == "timestamp" and v.tzinfo is None)]
            assert not bad, f"{ds.name}.{name} ({col.type}): {bad[:3]}"
            if col.type in ("integer", "numeric"):  # ids, counts, sizes, a confidence: none is negative
                assert min(values) >= 0, f"{ds.name}.{name}: {min(values)}"


def test_generated_ids_are_unique_and_nothing_happens_after_the_snapshot(demo, rows):
    for ds in datasets(demo):
        first = next(iter(ds.columns))
        ids = column_values(rows, ds, first)
        assert len(set(ids)) == len(ids), f"{ds.name}.{first} repeats"
        for name, col in ds.columns.items():
            if col.type == "timestamp":
                assert all(v is None or v <= SNAPSHOT for v in column_values(rows, ds, name)), name
            if col.type == "date":
                assert all(v <= SNAPSHOT.date() for v in column_values(rows, ds, name)), name


def test_generated_enums_stay_within_the_contract_and_cover_it(demo, rows):
    for ds in datasets(demo):
        for name, col in ds.columns.items():
            if col.type == "enum":
                assert set(column_values(rows, ds, name)) == set(col.values), f"{ds.name}.{name}"


def test_secret_marker_in_every_secret_value_and_nowhere_else_generated(demo, rows):
    secrets = 0
    for ds in datasets(demo):
        for name, col in ds.columns.items():
            values = column_values(rows, ds, name)
            marked = [isinstance(v, str) and SECRET_MARKER in v for v in values]
            if col.secret:
                secrets += 1
                assert all(marked), f"{ds.name}.{name} has a value without the marker"
            else:
                assert not any(marked), f"{ds.name}.{name} is readable and carries the marker"
    assert secrets == 7


def test_generated_always_filters_hold_both_values_at_small_scale(demo):
    tenth = demo_data.generate(0.1)
    for ds in datasets(demo):
        for rule in ds.always_filter:
            values = column_values(tenth, ds, rule.column)
            assert rule.value in values and any(v != rule.value for v in values), f"{ds.name}.{rule.column}"


# ---------------------------------------------------------------- load()


def test_loaded_schema_matches_the_contract(demo, conn):
    tables = {r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [demo_data.SCHEMA])}
    assert tables == {ds.table_name for ds in datasets(demo)} | {"demo_meta", demo.evidence.table_name}
    for ds in datasets(demo):
        found = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            [ds.schema_name, ds.table_name]).fetchall()
        assert [name for name, _ in found] == list(ds.columns), ds.name
        for name, data_type in found:
            assert data_type in PG_TYPES[ds.columns[name].type], f"{ds.name}.{name}: {data_type}"


def test_the_publish_log_has_each_sources_batches_as_the_contract_reads_them(demo, conn):
    """Every source a dataset names has its batches, the newest published most recently; one source
    says only when it published, one is past the contract's threshold; hosts has no sources."""
    from ontoos_explore.contract import PUBLISH_LOG_COLUMNS

    log = demo.evidence
    columns = [r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
        "ORDER BY ordinal_position", [log.schema_name, log.table_name])]
    assert columns == list(PUBLISH_LOG_COLUMNS)
    current = {source: (collected, published, age) for source, collected, published, age in conn.execute(
        "SELECT DISTINCT ON (source) source, collected_at, published_at, "
        "extract(epoch FROM now() - coalesce(collected_at, published_at)) FROM lake.publish_log "
        "ORDER BY source, published_at DESC")}
    named = {s for ds in datasets(demo) for s in ds.sources}
    assert named <= set(current) and not demo.dataset("hosts").sources
    assert [s for s, (collected, _, _) in current.items() if collected is None] == ["registry"]
    stale = [s for s, (_, _, age) in current.items() if age > log.threshold_s]
    assert stale == ["cmdb"]
    per_source = dict(conn.execute("SELECT source, count(*) FROM lake.publish_log GROUP BY source").fetchall())
    assert set(per_source.values()) == {demo_data.BATCHES}


def test_load_counts_the_rows_it_loaded(conn, rows):
    counts = {t: scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("lake", t))) for t in COLUMNS}
    assert counts == {t: len(r) for t, r in rows.items()}
    meta = demo_data.loaded(conn)
    assert meta["generator_version"] == str(demo_data.GENERATOR_VERSION)
    assert (meta["seed"], float(meta["scale"]), int(meta["rows"])) == ("7", 1.0, sum(counts.values()))


def test_loaded_enums_stay_within_the_contract(demo, conn):
    for ds in datasets(demo):
        for name, col in ds.columns.items():
            if col.type == "enum":
                found = {r[0] for r in conn.execute(sql.SQL("SELECT DISTINCT {} FROM {}").format(
                    sql.Identifier(name), table_sql(ds)))}
                assert found == set(col.values), f"{ds.name}.{name}"


def test_enum_checks_refuse_other_values(conn):
    with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
        conn.execute("UPDATE lake.k8s_workloads SET kind = %s WHERE workload_id = 1", ["Pod"])


def test_secret_marker_in_every_secret_value_and_nowhere_else_loaded(demo, conn):
    for ds in datasets(demo):
        for name, col in ds.columns.items():
            total, marked = conn.execute(sql.SQL(
                "SELECT count(*), count(*) FILTER (WHERE strpos({}::text, %s) > 0) FROM {}").format(
                sql.Identifier(name), table_sql(ds)), [SECRET_MARKER]).fetchone()
            assert total > 0, ds.name
            assert marked == (total if col.secret else 0), f"{ds.name}.{name}: {marked} of {total} marked"


def child_side(relation, demo):
    """(child, parent, child columns, parent columns) of a key relation: the many side points to the one;
    a one_to_one relation named in its from-dataset's exists_with points from the child too."""
    pairs = list(relation.join.items())
    if relation.cardinality == "many_to_one" or relation in demo.parents_of(relation.from_):
        return relation.from_, relation.to, [a for a, _ in pairs], [b for _, b in pairs]
    return relation.to, relation.from_, [b for _, b in pairs], [a for a, _ in pairs]


def unmatched(conn, demo, child, parent, child_cols, parent_cols):
    c, p = demo.dataset(child), demo.dataset(parent)
    on = sql.SQL(" AND ").join(sql.SQL("p.{} = c.{}").format(sql.Identifier(pc), sql.Identifier(cc))
                               for cc, pc in zip(child_cols, parent_cols))
    return scalar(conn, sql.SQL("SELECT count(*) FROM {} c WHERE NOT EXISTS (SELECT 1 FROM {} p WHERE {})").format(
        table_sql(c), table_sql(p), on))


def test_every_key_relation_finds_its_parent(demo, conn):
    checked = 0
    for rel in demo.relations.values():
        if rel.cardinality == "many_to_many":
            continue
        child, parent, ccols, pcols = child_side(rel, demo)
        assert unmatched(conn, demo, child, parent, ccols, pcols) == 0, rel.name
        if rel.cardinality == "one_to_one":  # and every parent has its one child
            assert unmatched(conn, demo, parent, child, pcols, ccols) == 0, rel.name
        checked += 1
    assert checked == 17  # 13, and the 4 child-to-parent relations exists_with follows


def test_foreign_keys_are_the_key_relations(demo, conn):
    expected = set()
    for rel in demo.relations.values():
        if rel.cardinality != "many_to_many":
            child, parent, ccols, pcols = child_side(rel, demo)
            expected.add((demo.dataset(child).table_name, tuple(ccols), demo.dataset(parent).table_name, tuple(pcols)))
    found = conn.execute("""
        SELECT c.conrelid::regclass::text, array_agg(a.attname ORDER BY k.i),
               c.confrelid::regclass::text, array_agg(b.attname ORDER BY k.i)
        FROM pg_constraint c
        CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(ck, fk, i)
        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.ck
        JOIN pg_attribute b ON b.attrelid = c.confrelid AND b.attnum = k.fk
        WHERE c.contype = 'f' AND c.connamespace = 'lake'::regnamespace
        GROUP BY c.oid, c.conrelid, c.confrelid""").fetchall()
    found = {(t.removeprefix("lake."), tuple(cc), p.removeprefix("lake."), tuple(pc)) for t, cc, p, pc in found}
    assert found == expected


def test_the_cluster_join_meets_hosts_for_most_workloads(demo, conn):
    for rel in demo.relations.values():
        if rel.cardinality != "many_to_many":
            continue
        src, dst = demo.dataset(rel.from_), demo.dataset(rel.to)
        (a, b), = rel.join.items()
        total = scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(table_sql(src)))
        met = scalar(conn, sql.SQL(
            "SELECT count(*) FROM {} s WHERE EXISTS (SELECT 1 FROM {} d WHERE d.{} = s.{})").format(
            table_sql(src), table_sql(dst), sql.Identifier(b), sql.Identifier(a)))
        assert met >= 0.9 * total > 0, (rel.name, met, total)


def test_always_filters_filter_some_rows(demo, conn):
    rules = 0
    for ds in datasets(demo):
        for rule in ds.always_filter:
            assert rule.op == "="
            kept, dropped = conn.execute(sql.SQL(
                "SELECT count(*) FILTER (WHERE {c} = %s), count(*) FILTER (WHERE {c} IS DISTINCT FROM %s) FROM {t}"
            ).format(c=sql.Identifier(rule.column), t=table_sql(ds)), [rule.value, rule.value]).fetchone()
            assert kept > 0 and dropped > 0, (ds.name, rule.column, kept, dropped)
            rules += 1
    assert rules == 3


def test_loaded_is_none_without_the_schema(conn):
    with conn.transaction(force_rollback=True):
        conn.execute("DROP SCHEMA lake CASCADE")
        assert demo_data.loaded(conn) is None
    assert demo_data.loaded(conn) is not None


def test_ensure_loads_only_when_the_demo_differs(conn):
    try:
        assert demo_data.ensure(conn) is False  # the fixture loaded this very demo
        assert demo_data.ensure(conn, scale=0.1, seed=11) is True
        assert demo_data.ensure(conn, scale=0.1, seed=11) is False
        meta = demo_data.loaded(conn)
        assert (meta["seed"], meta["scale"]) == ("11", "0.1")
        assert scalar(conn, "SELECT count(*) FROM lake.gitlab_projects") == len(
            demo_data.generate(0.1, 11)["gitlab_projects"])
        conn.execute("UPDATE lake.demo_meta SET value = '0' WHERE key = 'generator_version'")
        assert demo_data.ensure(conn, scale=0.1, seed=11) is True  # another generator: reload
    finally:  # the other tests of this module read the scale 1, seed 7 demo
        demo_data.ensure(conn)
    assert demo_data.ensure(conn) is False
    assert demo_data.loaded(conn)["seed"] == "7"


def test_load_commits_on_a_connection_without_autocommit(dsn, conn):
    with psycopg.connect(dsn) as c:
        c.execute("SELECT 1")  # the caller has a transaction open
        demo_data.load(c, scale=0.1, seed=3)
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert demo_data.loaded(conn)["seed"] == "3"  # visible from another session
    demo_data.load(conn)
    assert demo_data.loaded(conn)["seed"] == "7"


def test_load_works_on_connections_binding_dollar_parameters(dsn, conn):
    """The executor runs compiled SQL ($n parameters) through psycopg.RawCursor connections."""
    with psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.RawCursor) as c:
        assert demo_data.ensure(c) is False
        assert demo_data.load(c, scale=0.1)["gitlab_projects"] == len(demo_data.generate(0.1)["gitlab_projects"])
        assert demo_data.ensure(c) is True
        assert demo_data.loaded(c)["scale"] == "1.0"
