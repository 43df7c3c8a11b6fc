"""Governance, the dashboard in a real browser: what a reviewer sees after a known set of rejections.

A real `ontoos serve --http` runs in a subprocess (audit on, the candidate
rule lowered to 3 uses by 2 principals). An analyst and a viewer send a known
set of requests over REST: secret columns reached for, an out-of-scope
dataset, syntax errors, a budget, an attempt at markup injection, and one
exploration repeated by both with other values. Once the audit has flushed,
headless chromium (Playwright, Debian's /usr/bin/chromium) signs in as the
reviewer and checks the page: the secret columns and who reached for them,
rejections by subtype, recent rejections with message and hint, the
candidate; a filter (reflected in the URL); the promote form (every example
it would keep: the numeric range ticked, the namespaces callers typed not),
Promote, sign out (the session ends), a second reviewer signs in and
approves (the promoter is not offered Approve), after which the registry
file holds the approved query, promoted_by and approved_by, and an agent can
run it over MCP. Every form carries the session's CSRF token. A screenshot is
saved to tests/governance/artifacts/dashboard.png. The page and its filters
also work with JavaScript off; a non-reviewer is refused at sign-in (403); no
login redirects to the login form; the JSON API refuses the analyst's token
with a 403 envelope. tests/governance/test_dashboard_security.py holds the
attacks (cross-origin forms, CSRF, the session, the sign-in limit, bad input).

Each server writes its audit to a database of its own. The tests that only read
share one server and its traffic; the two that change the registry (promoting
a candidate) each start a server of their own with the same traffic, so no test
sees what another did, in whatever order they run.
"""

from __future__ import annotations

import re
import time
import urllib.parse
import uuid
from typing import Any

import psycopg
import pytest
import yaml

from .browser import NO_CHROMIUM, context_of, launch, playwright, rows, rows_nojs, screenshot, sign_in_page, signed_in_as
from .dashboard import (ANA, COOKIE, FORM, REV, REV2, TOKENS, VIC, XSS, Dashboard, call, events, explore, post_form,
                        report_of, send_traffic, sign_in, start_dashboard, wait_for_events)

pytestmark = NO_CHROMIUM
UTC_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")

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


def _the_sign_in_is_audited(dash: Dashboard, page, who: str) -> None:
    """The sign-in is an audit event (surface dashboard): once it is recorded the page counts it."""
    wait_for_events(dash, "surface = 'dashboard' AND principal = %s AND reason = 'SIGNED_IN'", [who])
    page.reload()


def _the_page_shows_the_traffic(page, traffic: dict[str, Any]) -> None:
    """The totals, which secret columns were reached for and by whom, rejections by subtype, dataset
    and principal, the chart, the recent rejections (markup shown as text), the candidate, the registry."""
    totals = page.locator("#totals").inner_text()  # the 15 requests, and the reviewer's sign-in
    assert re.search(r"requests\s*16", totals) and re.search(r"refused\s*12", totals), totals
    assert re.search(r"principals\s*4", totals), totals
    by_column = rows(page, "by-column")
    assert [r[:5] for r in by_column] == [
        ["workloads", "env_dump", "SECRET_COLUMN_DENIED", "3", f"{ANA}, {VIC}"],
        ["configs", "value", "SECRET_COLUMN_DENIED", "1", ANA],
        ["hosts", "ssh_private_key", "SECRET_COLUMN_DENIED", "1", ANA],
    ]
    assert all(UTC_TIME.fullmatch(r[5]) for r in by_column), by_column
    assert rows(page, "by-subtype") == [["UNKNOWN_FIELD", "6"], ["SYNTAX_ERROR", "2"], ["UNKNOWN_DATASET", "2"],
                                         ["AUTH_REQUIRED", "1"], ["QUERY_BUDGET_EXCEEDED", "1"]]
    assert rows(page, "by-dataset") == [["workloads", "4"], ["hosts", "3"], ["configs", "1"], ["table_refs", "1"]]
    assert rows(page, "by-principal") == [[ANA, "7"], [VIC, "4"], ["anonymous", "1"]]
    # the chart: one bar per day with rejections, their totals summing to 12, a segment per subtype and day
    assert sum(int(t) for t in page.locator("svg#chart text.total").all_text_contents()) == 12
    assert sum(int(t.rsplit(": ", 1)[1]) for t in page.locator("svg#chart rect title").all_text_contents()) == 12

    # the most recent rejections, with message and hint
    recent = rows(page, "recent")
    assert len(recent) == 12
    env_dump = traffic["env_dump_error"]
    secret_rows = [r for r in recent if env_dump["message"] in r[4]]
    assert len(secret_rows) == 3
    assert all(env_dump["hint"] in r[4] for r in secret_rows)
    assert {r[1].split("\n")[0] for r in secret_rows} == {ANA, VIC}
    syntax = next(r for r in recent if traffic["syntax_error"]["message"] in r[4])
    assert traffic["syntax_error"]["hint"] in syntax[4] and syntax[2].startswith("SYNTAX_ERROR")
    # the markup planted in a literal is shown as text, never run
    script = XSS.split("<img")[0]  # the list cuts the exploration at 120 characters (the event page has it whole)
    assert any(script in r[3] for r in recent), [r[3] for r in recent]
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#recent img").count() == 0 and page.locator("#recent script").count() == 0

    candidates = rows(page, "candidates")
    assert len(candidates) == 1
    assert traffic["fingerprint"] in candidates[0][0] and candidates[0][1:3] == ["3", "2"]
    assert "explore workloads fields name, replicas where namespace = " in candidates[0][0]
    # the hand-written query is listed, approved, without an Approve button
    assert rows(page, "queries") == [["hosts_by_provider", "Hosts of a provider", "approved", "", "Retire"]]


