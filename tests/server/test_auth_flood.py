"""Requests without a valid token are limited per client address: past `auth_failures` they are
answered 429 (EX412) without an audit event each, and the trail gets one AUTH_FLOOD gap per
episode, written when the address is next let through or when the server stops. A valid
token from the same address never draws on that limit.

The episode logic (`server.limits.AuthFloods`) runs here on a fake clock: which request is
let through, how long to wait, when an episode is sealed and what it says, with no time
passing. One real server checks the wiring (401, then 429 with Retry-After, the audit's events
and the one gap written at shutdown) with a bucket that refills once in 1,000 minutes, so
nothing depends on how fast the test runs.
"""

from __future__ import annotations

import datetime as dt
import time

import psycopg
import pytest

from ontoos_explore.server.config import RateLimit, RateLimiter, ServerConfig
from ontoos_explore.server.limits import AuthFloods, flooded
from tests.server.test_hostile_support import assert_envelope, request, start_hostile_server

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)


class Clocks:
    """The two clocks AuthFloods reads: monotonic seconds for the buckets, and the wall clock
    for an episode's first and last request, both moved by hand."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds

    def wall(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.seconds)

    def advance(self, seconds: float) -> None:
        self.seconds += seconds


def floods(limit: RateLimit, max_open: int = 1000) -> tuple[AuthFloods, Clocks, list[tuple]]:
    clocks, gaps = Clocks(), []
    f = AuthFloods(limit, lambda n, first, last, address: gaps.append((address, n, first, last)), max_open,
                   clock=clocks.monotonic, now=clocks.wall)
    return f, clocks, gaps


# ================================================================ the episodes, on a fake clock


def test_a_burst_is_let_through_then_refused_with_the_wait_until_the_next_token():
    f, clocks, gaps = floods(RateLimit(per_second=0.5, burst=2))  # a token every 2 s
    assert [f.admit("10.0.0.1") for _ in range(2)] == [0.0, 0.0]
    assert f.admit("10.0.0.1") == 2.0
    clocks.advance(0.5)
    assert f.admit("10.0.0.1") == 1.5  # refused requests take nothing from the bucket
    clocks.advance(1.25)
    assert f.admit("10.0.0.1") == 0.25  # not yet a whole token
    assert gaps == []  # the episode is open: nothing written yet
    clocks.advance(0.25)
    assert f.admit("10.0.0.1") == 0.0  # a token back: answered as usual, and the episode is sealed
    assert gaps == [("10.0.0.1", 3, T0, T0 + dt.timedelta(seconds=1.75))]


def test_an_episode_is_one_gap_however_long_it_lasts():
    f, clocks, gaps = floods(RateLimit(per_second=1.0, burst=1))
    assert f.admit("a") == 0.0
    for _ in range(50):
        clocks.advance(0.01)
        assert f.admit("a") > 0
    assert gaps == []
    clocks.advance(5)
    assert f.admit("a") == 0.0
    assert [(address, n) for address, n, *_ in gaps] == [("a", 50)]
    first, last = gaps[0][2], gaps[0][3]
    assert (first, last) == (T0 + dt.timedelta(seconds=0.01), T0 + dt.timedelta(seconds=0.5))
    assert f.admit("a") > 0  # and a new episode starts with the next refusal ...
    f.seal_all()
    assert [(address, n) for address, n, *_ in gaps] == [("a", 50), ("a", 1)]  # ... sealed on its own


def test_episodes_are_sealed_per_address_and_bounded():
    f, clocks, gaps = floods(RateLimit(1.0, 1), max_open=2)
    assert f.admit("a") == 0.0 and f.admit("a") > 0 and f.admit("a") > 0
    assert f.admit("b") == 0.0 and f.admit("b") > 0
    assert gaps == []  # two episodes open
    assert f.admit("c") == 0.0 and f.admit("c") > 0  # a third: the oldest is written
    assert [(address, n) for address, n, *_ in gaps] == [("a", 2)]
    clocks.advance(5)
    assert f.admit("b") == 0.0  # b is let through again: its episode is written
    assert [(address, n) for address, n, *_ in gaps] == [("a", 2), ("b", 1)]
    f.seal_all()
    assert [(address, n) for address, n, *_ in gaps] == [("a", 2), ("b", 1), ("c", 1)]
    f.seal_all()  # nothing open: nothing more
    assert len(gaps) == 3


def test_one_address_never_uses_up_another():
    f, _, gaps = floods(RateLimit(1.0, 3))
    assert [f.admit("a") for _ in range(3)] == [0.0] * 3 and f.admit("a") > 0
    assert [f.admit("b") for _ in range(3)] == [0.0] * 3  # b has its own bucket
    assert gaps == []


def test_the_429_envelope_says_when_to_retry():
    env = flooded(0.2)
    assert env["meta"]["retry_after_s"] == 1  # never 0: at least a second
    err = assert_envelope(env, "EX412", "valid token")
    assert err["hint"].startswith("retry in 1 s")
    assert flooded(61.5)["meta"]["retry_after_s"] == 62


def test_the_real_clocks_are_the_default():
    gaps = []
    f = AuthFloods(RateLimit(1.0, 1), lambda n, first, last, address: gaps.append((n, first, last)))
    assert f.limiter.clock is time.monotonic
    before = dt.datetime.now(dt.timezone.utc)
    assert f.admit("x") == 0.0 and f.admit("x") > 0
    f.seal_all()
    [(n, first, last)] = gaps
    assert n == 1 and first == last and before <= first <= dt.datetime.now(dt.timezone.utc)


def test_the_bucket_table_keeps_the_most_recent_keys():
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0], max_keys=2)
    one = RateLimit(0.001, 1)
    assert limiter.take_key("a", one) == 0.0 and limiter.take_key("b", one) == 0.0
    assert limiter.take_key("a", one) > 0  # a is the most recent now
    assert limiter.take_key("c", one) == 0.0 and len(limiter) == 2  # b went, not a
    assert limiter.take_key("a", one) > 0
    assert limiter.take_key("b", one) == 0.0  # a fresh bucket


@pytest.mark.parametrize(("setting", "want"), [
    (None, (10.0, 100)), (False, None), ({"per_minute": 30, "burst": 5}, (0.5, 5))])
def test_the_auth_failures_setting(setting, want):
    config = ServerConfig.model_validate({} if setting is None else {"auth_failures": setting})
    limit = config.auth_failure_limit()
    assert (None if limit is None else (limit.per_second, limit.burst)) == want


# ================================================================ the wiring, on a real server

# 2 at once, then one more every 1,000 minutes: no token comes back while the test runs
FLOOD = {"auth_failures": {"per_minute": 0.001, "burst": 2}}


def _counts(audit_dsn: str) -> tuple[int, int, int]:
    """(EX502 events of no principal, AUTH_FLOOD gap rows, the events those gaps stand for)."""
    with psycopg.connect(audit_dsn, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('ontoos_audit.gaps') IS NULL").fetchone()[0]:
            return 0, 0, 0  # the writer has not made its schema yet
        events = conn.execute("SELECT count(*) FROM ontoos_audit.events WHERE error_code = 'EX502' "
                              "AND principal = 'anonymous'").fetchone()[0]
        rows, gaps = conn.execute("SELECT count(*), coalesce(sum(events), 0) FROM ontoos_audit.gaps "
                                  "WHERE reason = 'AUTH_FLOOD'").fetchone()
    return events, rows, gaps


def _wait_for(audit_dsn: str, want: tuple[int, int, int], timeout: float = 60.0) -> tuple[int, int, int]:
    """The counts once they are `want` (the audit writer flushes in the background); whatever
    they are after `timeout` otherwise, for the assertion to show."""
    deadline = time.monotonic() + timeout
    while (got := _counts(audit_dsn)) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def _bad(srv):
    return request(srv, "POST", "/api/v1/explore", body='{"dataset": "workloads"}', who=None,
                   headers={"Authorization": "Bearer not-a-token"})


def test_a_flood_without_a_token_is_429_one_gap_and_a_valid_token_still_works(pg_dsn, tmp_path):
    srv = start_hostile_server("auth-flood", pg_dsn, tmp_path / "srv", config_extra=FLOOD)
    try:
        base = _counts(srv.audit_dsn)
        first = [_bad(srv) for _ in range(2)]
        assert [r.status for r in first] == [401, 401]
        flooded_ = [_bad(srv) for _ in range(3)]
        for r in flooded_:
            assert r.status == 429, (r.status, r.text[:200])
            err = assert_envelope(r.json, "EX412", "valid token")
            assert err["hint"].startswith("retry in ") and int(r.headers["retry-after"]) > 60
            assert r.json["meta"]["retry_after_s"] == int(r.headers["retry-after"])
        ok = request(srv, "POST", "/api/v1/explore", body='{"dataset": "workloads", "fields": ["name"], "limit": 1}')
        assert ok.status == 200, ok.text[:200]  # the same address, a valid token: not limited
        # the two refusals are recorded one by one; the three 429s are not, and their episode is open
        want = (base[0] + 2, base[1], base[2])
        assert _wait_for(srv.audit_dsn, want) == want
    finally:
        srv.stop_cleanly()
    # the open episode is written on the way out: one gap for the three
    assert _counts(srv.audit_dsn) == (base[0] + 2, base[1] + 1, base[2] + 3)
    with psycopg.connect(srv.audit_dsn, autocommit=True) as conn:
        detail, first_at, last_at = conn.execute(
            "SELECT detail, first_at, last_at FROM ontoos_audit.gaps WHERE reason = 'AUTH_FLOOD'").fetchone()
    assert "3 requests without a valid token from 127.0.0.1" in detail
    assert first_at <= last_at
