"""Auth, the gaps tests/server/test_http.py and tests/governance leave: ambiguous credentials,
credentials in the wrong place, hostile token bytes, reviewer-only routes that must refuse
before they validate, scopes other than HTTP (a WebSocket never reaches the app, whatever token
it carries), and how tokens are kept (hashed) and compared (constant time).

Covered elsewhere, not repeated here: no token / a wrong token / other schemes on every
route (test_http: test_no_token_is_401..., test_bad_credentials_are_401), a role whose
read sets exclude the dataset (test_http: test_out_of_scope_dataset_reads_exactly_like_a_missing_one,
test_catalog_out_of_scope_...; test_mcp_role_comes_from_the_token), the dashboard and its
JSON API with an analyst's token or cookie (governance/test_dashboard_browser:
test_access_control_without_a_browser).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import pickle

import anyio
import pytest
import yaml

from ontoos_explore.errors import ContractError
from ontoos_explore.server import config as config_module
from ontoos_explore.server.config import Authenticator, ServerConfig, load_config, token_hash
from ontoos_explore.server.middleware import BearerAuth
from tests.server.test_hostile_support import assert_envelope, raw_exchange, request, start_hostile_server, token

ACCEPT = "application/json, text/event-stream"
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "auth", "version": "0"}}})
ROUTES = {
    "POST explore": ("POST", "/api/v1/explore", '{"dataset": "hosts", "fields": ["hostname"], "limit": 1}', {}),
    "GET explore": ("GET", "/api/v1/explore?dataset=hosts&fields=hostname&limit=1", None, {}),
    "GET catalog": ("GET", "/api/v1/catalog", None, {}),
    "POST mcp": ("POST", "/mcp", INIT, {"Accept": ACCEPT}),
}


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("auth", pg_dsn, tmp_path_factory.mktemp("auth-server"))
    yield srv
    srv.stop_cleanly()


def assert_401(r) -> dict:
    assert r.status == 401, (r.status, r.text[:300])
    assert r.headers["www-authenticate"].startswith("Bearer"), r.headers
    return assert_envelope(r.json, "EX502")


def send_with_headers(srv, method: str, path: str, headers: list[tuple[str, str]], body: str | None = None):
    """http.client with repeated header names (a dict cannot hold them)."""
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
    try:
        conn.putrequest(method, path)
        for name, value in headers:
            conn.putheader(name, value)
        data = body.encode() if body is not None else None
        if data is not None:
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8")
    finally:
        conn.close()


# ================================================================ ambiguous or misplaced credentials


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("order", ["valid first", "valid last", "both valid"])
def test_two_authorization_headers_are_refused(server, route, order):
    """Which one counts is ambiguous (a proxy may check one, the app use the other): neither."""
    method, path, body, extra = ROUTES[route]
    good, bad = f"Bearer {token('alice')}", "Bearer not-a-token"
    pair = {"valid first": (good, bad), "valid last": (bad, good), "both valid": (good, f"Bearer {token('rex')}")}[order]
    headers = [("Authorization", pair[0]), ("Authorization", pair[1]), *extra.items()]
    status, h, text = send_with_headers(server, method, path, headers, body)
    assert status == 401, text[:300]
    err = assert_envelope(json.loads(text), "EX502", "more than one Authorization header")
    assert "one Authorization" in err["hint"] and h["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("route", ROUTES)
def test_a_token_cookie_does_not_authenticate_the_api(server, route):
    """The cookie is the dashboard's (/governance only): the API and MCP take a bearer header,
    so a browser visiting another site cannot make cross-site requests carry it."""
    method, path, body, extra = ROUTES[route]
    r = request(server, method, path, body=body, who=None,
                headers={**extra, "Cookie": f"ontoos_token={token('alice')}"})
    assert_401(r)


@pytest.mark.parametrize("param", ["access_token", "token", "bearer"])
def test_a_token_in_the_query_string_does_not_authenticate(server, param):
    r = request(server, "GET", f"/api/v1/catalog?{param}={token('alice')}", who=None)
    assert_401(r)
    assert token("alice") not in r.text


@pytest.mark.parametrize("value", [
    b"Bearer \xff\xfe\xfd",                          # not UTF-8
    b"Bearer caf\xc3\xa9-\xe2\x80\x8b",              # UTF-8, with a zero-width space
    b"Bearer " + b"a" * 8000,                        # 8 KB
    b"Bearer\t" + b"x",                              # a tab, not a space
    b"Bearer %00",                                   # an encoded NUL
    b"bEaReR",                                       # a scheme and nothing else
], ids=["not-utf8", "zero-width", "8kb", "tab", "encoded-nul", "scheme-only"])
def test_hostile_token_bytes_are_a_clean_401(server, value):
    data = (b"GET /api/v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + value
            + b"\r\nConnection: close\r\n\r\n")
    reply = raw_exchange(server, data)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401"), reply[:300]
    assert_envelope(json.loads(body), "EX502")


def test_a_valid_token_with_padding_still_works_and_a_near_miss_does_not(server):
    assert request(server, "GET", "/api/v1/catalog", who=None,
                   headers={"Authorization": f"Bearer   {token('alice')}  "}).status == 200
    for near in (token("alice").upper(), token("alice") + "\u00a0", " ".join(token("alice"))):
        assert_401(request(server, "GET", "/api/v1/catalog", who=None, headers={"Authorization": f"Bearer {near}"}))


# ================================================================ reviewer-only routes


@pytest.mark.parametrize("path", [
    "/api/v1/governance/report",
    "/api/v1/governance/no_such_view",          # must not list the views to a non-reviewer
    "/api/v1/governance/report?days=abc",        # auth before validation
])
@pytest.mark.parametrize("who", ["alice", "vera"])
def test_governance_api_refuses_non_reviewers_before_reading_anything(server, path, who):
    r = request(server, "GET", path, who=who)
    assert r.status == 403, (r.status, r.text[:300])
    err = assert_envelope(r.json, "EX503")
    assert (err["type"], err["subtype"]) == ("auth", "AUTH_SCOPE_DENIED")
    assert "by_column" not in r.text and "candidates" not in r.text


def test_a_governance_path_outside_the_routes_is_a_404_envelope(server):
    r = request(server, "GET", "/api/v1/governance/..%2F..%2Fetc%2Fpasswd", who="alice")
    assert r.status == 404 and "root:" not in r.text
    assert_envelope(r.json, "EX102")


@pytest.mark.parametrize("path", ["/governance/promote", "/governance/approve"])
def test_governance_actions_refuse_an_analyst_token(server, path):
    r = request(server, "POST", path, who="alice", headers={"Content-Type": "application/x-www-form-urlencoded"},
                body="id=x&fingerprint=y&title=z")
    assert r.status == 403, r.text[:300]
    assert "AUTH_SCOPE_DENIED" in r.text


def test_the_reviewer_gets_the_governance_api(server):
    r = request(server, "GET", "/api/v1/governance/report", who="rex")
    assert r.status == 200 and r.json["ok"] is True, r.text[:300]


# ================================================================ scopes other than HTTP


def _scope(kind: str, token_: str | None = None) -> dict:
    headers = [(b"authorization", f"Bearer {token_}".encode())] if token_ else []
    if kind == "lifespan":
        return {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    return {"type": kind, "asgi": {"version": "3.0"}, "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
            "headers": headers + [(b"upgrade", b"websocket"), (b"connection", b"Upgrade")], "scheme": "ws",
            "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8765), "subprotocols": []}


def _through_bearer_auth(demo, scope: dict) -> tuple[list[str], list[dict]]:
    """`scope` through BearerAuth (alice's token valid): (what reached the app, what was sent back)."""
    config = _config({"alice": "alice-token-" + "7" * 20})
    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope["type"])

    async def receive():
        return {"type": "websocket.connect"} if scope["type"] == "websocket" else {"type": "lifespan.startup"}

    async def send(message):
        sent.append(message)

    anyio.run(BearerAuth(app, Authenticator(config, demo)), scope, receive, send)
    return reached, sent


