"""The deployment settings (src/ontoos_explore/settings.py): one table, one frozen record, read
once at start; flags over the environment over the defaults; every setting refuses a bad value
with EX907 naming its variable and what it takes (never EX902, the contract's), and the CLI
answers one with an envelope, never a traceback. The tables in the docs are the table's own."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ontoos_explore import settings as st
from ontoos_explore.errors import ExploreError
from ontoos_explore.governance.report import Rule

ROOT = Path(__file__).resolve().parents[1]
ONTOOS = Path(sys.executable).parent / "ontoos"


def refusal(env: dict[str, str] | None = None, **flags) -> ExploreError:
    with pytest.raises(ExploreError) as e:
        st.read(env or {}, **flags)
    return e.value


# ---------------------------------------------------------------- the table and the record


def test_every_setting_is_one_row_and_one_field_of_the_record():
    assert [f.name for f in dataclasses.fields(st.Settings)] == [s.name for s in st.SETTINGS]
    envs = [s.env for s in st.SETTINGS]
    assert len(set(envs)) == len(envs) and all(e.startswith("ONTOOS_") for e in envs)
    for s in st.SETTINGS:
        assert s.help and s.kind.takes, s.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.Settings().pool_max = 3  # type: ignore[misc]


def test_an_empty_environment_gives_every_default():
    got = st.read({})
    for s in st.SETTINGS:
        expected = s.computed() if s.computed is not None else s.default
        assert getattr(got, s.name) == expected, s.name
    assert got.body_timeout_s == 30.0 and got.queries == Path("queries.yaml")
    assert (got.promote_uses, got.promote_principals, got.promote_days) == (5, 2, 14)
    assert got.contract is None and got.config is None and got.role is None and got.debug is False


def test_every_setting_is_read_from_its_variable(tmp_path):
    contract, config = tmp_path / "c.yaml", tmp_path / "s.yaml"
    contract.write_text("x"), config.write_text("x")
    env = {"ONTOOS_DSN": "postgresql://u@db:5433/lake", "ONTOOS_DATA_DIR": str(tmp_path / "pg"),
           "ONTOOS_POOL_MIN": "0", "ONTOOS_POOL_MAX": "3", "ONTOOS_POOL_TIMEOUT": "2.5", "ONTOOS_QUERY_ROLES": "OFF",
           "ONTOOS_ROLE_PREFIX": "acme_", "ONTOOS_COST_CACHE": "0",
           "ONTOOS_AUDIT_DSN": "host=/run/pg dbname=audit", "ONTOOS_AUDIT": "no", "ONTOOS_AUDIT_QUEUE_MAX": "500",
           "ONTOOS_AUDIT_QUEUE_MB": "1.5", "ONTOOS_AUDIT_SPOOL": str(tmp_path / "spool"), "ONTOOS_BODY_TIMEOUT": " 2 ", "ONTOOS_HEADER_TIMEOUT": "0.5", "ONTOOS_DRAIN_TIMEOUT": "12", "ONTOOS_MCP_STATELESS": "on", "ONTOOS_SHARED_LIMITS": "on", "ONTOOS_LOG_FORMAT": "json",
           "ONTOOS_CONNECTIONS_PER_CLIENT": "8", "ONTOOS_QUERIES": str(tmp_path / "q.yaml"), "ONTOOS_REGISTRY": "database",
           "ONTOOS_DRIFT_INTERVAL": "0", "ONTOOS_SECRET": "s3cret-s3cret-s3cret", "ONTOOS_CURSOR_TTL": "60",
           "ONTOOS_MIN_CLI_VERSION": "0.2",
           "ONTOOS_PROMOTE_USES": "3", "ONTOOS_PROMOTE_PRINCIPALS": "1", "ONTOOS_PROMOTE_DAYS": "30",
           "ONTOOS_CONTRACT": str(contract), "ONTOOS_CONFIG": str(config), "ONTOOS_ROLE": "analyst",
           "ONTOOS_DEBUG": "on"}
    assert set(env) == {s.env for s in st.SETTINGS}
    got = st.read(env)
    assert got == st.Settings(
        dsn="postgresql://u@db:5433/lake", data_dir=tmp_path / "pg", pool_min=0, pool_max=3, pool_timeout_s=2.5,
        query_roles=False, role_prefix="acme_", cost_cache_s=0.0,
        audit_dsn="host=/run/pg dbname=audit", audit=False, audit_queue_max=500, audit_queue_mb=1.5,
        audit_spool=tmp_path / "spool", body_timeout_s=2.0, header_timeout_s=0.5, connections_per_client=8, drain_timeout_s=12.0, mcp_stateless=True, shared_limits=True, log_format="json", queries=tmp_path / "q.yaml", registry="database",
        drift_interval_s=0.0, secret="s3cret-s3cret-s3cret", cursor_ttl_s=60, min_cli_version="0.2", promote_uses=3, promote_principals=1, promote_days=30,
        contract=contract, config=config, role="analyst", debug=True)


def test_the_audit_spool_is_the_cache_dir_unless_named_and_off_turns_it_off(tmp_path):
    assert st.read({}).audit_spool.name == "audit-spool"
    assert st.read({"ONTOOS_AUDIT_SPOOL": "OFF"}).audit_spool is None
    assert st.read({"ONTOOS_AUDIT_SPOOL": str(tmp_path)}).audit_spool == tmp_path
    assert st.Settings().audit_spool is None  # built directly (tests, embedding): no spool unless given


def test_a_flag_overrides_its_variable_which_overrides_the_default(tmp_path):
    env = {"ONTOOS_DSN": "postgresql:///from_env", "ONTOOS_QUERIES": "env.yaml", "ONTOOS_ROLE": "viewer"}
    got = st.read(env, dsn="postgresql:///from_flag", queries=None, role="")
    assert got.dsn == "postgresql:///from_flag"  # the flag
    assert got.queries == Path("env.yaml") and got.role == "viewer"  # flags not given: the variables
    assert st.read({}, queries=str(tmp_path / "q.yaml")).queries == tmp_path / "q.yaml"
    assert st.Settings.from_env(dsn="postgresql:///x", env={}).dsn == "postgresql:///x"  # the older entry point
    with pytest.raises(TypeError):
        st.read({}, no_such_setting=1)


def test_a_bad_flag_is_refused_naming_the_flag(tmp_path):
    e = refusal(queries=str(tmp_path))
    assert e.code == "EX907" and e.message.startswith(f"--queries={str(tmp_path)!r}")
    assert e.hint.startswith("--queries takes the path of a file")
    e = refusal(dsn="no dsn here")
    assert e.message.startswith("--dsn is not a valid setting") and "no dsn here" not in e.message + e.hint


def test_a_role_is_read_as_given_and_judged_by_the_contract(capsys, monkeypatch):
    from ontoos_explore.cli import main

    assert st.read({"ONTOOS_ROLE": " analyst "}).role == "analyst"
    monkeypatch.delenv("ONTOOS_CONTRACT", raising=False)
    monkeypatch.setenv("ONTOOS_ROLE", "analyts")
    code = main(["compile", "-q", "explore workloads fields name"])
    err = json.loads(capsys.readouterr().out)["error"]
    assert code == 2 and err["code"] == "EX501" and "analyst" in err["hint"]


# ---------------------------------------------------------------- a bad value of every setting


def _bad_values(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """setting -> (a value it refuses, what the refusal says it takes)."""
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    return {
        "dsn": ("not a connection string", "a PostgreSQL connection string"),
        "data_dir": (str(a_file), "the path of a directory"),
        "pool_min": ("-1", "an integer >= 0"),
        "pool_max": ("0", "an integer >= 1"),
        "pool_timeout_s": ("0", "a number > 0"),
        "query_roles": ("maybe", "on or off"),
        "role_prefix": ("acme-", "letters, digits and _"),
        "cost_cache_s": ("-1", "a number >= 0"),
        "audit_dsn": ("postgresql://u:pw@h/db trailing", "a PostgreSQL connection string"),
        "audit": ("sometimes", "on or off"),
        "mcp_stateless": ("maybe", "on or off"),
        "shared_limits": ("both", "on or off"),
        "log_format": ("yaml", "text or json"),
        "audit_queue_max": ("1e3", "an integer >= 1"),
        "audit_queue_mb": ("0", "a number > 0"),
        "registry": ("files", "file or database"),
        "audit_spool": (str(a_file), "the path of a directory (made if missing), or off"),
        "body_timeout_s": ("-5", "a number > 0"),
        "header_timeout_s": ("0", "a number > 0"),
        "drain_timeout_s": ("-1", "a number > 0"),
        "connections_per_client": ("0", "an integer >= 1"),
        "queries": (str(tmp_path), "the path of a file"),
        "drift_interval_s": ("-1", "a number >= 0"),
        "secret": ("too short", "at least 16 characters"),
        "cursor_ttl_s": ("0", "an integer >= 1"),
        "min_cli_version": ("v1.2", "a version: numbers separated by dots"),
        "promote_uses": ("0", "an integer >= 1"),
        "promote_principals": ("two", "an integer >= 1"),
        "promote_days": ("3651", "an integer from 1 to 3650"),
        "contract": (str(tmp_path / "missing.yaml"), "the path of a file that exists"),
        "config": (str(tmp_path), "the path of a file that exists"),
        "debug": ("verbose", "on or off"),
    }


# The role is who is asking: any text is read, and the contract judges it (EX501, naming the
# roles there, exit 2 on the CLI: the caller's input), as tests/test_cli.py checks.
JUDGED_ELSEWHERE = {"role"}


def test_the_bad_values_cover_every_setting(tmp_path):
    assert set(_bad_values(tmp_path)) == set(st.BY_NAME) - JUDGED_ELSEWHERE


@pytest.mark.parametrize("name", [s.name for s in st.SETTINGS if s.name not in JUDGED_ELSEWHERE])
def test_a_bad_value_is_refused_with_ex907_naming_the_variable(name, tmp_path):
    value, takes = _bad_values(tmp_path)[name]
    env_name = st.BY_NAME[name].env
    e = refusal({env_name: value})
    assert (e.code, e.type, e.subtype) == ("EX907", "internal", "SETTING_INVALID")
    assert e.code != "EX902"
    assert e.message.startswith(env_name) and "is not a valid setting" in e.message
    assert e.hint.startswith(f"{env_name} takes ") and takes in e.hint
    assert "unset it for the default" in e.hint
    if st.BY_NAME[name].secret:  # a DSN may hold a password: never echoed
        assert value not in e.message and value not in e.hint and "pw" not in e.message
    else:
        assert repr(value) in e.message
    envelope = e.to_envelope()
    assert envelope["ok"] is False and envelope["error"]["code"] == "EX907"


@pytest.mark.parametrize("value", ["2.5", "1_000", "８", " ", "+", "0x10", "nan"])
def test_numbers_are_ascii_decimal_or_nothing(value):
    if value.strip():
        assert refusal({"ONTOOS_POOL_MAX": value}).code == "EX907"
    else:
        assert st.read({"ONTOOS_POOL_MAX": value}).pool_max == 8  # blank: the default


def test_the_pool_may_not_keep_more_connections_than_it_may_open():
    e = refusal({"ONTOOS_POOL_MIN": "4", "ONTOOS_POOL_MAX": "2"})
    assert e.code == "EX907" and "ONTOOS_POOL_MIN=4" in e.message and "ONTOOS_POOL_MAX=2" in e.message


def test_a_path_says_why_it_is_refused(tmp_path):
    assert refusal({"ONTOOS_CONTRACT": str(tmp_path / "nope.yaml")}).message.endswith(": no such file")
    assert refusal({"ONTOOS_QUERIES": str(tmp_path)}).message.endswith(": a directory, not a file")
    assert st.read({"ONTOOS_QUERIES": str(tmp_path / "not_yet.yaml")}).queries == tmp_path / "not_yet.yaml"


def test_the_promotion_rule_is_read_as_a_setting():
    assert Rule.from_env({}) == Rule() == Rule(5, 2, 14)
    assert Rule.from_env({"ONTOOS_PROMOTE_USES": "7", "ONTOOS_PROMOTE_DAYS": "30"}) == Rule(7, 2, 30)
    assert Rule.from_settings(st.Settings(promote_principals=4)) == Rule(5, 4, 14)
    with pytest.raises(ExploreError) as e:  # was a bare ValueError
        Rule.from_env({"ONTOOS_PROMOTE_PRINCIPALS": "many"})
    assert e.value.code == "EX907" and "ONTOOS_PROMOTE_PRINCIPALS='many'" in e.value.message


# ---------------------------------------------------------------- the docs are the table's


def test_the_readme_shows_the_table():
    assert st.markdown_table() in (ROOT / "README.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------- the CLI


def _script(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    return subprocess.run([str(ONTOOS), *argv], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**clean, **env}, stdin=subprocess.DEVNULL)


def test_explore_with_a_bad_pool_max_prints_the_ex907_envelope(tmp_path):
    r = _script("explore", "--role", "analyst", "-q", "explore workloads fields name", cwd=tmp_path,
                ONTOOS_POOL_MAX="many", ONTOOS_DATA_DIR=str(tmp_path / "never-started"))
    assert r.returncode == 1, r.stderr
    assert r.stdout.count("\n") == 1
    env = json.loads(r.stdout)
    assert env["ok"] is False and env["error"]["code"] == "EX907" and env["error"]["subtype"] == "SETTING_INVALID"
    assert "ONTOOS_POOL_MAX='many'" in env["error"]["message"]
    assert "an integer >= 1" in env["error"]["hint"]
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    assert not (tmp_path / "never-started").exists()  # refused before anything started


def test_serve_stdio_with_a_bad_setting_keeps_stdout_for_the_protocol(tmp_path):
    r = _script("serve", "--stdio", "--role", "analyst", cwd=tmp_path, ONTOOS_BODY_TIMEOUT="soon")
    assert r.returncode == 1
    assert r.stdout == ""  # stdout is the JSON-RPC channel
    env = json.loads(r.stderr.strip().splitlines()[-1])
    assert env["error"]["code"] == "EX907" and "ONTOOS_BODY_TIMEOUT='soon'" in env["error"]["message"]
    assert "Traceback" not in r.stderr
