"""Governance, the dashboard in a real browser: what a reviewer sees after a known set of rejections.

A real `ontoos serve --http` runs in a subprocess (audit on, the candidate
rule lowered to 3 uses by 2 principals). An analyst and a viewer send a known
set of requests over REST: secret columns reached for, an out-of-scope
dataset, syntax errors, a budget, an attempt at markup injection, and one
exploration repeated by both with other values. Once the audit has flushed,
headless chromium (Playwright, Debian's /usr/bin/chromium) signs in as the
reviewer and checks the page: the secret columns and who reached for them,
rejections by subtype, recent rejections with message and hint, the
candidate; a filter (reflected in the URL); Promote (click 1) and Approve
(click 2), after which the registry file holds the approved query and an
agent can run it over MCP. A screenshot is saved to
tests/governance/artifacts/dashboard.png. The page and its filters also work
with JavaScript off; a non-reviewer gets a 403 page; no login redirects to
the login form; the JSON API refuses the analyst's token with a 403 envelope.

Each server writes its audit to a database of its own. The tests that only read
share one server and its traffic; the two that change the registry (promoting
a candidate) each start a server of their own with the same traffic, so no test
sees what another did, in whatever order they run.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import secrets
import subprocess
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests import serving
from tests.databases import new_database

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
SCREENSHOT = ARTIFACTS / "dashboard.png"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed at /usr/bin/chromium "
                                                               "(.ci/run installs it: apt-get install chromium)")

ANA, VIC, REV = "gov-dash-ana", "gov-dash-vic", "gov-dash-rev"
TOKENS = {ANA: "ana-" + secrets.token_hex(16), VIC: "vic-" + secrets.token_hex(16), REV: "rev-" + secrets.token_hex(16)}
ROLES = {ANA: "analyst", VIC: "viewer", REV: "admin"}

HAND_WRITTEN = {
    "id": "hosts_by_provider",
    "title": "Hosts of a provider",
    "status": "approved",
    "read_sets": ["engineering"],
    "parameters": [{"name": "provider", "type": "enum", "values": ["aws", "gcp", "azure", "onprem"]}],
    "sql": 'SELECT "h"."hostname" AS "hostname" FROM "lake"."hosts" AS "h" WHERE "h"."provider" = $1 LIMIT 51',
    "bind": ["provider"],
    "columns": ["hostname"],
    "max_rows": 50,
}

REPEATED = "explore workloads fields name, replicas where namespace = '{ns}' and replicas > {n} order by name limit 5"
XSS = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


@dataclass
class Dashboard:
    """A running `ontoos serve --http` with the dashboard, its registry file and its own audit."""

    srv: serving.Server
    registry: Path

    @property
    def port(self) -> int:
        return self.srv.port

    @property
    def base(self) -> str:
        return self.srv.base


@dataclass
class Resp:
    status: int
    headers: dict[str, str]
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def call(srv: Dashboard, method: str, path: str, *, token: str | None = None, body: Any = None,
         headers: dict[str, str] | None = None) -> Resp:
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        h.setdefault("Content-Type", "application/json")
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        return Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace"))
    finally:
        conn.close()


def explore(srv: Dashboard, who: str, body: dict[str, Any]) -> Resp:
    return call(srv, "POST", "/api/v1/explore", token=TOKENS[who], body=body)


def explore_get(srv: Dashboard, who: str, params: list[tuple[str, str]]) -> Resp:
    return call(srv, "GET", "/api/v1/explore?" + urllib.parse.urlencode(params), token=TOKENS[who])


def start_dashboard(pg_dsn: str, workdir: Path) -> Dashboard:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "server.yaml"
    config.write_text(yaml.safe_dump({"principals": {
        name: {"role": ROLES[name], "token_sha256": hashlib.sha256(TOKENS[name].encode()).hexdigest(),
               **({"reviewer": True} if name == REV else {})} for name in TOKENS}}), encoding="utf-8")
    registry = workdir / "queries.yaml"
    registry.write_text(yaml.safe_dump({"queries": [HAND_WRITTEN]}, sort_keys=False), encoding="utf-8")
    port = serving.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update({"ONTOOS_DSN": pg_dsn, "ONTOOS_AUDIT_DSN": new_database(pg_dsn, "dashboard"),
                "ONTOOS_PROMOTE_USES": "3", "ONTOOS_PROMOTE_PRINCIPALS": "2",
                "ONTOOS_DATA_DIR": str(workdir / "embedded-unused"), "PYTHONUNBUFFERED": "1"})
    with open(workdir / "stdout.log", "wb") as out, open(workdir / "stderr.log", "wb") as err:
        proc = subprocess.Popen([serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}", "--config",
                                 str(config), "--queries", str(registry)], cwd=workdir, env=env, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL)
    srv = serving.Server("dashboard", "127.0.0.1", port, proc, workdir, workdir / "stderr.log")
    return Dashboard(srv.wait_healthy(), registry)


EXPECTED_TOTALS = {"requests": 15, "refused": 12, "failed": 0, "principals": 3}


def report_of(s: Dashboard) -> dict[str, Any]:
    r = call(s, "GET", "/api/v1/governance/report", token=TOKENS[REV])
    assert r.status == 200, r.body
    return r.json()["data"]


def send_traffic(s: Dashboard) -> dict[str, Any]:
    """The known set of requests; returns what the callers saw that the page must show."""
    seen: dict[str, Any] = {}
    # the analyst reaches for three secret columns (one twice, once over GET), makes a syntax error,
    # forgets the heavy dataset's filter, and tries to plant markup in a literal
    r = explore(s, ANA, {"dataset": "workloads", "fields": ["name", "env_dump"]})
    assert r.status == 400, r.body
    seen["env_dump_error"] = r.json()["error"]
    assert explore_get(s, ANA, [("dataset", "workloads"), ("fields", "name,env_dump")]).status == 400
    assert explore(s, ANA, {"dataset": "configs", "fields": ["key", "value"], "filter": "source = 'env'"}).status == 400
    assert explore(s, ANA, {"query": "explore hosts fields hostname, ssh_private_key"}).status == 400
    r = explore(s, ANA, {"query": "explore workloads fields name wher"})
    assert r.status == 400 and r.json()["error"]["subtype"] == "SYNTAX_ERROR"
    seen["syntax_error"] = r.json()["error"]
    r = explore(s, ANA, {"dataset": "table_refs", "fields": ["file_path"]})
    assert r.status == 403 and r.json()["error"]["code"] == "EX406"
    r = explore(s, ANA, {"query": f"explore workloads fields name where namespace = '{XSS}' and nosuchcol = 1"})
    assert r.status == 400 and r.json()["error"]["subtype"] == "UNKNOWN_FIELD"
    # the viewer: a secret column, a dataset outside its read sets (twice), a syntax error
    assert explore(s, VIC, {"dataset": "workloads", "fields": ["name", "env_dump"]}).status == 400
    assert explore(s, VIC, {"dataset": "hosts", "fields": ["hostname"]}).status == 400
    assert explore_get(s, VIC, [("query", "explore hosts fields hostname")]).status == 400
    assert explore(s, VIC, {"query": "explore workloads fields name,, namespace"}).status == 400
    # a bad token
    assert call(s, "GET", "/api/v1/catalog", token="not-a-token").status == 401
    # one exploration, three times, by both, with other values
    fps = set()
    for who, ns, n in ((ANA, "prod", 2), (VIC, "staging", 1), (ANA, "payments", 0)):
        r = explore(s, who, {"query": REPEATED.format(ns=ns, n=n)})
        assert r.status == 200, r.body
        fps.add(r.json()["meta"]["fingerprint"])
    assert len(fps) == 1
    seen["fingerprint"] = fps.pop()

    # wait for the audit to flush: the reviewer's JSON report must reach the known totals
    deadline = time.monotonic() + 60
    while (report := report_of(s))["totals"] != EXPECTED_TOTALS and time.monotonic() < deadline:
        time.sleep(0.1)
    assert report["totals"] == EXPECTED_TOTALS
    seen["report"] = report
    return seen


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    """The dashboard the read-only tests share (its clean shutdown is checked at the end)."""
    dash = start_dashboard(pg_dsn, tmp_path_factory.mktemp("governance-server"))
    yield dash
    dash.srv.stop_cleanly()


@pytest.fixture(scope="module")
def traffic(server) -> dict[str, Any]:
    return send_traffic(server)


@pytest.fixture
def own_server(pg_dsn, tmp_path):
    """(a dashboard of this test's own, its traffic): for a test that changes the registry."""
    dash = start_dashboard(pg_dsn, tmp_path / "governance-server")
    try:
        yield dash, send_traffic(dash)
    finally:
        dash.srv.stop_cleanly()


def _kv(rows):
    return [(r["key"], r["n"]) for r in rows]


def test_the_json_report_after_the_known_traffic(server, traffic):
    r = traffic["report"]
    assert _kv(r["by_subtype"]) == [("UNKNOWN_FIELD", 6), ("SYNTAX_ERROR", 2), ("UNKNOWN_DATASET", 2),
                                    ("AUTH_REQUIRED", 1), ("QUERY_BUDGET_EXCEEDED", 1)]
    assert _kv(r["by_dataset"]) == [("workloads", 4), ("hosts", 3), ("configs", 1), ("table_refs", 1)]
    assert _kv(r["by_principal"]) == [(ANA, 7), (VIC, 4), ("anonymous", 1)]
    assert [(c["dataset"], c["column_name"], c["reason"], c["n"], sorted(c["who"])) for c in r["by_column"]] == [
        ("workloads", "env_dump", "SECRET_COLUMN_DENIED", 3, [ANA, VIC]),
        ("configs", "value", "SECRET_COLUMN_DENIED", 1, [ANA]),
        ("hosts", "ssh_private_key", "SECRET_COLUMN_DENIED", 1, [ANA]),
    ]
    assert [(c["fingerprint"], c["uses"], c["principals"]) for c in r["candidates"]] == [(traffic["fingerprint"], 3, 2)]
    assert r["rule"] == {"min_uses": 3, "min_principals": 2, "days": 14}
    assert len(r["recent"]) == 12
    assert {e["surface"] for e in r["recent"]} == {"rest"}
    # one view at a time, filtered
    one = call(server, "GET", "/api/v1/governance/by_column?dataset=workloads", token=TOKENS[REV])
    assert one.status == 200
    assert [(c["column_name"], c["n"]) for c in one.json()["data"]["by_column"]] == [("env_dump", 3)]
    bad = call(server, "GET", "/api/v1/governance/no_such_view", token=TOKENS[REV])
    assert bad.status == 400 and bad.json()["error"]["code"] == "EX102"


def _launch(p):
    return p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # a test dependency of the project (pyproject [test]); its absence is a failure
        pytest.fail("the playwright package is not installed: pip install -e '.[test]'")
    return sync_playwright()


def _context(browser, **kw):
    """A browser context whose automatic /favicon.ico requests never reach the server (each one would be
    an unauthenticated request, see test_browsing_the_dashboard_adds_no_rejections)."""
    context = browser.new_context(**kw)
    context.route("**/favicon.ico", lambda route: route.fulfill(status=404, body=""))
    return context


def _rows(page, table_id: str) -> list[list[str]]:
    """The text of each data row of a table (the header row left out)."""
    return page.eval_on_selector_all(
        f"#{table_id} tr", "rows => rows.slice(1).map(r => Array.from(r.cells).map(c => c.innerText.trim()))")


def _rows_nojs(page, table_id: str) -> list[list[str]]:
    rows = page.locator(f"#{table_id} tr")
    out = []
    for i in range(1, rows.count()):
        cells = rows.nth(i).locator("td")
        out.append([cells.nth(j).inner_text().strip() for j in range(cells.count())])
    return out


def _sign_in(page, base: str, token: str) -> None:
    page.goto(base + "/governance")
    assert page.url == base + "/governance/login"  # no cookie: redirected to the sign-in form
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")


def _signed_in_as_the_reviewer(page, context, base: str) -> None:
    from playwright.sync_api import expect

    _sign_in(page, base, TOKENS[REV])
    page.wait_for_url(base + "/governance")
    expect(page.locator("h1")).to_have_text("Governance")
    expect(page.locator("body")).to_contain_text(f"Signed in as {REV}")
    cookie = next(c for c in context.cookies() if c["name"] == "ontoos_token")
    assert cookie["httpOnly"] is True and cookie["path"] == "/governance"


def _the_page_shows_the_traffic(page, traffic: dict[str, Any]) -> None:
    """The totals, which secret columns were reached for and by whom, rejections by subtype, dataset
    and principal, the chart, the recent rejections (markup shown as text), the candidate, the registry."""
    totals = page.locator("#totals").inner_text()
    assert re.search(r"requests\s*15", totals) and re.search(r"refused\s*12", totals), totals
    assert _rows(page, "by-column") == [
        ["workloads", "env_dump", "SECRET_COLUMN_DENIED", "3", f"{ANA}, {VIC}"],
        ["configs", "value", "SECRET_COLUMN_DENIED", "1", ANA],
        ["hosts", "ssh_private_key", "SECRET_COLUMN_DENIED", "1", ANA],
    ]
    assert _rows(page, "by-subtype") == [["UNKNOWN_FIELD", "6"], ["SYNTAX_ERROR", "2"], ["UNKNOWN_DATASET", "2"],
                                         ["AUTH_REQUIRED", "1"], ["QUERY_BUDGET_EXCEEDED", "1"]]
    assert _rows(page, "by-dataset") == [["workloads", "4"], ["hosts", "3"], ["configs", "1"], ["table_refs", "1"]]
    assert _rows(page, "by-principal") == [[ANA, "7"], [VIC, "4"], ["anonymous", "1"]]
    # the chart: one bar per day with rejections, summing to 12
    assert page.locator("svg#chart rect").count() >= 1
    assert sum(int(t) for t in page.locator("svg#chart text").all_text_contents() if t.isdigit()) == 12

    # the most recent rejections, with message and hint
    recent = _rows(page, "recent")
    assert len(recent) == 12
    env_dump = traffic["env_dump_error"]
    secret_rows = [r for r in recent if env_dump["message"] in r[4]]
    assert len(secret_rows) == 3
    assert all(env_dump["hint"] in r[4] for r in secret_rows)
    assert {r[1].split("\n")[0] for r in secret_rows} == {ANA, VIC}
    syntax = next(r for r in recent if traffic["syntax_error"]["message"] in r[4])
    assert traffic["syntax_error"]["hint"] in syntax[4] and syntax[2].startswith("SYNTAX_ERROR")
    # the markup planted in a literal is shown as text, never run
    assert any(XSS in r[3] for r in recent), [r[3] for r in recent]
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#recent img").count() == 0 and page.locator("#recent script").count() == 0

    candidates = _rows(page, "candidates")
    assert len(candidates) == 1
    assert traffic["fingerprint"] in candidates[0][0] and candidates[0][1:3] == ["3", "2"]
    assert "explore workloads fields name, replicas where namespace = " in candidates[0][0]
    # the hand-written query is listed, approved, without an Approve button
    assert _rows(page, "queries") == [["hosts_by_provider", "Hosts of a provider", "approved", ""]]


def _the_filters_narrow_it(page) -> None:
    """The dataset, submitted with the form: the URL reflects it and the tables change; then a subtype
    and a number of days on top of it."""
    page.select_option("select[name=dataset]", "workloads")
    page.click("#filters button[type=submit]")
    page.wait_for_url(re.compile(r".*/governance\?.*dataset=workloads.*"))
    query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    assert query["dataset"] == ["workloads"] and query["days"] == ["14"]
    assert _rows(page, "by-column") == [["workloads", "env_dump", "SECRET_COLUMN_DENIED", "3", f"{ANA}, {VIC}"]]
    assert _rows(page, "by-subtype") == [["UNKNOWN_FIELD", "4"]]
    assert _rows(page, "by-dataset") == [["workloads", "4"]]
    assert _rows(page, "by-principal") == [[ANA, "3"], [VIC, "1"]]
    assert len(_rows(page, "recent")) == 4
    assert page.locator("select[name=dataset]").input_value() == "workloads"
    json_link = page.get_by_role("link", name="/api/v1/governance/report")
    assert "dataset=workloads" in json_link.get_attribute("href")

    page.select_option("select[name=dataset]", "")
    page.select_option("select[name=subtype]", "UNKNOWN_DATASET")
    page.select_option("select[name=days]", "7")
    page.click("#filters button[type=submit]")
    page.wait_for_url(re.compile(r".*subtype=UNKNOWN_DATASET.*"))
    query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    assert query == {"days": ["7"], "subtype": ["UNKNOWN_DATASET"]}
    assert _rows(page, "by-dataset") == [["hosts", "2"]]
    assert _rows(page, "by-principal") == [[VIC, "2"]]
    assert _rows(page, "by-column") == [["none"]]


def _saved(dash: Dashboard) -> dict[str, dict[str, Any]]:
    return {q["id"]: q for q in yaml.safe_load(dash.registry.read_text(encoding="utf-8"))["queries"]}


def _promote_then_approve(page, dash: Dashboard, fp: str) -> str:
    """Promote the candidate (click 1), then approve it (click 2); returns the query's id."""
    from playwright.sync_api import expect

    page.goto(dash.base + "/governance")
    row = page.locator("#candidates tr", has_text=fp)
    suggested_id = row.locator("input[name=id]").input_value()
    assert re.fullmatch(r"workloads_[0-9a-f]{6}", suggested_id), suggested_id
    row.get_by_role("button", name="Promote").click()
    page.wait_for_url(re.compile(r".*/governance\?msg=.*"))
    expect(page.locator("#flash")).to_contain_text(f"promoted {suggested_id} (pending)")
    assert "error" not in (page.locator("#flash").get_attribute("class") or "")
    saved = _saved(dash)
    assert saved[suggested_id]["status"] == "pending"
    assert saved[suggested_id]["origin_fingerprint"] == fp
    assert [prm["name"] for prm in saved[suggested_id]["parameters"]] == ["namespace", "replicas"]
    assert saved["hosts_by_provider"]["status"] == "approved"
    pending_row = page.locator("#queries tr", has_text=suggested_id)
    expect(pending_row).to_contain_text("pending")

    pending_row.get_by_role("button", name="Approve").click()
    page.wait_for_url(re.compile(r".*msg=approved.*"))
    expect(page.locator("#flash")).to_contain_text(f"approved {suggested_id}")
    saved = _saved(dash)
    assert saved[suggested_id]["status"] == "approved"
    assert [r[:3] for r in _rows(page, "queries")] == [
        ["hosts_by_provider", "Hosts of a provider", "approved"],
        [suggested_id, saved[suggested_id]["title"], "approved"]]
    assert page.locator("#queries button").count() == 0
    return suggested_id


def _screenshot(page) -> None:
    """The page as a test artifact: a real PNG of some size."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    data = SCREENSHOT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000, f"the screenshot is only {len(data)} bytes"


def _an_agent_runs_it(dash: Dashboard, pg_dsn: str, ident: str) -> None:
    """The approved query is runnable by an agent over MCP, with new values."""
    import anyio

    rows = anyio.run(_run_named_over_mcp, dash, ident)
    with psycopg.connect(pg_dsn) as conn:
        expected = conn.execute("SELECT name, replicas FROM lake.k8s_workloads WHERE namespace = 'ml-serving' "
                                "AND replicas > 3 AND NOT is_deleted ORDER BY name").fetchall()
    assert len(expected) > 0
    assert len(rows) == min(len(expected), 5)  # the promoted limit
    assert set(map(tuple, rows)) <= set(expected)
    assert [r[0] for r in rows] == [name for name, _ in expected][: len(rows)]  # ordered by name


def test_reviewer_dashboard_in_a_real_browser(own_server, pg_dsn):
    """From sign-in to a query an agent runs: the page, its filters, promote and approve."""
    dash, traffic = own_server
    dialogs: list[str] = []
    with _playwright() as p:
        browser = _launch(p)
        try:
            context = _context(browser, viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            _signed_in_as_the_reviewer(page, context, dash.base)
            _the_page_shows_the_traffic(page, traffic)
            _the_filters_narrow_it(page)
            ident = _promote_then_approve(page, dash, traffic["fingerprint"])
            _screenshot(page)
            assert not dialogs, dialogs
            context.close()
        finally:
            browser.close()
    _an_agent_runs_it(dash, pg_dsn, ident)


async def _run_named_over_mcp(server: Dashboard, ident: str) -> list[list[Any]]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKENS[VIC]}"})
    async with http_client, Client(streamable_http_client(server.base + "/mcp", http_client=http_client)) as c:
        listed = (await c.call_tool("ontoos_queries", {})).structured_content["data"]["queries"]
        assert [q["id"] for q in listed] == [ident]  # the viewer cannot see the engineering query
        assert set(listed[0]["parameters"]["properties"]) == {"namespace", "replicas"}
        r = await c.call_tool("ontoos_run_query", {"id": ident, "params": {"namespace": "ml-serving", "replicas": 3}})
        assert r.is_error is False, r.content[0].text
        return r.structured_content["data"]["rows"]


def test_the_dashboard_works_without_javascript(server, traffic):
    base = server.base
    with _playwright() as p:
        browser = _launch(p)
        try:
            context = _context(browser, java_script_enabled=False)
            page = context.new_page()
            _sign_in(page, base, TOKENS[REV])
            page.wait_for_url(base + "/governance")
            assert page.locator("#by-column tr").count() == 4
            assert _rows_nojs(page, "by-column")[0] == ["workloads", "env_dump", "SECRET_COLUMN_DENIED", "3", f"{ANA}, {VIC}"]
            # the filter form is a plain GET form
            page.select_option("select[name=dataset]", "hosts")
            page.click("#filters button[type=submit]")
            page.wait_for_url(re.compile(r".*dataset=hosts.*"))
            assert _rows_nojs(page, "by-column") == [["hosts", "ssh_private_key", "SECRET_COLUMN_DENIED", "1", ANA]]
            assert _rows_nojs(page, "by-subtype") == [["UNKNOWN_DATASET", "2"], ["UNKNOWN_FIELD", "1"]]
            assert page.locator("select[name=dataset] option[selected]").inner_text() == "hosts"
            context.close()
        finally:
            browser.close()


def test_a_non_reviewer_gets_a_403_page(server, traffic):
    base = server.base
    with _playwright() as p:
        browser = _launch(p)
        try:
            context = _context(browser)
            page = context.new_page()
            _sign_in(page, base, TOKENS[ANA])
            page.wait_for_url(base + "/governance")
            response = page.reload()
            assert response.status == 403
            body = page.locator("body").inner_text()
            assert "reviewers" in body and "AUTH_SCOPE_DENIED" in body
            assert "env_dump" not in page.content()
            # and a wrong token is refused at the sign-in form
            page2 = _context(browser).new_page()
            page2.goto(base + "/governance/login")
            page2.fill("input[name=token]", "wrong-token")
            with page2.expect_response(lambda r: r.url.endswith("/governance/login") and r.request.method == "POST") as info:
                page2.click("button[type=submit]")
            assert info.value.status == 401
            assert "not valid" in page2.locator("body").inner_text()
        finally:
            browser.close()


def test_access_control_without_a_browser(server, traffic):
    before = server.registry.read_text(encoding="utf-8")
    # no login: the page redirects to the sign-in form
    r = call(server, "GET", "/governance")
    assert r.status == 303 and r.headers["location"] == "/governance/login"
    r = call(server, "GET", "/governance/login")
    assert r.status == 200 and "name='token'" in r.body
    # the JSON API: the analyst's token is a 403 envelope, no token a 401
    r = call(server, "GET", "/api/v1/governance/report", token=TOKENS[ANA])
    assert r.status == 403
    env = r.json()
    assert env["ok"] is False and (env["error"]["subtype"], env["error"]["code"]) == ("AUTH_SCOPE_DENIED", "EX503")
    assert "env_dump" not in r.body
    r = call(server, "GET", "/api/v1/governance/by_column", token=TOKENS[VIC])
    assert r.status == 403
    r = call(server, "GET", "/api/v1/governance/report")
    assert r.status == 401 and r.json()["error"]["subtype"] == "AUTH_REQUIRED"
    # the page with the analyst's bearer token or cookie: 403
    r = call(server, "GET", "/governance", token=TOKENS[ANA])
    assert r.status == 403 and "env_dump" not in r.body
    r = call(server, "GET", "/governance", headers={"Cookie": f"ontoos_token={TOKENS[ANA]}"})
    assert r.status == 403
    # the reviewer's bearer token works on the page too
    r = call(server, "GET", "/governance", token=TOKENS[REV])
    assert r.status == 200 and "env_dump" in r.body
    # actions: a non-reviewer cannot promote or approve; nothing is written
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    r = call(server, "POST", "/governance/promote", token=TOKENS[ANA], headers=form,
             body=urllib.parse.urlencode({"fingerprint": traffic["fingerprint"], "id": "sneaky", "title": "x"}))
    assert r.status == 403
    r = call(server, "POST", "/governance/approve", headers={**form, "Cookie": f"ontoos_token={TOKENS[VIC]}"},
             body=urllib.parse.urlencode({"id": "hosts_by_provider"}))
    assert r.status == 403
    r = call(server, "POST", "/governance/promote", headers=form,
             body=urllib.parse.urlencode({"fingerprint": traffic["fingerprint"], "id": "sneaky2", "title": "x"}))
    assert r.status == 401
    assert server.registry.read_text(encoding="utf-8") == before
    # a reviewer's failed action comes back as an error flash, and writes nothing
    cookie = {**form, "Cookie": f"ontoos_token={TOKENS[REV]}"}
    for fields in ({"fingerprint": traffic["fingerprint"], "id": "hosts_by_provider", "title": "taken"},  # id in use
                   {"fingerprint": "0000000000000000", "id": "from_nothing", "title": "x"},            # no such uses
                   {"fingerprint": traffic["fingerprint"], "id": "not an id", "title": "x"}):         # not an identifier
        r = call(server, "POST", "/governance/promote", headers=cookie, body=urllib.parse.urlencode(fields))
        assert r.status == 303, (fields, r.status, r.body)
        target = urllib.parse.urlparse(r.headers["location"])
        assert target.path == "/governance"
        assert urllib.parse.parse_qs(target.query).get("error") == ["1"], fields
    r = call(server, "POST", "/governance/approve", headers=cookie, body=urllib.parse.urlencode({"id": "no_such_query"}))
    assert r.status == 303 and "error=1" in r.headers["location"]
    assert server.registry.read_text(encoding="utf-8") == before


def test_a_promoted_fingerprint_is_no_longer_offered_for_promotion(own_server):
    """Once the registry holds a query promoted from a fingerprint, the dashboard must not offer to promote
    that fingerprint again (a second click only fails with 'already has a query' or makes a duplicate)."""
    dash, traffic = own_server
    fp = traffic["fingerprint"]

    def offered() -> list[str]:
        page = call(dash, "GET", "/governance", token=TOKENS[REV])
        assert page.status == 200
        candidates = page.body.split('id="candidates"')[1].split("</table>")[0]
        return re.findall(r'name="fingerprint" value="([0-9a-z:]+)"', candidates)

    assert fp in offered()
    r = call(dash, "POST", "/governance/promote",
             headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"ontoos_token={TOKENS[REV]}"},
             body=urllib.parse.urlencode({"fingerprint": fp, "id": "promoted_once", "title": "Promoted once"}))
    assert r.status == 303 and "error" not in r.headers["location"]
    assert _saved(dash)["promoted_once"]["origin_fingerprint"] == fp
    assert fp not in offered(), "the dashboard still offers to promote a fingerprint that is already a named query"


def _barrier(dash: Dashboard) -> str:
    """One refused request with a dataset name of its own, waited for in the reviewer's report: once it
    is there, so is every event recorded before it (the writer keeps their order). Returns the name."""
    marker = f"barrier_{uuid.uuid4().hex[:8]}"
    assert explore(dash, ANA, {"dataset": marker, "fields": ["x"]}).status == 400
    deadline = time.monotonic() + 60
    while marker not in dict(_kv(report_of(dash)["by_dataset"])):
        assert time.monotonic() < deadline, "the audit never recorded the barrier's request"
        time.sleep(0.1)
    return marker


def test_browsing_the_dashboard_adds_no_rejections(server, traffic):
    """A reviewer looking at the dashboard must not change what it shows: the browser's own requests
    (here the automatic /favicon.ico, sent without a token) are not agent traffic to audit as rejections.
    Between two barriers, the report may change by the second barrier's own request only."""
    def totals():
        data = report_of(server)
        return data["totals"], dict(_kv(data["by_principal"])), dict(_kv(data["by_subtype"]))

    _barrier(server)
    before = totals()
    with _playwright() as p:
        browser = _launch(p)
        try:
            page = browser.new_page()  # a plain browser, as a reviewer has
            _sign_in(page, server.base, TOKENS[REV])
            page.wait_for_url(server.base + "/governance")
            page.reload()
            page.goto(server.base + "/governance?days=7")
        finally:
            browser.close()
    _barrier(server)
    after = totals()
    (t0, p0, s0), (t1, p1, s1) = before, after
    assert {k: t1[k] - t0[k] for k in t0} == {"requests": 1, "refused": 1, "failed": 0, "principals": 0}, (before, after)
    assert {k: p1.get(k, 0) - p0.get(k, 0) for k in p1} == {k: int(k == ANA) for k in p1}, (before, after)
    assert {k: s1.get(k, 0) - s0.get(k, 0) for k in s1} == {k: int(k == "UNKNOWN_DATASET") for k in s1}, (before, after)
