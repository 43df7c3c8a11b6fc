"""/metrics and the JSON logs of real `ontoos serve --http` processes.

The Prometheus text (read with the client library's own parser) counts each answer once by surface,
tool, outcome and subtype, times the calls, counts the calls a limit refused, and samples the pool
and the audit queue; with `--workers 2` any worker's /metrics speaks for both. Loopback may read it
unless the configuration says otherwise; then only a principal marked `metrics`. With
ONTOOS_LOG_FORMAT=json each answer is one JSON line on stderr carrying its exploration id.
"""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ontoos_explore.server.metrics import Metrics, tool_label
from tests.server.test_hostile_support import request, start_hostile_server

EXPLORE = json.dumps({"dataset": "workloads", "fields": ["name"], "limit": 2})


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, from the Prometheus text."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape(srv, who=None) -> tuple[int, str]:
    r = request(srv, "GET", "/metrics", who=who)
    return r.status, r.text


def test_tool_labels_stay_few_whatever_callers_send():
    built_in = {"ontoos_explore": None}
    assert tool_label("ontoos_explore", built_in, "ontoos_q_") == "ontoos_explore"
    assert tool_label("ontoos_q_anything", built_in, "ontoos_q_") == "named_query"
    assert {tool_label(f"made_up_{i}", built_in, "ontoos_q_") for i in range(50)} == {"unknown"}
    assert tool_label(["not", "a", "name"], built_in, "ontoos_q_") == "unknown"


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("metrics", pg_dsn, tmp_path_factory.mktemp("metrics"), ONTOOS_LOG_FORMAT="json")
    yield srv
    srv.stop_cleanly()


def test_each_answer_is_counted_once_and_timed(server):
    status, before = scrape(server)
    assert status == 200
    before = samples(before)
    answers = [request(server, "POST", "/api/v1/explore", body=EXPLORE) for _ in range(4)]
    typo = request(server, "POST", "/api/v1/explore", body=json.dumps({"dataset": "workloadz", "fields": ["name"]}))
    limited = [request(server, "POST", "/api/v1/explore", body=EXPLORE, who="tina").status for _ in range(5)]
    status, text = scrape(server)
    after = samples(text)
    ok = dict(surface="rest", tool="ontoos_explore", outcome="ok", subtype="none")
    assert [a.status for a in answers] == [200] * 4 and typo.status == 400 and limited.count(429) == 2
    assert value(after, "ontoos_requests_total", **ok) - value(before, "ontoos_requests_total", **ok) == 4 + 3
    refused = dict(surface="rest", tool="ontoos_explore", outcome="refused", subtype="UNKNOWN_DATASET")
    assert value(after, "ontoos_requests_total", **refused) - value(before, "ontoos_requests_total", **refused) == 1
    assert value(after, "ontoos_limited_total", reason="RATE_LIMITED") - \
        value(before, "ontoos_limited_total", reason="RATE_LIMITED") == 2
    timed = value(after, "ontoos_request_seconds_count", surface="rest", tool="ontoos_explore")
    # the calls that ran are timed; the two refused by the rate limit were answered before any tool ran
    assert timed - value(before, "ontoos_request_seconds_count", surface="rest", tool="ontoos_explore") == 4 + 1 + 3
    assert value(after, "ontoos_pool_connections", state="size") >= 1
    assert ("ontoos_audit_queue_depth", ()) in after


def test_the_json_logs_carry_one_line_per_answer_with_its_exploration_id(server):
    answer = request(server, "POST", "/api/v1/explore", body=EXPLORE).json
    wanted = answer["meta"]["exploration_id"]
    deadline = time.monotonic() + 5
    lines: list[dict] = []
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in server.stderr().splitlines() if line.startswith("{")]
        if any(line.get("exploration_id") == wanted for line in lines):
            break
        time.sleep(0.05)
    (line,) = [x for x in lines if x.get("exploration_id") == wanted]
    assert (line["logger"], line["message"], line["tool"], line["outcome"], line["status"], line["principal"]) == \
        ("ontoos_explore.requests", "request", "ontoos_explore", "ok", 200, "alice")
    assert line["rows"] == 2 and line["elapsed_ms"] > 0 and "dataset" not in line  # what the audit has, not the text
    prose = [x for x in server.stderr().splitlines() if x and not x.startswith(("{", "ontoos: "))]
    assert prose == []  # every log record is a JSON line


def test_metrics_are_for_operators_when_loopback_is_not_trusted(pg_dsn, tmp_path):
    srv = start_hostile_server("metrics-closed", pg_dsn, tmp_path / "closed", config_extra={"metrics_loopback": False})
    try:
        anyone, named, operator = (request(srv, "GET", "/metrics", who=w) for w in (None, "alice", "rex"))
    finally:
        srv.stop_cleanly()
    for r in (anyone, named):
        assert r.status == 403 and r.json["error"]["code"] == "EX503" and r.json["error"]["hint"]
    assert operator.status == 200 and "ontoos_requests_total" in operator.text


def test_any_workers_metrics_speak_for_all(pg_dsn, tmp_path):
    srv = start_hostile_server("metrics-workers", pg_dsn, tmp_path / "workers", args=("--workers", "2"))
    try:
        for _ in range(20):
            assert request(srv, "POST", "/api/v1/explore", body=EXPLORE).status == 200
        ok = dict(surface="rest", tool="ontoos_explore", outcome="ok", subtype="none")
        counts = {value(samples(scrape(srv)[1]), "ontoos_requests_total", **ok) for _ in range(8)}
    finally:
        srv.stop_cleanly()
    assert counts == {20.0}


def test_a_metrics_object_counts_into_its_own_registry():
    from ontoos_explore.envelope import Answer
    from ontoos_explore.errors import rate_limited

    a, b = Metrics(), Metrics()  # two apps in one process: no clash, no shared counts
    refused = Answer.refusal(rate_limited("ann", "1 calls per second (bursts of 1)", 1.0))
    a.answered("mcp", "ontoos_explore", refused, 0.003)
    got, other = samples(a.exposition().decode()), samples(b.exposition().decode())
    labels = dict(surface="mcp", tool="ontoos_explore", outcome="refused", subtype="QUERY_BUDGET_EXCEEDED")
    assert value(got, "ontoos_requests_total", **labels) == 1.0
    assert value(got, "ontoos_limited_total", reason="RATE_LIMITED") == 1.0
    assert value(got, "ontoos_request_seconds_bucket", surface="mcp", tool="ontoos_explore", le="0.005") == 1.0
    assert value(other, "ontoos_requests_total", **labels) == 0.0
