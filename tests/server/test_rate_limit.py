"""Rate limits per principal: token buckets from the server configuration, taken by every tool
call on every surface (REST explore and catalog, MCP tools/call over HTTP and stdio), refused
with RATE_LIMITED (EX412): HTTP 429 with Retry-After on REST, a tool error with
meta.retry_after_s on MCP, and recorded in the audit like any refusal.

Principals (tests/server/test_hostile_support.py): dora has the server-wide default (bursts
of 3), tina bursts of 3 (REST), mia of 2 (MCP), max of 3 (refused requests count), sam of 3
(REST and MCP together), alice none (rate_limit: false). Every bucket there refills once in
1,000 minutes, and each principal's is used up by one test only: no outcome depends on how
fast the tests run or which ran before. Refilling is tested on a fake clock. The audit read
here is the server's own (a database of its own).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pydantic import ValidationError

from ontoos_explore.server.config import Principal, RateLimit, RateLimitConfig, RateLimiter, ServerConfig
from ontoos_explore.server.tools import TOOLS
from tests.server.test_hostile_support import PREFIX, SLOW, assert_envelope, request, start_hostile_server, token

QUESTION = json.dumps({"dataset": "workloads", "fields": ["name"], "limit": 1})


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("rate-limit", pg_dsn, tmp_path_factory.mktemp("rate-limit-server"))
    yield srv
    srv.stop_cleanly()


def assert_429(r, retry_at_least: int = 1) -> dict:
    assert r.status == 429, (r.status, r.text[:300])
    retry_after = int(r.headers["retry-after"])
    assert retry_after >= retry_at_least, r.headers
    env = r.json
    err = assert_envelope(env, "EX412", f"retry in {retry_after} s")
    assert (err["type"], err["subtype"]) == ("policy", "QUERY_BUDGET_EXCEEDED")
    assert "rate limit" in err["message"]
    assert env["meta"]["retry_after_s"] == retry_after
    return err


def audit_events(audit_dsn: str, principal: str, code: str, want: int, timeout: float = 60.0) -> list[tuple]:
    """The audit's events of `principal` with `code`, once there are `want` of them (or the timeout)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(audit_dsn, autocommit=True) as conn:
        while True:
            rows = conn.execute("SELECT surface, outcome, error_type, error_subtype, role FROM ontoos_audit.events "
                                "WHERE principal = %s AND error_code = %s", (principal, code)).fetchall()
            if len(rows) >= want or time.monotonic() > deadline:
                return rows
            time.sleep(0.2)