@pytest.mark.parametrize("token_", ["alice-token-" + "7" * 20, "not-a-token", None], ids=["valid", "wrong", "none"])
def test_a_websocket_scope_is_closed_without_reaching_the_app(demo, token_):
    reached, sent = _through_bearer_auth(demo, _scope("websocket", token_))
    assert reached == [] and sent == [{"type": "websocket.close", "code": 1008}]


def test_lifespan_still_reaches_the_app_and_other_scopes_do_not(demo):
    assert _through_bearer_auth(demo, _scope("lifespan")) == (["lifespan"], [])
    assert _through_bearer_auth(demo, _scope("webtransport", "alice-token-" + "7" * 20)) == ([], [])


def test_the_server_does_not_upgrade_to_a_websocket(server):
    """A WebSocket handshake with a valid token is served as the plain HTTP request it also is."""
    data = (f"GET /api/v1/catalog HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer "
            f"{token('alice')}\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode()
    reply = raw_exchange(server, data, timeout=5)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), reply[:300]
    assert b"upgrade" not in head.lower().split(b"\r\n", 1)[1] and json.loads(body)["ok"] is True


# ================================================================ tokens: hashed, compared in constant time


def _config(tokens: dict[str, str], **extra) -> ServerConfig:
    return ServerConfig.model_validate({"principals": {
        name: {"role": "analyst", "token_sha256": hashlib.sha256(t.encode()).hexdigest(), **extra}
        for name, t in tokens.items()}})


