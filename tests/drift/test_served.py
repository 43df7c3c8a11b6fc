"""A server started on a lake that moved: it starts, says what moved on its first lines, is ready (drift
reported, not fatal), refuses what moved, answers the rest; and a CLI older than it expects is warned, not
failed, by `doctor --server`."""

from __future__ import annotations

import json

import pytest

from ontoos_explore.cli import main
from tests.server.test_http import ALICE, call, start_server

from .conftest import PREFIX


@pytest.fixture(scope="module")
def drifted_server(drifted_dsn, tmp_path_factory):
    srv = start_server("drifted", tmp_path_factory.mktemp("drifted-server"), {
        "ONTOOS_DSN": drifted_dsn, "ONTOOS_AUDIT": "off", "ONTOOS_ROLE_PREFIX": PREFIX,
        "ONTOOS_MIN_CLI_VERSION": "99.0.0"}, [drifted_dsn])
    yield srv
    srv.stop_cleanly()


def test_it_starts_and_its_first_lines_say_what_moved(drifted_server, demo):
    lines = [line for line in drifted_server.stderr().splitlines() if "drift:" in line]
    assert len(lines) == 1, drifted_server.stderr()
    # PLANTED: a dropped table, a dropped column, a retyped column, a revoked grant
    assert f"contract {demo.hash}; drift: " in lines[0] and "drift: none" not in lines[0]
    assert "1 dataset(s)" in lines[0] and "ontoos doctor lists them" in lines[0]


def test_readyz_is_ready_and_reports_the_drift(drifted_server, demo):
    r = call(drifted_server, "GET", "/readyz")
    assert r.status == 200 and r.json["ready"] is True and r.json["contract"] == {"loaded": True, "hash": demo.hash}
    assert r.json["drift"]["drifted"] is True and r.json["_notice"]["schema_drift"] is True
    assert r.json["_notice"]["min_cli_version"] == "99.0.0"


def test_what_moved_is_refused_and_the_rest_answers(drifted_server):
    gone = call(drifted_server, "POST", "/api/v1/explore", token=ALICE, body={"dataset": "databases", "fields": ["name"]})
    assert gone.status == 503 and gone.json["error"]["subtype"] == "DEGRADED"
    assert "databases" in gone.json["error"]["message"] and gone.json["error"]["code"] != "EX905"
    kept = call(drifted_server, "POST", "/api/v1/explore", token=ALICE,
                body={"dataset": "workloads", "fields": ["name"], "limit": 2})
    assert kept.status == 200 and len(kept.json["data"]["rows"]) == 2


def test_doctor_warns_a_cli_older_than_the_server_expects_and_does_not_fail(drifted_server, pg_dsn, tmp_path,
                                                                             capsys, monkeypatch):
    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)  # the local checks on the clean demo: only the server's is at stake
    monkeypatch.setenv("ONTOOS_QUERIES", str(tmp_path / "none.yaml"))
    token = tmp_path / "token"
    token.write_text(ALICE + "\n")
    code = main(["doctor", "--json", "--server", f"http://{drifted_server.host}:{drifted_server.port}",
                 "--token-file", str(token)])
    captured = capsys.readouterr()
    server = next(c for c in json.loads(captured.out)["checks"] if c["name"] == "server")
    assert code == 0 and server["status"] == "ok" and server["details"][0]["token_accepted"] is True
    assert "older than the server expects (min_cli_version 99.0.0)" in captured.err