# ================================================================ the bucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_its_burst_then_refills_at_its_rate():
    clock = Clock()
    limiter = RateLimiter(clock)
    p = Principal("p", "analyst", rate=RateLimit(per_second=2.0, burst=3))
    assert [limiter.take(p) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take(p) == pytest.approx(0.5)  # one token every 0.5 s
    clock.now += 0.25
    assert limiter.take(p) == pytest.approx(0.25)  # refused calls take nothing
    clock.now += 0.25
    assert limiter.take(p) == 0.0
    clock.now += 3600  # a long pause refills the bucket to its burst, not beyond
    assert [limiter.take(p) for _ in range(4)][-1] > 0
    other = Principal("q", "analyst", rate=RateLimit(per_second=2.0, burst=3))
    assert limiter.take(other) == 0.0  # per principal
    free = Principal("r", "analyst")
    assert all(limiter.take(free) == 0.0 for _ in range(1000))


def test_a_clock_that_goes_back_gives_nothing_away():
    clock = Clock()
    limiter = RateLimiter(clock)
    p = Principal("p", "analyst", rate=RateLimit(per_second=1.0, burst=1))
    assert limiter.take(p) == 0.0
    clock.now -= 50
    assert limiter.take(p) > 0


def test_the_configuration_of_limits():
    cfg = ServerConfig.model_validate({
        "rate_limit": {"per_second": 5},
        "principals": {
            "own": {"role": "analyst", "token_sha256": "a" * 64, "rate_limit": {"per_minute": 30, "burst": 4}},
            "default": {"role": "analyst", "token_sha256": "b" * 64},
            "none": {"role": "analyst", "token_sha256": "c" * 64, "rate_limit": False},
        }})
    own, default, none = (cfg.rate_of(cfg.principals[n]) for n in ("own", "default", "none"))
    assert own == RateLimit(0.5, 4, "minute") and own.describe() == "30 calls per minute (bursts of 4)"
    assert default == RateLimit(5.0, 5, "second")  # the burst defaults to the rate's own number
    assert none is None
    bare = ServerConfig.model_validate({"principals": {"x": {"role": "a", "token_sha256": "d" * 64}}})
    assert bare.rate_of(bare.principals["x"]) is None  # no rate_limit anywhere: no limit
    for bad in ({}, {"per_second": 1, "per_minute": 1}, {"per_second": 0}, {"per_minute": -1},
                {"per_second": float("inf")}, {"per_second": float("nan")}, {"per_second": 1, "burst": 0},
                {"per_second": 1, "every": 2}):
        with pytest.raises(ValidationError):
            RateLimitConfig.model_validate(bad)
    with pytest.raises(ValidationError):
        ServerConfig.model_validate({"principals": {"x": {"role": "a", "token_sha256": "d" * 64, "rate_limit": True}}})


# ================================================================ REST


def test_rest_over_the_limit_is_429_with_retry_after(server):
    for _ in range(3):  # tina: bursts of 3
        r = request(server, "POST", "/api/v1/explore", body=QUESTION, who="tina")
        assert r.status == 200, r.text[:300]
    err = assert_429(request(server, "POST", "/api/v1/explore", body=QUESTION, who="tina"), retry_at_least=10)
    assert "0.001 calls per minute (bursts of 3)" in err["message"]
    # every REST route takes from the same bucket, and so does a request refused for its own faults
    assert_429(request(server, "GET", "/api/v1/catalog", who="tina"))
    assert_429(request(server, "GET", "/api/v1/explore?dataset=workloads&fields=name", who="tina"))
    assert_429(request(server, "POST", "/api/v1/explore", body="{not json", who="tina"))
    # the others are not affected
    assert request(server, "GET", "/api/v1/catalog", who="alice").status == 200
    rows = audit_events(server.audit_dsn, "tina", "EX412", 4)
    assert len(rows) == 4 and set(rows) == {("rest", "refused", "policy", "QUERY_BUDGET_EXCEEDED", "reader")}


def test_answers_to_a_limited_principal_say_what_is_left_of_its_bucket(server):
    """The headers of lea's answers (bursts of 2, her bucket used by this test only):
    the policy (q calls, refilled over w seconds) and what is left after each call (r, the next in t s)."""
    first = request(server, "POST", "/api/v1/explore", body="{not json", who="lea")  # refused for itself: a call
    second = request(server, "GET", "/api/v1/catalog", who="lea")
    third = request(server, "POST", "/api/v1/explore", body=QUESTION, who="lea")
    window = round(2 / (SLOW / 60))  # 2 calls at 0.001 a minute: 120,000 s to refill
    assert (first.status, second.status, third.status) == (400, 200, 429)
    for r in (first, second, third):
        assert r.headers["ratelimit-policy"] == f'"burst";q=2;w={window}', r.headers
    assert first.headers["ratelimit"] == '"burst";r=1;t=0'
    refill = int(second.headers["ratelimit"].rsplit("t=", 1)[1])
    assert second.headers["ratelimit"].startswith('"burst";r=0;t=') and 59_000 <= refill <= 60_000  # a call a 60,000 s
    assert third.headers["ratelimit"].startswith('"burst";r=0;t=') and "retry-after" in third.headers
    alice = request(server, "GET", "/api/v1/catalog", who="alice")  # no limit: no headers
    assert "ratelimit" not in alice.headers and "ratelimit-policy" not in alice.headers


def test_refused_requests_take_a_call_too(server):
    """max: a malformed body, a catalog call and a GET exploration use up a burst of 3."""
    assert request(server, "POST", "/api/v1/explore", body="[1, 2", who="max").status == 400
    assert request(server, "GET", "/api/v1/catalog", who="max").status == 200
    assert request(server, "GET", "/api/v1/explore?dataset=workloads&fields=name&limit=1", who="max").status == 200
    assert_429(request(server, "GET", "/api/v1/catalog?dataset=workloads", who="max"))


def test_the_server_default_applies(server):
    """dora has no limit of her own: the server's, bursts of 3 (its refill: the bucket tests above)."""
    statuses = [request(server, "GET", "/api/v1/catalog", who="dora").status for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429], statuses
    err = assert_429(request(server, "GET", "/api/v1/catalog", who="dora"), retry_at_least=10)
    assert "0.001 calls per minute (bursts of 3)" in err["message"]


def test_an_unlimited_principal_is_never_refused(server):
    statuses = {request(server, "GET", "/api/v1/catalog", who="alice").status for _ in range(25)}
    assert statuses == {200}


# ================================================================ MCP


def _mcp(server, who: str):
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token(who)}"})
    return http_client, Client(streamable_http_client(server.base + "/mcp", http_client=http_client), mode="auto")