def _the_filters_narrow_it(page) -> None:
    """The dataset, submitted with the form: the URL reflects it and the tables change; then a subtype
    and a number of days on top of it."""
    page.select_option("select[name=dataset]", "workloads")
    page.click("#filters button[type=submit]")
    page.wait_for_url(re.compile(r".*/governance\?.*dataset=workloads.*"))
    query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    assert query["dataset"] == ["workloads"] and query["window"] == ["14d"]
    assert [r[:5] for r in rows(page, "by-column")] == [["workloads", "env_dump", "SECRET_COLUMN_DENIED", "3",
                                                         f"{ANA}, {VIC}"]]
    assert rows(page, "by-subtype") == [["UNKNOWN_FIELD", "4"]]
    assert rows(page, "by-dataset") == [["workloads", "4"]]
    assert rows(page, "by-principal") == [[ANA, "3"], [VIC, "1"]]
    assert len(rows(page, "recent")) == 4
    assert page.locator("select[name=dataset]").input_value() == "workloads"
    json_link = page.get_by_role("link", name="/api/v1/governance/report")
    assert "dataset=workloads" in json_link.get_attribute("href")

    page.select_option("select[name=dataset]", "")
    page.select_option("select[name=subtype]", "UNKNOWN_DATASET")
    page.select_option("select[name=window]", "7d")
    page.click("#filters button[type=submit]")
    page.wait_for_url(re.compile(r".*subtype=UNKNOWN_DATASET.*"))
    query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    assert query == {"window": ["7d"], "subtype": ["UNKNOWN_DATASET"]}
    assert rows(page, "by-dataset") == [["hosts", "2"]]
    assert rows(page, "by-principal") == [[VIC, "2"]]
    assert rows(page, "by-column") == [["none"]]


def _saved(dash: Dashboard) -> dict[str, dict[str, Any]]:
    return {q["id"]: q for q in yaml.safe_load(dash.registry.read_text(encoding="utf-8"))["queries"]}


def _review_and_promote(page, dash: Dashboard, fp: str) -> str:
    """The candidate's promote form: the query and every example it would keep (the numeric range
    ticked, the namespaces callers typed not ticked); Promote as it is. Returns the query's id."""
    from playwright.sync_api import expect

    page.goto(dash.base + "/governance")
    page.locator("#candidates tr", has_text=fp).get_by_role("link", name="Review and promote").click()
    page.wait_for_url(re.compile(r".*/governance/promote\?fingerprint=" + fp))
    expect(page.locator("h1")).to_have_text("Review a promotion")
    namespace, replicas = (page.locator(f"#parameters tr[data-parameter={n}]") for n in ("namespace", "replicas"))
    assert [(c.get_attribute("value"), c.is_checked()) for c in namespace.locator("input[name=keep]").all()] == \
        [('["namespace", "payments"]', False), ('["namespace", "staging"]', False)]
    expect(namespace).to_contain_text("free text typed by callers")
    assert [(c.get_attribute("value"), c.is_checked()) for c in replicas.locator("input[name=keep]").all()] == \
        [('["replicas", 0]', True), ('["replicas", 2]', True)]
    assert page.locator("#promote input[name=csrf]").count() == 1
    ident = page.locator("#promote input[name=id]").input_value()
    assert re.fullmatch(r"workloads_[0-9a-f]{6}", ident), ident
    page.get_by_role("button", name="Promote").click()
    page.wait_for_url(re.compile(r".*/governance\?done=promoted&id=" + ident))
    expect(page.locator("#flash")).to_contain_text(f"promoted {ident} (pending)")
    saved = _saved(dash)[ident]
    assert (saved["status"], saved["origin_fingerprint"], saved["promoted_by"]) == ("pending", fp, REV)
    assert {p["name"]: p["examples"] for p in saved["params"]} == {"namespace": [], "replicas": [0, 2]}
    assert _saved(dash)["hosts_by_provider"]["status"] == "approved"
    # its promoter is not offered Approve
    pending_row = page.locator("#queries tr", has_text=ident)
    expect(pending_row).to_contain_text("pending")
    expect(pending_row).to_contain_text("another reviewer approves it")
    assert pending_row.get_by_role("button", name="Approve").count() == 0
    return ident


