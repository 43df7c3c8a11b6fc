"""Dashboard views (server/dashboard_views.py): a reviewer's URL -> filters and page; a report table
-> cells, links and exports.

- `filters_of` reads each filter into its field (14 days by default; `window=7d`, `window=7` and the
  older `days=7` alike), an empty value is unset, and a bad value, a parameter given twice or an
  unknown one is refused (INVALID_REQUEST, with a did-you-mean, repeating none of the URL's text);
  `Filters.query()` reads back as the same filters;
- `page_of` and `export_format` accept what they name and refuse the rest;
- `when` shows a time in UTC with its zone, `cut` shortens long text to CUT characters;
- `cells` lead each value where it belongs (an event, a principal's events, a column's attempts, a
  fingerprint or a named query), with path parts and query values encoded;
- `export` writes the whole table as CSV (formulas defused, lists as JSON) or as the JSON envelope,
  with the total and whether it was cut in the headers.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import urllib.parse

import pytest
from starlette.datastructures import QueryParams

from ontoos_explore.errors import Codes, ExploreError
from ontoos_explore.governance import report
from ontoos_explore.governance.report import Filters, Page
from ontoos_explore.server.dashboard_views import CUT, LISTINGS, cells, cut, export, export_format, filters_of
from ontoos_explore.server.dashboard_views import page_of, when


def q(**params) -> QueryParams:
    return QueryParams(urllib.parse.urlencode(params))


def refused(call, *args):
    with pytest.raises(ExploreError) as e:
        call(*args)
    assert e.value.error_code is Codes.INVALID_REQUEST
    return e.value


# ---------------------------------------------------------------- filters and pages


def test_the_default_filters_are_14_days_and_nothing_else_and_an_empty_value_is_unset():
    assert filters_of(QueryParams("")) == Filters(14, None, None, None, None, None)
    assert filters_of(QueryParams("window=7d&dataset=&principal=")) == Filters(days=7)
    assert filters_of(QueryParams("window=")).days == 14


@pytest.mark.parametrize("text", ["window=7d", "window=7", "days=7", "window=&days=7"])
def test_a_window_of_seven_days_however_written(text):
    assert filters_of(QueryParams(text)).days == 7


def test_each_filter_is_read_into_its_field():
    f = filters_of(QueryParams("window=30d&dataset=workloads&subtype=UNKNOWN_FIELD&principal=ana"
                               "&surface=mcp-stdio&outcome=refused"))
    assert f == Filters(days=30, dataset="workloads", subtype="UNKNOWN_FIELD", principal="ana",
                        surface="mcp-stdio", outcome="refused")
    longest = filters_of(q(principal="a" * 200, window="365d"))  # the limits themselves are accepted
    assert (longest.principal, longest.days) == ("a" * 200, 365)


@pytest.mark.parametrize("params", [
    {"window": "0"}, {"window": "366"}, {"window": "abc"}, {"window": "7w"},
    {"dataset": "not a name"}, {"subtype": "unknown_field"},
    {"principal": "ana\x01"}, {"principal": "a" * 201},
    {"surface": "Bad Surface"}, {"outcome": "refusd"},
])
def test_a_bad_value_is_refused(params):
    refused(filters_of, q(**params))


@pytest.mark.parametrize(("text", "attr", "says"), [
    ("outcome=refusd", "hint", "did you mean 'refused'"),
    ("dataset=a&dataset=b", "message", "'dataset' is given 2 times"),
    ("windw=7d", "message", "this page takes no parameter of that name"),
    ("windw=7d", "hint", "did you mean 'window'"),
])
def test_a_refusal_says_what_was_meant(text, attr, says):
    assert says in getattr(refused(filters_of, QueryParams(text)), attr)


def test_a_refusal_repeats_none_of_the_urls_text():
    for e in (refused(filters_of, q(**{"<b>x</b>": "1"})), refused(filters_of, q(outcome="<b>x</b>"))):
        assert "<b>" not in e.message and "<b>" not in e.hint


def test_filters_read_back_from_their_own_query():
    f = Filters(days=30, dataset="workloads", subtype="SECRET_COLUMN_DENIED", principal="a b&c=d",
                surface="rest", outcome="failed")
    assert filters_of(QueryParams(urllib.parse.urlencode(f.query()))) == f
    assert filters_of(QueryParams(urllib.parse.urlencode(Filters().query()))) == Filters()


def test_page_defaults_and_limits():
    assert page_of(QueryParams("")) == Page(1, 20)
    assert page_of(QueryParams("page=3&size=200")) == Page(3, 200)
    for text in ("page=0", "page=x", "size=0", "size=201", "page=-1"):
        refused(page_of, QueryParams(text))


def test_export_formats():
    assert [export_format(QueryParams(t)) for t in ("", "format=csv", "format=json", "format=html")] == [
        None, "csv", "json", None]
    refused(export_format, QueryParams("format=xml"))


# ---------------------------------------------------------------- times and text


@pytest.mark.parametrize(("value", "shown"), [
    ("2026-12-01T12:30:45+02:00", "2026-12-01 10:30:45 UTC"),
    (dt.datetime(2026, 12, 1, 10, 0, 5), "2026-12-01 10:00:05 UTC"),
    (dt.datetime(2026, 12, 1, 23, 0, tzinfo=dt.timezone(dt.timedelta(hours=-3))), "2026-12-02 02:00:00 UTC"),
    (None, ""),
    ("not a time", "not a time"),
])
def test_when_shows_utc_with_its_zone(value, shown):
    assert when(value) == shown


def test_cut_keeps_cut_characters():
    assert CUT == 120
    assert cut("x" * 120) == "x" * 120
    text = "".join(chr(ord("a") + i % 26) for i in range(121))
    assert cut(text) == text[:119] + "…" and len(cut(text)) == 120
    assert cut(None) == ""


# ---------------------------------------------------------------- cells

F = Filters()  # 14 days


def split(href: str) -> tuple[str, dict[str, list[str]]]:
    parts = urllib.parse.urlsplit(href)
    return parts.path, urllib.parse.parse_qs(parts.query)


def test_a_column_row_leads_to_the_column_and_to_each_principal():
    row = {"dataset": "workloads", "column_name": "env_dump", "reason": "SECRET_COLUMN_DENIED", "n": 3,
           "principals": 2, "who": ["vic", "ana"], "first": "2026-11-30T08:00:00+00:00",
           "last": "2026-12-01T10:00:00+00:00"}
    got = cells(LISTINGS["columns"], row, F)
    assert got[:4] == [[("workloads", None)], [("env_dump", "/governance/columns/workloads/env_dump?window=14d")],
                       [("SECRET_COLUMN_DENIED", None)], [("3", None)]]
    who = got[4]
    assert [text for text, _ in who] == ["ana", ", ", "vic"] and who[1][1] is None
    for (name, href) in (who[0], who[2]):
        assert split(href) == ("/governance/events", {"window": ["14d"], "principal": [name]})
    assert got[5] == [("2026-12-01 10:00:00 UTC", None)]
    row = {**row, "column_name": "env/dump x", "who": []}  # a path part is quoted
    assert cells(LISTINGS["columns"], row, Filters(days=7))[1] == [
        ("env/dump x", "/governance/columns/workloads/env%2Fdump%20x?window=7d")]


def test_an_event_row_leads_to_its_event_its_principal_and_its_subtype():
    long = "from workloads select " + ", ".join(f"c{i}" for i in range(40))
    assert len(long) > CUT
    row = {"id": "ev 1/2", "at": "2026-12-01T10:00:00+00:00", "principal": "a b&c", "surface": "mcp",
           "outcome": "refused", "subtype": "UNKNOWN_FIELD", "dataset": "workloads", "exploration": long,
           "message": "no field 'c9'"}
    f = Filters(days=7, dataset="workloads")
    at, principal, surface, outcome, subtype, dataset, exploration, message = cells(LISTINGS["events"], row, f)
    assert at == [("2026-12-01 10:00:00 UTC", "/governance/events/ev%201%2F2")]
    [(text, href)] = principal  # its name, encoded in the query string
    assert text == "a b&c" and split(href) == ("/governance/events", {"window": ["7d"], "dataset": ["workloads"],
                                                                        "principal": ["a b&c"]})
    assert "principal=a+b%26c" in href
    [(text, href)] = subtype
    assert text == "UNKNOWN_FIELD"
    assert split(href) == ("/governance/events", {"window": ["7d"], "dataset": ["workloads"],
                                                  "subtype": ["UNKNOWN_FIELD"]})
    assert (surface, outcome, dataset) == ([("mcp", None)], [("refused", None)], [("workloads", None)])
    assert exploration == [(long[:CUT - 1] + "…", "/governance/events/ev%201%2F2")]
    assert message == [("no field 'c9'", None)]  # short: the whole is here, no link


def test_a_short_exploration_and_no_subtype_have_no_link():
    row = {"id": "e1", "at": None, "principal": "ana", "subtype": None, "exploration": "from hosts", "message": None}
    got = dict(zip(LISTINGS["events"].columns, cells(LISTINGS["events"], row, F)))
    assert got["exploration"] == [("from hosts", None)]
    assert got["subtype"] == [("", None)] and got["message"] == [("", None)]
    assert got["at"] == [("", "/governance/events/e1")]


@pytest.mark.parametrize(("listing", "key", "field"), [
    ("subtypes", "UNKNOWN_FIELD", "subtype"), ("datasets", "workloads", "dataset"),
    ("principals", "a b&c", "principal"),
])
def test_a_count_leads_to_the_refused_events_of_its_key(listing, key, field):
    [[(text, href)], [(n, none)]] = cells(LISTINGS[listing], {"key": key, "n": 4}, F)
    assert (text, n, none) == (key, "4", None)
    assert split(href) == ("/governance/events", {"window": ["14d"], "outcome": ["refused"], field: [key]})


def test_a_recurring_exploration_leads_to_its_named_query_or_its_fingerprint():
    listing = LISTINGS["fingerprints"]
    named = {"fingerprint": "named:hosts_by_provider", "example": "named query hosts_by_provider", "uses": 9,
             "ok": 9, "principals": 3, "last": None}
    assert cells(listing, named, F)[0] == [("named query hosts_by_provider", "/governance/queries/hosts_by_provider")]
    plain = {**named, "fingerprint": "0123456789abcdef", "example": "x" * 130}
    assert cells(listing, plain, Filters(days=30))[0] == [
        ("x" * 119 + "…", "/governance/fingerprints/0123456789abcdef?window=30d")]
    assert cells(listing, plain, F)[1:4] == [[("9", None)], [("9", None)], [("3", None)]]


# ---------------------------------------------------------------- exports

ROWS = [
    {"id": "e1", "exploration": "=HYPERLINK(\"x\")", "n": -1, "who": ["ana", "vic"]},
    {"id": "e2", "exploration": None, "n": 2, "who": []},
    {"id": "e3", "exploration": "+1", "n": 0, "who": None},
    {"id": "e4", "exploration": "-2", "n": 5, "who": ["a,b"]},
    {"id": "e5", "exploration": "@SUM(A1)", "n": 1, "who": ["ana"]},
    {"id": "e6", "exploration": "from hosts", "n": 3, "who": ["ana"]},
    {"id": "e7", "exploration": "\tcmd", "n": 1, "who": None},
    {"id": "e8", "exploration": "\rcmd", "n": 1, "who": None},
]


def table(total: int) -> report.Table:
    return report.Table("events", ("id", "exploration", "n", "who"), ROWS, total, report.Page(1, 10))


def test_csv_export_has_the_header_then_every_row():
    response = export(table(8), "csv", "events", F, "2026-12-01 10:00:00 UTC")
    assert list(csv.reader(io.StringIO(response.body.decode("utf-8"), newline=""))) == [
        ["id", "exploration", "n", "who"],
        ["e1", "'=HYPERLINK(\"x\")", "-1", '["ana","vic"]'],
        ["e2", "", "2", "[]"],
        ["e3", "'+1", "0", ""],
        ["e4", "'-2", "5", '["a,b"]'],
        ["e5", "'@SUM(A1)", "1", '["ana"]'],
        ["e6", "from hosts", "3", '["ana"]'],
        ["e7", "'\tcmd", "1", ""],
        ["e8", "'\rcmd", "1", ""],
    ]
    assert response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"] == 'attachment; filename="ontoos-events.csv"'
    assert (response.headers["x-ontoos-total"], response.headers["x-ontoos-truncated"]) == ("8", "false")


def test_json_export_is_the_envelope():
    f = Filters(days=7, dataset="workloads", outcome="refused")
    response = export(table(25), "json", "events", f, "2026-12-01 10:00:00 UTC")
    body = json.loads(response.body)
    assert body["ok"] is True
    assert body["data"] == {"columns": ["id", "exploration", "n", "who"], "rows": ROWS, "total": 25}
    assert body["meta"] == {"filters": {"days": 7, "dataset": "workloads", "subtype": None, "principal": None,
                                        "surface": None, "outcome": "refused"},
                            "truncated": True, "as_of": "2026-12-01 10:00:00 UTC"}
    assert body["meta"]["filters"] == f.shown()
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-disposition"] == 'attachment; filename="ontoos-events.json"'
    assert (response.headers["x-ontoos-total"], response.headers["x-ontoos-truncated"]) == ("25", "true")
