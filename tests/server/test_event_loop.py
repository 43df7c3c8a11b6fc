"""One request does not freeze everyone: while several clients send the largest requests the limits
allow, as fast as they are answered, the server's event loop still answers /healthz at once.

Compiling such a request (parsing 64 KB of text, 19,000 JSON values, a 1,000-value IN list through
the guard) is up to a second of CPU; on the event loop it held every other request for as long. So
did, for tens of milliseconds a request, reading the longest GET filter a request line holds and
rendering a large refused exploration into its audit event. Each runs on a worker thread when the
request is large (`offload.py`), so /healthz (answered by the event loop itself, no token, no
database) waits only its turn for the interpreter. The server is a real
`ontoos serve --http` (tests/server/test_hostile_support.py); the bound is 100 ms for the median of
the probes (a blocked loop makes most probes wait for a whole compile), and every load request must
be answered as it should be.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from urllib.parse import quote, unquote

import pytest

from ontoos_explore.grammar.limits import MAX_DEPTH, MAX_JSON_VALUES, MAX_LIST, MAX_TEXT, predicate_depth
from ontoos_explore.grammar.parser import parse_text
from ontoos_explore.server.connections import MAX_HEAD
from tests.server.test_hostile_support import request, start_hostile_server

HEALTHZ_MEDIAN_MS = 100
PROBES = 40


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("event-loop", pg_dsn, tmp_path_factory.mktemp("event-loop-server"))
    yield srv
    srv.stop_cleanly()


def in_lists_text(seed: int) -> str:
    """The text form at the size limit: 'in' lists of MAX_LIST entries each, ORed."""
    lists, text = [], "explore workloads fields name where "
    while True:
        values = ", ".join(str(seed + i) for i in range(MAX_LIST))
        more = " or ".join([*lists, f"replicas in ({values})"])
        if len(text) + len(more) > MAX_TEXT:
            return text + " or ".join(lists)
        lists.append(f"replicas in ({values})")


def deep_text(seed: int) -> str:
    """The text form at the size limit, ORing predicates nested MAX_DEPTH - 1 levels (MAX_DEPTH in all)."""
    unit = "replicas = 0"
    for level in range(1, MAX_DEPTH):
        unit = f"(replicas = {seed + level} {'and' if level % 2 else 'or'} {unit})"
    text = "explore workloads fields name where " + unit
    while len(text) + len(unit) + 4 <= MAX_TEXT:
        text += " or " + unit
    return text


def json_lists(seed: int) -> dict:
    """The JSON form with as many values as a request may hold: 'in' lists of MAX_LIST values."""
    n = MAX_JSON_VALUES // MAX_LIST - 1
    return {"dataset": "workloads", "fields": ["name"],
            "filter": [{"field": "replicas", "op": "in", "value": list(range(seed + i * MAX_LIST, seed + (i + 1) * MAX_LIST))}
                       for i in range(n)]}


def admin_list(seed: int) -> dict:
    """A 1,000-value IN list the admin may run: bound, compiled, guarded and executed (entries vary, so
    each is a template of its own)."""
    n = MAX_LIST - seed % 50
    return {"query": "explore workloads fields name where replicas in ("
                     + ", ".join(str(seed * MAX_LIST + i) for i in range(n)) + ") limit 5"}


URL_BYTES = MAX_HEAD - 2_000  # the request line and headers the server reads (connections.MAX_HEAD)


def long_get(seed: int) -> str:
    """A GET whose filter is as long as a request may carry: names ORed, URL-encoded, up to the text's
    limit (MAX_TEXT) or the head's, whichever comes first."""
    path, terms = "/api/v1/explore?dataset=workloads&fields=name&filter=", []
    while len(path) + len(quote(" or ".join(terms))) < URL_BYTES and len(" or ".join(terms)) < MAX_TEXT:
        terms.append(f"name = 'w{seed}-{len(terms)}'")
    return path + quote(" or ".join(terms[:-1]))


# principal -> (its i-th request: a POST body, or a GET's path; the status it must get)
CLIENTS = {
    "alice": (lambda i: {"query": in_lists_text(i)}, 403),  # parsed, then over analyst's max_in_list
    "fuzz": (json_lists, 403),  # read, then over analyst's max_in_list
    "vera": (lambda i: {"query": deep_text(i)}, 403),  # parsed, then over viewer's max_predicates
    "rex": (admin_list, 200),
    "pat": (long_get, 403),  # parsed (off the loop), then over max_predicates: its event rendered off it too
}


def test_the_requests_are_the_largest_allowed():
    text = in_lists_text(0)
    assert MAX_TEXT - 4 * MAX_LIST < len(text) <= MAX_TEXT
    deep = deep_text(0)
    assert MAX_TEXT - 1000 < len(deep) <= MAX_TEXT and predicate_depth(parse_text(deep).where) == MAX_DEPTH
    values = sum(len(f["value"]) + 4 for f in json_lists(0)["filter"])
    assert MAX_JSON_VALUES - MAX_LIST < values < MAX_JSON_VALUES
    filter_text = unquote(long_get(0).partition("&filter=")[2])
    assert URL_BYTES - 100 < len(long_get(0)) < URL_BYTES or MAX_TEXT - 100 < len(filter_text) <= MAX_TEXT


def test_healthz_stays_fast_while_the_largest_requests_compile(server):
    stop = threading.Event()
    answered: dict[str, list[tuple[int, float]]] = {name: [] for name in CLIENTS}
    failures: list[str] = []

    def client(name: str) -> None:
        make, status = CLIENTS[name]
        i = 0
        while not stop.is_set():
            i += 1
            asked = make(i)
            start = time.perf_counter()
            if isinstance(asked, str):
                r = request(server, "GET", asked, who=name, timeout=120, request_text=asked[:200])
            else:
                body = json.dumps(asked)
                r = request(server, "POST", "/api/v1/explore", body=body, who=name, timeout=120,
                            request_text=body[:200])
            answered[name].append((r.status, time.perf_counter() - start))
            if r.status != status:
                failures.append(f"{name}: {r.status} {r.text[:300]}")
                return

    threads = [threading.Thread(target=client, args=(name,), daemon=True) for name in CLIENTS]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 120
        while not all(answered.values()) and not failures and time.monotonic() < deadline:
            time.sleep(0.05)  # every client under way: one request answered each
        assert not failures, failures
        assert all(answered.values()), "the load did not get going"
        before = {name: len(done) for name, done in answered.items()}
        probes = []
        for _ in range(PROBES):
            start = time.perf_counter()
            r = request(server, "GET", "/healthz", who=None, timeout=30)
            probes.append((time.perf_counter() - start) * 1000)
            assert r.status == 200 and r.json["ok"] is True
            time.sleep(0.03)
        during = {name: len(done) - before[name] for name, done in answered.items()}
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=180)
    assert not failures, failures
    # the load was real: every client kept a request in flight through the probes (none stopped), they
    # were answered meanwhile, and each large compile takes far longer than the bound
    assert sum(during.values()) >= 1, during
    slow = [s for name in ("alice", "vera") for status, s in answered[name]]
    assert statistics.median(slow) * 1000 > HEALTHZ_MEDIAN_MS, slow
    median = statistics.median(probes)
    assert median < HEALTHZ_MEDIAN_MS, f"/healthz median {median:.0f} ms while compiling: {sorted(probes)}"