def _sign_out(page, context, dash: Dashboard) -> None:
    """Sign out (a form with the CSRF token): the session ends on the server, the cookie goes."""
    from playwright.sync_api import expect

    old = next(c for c in context.cookies() if c["name"] == COOKIE)["value"]
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(dash.base + "/governance/login?done=signed_out")
    expect(page.locator("#flash")).to_contain_text("You are signed out")
    assert not any(c["name"] == COOKIE for c in context.cookies())
    r = call(dash, "GET", "/governance", headers={"Cookie": f"{COOKIE}={old}"})
    assert r.status == 303 and r.headers["location"] == "/governance/login"


def _another_reviewer_approves(page, context, dash: Dashboard, ident: str) -> None:
    from playwright.sync_api import expect

    signed_in_as(page, context, dash.base, REV2)
    pending_row = page.locator("#queries tr", has_text=ident)
    expect(pending_row).to_contain_text(REV)  # promoted by
    pending_row.get_by_role("button", name="Approve").click()
    page.wait_for_url(re.compile(r".*/governance\?done=approved&id=" + ident))
    expect(page.locator("#flash")).to_contain_text(f"approved {ident}")
    saved = _saved(dash)[ident]
    assert (saved["status"], saved["promoted_by"], saved["approved_by"]) == ("approved", REV, REV2)
    assert [r[:4] for r in rows(page, "queries")] == [
        ["hosts_by_provider", "Hosts of a provider", "approved", ""],
        [ident, saved["title"], "approved", REV]]
    assert page.locator("#queries").get_by_role("button", name="Approve").count() == 0
    found = wait_for_events(dash, "surface = 'dashboard' AND reason IN ('PROMOTED', 'APPROVED')", n=2)
    assert [(e["principal"], e["reason"]) for e in found] == [(REV, "PROMOTED"), (REV2, "APPROVED")]
    assert all(ident in e["exploration"] for e in found)


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
    """From sign-in to a query an agent runs: the page, its filters, the promote form, sign-out, approval
    by another reviewer."""
    dash, traffic = own_server
    dialogs: list[str] = []
    with playwright() as p:
        browser = launch(p)
        try:
            context = context_of(browser, viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            signed_in_as(page, context, dash.base, REV)
            _the_sign_in_is_audited(dash, page, REV)
            _the_page_shows_the_traffic(page, traffic)
            _the_filters_narrow_it(page)
            ident = _review_and_promote(page, dash, traffic["fingerprint"])
            _sign_out(page, context, dash)
            _another_reviewer_approves(page, context, dash, ident)
            screenshot(page, "dashboard")
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
        properties = listed[0]["parameters"]["properties"]
        assert set(properties) == {"namespace", "replicas"}
        assert "examples" not in properties["namespace"] and properties["replicas"]["examples"] == [0, 2]
        r = await c.call_tool("ontoos_run_query", {"id": ident, "params": {"namespace": "ml-serving", "replicas": 3}})
        assert r.is_error is False, r.content[0].text
        return r.structured_content["data"]["rows"]


def test_the_dashboard_works_without_javascript(server, traffic):
    base = server.base
    with playwright() as p:
        browser = launch(p)
        try:
            context = context_of(browser, java_script_enabled=False)
            page = context.new_page()
            sign_in_page(page, base, TOKENS[REV])
            page.wait_for_url(base + "/governance")
            assert page.locator("#by-column tr").count() == 4
            assert rows_nojs(page, "by-column")[0][:5] == ["workloads", "env_dump", "SECRET_COLUMN_DENIED", "3",
                                                           f"{ANA}, {VIC}"]
            # the filter form is a plain GET form
            page.select_option("select[name=dataset]", "hosts")
            page.click("#filters button[type=submit]")
            page.wait_for_url(re.compile(r".*dataset=hosts.*"))
            assert [r[:5] for r in rows_nojs(page, "by-column")] == [["hosts", "ssh_private_key", "SECRET_COLUMN_DENIED",
                                                                      "1", ANA]]
            assert rows_nojs(page, "by-subtype") == [["UNKNOWN_DATASET", "2"], ["UNKNOWN_FIELD", "1"]]
            assert page.locator("select[name=dataset] option[selected]").inner_text() == "hosts"
            context.close()
        finally:
            browser.close()


def test_a_non_reviewer_is_refused_at_sign_in(server, traffic):
    base = server.base
    with playwright() as p:
        browser = launch(p)
        try:
            context = context_of(browser)
            page = context.new_page()
            with page.expect_response(lambda r: r.url.endswith("/governance/login") and r.request.method == "POST") as info:
                sign_in_page(page, base, TOKENS[ANA])
            assert info.value.status == 403
            body = page.locator("body").inner_text()
            assert "reviewers" in body and "AUTH_SCOPE_DENIED" in body
            assert "env_dump" not in page.content()
            assert not context.cookies()  # no session for a non-reviewer
            # and a wrong token is refused at the sign-in form
            page2 = context_of(browser).new_page()
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
    assert r.status == 200 and 'name="token"' in r.body
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
    # the page with the analyst's bearer token: 403; a token as the cookie signs nobody in
    r = call(server, "GET", "/governance", token=TOKENS[ANA])
    assert r.status == 403 and "env_dump" not in r.body
    for name in (COOKIE, "ontoos_token"):
        r = call(server, "GET", "/governance", headers={"Cookie": f"{name}={TOKENS[REV]}"})
        assert r.status == 303 and r.headers["location"] == "/governance/login"
    # the reviewer's bearer token works on the page too (reading: the actions need a session)
    r = call(server, "GET", "/governance", token=TOKENS[REV])
    assert r.status == 200 and "env_dump" in r.body and 'name="csrf"' not in r.body
    # actions: a non-reviewer cannot promote or approve; nothing is written
    r = call(server, "POST", "/governance/promote", token=TOKENS[ANA], headers=FORM,
             body=urllib.parse.urlencode({"fingerprint": traffic["fingerprint"], "id": "sneaky", "title": "x"}))
    assert r.status == 403 and "AUTH_SCOPE_DENIED" in r.body
    r = call(server, "POST", "/governance/approve", headers={**FORM, "Cookie": f"{COOKIE}={TOKENS[VIC]}"},
             body=urllib.parse.urlencode({"id": "hosts_by_provider"}))
    assert r.status == 401
    r = call(server, "POST", "/governance/promote", headers=FORM,
             body=urllib.parse.urlencode({"fingerprint": traffic["fingerprint"], "id": "sneaky2", "title": "x"}))
    assert r.status == 401
    assert server.registry.read_text(encoding="utf-8") == before
    # a reviewer's failed action is its refusal's page (status and message), and writes nothing
    rev = sign_in(server, REV)
    for fields, status, says in (
            ({"fingerprint": traffic["fingerprint"], "id": "hosts_by_provider", "title": "taken"}, 400, "already has"),
            ({"fingerprint": "0000000000000000", "id": "from_nothing", "title": "x"}, 400, "no successful exploration"),
            ({"fingerprint": traffic["fingerprint"], "id": "not an id", "title": "x"}, 400, "identifier")):
        r = post_form(server, "/governance/promote", fields, rev)
        assert r.status == status and says in r.body, (fields, r.status, r.body[:300])
        assert r.headers["content-type"].startswith("text/html")
    r = post_form(server, "/governance/approve", {"id": "no_such_query"}, rev)
    assert r.status == 400 and "no query" in r.body
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
        return re.findall(r'data-fingerprint="([0-9a-z:]+)"', candidates)

    assert fp in offered()
    r = post_form(dash, "/governance/promote", {"fingerprint": fp, "id": "promoted_once", "title": "Promoted once"},
                  sign_in(dash, REV))
    assert r.status == 303 and r.headers["location"] == "/governance?done=promoted&id=promoted_once"
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
    Between two barriers, the report may change by the second barrier's own request and the reviewer's
    sign-in (an audited action, not a rejection) only."""
    def totals():
        data = report_of(server)
        return data["totals"], dict(_kv(data["by_principal"])), dict(_kv(data["by_subtype"]))

    _barrier(server)
    before = totals()
    reviewer_seen = bool(events(server, "principal = %s", [REV]))
    with playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page()  # a plain browser, as a reviewer has
            sign_in_page(page, server.base, TOKENS[REV])
            page.wait_for_url(server.base + "/governance")
            page.reload()
            page.goto(server.base + "/governance?window=7d")
        finally:
            browser.close()
    _barrier(server)
    after = totals()
    (t0, p0, s0), (t1, p1, s1) = before, after
    assert {k: t1[k] - t0[k] for k in t0} == {"requests": 2, "refused": 1, "failed": 0,
                                              "principals": 0 if reviewer_seen else 1}, (before, after)
    assert {k: p1.get(k, 0) - p0.get(k, 0) for k in p1} == {k: int(k == ANA) for k in p1}, (before, after)
    assert {k: s1.get(k, 0) - s0.get(k, 0) for k in s1} == {k: int(k == "UNKNOWN_DATASET") for k in s1}, (before, after)
