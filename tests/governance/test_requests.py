"""Template requests, end to end on a real server: an agent that found no way to ask files its question
(MCP, REST, CLI), with the refusals it met first; a reviewer sees it on the dashboard and closes it,
naming the query that answers it; each step audited."""

from __future__ import annotations

import html
import json

import psycopg
import pytest

from ontoos_explore.governance import requests
from tests.databases import new_database
from tests.governance.dashboard import (ANA, REV, TOKENS, VIC, call, post_form, sign_in, start_dashboard,
                                        wait_for_events)


@pytest.fixture(scope="module")
def dash(pg_dsn, tmp_path_factory):
    d = start_dashboard(pg_dsn, tmp_path_factory.mktemp("requests"))
    yield d
    d.srv.stop_cleanly()


def test_a_request_carries_the_refusals_before_it_and_a_reviewer_closes_it(dash):
    refused = call(dash, "POST", "/api/v1/explore", token=TOKENS[ANA],
                   body={"dataset": "workloads", "fields": ["namespace", "count()"]})  # UNSUPPORTED_QUERY
    assert refused.status == 400 and "ontoos_request_query" in refused.json()["error"]["hint"]
    fingerprint = wait_for_events(dash, "principal = %s AND outcome = 'refused'", [ANA])[0]["fingerprint"]
    filed = call(dash, "POST", "/api/v1/requests", token=TOKENS[ANA],
                 body={"question": "workloads per namespace with their <b>owners</b>", "dataset": "Workloads"})
    assert filed.status == 200, filed.body
    data = filed.json()["data"]
    assert data["dataset"] == "workloads" and data["recent_refusals"] == [fingerprint] and data["status"] == "open"
    signed = sign_in(dash, REV)
    page = call(dash, "GET", "/governance", headers=signed.header).body
    assert data["request_id"] in page and html.escape("<b>owners</b>") in page and "<b>owners</b>" not in page
    closed = post_form(dash, "/governance/requests/close",
                       {"id": data["request_id"], "answered_by": "workloads_by_namespace"}, signed)
    assert closed.status == 303 and "done=closed" in closed.headers["location"]
    again = post_form(dash, "/governance/requests/close", {"id": data["request_id"]}, signed, json_answer=True)
    assert again.status == 400 and "no open request" in again.json()["error"]["message"]
    page = call(dash, "GET", "/governance", headers=signed.header).body
    open_requests = page[page.index('<table id="requests">'):].split("</table>", 1)[0]
    assert data["request_id"] not in open_requests  # (the refusal of closing it again may be among the rejections)
    with psycopg.connect(dash.audit_dsn) as conn:
        row = conn.execute("SELECT status, closed_by, answered_by, surface FROM ontoos_audit.requests WHERE id = %s",
                           [data["request_id"]]).fetchone()
    assert row == ("closed", REV, "workloads_by_namespace", "rest")
    closes = wait_for_events(dash, "surface = 'dashboard' AND exploration LIKE %s", ["close request%"], n=2)
    assert [e["outcome"] for e in closes] == ["ok", "refused"]  # the close, then the second try


def test_a_request_about_a_dataset_the_caller_may_not_read_is_refused_as_exploring_it(dash):
    r = call(dash, "POST", "/api/v1/requests", token=TOKENS[VIC], body={"question": "hosts?", "dataset": "hosts"})
    assert r.status == 400 and r.json()["error"]["code"] == "EX202"
    r = call(dash, "POST", "/api/v1/requests", token=TOKENS[VIC], body={"question": "   "})
    assert r.status == 400 and "'question' must be the question" in r.json()["error"]["message"]
    r = call(dash, "POST", "/api/v1/requests", token=TOKENS[VIC], body={"dataset": "workloads"})
    assert r.status == 400 and r.json()["error"]["code"] == "EX102"


def test_requests_store_open_and_close(pg_dsn):
    dsn = new_database(pg_dsn, "requests")
    with psycopg.connect(dsn) as conn:
        a = requests.file(conn, principal="p", role="viewer", surface="cli", question="q1", dataset=None)
        b = requests.file(conn, principal="p", role="viewer", surface="mcp",
                          question=requests.question_of("q2" * 2000), dataset="workloads")
        assert [r["id"] for r in requests.open_requests(conn)] == [b["request_id"], a["request_id"]]
        assert len(b["question"]) == requests.MAX_QUESTION
        assert requests.close(conn, a["request_id"], "rex") and not requests.close(conn, a["request_id"], "rex")
        assert [r["id"] for r in requests.open_requests(conn)] == [b["request_id"]]


def test_the_mcp_tool_is_annotated_as_writing():
    from ontoos_explore.server.tool_models import ANNOTATIONS, TOOLS

    assert "ontoos_request_query" in TOOLS
    assert ANNOTATIONS["ontoos_request_query"]["read_only_hint"] is False
    assert ANNOTATIONS["ontoos_request_query"]["destructive_hint"] is False
    assert set(ANNOTATIONS) == {"ontoos_request_query"}  # every other tool is read-only


def test_ontoos_queries_request_files_one_from_the_cli(pg_dsn, capsys, monkeypatch):
    from ontoos_explore.cli import main

    audit = new_database(pg_dsn, "requests_cli")
    monkeypatch.setenv("ONTOOS_AUDIT_DSN", audit)
    monkeypatch.delenv("ONTOOS_CONTRACT", raising=False)
    code = main(["queries", "request", "which teams own the busiest namespaces?", "--dataset", "workloads",
                 "--role", "viewer", "--dsn", pg_dsn])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["data"]["dataset"] == "workloads" and out["data"]["status"] == "open"
    with psycopg.connect(audit) as conn:
        assert conn.execute("SELECT surface, role, question FROM ontoos_audit.requests").fetchall() == [
            ("cli", "viewer", "which teams own the busiest namespaces?")]
    assert main(["queries", "request", "--role", "viewer", "--dsn", pg_dsn]) == 2
    assert "needs the question" in json.loads(capsys.readouterr().out)["error"]["message"]
