"""Governance, investigating in a real browser: every row of the dashboard leads somewhere.

A real `ontoos serve --http` (audit on) receives the known traffic of
tests/governance/dashboard.py (secret columns reached for, syntax errors, a
dataset out of scope, one exploration repeated by two principals). Headless
chromium signs in as a reviewer and:

- goes from "a secret column was reached for" to the person, the exploration
  and every other attempt in three clicks (the column, an attempt, its
  principal), back again with the browser's Back, and downloads the attempts
  as CSV and JSON;
- filters the events (the form's fields are the URL's query parameters of
  the same names) and pages through them ("1–5 of 12"): the pages are
  disjoint and together are exactly the audit's events;
- reads the chart's text alternatives, moves by keyboard, and finds every
  control labelled and every table captioned, also with JavaScript off;
- follows a fingerprint to its uses and variants, a template request to the
  refusals it followed, a named query to its page, and retires and rejects
  from there (a server of that test's own), after which the query no longer
  runs.

What each page shows is compared with the audit database itself. Screenshots
are kept in tests/governance/artifacts/.
"""

from __future__ import annotations

import csv
import html
import datetime as dt
import io
import json
import re
import urllib.parse
from typing import Any

import pytest
import yaml

from ontoos_explore.governance.report import EVENT_COLUMNS

from .browser import NO_CHROMIUM, context_of, launch, playwright, rows, screenshot, signed_in_as
from .dashboard import (ANA, REV, REV2, TOKENS, VIC, Dashboard, call, events, post_form, send_traffic, sign_in,
                        start_dashboard, wait_for_events)

pytestmark = NO_CHROMIUM
UTC_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


@pytest.fixture(scope="module")
def dash(pg_dsn, tmp_path_factory):
    d = start_dashboard(pg_dsn, tmp_path_factory.mktemp("investigate"))
    try:
        yield d, send_traffic(d)
    finally:
        d.srv.stop_cleanly()


@pytest.fixture
def browser():
    with playwright() as p:
        b = launch(p)
        try:
            yield b
        finally:
            b.close()


def _page(browser, base: str, who: str = REV, **kw):
    context = context_of(browser, viewport={"width": 1300, "height": 900}, accept_downloads=True, **kw)
    page = context.new_page()
    signed_in_as(page, context, base, who)
    return page


def _hrefs(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "links => links.map(a => a.getAttribute('href'))")


def _event_ids(page, table: str) -> list[str]:
    """The events a table lists, in order: the link of each row's time (its first cell)."""
    return [h.rsplit("/", 1)[1] for h in _hrefs(page, f"#{table} tbody td:first-child a[href^='/governance/events/']")]


def _shown_time(at) -> str:
    return at.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _facts(page) -> dict[str, str]:
    """The first definition list of the page: term -> description."""
    return dict(zip(page.locator("dl.facts").first.locator("dt").all_inner_texts(),
                    page.locator("dl.facts").first.locator("dd").all_inner_texts()))


def _download(page, link_name: str):
    with page.expect_download() as info:
        page.locator("p.downloads").last.get_by_role("link", name=link_name).click()
    return info.value


