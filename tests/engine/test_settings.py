"""Deployment settings from the environment, as the engine reads them (re-exported by
engine/settings.py): defaults, overrides, and a clear refusal for a number that does not parse
or is out of range (EX907 naming it, on the CLI an envelope; never the contract's EX902).
tests/test_settings.py covers every row of the table."""

from __future__ import annotations

import json

import pytest

from ontoos_explore import cli
from ontoos_explore.engine.settings import Settings
from ontoos_explore.errors import ExploreError


def test_defaults_and_overrides():
    default = Settings.from_env(env={})
    assert (default.pool_max, default.pool_timeout_s, default.cost_cache_s) == (8, 5.0, 300.0)
    assert (default.audit_queue_max, default.audit_queue_mb) == (100_000, 64.0)
    chosen = Settings.from_env(env={"ONTOOS_POOL_MAX": "3", "ONTOOS_COST_CACHE": "0", "ONTOOS_AUDIT_QUEUE_MB": "1.5",
                                    "ONTOOS_POOL_TIMEOUT": " 2.5 ", "ONTOOS_AUDIT_QUEUE_MAX": ""})
    assert (chosen.pool_max, chosen.cost_cache_s, chosen.audit_queue_mb, chosen.pool_timeout_s) == (3, 0.0, 1.5, 2.5)
    assert chosen.audit_queue_max == 100_000  # empty: the default


@pytest.mark.parametrize(("name", "value", "says"), [
    ("ONTOOS_POOL_MAX", "0", "an integer >= 1"),
    ("ONTOOS_POOL_MAX", "2.5", "an integer >= 1"),
    ("ONTOOS_POOL_MAX", "lots", "an integer >= 1"),
    ("ONTOOS_POOL_TIMEOUT", "0", "a number > 0"),
    ("ONTOOS_COST_CACHE", "-1", "a number >= 0"),
    ("ONTOOS_COST_CACHE", "nan", "a number >= 0"),
    ("ONTOOS_AUDIT_QUEUE_MAX", "-3", "an integer >= 1"),
    ("ONTOOS_AUDIT_QUEUE_MB", "0", "a number > 0"),
])
def test_a_bad_number_is_refused_naming_the_variable(name, value, says):
    with pytest.raises(ExploreError) as e:
        Settings.from_env(env={name: value})
    assert (e.value.code, e.value.subtype) == ("EX907", "SETTING_INVALID")
    assert name in e.value.message and repr(value) in e.value.message
    assert says in e.value.hint


def test_the_engine_reads_the_one_settings_record():
    from ontoos_explore import settings

    assert Settings is settings.Settings
    assert Settings.from_env(env={"ONTOOS_POOL_MAX": "3"}) == settings.read({"ONTOOS_POOL_MAX": "3"})
    assert Settings(pool_max=2).pool_min == 1 and Settings().data_dir is None  # built directly: the defaults


def test_the_cli_answers_a_bad_setting_with_an_envelope(monkeypatch, capsys):
    monkeypatch.setenv("ONTOOS_POOL_MAX", "many")
    code = cli.main(["explore", "--role", "analyst", "-q", "explore workloads fields name"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["ok"] is False
    assert out["error"]["code"] == "EX907" and "ONTOOS_POOL_MAX='many'" in out["error"]["message"]
    assert "unset it for the default" in out["error"]["hint"]