@pytest.mark.anyio
async def test_mcp_over_http_over_the_limit_is_a_tool_error(server):
    http_client, client = _mcp(server, "mia")  # bursts of 2
    with anyio.fail_after(60):
        async with http_client, client as c:
            first = await c.call_tool("ontoos_catalog", {})
            second = await c.call_tool("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limit": 1})
            third = await c.call_tool("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limit": 1})
            listed = await c.list_tools()  # not a tool call: not limited
    assert first.is_error is False and second.is_error is False
    assert third.is_error is True and third.structured_content is None
    env = json.loads(third.content[0].text)
    err = assert_envelope(env, "EX412", "retry in")
    assert env["meta"]["retry_after_s"] >= 10 and f"retry in {env['meta']['retry_after_s']} s" in err["hint"]
    assert len(listed.tools) == len(TOOLS)
    rows = audit_events(server.audit_dsn, "mia", "EX412", 1)
    assert rows == [("mcp", "refused", "policy", "QUERY_BUDGET_EXCEEDED", "analyst")]


@pytest.mark.anyio
async def test_rest_and_mcp_share_one_bucket(server):
    """Once REST has emptied sam's bucket (bursts of 3), MCP is refused as well."""
    statuses = [request(server, "GET", "/api/v1/catalog", who="sam").status for _ in range(4)]
    assert statuses == [200, 200, 200, 429], statuses
    http_client, client = _mcp(server, "sam")
    with anyio.fail_after(60):
        async with http_client, client as c:
            result = await c.call_tool("ontoos_catalog", {})
    assert result.is_error is True
    assert json.loads(result.content[0].text)["error"]["code"] == "EX412"


@pytest.mark.anyio
async def test_mcp_over_stdio_takes_the_principals_limit(server, pg_dsn):
    """`serve --stdio --principal mia` carries mia's limit (a fresh bucket in a process of its own)."""
    env = {"ONTOOS_DSN": pg_dsn, "ONTOOS_CONTRACT": str(server.workdir / "contract.yaml"),
           "ONTOOS_ROLE_PREFIX": PREFIX, "ONTOOS_AUDIT": "off"}
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "ontoos"),
                                   args=["serve", "--stdio", "--config", str(server.workdir / "server.yaml"),
                                         "--principal", "mia"], env=env)
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as c:
            results = [await c.call_tool("ontoos_catalog", {}) for _ in range(3)]
    assert [r.is_error for r in results] == [False, False, True]
    assert json.loads(results[2].content[0].text)["error"]["code"] == "EX412"