def test_from_a_secret_column_to_the_person_the_exploration_and_every_attempt(dash, browser):
    d, traffic = dash
    attempts = events(d, "column_name = 'env_dump' AND outcome = 'refused'")
    assert len(attempts) == 3 and {e["principal"] for e in attempts} == {ANA, VIC}
    page = _page(browser, d.base)
    summary_url = page.url

    # click 1: the column
    page.locator("#by-column").get_by_role("link", name="env_dump").click()
    page.wait_for_url(re.compile(r".*/governance/columns/workloads/env_dump\?window=14d$"))
    assert page.locator("h1").inner_text() == "Attempts on workloads.env_dump"
    facts = _facts(page)
    assert (facts["attempts"], facts["principals"], facts["reason"]) == ("3", "2", "SECRET_COLUMN_DENIED")
    assert facts["first seen"] == _shown_time(min(e["at"] for e in attempts))
    assert facts["last seen"] == _shown_time(max(e["at"] for e in attempts))
    who = rows(page, "who")
    assert [r[:2] for r in who] == [[ANA, "2"], [VIC, "1"]]
    assert all(UTC_TIME.fullmatch(r[2]) and UTC_TIME.fullmatch(r[3]) for r in who)
    newest_first = sorted(attempts, key=lambda e: (e["at"], e["id"]), reverse=True)
    assert _event_ids(page, "attempts") == [e["id"] for e in newest_first]
    assert page.locator("nav.pager").inner_text().startswith("1–3 of 3 attempts")
    screenshot(page, "column")
    column_url = page.url

    # the attempts, downloaded: CSV and JSON, the same three
    got = _download(page, "CSV")
    assert got.suggested_filename == "ontoos-workloads-env_dump-attempts.csv"
    table = list(csv.reader(io.StringIO(open(got.path(), encoding="utf-8").read())))
    assert tuple(table[0]) == EVENT_COLUMNS
    assert [r[0] for r in table[1:]] == [e["id"] for e in newest_first]
    assert {r[EVENT_COLUMNS.index("principal")] for r in table[1:]} == {ANA, VIC}
    got = _download(page, "JSON")
    body = json.loads(open(got.path(), encoding="utf-8").read())
    assert body["data"]["total"] == 3 and [r["id"] for r in body["data"]["rows"]] == [e["id"] for e in newest_first]
    assert body["meta"]["filters"]["dataset"] == "workloads" and body["meta"]["truncated"] is False

    # click 2: an attempt (the viewer's), with everything the audit knows of it
    vic = next(e for e in attempts if e["principal"] == VIC)
    page.locator(f"#attempts a[href='/governance/events/{vic['id']}']").click()
    page.wait_for_url(re.compile(rf".*/governance/events/{vic['id']}$"))
    assert page.locator("#exploration").inner_text() == vic["exploration"] == "explore workloads fields name, env_dump"
    facts = dict(zip(page.locator("dl.facts dt").all_inner_texts(), page.locator("dl.facts dd").all_inner_texts()))
    expected = traffic["env_dump_error"]
    assert {k: facts[k] for k in ("principal", "role", "surface", "dataset", "outcome", "subtype", "code",
                                  "message (what the caller saw)", "hint", "true reason", "column reached for")} == {
        "principal": VIC, "role": "reader", "surface": "rest", "dataset": "workloads", "outcome": "refused",
        "subtype": "UNKNOWN_FIELD", "code": "EX201", "message (what the caller saw)": expected["message"],
        "hint": vic["hint"], "true reason": "SECRET_COLUMN_DENIED", "column reached for": "env_dump"}
    assert facts["when"] == _shown_time(vic["at"])
    screenshot(page, "event")
    event_url = page.url

    # click 3: the person, and every event of theirs
    page.locator("dl.facts").first.get_by_role("link", name=VIC).click()
    page.wait_for_url(re.compile(r".*/governance/events\?.*principal=" + re.escape(urllib.parse.quote(VIC))))
    theirs = events(d, "principal = %s", [VIC])
    assert sorted(_event_ids(page, "listing")) == sorted(e["id"] for e in theirs)
    assert {r[1] for r in rows(page, "listing")} == {VIC}

    # and back, as the browser goes back
    for url in (event_url, column_url, summary_url):
        page.go_back()
        assert page.url == url
    assert page.locator("h1").inner_text() == "Governance"


def test_filtering_and_paging_the_events(dash, browser):
    d, _ = dash
    page = _page(browser, d.base)
    page.goto(d.base + "/governance/events")
    page.get_by_label("Surface").select_option("rest")
    page.get_by_label("Outcome").select_option("refused")
    page.get_by_label("Window").select_option("7d")
    page.locator("#filters").get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r".*outcome=refused.*"))
    query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    assert query == {"window": ["7d"], "surface": ["rest"], "outcome": ["refused"]}
    refused = events(d, "surface = 'rest' AND outcome = 'refused'")
    assert len(refused) == 12
    assert sorted(_event_ids(page, "listing")) == sorted(e["id"] for e in refused)
    assert page.get_by_label("Outcome").input_value() == "refused"  # the form shows what the URL says

    # five to a page: 1-5, 6-10, 11-12, each one page of the same filters
    page.goto(page.url + "&size=5")
    seen: list[str] = []
    for first, last, number in ((1, 5, 1), (6, 10, 2), (11, 12, 3)):
        assert page.locator("nav.pager .count").inner_text() == f"{first}–{last} of 12 rows, page {number} of 3"
        ids = _event_ids(page, "listing")
        assert len(ids) == last - first + 1 and not set(ids) & set(seen)
        seen += ids
        if number < 3:
            page.locator("nav.pager").get_by_role("link", name="next").click()
            page.wait_for_url(re.compile(rf".*page={number + 1}.*"))
    assert page.locator("nav.pager").get_by_role("link", name="next").count() == 0
    assert seen == [e["id"] for e in sorted(refused, key=lambda e: (e["at"], e["id"]), reverse=True)]
    page.locator("nav.pager").get_by_role("link", name="previous").click()
    assert _event_ids(page, "listing") == seen[5:10]

    # a principal typed in, on top of a dataset
    page.goto(d.base + "/governance/events")
    page.get_by_label("Principal").fill(ANA)
    page.get_by_label("Dataset").select_option("hosts")
    page.locator("#filters").get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r".*dataset=hosts.*"))
    expected = events(d, "principal = %s AND dataset = 'hosts'", [ANA])
    assert sorted(_event_ids(page, "listing")) == sorted(e["id"] for e in expected) and expected
    # the summary takes the same filters
    page.goto(d.base + "/governance?" + urllib.parse.urlencode({"principal": VIC}))
    assert rows(page, "by-principal") == [[VIC, "4"]]


