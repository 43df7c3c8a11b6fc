"""Requests without a valid token are limited per client address: past `auth_failures` they are
answered 429 (EX412) without an audit event each, and the trail gets one AUTH_FLOOD gap per
episode, written when the address is next let through or when the server stops. A valid
token from the same address never draws on that limit.

The server here allows 2 such requests at once, refilling 1 per second; its audit store is
the shared test database, so the checks count what changed, not what is there.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from ontoos_explore.server.config import RateLimit, RateLimiter, ServerConfig
from ontoos_explore.server.limits import AuthFloods
from tests.server.test_hostile_support import assert_envelope, request, start_hostile_server

FLOOD = {"auth_failures": {"per_second": 1, "burst": 2}}


def _counts(pg_dsn: str) -> tuple[int, int]:
    """(EX502 events of no principal, AUTH_FLOOD gap events) in the audit store."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        events = conn.execute("SELECT count(*) FROM ontoos_audit.events WHERE error_code = 'EX502' "
                              "AND principal = 'anonymous'").fetchone()[0]
        gaps = conn.execute("SELECT coalesce(sum(events), 0) FROM ontoos_audit.gaps "
                            "WHERE reason = 'AUTH_FLOOD'").fetchone()[0]
    return events, gaps


def _wait_for(pg_dsn: str, want: tuple[int, int], timeout: float = 15.0) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    while True:
        got = _counts(pg_dsn)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def _bad(srv):
    return request(srv, "POST", "/api/v1/explore", body='{"dataset": "workloads"}', who=None,
                   headers={"Authorization": "Bearer not-a-token"})


def test_a_flood_without_a_token_is_429_one_gap_and_a_valid_token_still_works(pg_dsn, tmp_path):
    srv = start_hostile_server("auth-flood", pg_dsn, tmp_path / "srv", config_extra=FLOOD)
    try:
        events, gaps = _counts(pg_dsn)
        first = [_bad(srv) for _ in range(2)]
        assert [r.status for r in first] == [401, 401]
        flooded = [_bad(srv) for _ in range(3)]
        for r in flooded:
            assert r.status == 429, (r.status, r.text[:200])
            err = assert_envelope(r.json, "EX412", "valid token")
            assert err["hint"].startswith("retry in ") and int(r.headers["retry-after"]) >= 1
            assert r.json["meta"]["retry_after_s"] == int(r.headers["retry-after"])
        ok = request(srv, "POST", "/api/v1/explore", body='{"dataset": "workloads", "fields": ["name"], "limit": 1}')
        assert ok.status == 200, ok.text[:200]  # the same address, a valid token: not limited
        # two refusals recorded one by one; the three 429s not yet anywhere
        assert _wait_for(pg_dsn, (events + 2, gaps)) == (events + 2, gaps)
        time.sleep(1.3)  # a token back in the bucket: the next refusal is a 401 and seals the episode
        assert _bad(srv).status == 401
        assert _wait_for(pg_dsn, (events + 3, gaps + 3)) == (events + 3, gaps + 3)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            detail = conn.execute("SELECT detail FROM ontoos_audit.gaps WHERE reason = 'AUTH_FLOOD' "
                                  "ORDER BY at DESC LIMIT 1").fetchone()[0]
        assert "3 requests without a valid token from 127.0.0.1" in detail
        # a second episode, open when the server stops: written on the way out
        for _ in range(4):
            _bad(srv)
    finally:
        assert srv.stop() in (0, -15), srv.stderr()[-2000:]  # uvicorn re-raises SIGTERM after a clean shutdown
    # the 401 above took the one token back: all four were 429s, written as one more gap at shutdown
    assert _wait_for(pg_dsn, (events + 3, gaps + 7)) == (events + 3, gaps + 7)


def test_episodes_are_sealed_per_address_and_bounded():
    gaps = []
    now = [0.0]
    floods = AuthFloods(RateLimit(1.0, 1), lambda n, first, last, address: gaps.append((address, n)), max_open=2)
    floods.limiter = RateLimiter(clock=lambda: now[0])
    assert floods.admit("a") == 0.0 and floods.admit("a") > 0 and floods.admit("a") > 0
    assert floods.admit("b") == 0.0 and floods.admit("b") > 0
    assert gaps == []  # two episodes open
    assert floods.admit("c") == 0.0 and floods.admit("c") > 0  # a third: the oldest is written
    assert gaps == [("a", 2)]
    now[0] = 5.0
    assert floods.admit("b") == 0.0  # b is let through again: its episode is written
    assert gaps == [("a", 2), ("b", 1)]
    floods.seal_all()
    assert gaps == [("a", 2), ("b", 1), ("c", 1)]


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