TOKENS = {"a": "token-a-" + "1" * 20, "b": "token-b-" + "2" * 20, "c": "tökén-c-\u00e9", "d": "token-d"}


def test_the_authenticator_keeps_only_digests(demo):
    auth = Authenticator(_config(TOKENS), demo)
    state = pickle.dumps(auth.__dict__) + repr(auth.__dict__).encode()
    for t in TOKENS.values():
        assert t.encode() not in state and t.encode("utf-8") not in pickle.dumps(auth._entries)
        assert hashlib.sha256(t.encode()).digest() in [d for d, _ in auth._entries]
    assert auth.authenticate(TOKENS["c"]).name == "c"  # hashed as UTF-8
    assert token_hash(TOKENS["c"]) == hashlib.sha256(TOKENS["c"].encode("utf-8")).hexdigest()


@pytest.mark.parametrize("presented", ["a", "d", None], ids=["first", "last", "none"])
def test_authenticate_compares_with_every_entry_whatever_matches(demo, monkeypatch, presented):
    """No early exit: as many constant-time comparisons for the first entry, the last, or none."""
    auth = Authenticator(_config(TOKENS), demo)
    calls = []
    real = hmac.compare_digest

    def counting(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(config_module.hmac, "compare_digest", counting)
    found = auth.authenticate(TOKENS[presented] if presented else "no-such-token")
    assert (found.name if found else None) == presented
    assert len(calls) == len(TOKENS)
    assert all(a == b == 32 for a, b in calls)  # digests of equal length: no length leak either


def test_the_configuration_never_takes_a_plain_token(demo, tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump({"principals": {"eve": {"role": "analyst", "token": "plaintext"}}}))
    with pytest.raises(ContractError) as caught:
        load_config(path, demo)
    assert "principals.eve" in caught.value.message
    assert "plaintext" not in caught.value.message
    path.write_text(yaml.safe_dump({"principals": {"eve": {"role": "analyst", "token_sha256": "plaintext"}}}))
    with pytest.raises(ContractError) as caught:
        load_config(path, demo)
    assert "64 hex characters" in caught.value.message


def test_a_role_the_contract_lacks_is_named_with_a_did_you_mean(demo, tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump({"principals": {"eve": {"role": "analyts", "token_sha256": "a" * 64}}}))
    with pytest.raises(ContractError) as caught:
        load_config(path, demo)
    assert "principals.eve.role: 'analyts' is not a role of the contract" in caught.value.message
    assert caught.value.hint.startswith("did you mean 'analyst'? roles: ") and "viewer" in caught.value.hint