def test_every_table_downloads_with_its_filters(dash):
    d, _ = dash
    rev = sign_in(d, REV)
    for path, query, expected in (
            ("/governance/events", {"dataset": "hosts", "outcome": "refused"},
             sorted(e["id"] for e in events(d, "dataset = 'hosts' AND outcome = 'refused'"))),
            ("/governance/columns", {"dataset": "workloads"}, None),
            ("/governance/subtypes", {"principal": VIC}, None),
            ("/governance/fingerprints", {}, None)):
        as_json = call(d, "GET", path + "?" + urllib.parse.urlencode({**query, "format": "json"}), headers=rev.header)
        as_csv = call(d, "GET", path + "?" + urllib.parse.urlencode({**query, "format": "csv"}), headers=rev.header)
        assert as_json.status == as_csv.status == 200, (path, as_json.body[:200])
        body = as_json.json()
        table = list(csv.reader(io.StringIO(as_csv.body)))
        assert table[0] == body["data"]["columns"] and len(table) - 1 == body["data"]["total"]
        assert as_csv.headers["x-ontoos-total"] == str(body["data"]["total"])
        assert {k: v for k, v in body["meta"]["filters"].items() if v is not None and k != "days"} == query
        if expected is not None:
            assert sorted(r["id"] for r in body["data"]["rows"]) == expected
    # the candidates, whole: the one exploration both ran, with the way to promote it
    fp = dash[1]["fingerprint"]
    listed = call(d, "GET", "/governance/candidates?format=json", headers=rev.header).json()["data"]
    assert [(c["fingerprint"], c["uses"], c["principals"]) for c in listed["rows"]] == [(fp, 3, 2)]
    assert call(d, "GET", "/governance/candidates?dataset=hosts&format=json", headers=rev.header).json()[
        "data"]["rows"] == []
    page = call(d, "GET", "/governance/candidates", headers=rev.header)
    assert page.status == 200 and f'href="/governance/promote?fingerprint={fp}"' in page.body
    assert f'href="/governance/fingerprints/{fp}?window=14d"' in page.body
    subtypes = call(d, "GET", "/governance/subtypes?principal=" + VIC + "&format=json", headers=rev.header).json()
    assert [(r["key"], r["n"]) for r in subtypes["data"]["rows"]] == [("UNKNOWN_DATASET", 2), ("SYNTAX_ERROR", 1),
                                                                       ("UNKNOWN_FIELD", 1)]
    # a caller's text a spreadsheet would run is neutralised in CSV, kept as it is in JSON
    planted = '=HYPERLINK("http://evil.example","x")'
    assert call(d, "POST", "/api/v1/explore", token=TOKENS[ANA], body={"query": planted}).status == 400
    found = wait_for_events(d, "exploration = %s", [planted])
    got = call(d, "GET", f"/governance/events?principal={ANA}&format=csv", headers=rev.header)
    row = next(r for r in csv.reader(io.StringIO(got.body)) if r[0] == found[0]["id"])
    assert row[EVENT_COLUMNS.index("exploration")] == "'" + planted
    got = call(d, "GET", f"/governance/events/{found[0]['id']}", headers=rev.header)
    assert got.status == 200 and "=HYPERLINK(&#34;http://evil.example&#34;" in got.body


def test_the_chart_and_its_text_alternatives(dash, browser):
    d, _ = dash
    refused = events(d, "outcome = 'refused'")
    per_subtype: dict[str, int] = {}
    pairs = set()
    for e in refused:
        per_subtype[e["error_subtype"]] = per_subtype.get(e["error_subtype"], 0) + 1
        pairs.add((e["at"].astimezone(dt.timezone.utc).date(), e["error_subtype"]))
    page = _page(browser, d.base, java_script_enabled=False)
    svg = page.locator("svg#chart")
    assert svg.get_attribute("role") == "img" and svg.get_attribute("aria-labelledby") == "chart-title chart-desc"
    desc = page.locator("#chart-desc").text_content()
    assert desc.startswith(f"{len(refused)} rejections over ")
    for subtype, n in per_subtype.items():
        assert f"{subtype} {n}" in desc
    assert svg.locator("rect").count() == len(pairs)
    legend = page.locator("#legend li").all_inner_texts()
    assert sorted(t.strip() for t in legend) == sorted(f"{s} {n}" for s, n in per_subtype.items())
    by_day = [r.locator("td").all_text_contents() for r in page.locator("#by-day tbody tr").all()]  # in <details>
    assert sum(int(r[1]) for r in by_day) == len(refused)
    assert all(int(r[1]) == sum(int(x) for x in r[2:]) for r in by_day)
    screenshot(page, "summary")


def test_keyboard_and_labels(dash, browser):
    d, _ = dash
    page = _page(browser, d.base)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to the content"
    page.keyboard.press("Enter")
    assert page.url.endswith("/governance#main")
    # every control a person uses has a name a screen reader reads; every table a caption and column headers
    for path in ("/governance", "/governance/events", "/governance/columns/workloads/env_dump",
                 "/governance/queries/hosts_by_provider"):
        page.goto(d.base + path)
        unnamed = page.evaluate("""[...document.querySelectorAll('select, input:not([type=hidden]), button')]
            .filter(e => !(e.labels && e.labels.length) && !e.textContent.trim() && !e.getAttribute('aria-label'))
            .map(e => e.outerHTML)""")
        assert unnamed == [], (path, unnamed)
        tables = page.evaluate("""[...document.querySelectorAll('table')].map(t => [t.id, !!t.caption,
            t.querySelectorAll('th[scope=col]').length === t.querySelectorAll('th').length])""")
        assert tables and all(c and s for _, c, s in tables), (path, tables)
    # by keyboard alone: focus the column's link and follow it
    page.goto(d.base + "/governance")
    page.locator("#by-column").get_by_role("link", name="env_dump").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/governance/columns/workloads/env_dump.*"))


def test_a_fingerprint_and_a_request_lead_to_their_details(dash, browser):
    d, traffic = dash
    fp = traffic["fingerprint"]
    filed = call(d, "POST", "/api/v1/requests", token=TOKENS[VIC],
                 body={"question": "which hosts run which workloads, by provider?", "dataset": "workloads"})
    assert filed.status == 200, filed.body
    request_id = filed.json()["data"]["request_id"]
    page = _page(browser, d.base)
    page.locator("#candidates").get_by_role("link", name=re.compile("explore workloads")).click()
    page.wait_for_url(re.compile(rf".*/governance/fingerprints/{fp}$"))
    facts = _facts(page)
    assert (facts["uses"], facts["answered"], facts["principals"]) == ("3", "3", "2")
    assert len(rows(page, "variants")) == 3 and [r[:2] for r in rows(page, "who")] == [[ANA, "2"], [VIC, "1"]]
    assert page.locator("#promotion").get_by_role("link", name="Review and promote").count() == 1
    uses = events(d, "fingerprint = %s", [fp])
    assert sorted(_event_ids(page, "uses")) == sorted(e["id"] for e in uses)

    page.goto(d.base + "/governance")
    wait_for_events(d, "principal = %s AND outcome = 'refused'", [VIC], n=4)
    page.reload()
    page.locator("#requests").get_by_role("link", name="refusals").click()
    page.wait_for_url(re.compile(rf".*/governance/requests/{request_id}$"))
    assert page.locator("#question").inner_text() == "which hosts run which workloads, by provider?"
    before = {e["id"] for e in events(d, "principal = %s AND outcome = 'refused' AND fingerprint = ANY(%s)",
                                      [VIC, filed.json()["data"]["recent_refusals"]])}
    assert before and set(_event_ids(page, "refusals")) == before


def _registry(d: Dashboard) -> dict[str, dict[str, Any]]:
    return {q["id"]: q for q in yaml.safe_load(d.registry.read_text(encoding="utf-8"))["queries"]}


def test_retiring_and_rejecting_from_a_query_page(pg_dsn, tmp_path, browser):
    d = start_dashboard(pg_dsn, tmp_path / "lifecycle")
    try:
        traffic = send_traffic(d)
        r = post_form(d, "/governance/promote", {"fingerprint": traffic["fingerprint"], "id": "promoted_one",
                                                 "title": "Promoted one"}, sign_in(d, REV))
        assert r.status == 303
        run = {"params": {"provider": "aws"}}
        assert call(d, "POST", "/api/v1/queries/hosts_by_provider/run", token=TOKENS[ANA], body=run).status == 200
        page = _page(browser, d.base, who=REV2)

        # a pending query: its page, and Reject
        page.locator("#queries").get_by_role("link", name="promoted_one").click()
        page.wait_for_url(re.compile(r".*/governance/queries/promoted_one$"))
        facts = _facts(page)
        assert (facts["status"], facts["promoted by"]) == ("pending", REV) and UTC_TIME.fullmatch(facts["promoted"])
        assert "explore" not in page.locator("#sql").inner_text() and "SELECT" in page.locator("#sql").inner_text()
        assert [r[0] for r in rows(page, "parameters")] == ["namespace", "replicas"]
        page.locator("#actions").get_by_role("button", name="Reject").click()
        page.wait_for_url(re.compile(r".*/governance/queries/promoted_one\?done=rejected&id=promoted_one$"))
        assert "rejected promoted_one" in page.locator("#flash").inner_text()
        facts = _facts(page)
        assert (facts["status"], facts["rejected by"]) == ("rejected", REV2) and UTC_TIME.fullmatch(facts["rejected"])
        assert page.locator("#actions button").count() == 0
        saved = _registry(d)["promoted_one"]
        assert (saved["status"], saved["rejected_by"]) == ("rejected", REV2) and saved["rejected_at"].endswith("Z")

        # an approved query: its page, and Retire; it no longer runs
        page.goto(d.base + "/governance/queries/hosts_by_provider")
        assert [r[:4] for r in rows(page, "parameters")] == [["provider", "enum", "", "aws, gcp, azure, onprem"]]
        assert _facts(page)["runs (365 days)"] == "1"
        screenshot(page, "query")
        page.locator("#actions").get_by_role("button", name="Retire").click()
        page.wait_for_url(re.compile(r".*done=retired&id=hosts_by_provider$"))
        assert _facts(page)["status"] == "retired" and _facts(page)["retired by"] == REV2
        refused = call(d, "POST", "/api/v1/queries/hosts_by_provider/run", token=TOKENS[ANA], body=run)
        assert refused.status == 400 and refused.json()["error"]["code"] == "EX208"
        done = wait_for_events(d, "surface = 'dashboard' AND reason IN ('REJECTED', 'RETIRED')", n=2)
        assert [(e["principal"], e["reason"], e["exploration"]) for e in done] == [
            (REV2, "REJECTED", "reject promoted_one"), (REV2, "RETIRED", "retire hosts_by_provider")]
        # neither is offered again: a rejected fingerprint is no candidate, a retired query has no action
        page.goto(d.base + "/governance")
        assert rows(page, "candidates") == [["none yet"]]
        assert page.locator("#queries button").count() == 0
    finally:
        d.srv.stop_cleanly()


def test_the_pages_refuse_what_they_cannot_show(dash):
    d, _ = dash
    rev = sign_in(d, REV)
    for path, status, says in (
            ("/governance/events/0123456789abcdef", 404, "no such event"),
            ("/governance/events/not%20an%20id", 404, "no such event"),
            ("/governance/columns/workloads/no%20such", 404, "no such column"),
            ("/governance/requests/zz", 404, "no such template request"),
            ("/governance/queries/nope", 400, "has no query"),
            ("/governance/events?page=0", 400, "'page' must be"),
            ("/governance/events?size=201", 400, "'size' must be"),
            ("/governance/events?window=400d", 400, "'window' must be"),
            ("/governance/events?format=xml", 400, "'format' must be")):
        r = call(d, "GET", path, headers=rev.header)
        assert (r.status, r.headers["content-type"].split(";")[0]) == (status, "text/html"), (path, r.status)
        assert says in html.unescape(r.body), (path, r.body[-600:])
        r = call(d, "GET", path, headers={**rev.header, "Accept": "application/json"})
        assert r.status == status and r.json()["ok"] is False, path
    # the pages are for reviewers: the analyst's token reads none of them
    for path in ("/governance/events", "/governance/columns/workloads/env_dump", "/governance/queries/hosts_by_provider",
                 "/governance/events?format=csv"):
        r = call(d, "GET", path, token=TOKENS[ANA])
        assert r.status == 403 and "SECRET_COLUMN_DENIED" not in r.body and "AUTH_SCOPE_DENIED" in r.body, path
