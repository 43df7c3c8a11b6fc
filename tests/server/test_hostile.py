"""Hostile input on every surface: the cases of tests/cases/hostile.yaml, and the ones bytes on a socket need.

Each `json` case is one JSON text, sent byte for byte as the REST POST body, as the
arguments of an ontoos_explore tools/call over MCP streamable HTTP (a raw JSON-RPC
POST to the real server: the SDK client would re-encode the text and lose what is
hostile in it) and over `ontoos serve --stdio`, and as `ontoos explore --json`. Each
`http` case is one request. Every answer must be the expected refusal (a
well-formed envelope with a hint, the right status and code) or the expected
success, within a timeout; no answer may carry a traceback, SQL, a server path, the
DSN or a secret value; the server must log no traceback (checked when its fixture
stops it); and the audit trail must take the hostile requests and keep taking
events after them (a test of its own, on its own requests: no test here needs
another to have run first).
"""

from __future__ import annotations

import json
import re
import queue
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ontoos_explore.cli import main as cli_main
from ontoos_explore.grammar.limits import MAX_JSON_CHARS, MAX_JSON_DEPTH, MAX_JSON_VALUES, check_json
from ontoos_explore.envelope import Answer, scrub
from ontoos_explore.errors import Codes, ExploreError
from ontoos_explore.server.rest import answer_response
from tests.server.test_hostile_support import (
    BODY_TIMEOUT_S,
    assert_envelope,
    load_cases,
    raw_exchange,
    request,
    start_hostile_server,
)

CASES = load_cases()
JSON_CASES = {c["id"]: c for c in CASES["json"]}
TOOL_CASES = {c["id"]: c for c in CASES["tools"]}
HTTP_CASES = {c["id"]: c for c in CASES["http"]}
ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-11-25"
TOOL_CALL = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "ontoos_explore", "arguments": %s}}'
ANY_TOOL_CALL = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "%s", "arguments": %s}}'
FORBIDDEN = ("Traceback", "SELECT", "ONTOOS-SECRET-", "psycopg", "site-packages")


def expected(case: dict[str, Any], surface: str) -> dict[str, Any]:
    """The case's expectation on `surface`: its own entry replaces the default one."""
    return case.get(surface) or case["expect"]


def no_leak(text: str) -> None:
    for bad in FORBIDDEN:
        assert bad not in text, f"{bad!r} in an answer: {text[:500]}"


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("hostile", pg_dsn, tmp_path_factory.mktemp("hostile-server"))
    yield srv
    srv.stop_cleanly()


# ================================================================ the json cases, REST


@pytest.mark.parametrize("case_id", JSON_CASES)
def test_rest_post(server, case_id):
    case = JSON_CASES[case_id]
    want = expected(case, "rest")
    r = request(server, "POST", "/api/v1/explore", body=case["body"], timeout=30)
    assert r.status == want["status"], (r.status, r.text[:500])
    assert r.headers["content-type"].startswith("application/json")
    if want.get("ok"):
        assert r.json["ok"] is True, r.text[:500]
    else:
        assert_envelope(r.json, want.get("code"), want.get("says"))


# ================================================================ the json cases, MCP over streamable HTTP


def _sse_or_json(reply) -> dict[str, Any]:
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        lines = re.split(r"\r\n|\r|\n", reply.text)  # SSE's line ends only: not str.splitlines (U+0085, U+2028)
        data = [line[5:].strip() for line in lines if line.startswith("data:")]
        assert data, reply.text[:500]
        return json.loads(data[-1])
    return reply.json


@pytest.fixture(scope="module")
def mcp_session(server) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}}}
    r = request(server, "POST", "/mcp", body=json.dumps(init), headers={"Accept": ACCEPT})
    assert r.status == 200, r.text
    assert _sse_or_json(r)["result"]["serverInfo"]["name"] == "ontoos-explore"
    headers = {"Accept": ACCEPT, "mcp-protocol-version": PROTOCOL}
    if sid := r.headers.get("mcp-session-id"):
        headers["mcp-session-id"] = sid
    note = request(server, "POST", "/mcp", body='{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                   headers=headers)
    assert note.status == 202, note.text
    return headers


def check_rpc_answer(message: dict[str, Any], want: dict[str, Any], ident) -> None:
    no_leak(json.dumps(message))
    if "rpc" in want:
        assert "error" in message, message
        assert message["error"]["code"] == want["rpc"], message
        if isinstance(message["error"].get("data"), dict):  # ours: the envelope, hint included
            assert_envelope(message["error"]["data"])
        if want.get("says"):
            assert want["says"].lower() in message["error"]["message"].lower(), message
        return
    assert message.get("id") == ident, message
    result = message["result"]
    if want.get("ok"):
        assert result["isError"] is False, result
        assert result["structuredContent"]["ok"] is True
        return
    assert result["isError"] is True and "structuredContent" not in result, result
    assert_envelope(json.loads(result["content"][0]["text"]), want.get("code"), want.get("says"))


@pytest.mark.parametrize("case_id", JSON_CASES)
def test_mcp_http(server, mcp_session, case_id):
    case = JSON_CASES[case_id]
    want = expected(case, "mcp")
    ident = 1000 + list(JSON_CASES).index(case_id)
    r = request(server, "POST", "/mcp", body=TOOL_CALL % (ident, case["body"]), headers=mcp_session, timeout=30)
    assert r.status < 500, r.text[:500]
    check_rpc_answer(_sse_or_json(r), want, ident)


# ================================================================ the json cases, MCP over stdio


class Stdio:
    """`ontoos serve --stdio` driven line by line; a reader thread queues what it writes."""

    def __init__(self, pg_dsn: str) -> None:
        env = {"PATH": "/usr/bin:/bin", "ONTOOS_DSN": pg_dsn}
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "ontoos"), "serve", "--stdio", "--role", "analyst"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines: queue.Queue = queue.Queue()
        self.stray: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.err = b""
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.decode("utf-8"))  # every line must be UTF-8 ...
        self.lines.put(None)

    def _read_err(self) -> None:
        self.err = self.proc.stderr.read()

    def send(self, text: str) -> None:
        self.proc.stdin.write(text.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def wait_for(self, ident, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            assert line is not None, f"the stdio server exited: {self.err.decode('utf-8', 'replace')[-2000:]}"
            message = json.loads(line)  # ... and JSON-RPC
            assert message.get("jsonrpc") == "2.0", line
            if message.get("id") == ident:
                return message
            self.stray.append(line)
        return None

    def close(self) -> tuple[int, str]:
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        time.sleep(0.1)
        return code, self.err.decode("utf-8", "replace")


def stdio_answers(stdio: Stdio, line: str, want: dict, ident: int, case_id: str) -> None:
    """Send `line` to the stdio server: the answer `want` says, or (dropped by the SDK) the
    JSON-RPC error for an unreadable line."""
    stdio.send(line)
    if want.get("dropped"):
        unreadable_is_answered(stdio, ident)
        return
    message = stdio.wait_for(ident, 30)
    assert message is not None, f"no answer to {case_id} over stdio within 30 s"
    check_rpc_answer(message, want, ident)


def unreadable_is_answered(stdio: Stdio, ident: int) -> None:
    """A line the SDK's stdio transport cannot read is answered as JSON-RPC says (-32700 not JSON,
    -32600 not a message), with its id when it can be read, else null; the session goes on."""
    stdio.stray.clear()
    stdio.send(json.dumps({"jsonrpc": "2.0", "id": ident + 100000, "method": "ping"}))
    assert stdio.wait_for(ident + 100000, 30) is not None, "the stdio server stopped answering"
    answers = [json.loads(line) for line in stdio.stray]
    answers = [m for m in answers if m.get("id") in (ident, None) and "error" in m]
    assert len(answers) == 1, stdio.stray
    error = answers[0]["error"]
    assert error["code"] in (-32700, -32600) and error["data"]["ok"] is False and error["data"]["error"]["hint"]


@pytest.fixture(scope="module")
def stdio(pg_dsn):
    s = Stdio(pg_dsn)
    s.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                                  "clientInfo": {"name": "hostile", "version": "0"}}}))
    assert s.wait_for(0, 60)["result"]["serverInfo"]["name"] == "ontoos-explore"
    s.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    yield s
    code, err = s.close()
    assert "Traceback" not in err, err[-3000:]
    assert code == 0, err[-3000:]


@pytest.mark.parametrize("case_id", JSON_CASES)
def test_mcp_stdio(stdio, case_id):
    case = JSON_CASES[case_id]
    want = expected(case, "stdio")
    ident = 2000 + list(JSON_CASES).index(case_id)
    stdio_answers(stdio, TOOL_CALL % (ident, case["body"]), want, ident, case_id)


@pytest.mark.parametrize("case_id", TOOL_CASES)
def test_other_tools_over_mcp_http_and_stdio(server, mcp_session, stdio, case_id):
    case = TOOL_CASES[case_id]
    ident = 3000 + list(TOOL_CASES).index(case_id)
    line = ANY_TOOL_CALL % (ident, case["tool"], case["body"])
    r = request(server, "POST", "/mcp", body=line, headers=mcp_session, timeout=30)
    assert r.status < 500, r.text[:500]
    check_rpc_answer(_sse_or_json(r), expected(case, "mcp"), ident)
    want = expected(case, "stdio")
    stdio_answers(stdio, line, want, ident, case_id)


# ================================================================ the json cases, the CLI


@pytest.mark.parametrize("case_id", JSON_CASES)
def test_cli_explore_json(pg_dsn, case_id, capsys, monkeypatch):
    case = JSON_CASES[case_id]
    want = expected(case, "cli")
    for key in ("ONTOOS_CONTRACT", "ONTOOS_ROLE", "ONTOOS_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ONTOOS_AUDIT", "off")
    rc = cli_main(["explore", "--role", "analyst", "--dsn", pg_dsn, "--format", "json", "--json", case["body"]])
    out, err = capsys.readouterr()
    no_leak(out + err)
    env = json.loads(out)
    if want.get("ok"):
        assert rc == 0 and env["ok"] is True, out[:500]
    else:
        assert rc == 2, (rc, out[:500])
        assert_envelope(env, want.get("code"), want.get("says"), max_message=None)


# ================================================================ the http cases


@pytest.mark.parametrize("case_id", HTTP_CASES)
def test_http_request(server, case_id):
    case = HTTP_CASES[case_id]
    want = case["expect"]
    body = bytes.fromhex(case["body_hex"]) if "body_hex" in case else case.get("body")
    r = request(server, case["method"], case["path"], body=body, headers=case.get("headers"),
                who=case.get("who", "alice"), timeout=30)
    assert r.status == want["status"], (r.status, r.text[:500])
    if case["method"] == "HEAD":
        return
    assert r.headers["content-type"].startswith("application/json"), r.headers
    no_leak(r.text)
    if "rpc" in want:
        check_rpc_answer(r.json, want, None)
    elif want.get("ok"):
        assert r.json["ok"] is True, r.text[:500]
    else:
        err = assert_envelope(r.json, want.get("code"), want.get("says"))
        if want.get("audited"):
            assert_audited(server, err)


def assert_audited(server, err: dict[str, Any]) -> None:
    """`audited: true`: the refusal is in the audit trail, with its code and message (the case makes
    the message unique), within a minute (the writer batches)."""
    def found() -> int:
        with psycopg.connect(server.audit_dsn, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('ontoos_audit.events') IS NULL").fetchone()[0]:
                return 0
            return conn.execute("SELECT count(*) FROM ontoos_audit.events WHERE error_code = %s AND message = %s",
                                (err["code"], err["message"])).fetchone()[0]

    deadline = time.monotonic() + 60
    while not found() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert found() == 1, f"the refusal was not audited once: {err['message']}"


# ================================================================ bytes on a socket


def _header(reply: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def _auth(server) -> bytes:
    from tests.server.test_hostile_support import token

    return f"Authorization: Bearer {token('alice')}\r\nHost: 127.0.0.1:{server.port}\r\n".encode()


MALFORMED_HTTP = {
    "a non-numeric Content-Length": lambda a: b"POST /api/v1/explore HTTP/1.1\r\n" + a + b"Content-Length: ab\r\n\r\n{}",
    "a negative Content-Length": lambda a: b"POST /api/v1/explore HTTP/1.1\r\n" + a + b"Content-Length: -5\r\n\r\n{}",
    "two Content-Lengths": lambda a: b"POST /api/v1/explore HTTP/1.1\r\n" + a
    + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "raw high bytes in the target": lambda a: b"GET /api/\xff\xfe HTTP/1.1\r\n" + a + b"\r\n",
    "a TLS hello": lambda a: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,
    "no HTTP at all": lambda a: b"\x00\x01\x02 hello\r\n\r\n",
}


@pytest.mark.parametrize("what", MALFORMED_HTTP)
def test_malformed_http_is_refused_before_the_app(server, what):
    """uvicorn refuses these before the app sees them: a plain-text 400 (the documented non-JSON case)."""
    reply = raw_exchange(server, MALFORMED_HTTP[what](_auth(server)) + b"Connection: close\r\n\r\n", timeout=10)
    status, headers, body = _header(reply)
    assert status == 400, reply[:300]
    assert body.strip() in (b"Invalid HTTP request received.", b""), body[:300]
    assert request(server, "GET", "/healthz", who=None).status == 200  # and the server is fine


@pytest.mark.parametrize("head", [b"X-Big: " + b"a" * 200_000 + b"\r\n",
                                  b"".join(b"X-Many-%d: %s\r\n" % (i, b"b" * 100) for i in range(700))],
                         ids=["one 200 KB header", "700 headers of 100 bytes"])
def test_a_head_past_its_bound_is_431_before_the_app(server, head):
    """The request line and headers past 64 KB (connections.MAX_HEAD): the envelope, its hint, the
    connection closed; the server goes on."""
    reply = raw_exchange(server, b"GET /api/v1/catalog HTTP/1.1\r\n" + _auth(server) + head + b"\r\n", timeout=10)
    status, headers, body = _header(reply)
    assert status == 431 and headers.get("connection") == "close", reply[:300]
    err = assert_envelope(json.loads(body), "EX408", "over 64 KB")
    assert "POST" in err["hint"]
    assert request(server, "GET", "/healthz", who=None).status == 200


@pytest.mark.parametrize("method", [b"BREW", b"PROPFIND2", b"get"])
def test_a_method_the_parser_does_not_know_is_405(server, method):
    """llhttp stops at a method it does not know: answered 405 with the envelope (as an HTTP method no
    route takes is), the connection closed."""
    reply = raw_exchange(server, method + b" /api/v1/explore HTTP/1.1\r\n" + _auth(server) + b"\r\n", timeout=10)
    status, headers, body = _header(reply)
    assert status == 405 and headers.get("connection") == "close", reply[:300]
    assert_envelope(json.loads(body), "EX102", "method")


@pytest.mark.parametrize("path", ["/api/v1/explore", "/mcp"])
def test_a_body_that_never_arrives_is_408(server, path):
    """Content-Length promises 100 bytes, 2 arrive, the connection stays open: 408 after the body timeout
    (the message names it; a server that kept waiting would leave the socket to its own 12 s timeout)."""
    head = (f"POST {path} HTTP/1.1\r\n".encode() + _auth(server)
            + b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            + b"Content-Length: 100\r\n\r\n{}")
    reply = raw_exchange(server, head, timeout=BODY_TIMEOUT_S + 10)
    status, headers, body = _header(reply)
    assert status == 408, reply[:500]
    assert headers.get("connection") == "close"  # the rest of the body must not be read as a next request
    message = json.loads(body)
    if path == "/mcp":
        assert message["error"]["code"] == -32600
        message = message["error"]["data"]
    err = assert_envelope(message, "EX102", "did not arrive")
    assert str(BODY_TIMEOUT_S) in err["message"]


def test_a_body_dripped_byte_by_byte_is_408(server):
    import socket

    body = b'{"dataset": "workloads", "fields": ["name"]}'
    head = (b"POST /api/v1/explore HTTP/1.1\r\n" + _auth(server) + b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode())
    with socket.create_connection((server.host, server.port), timeout=BODY_TIMEOUT_S + 10) as s:
        s.sendall(head)
        reply = b""
        s.setblocking(False)
        for byte in body:  # one byte every 0.25 s: 11 s for the body, far past the timeout
            try:
                s.sendall(bytes([byte]))
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.25)
            try:
                reply += s.recv(65536)
            except BlockingIOError:
                pass
            if b"\r\n\r\n" in reply:
                break
        s.setblocking(True)
        try:
            while b"}}" not in reply and (chunk := s.recv(65536)):
                reply += chunk
        except OSError:
            pass
    status, _, answer = _header(reply)
    assert status == 408, reply[:300]  # a server that read the whole body would have answered it (400 or 200)
    assert_envelope(json.loads(answer), "EX102", "did not arrive")


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def test_the_dashboard_login_form_is_bounded_too(server):
    """/governance/login takes no token and reads its form itself: a 50 MiB body once grew the
    server by 50 MiB and ended in a 500. The body limit and the body timeout hold there too."""
    import socket

    head = (b"POST /governance/login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n")
    # declared too large: refused before a byte of it is read
    status, headers, body = _header(raw_exchange(server, head + b"Content-Length: 52428800\r\n\r\ntoken=", timeout=10))
    assert status == 413 and headers.get("connection") == "close"
    assert_envelope(json.loads(body), "EX408", "262144")
    # chunked, 50 MiB: cut off as it passes the limit, the server does not grow
    before = _rss_kib(server.proc.pid)
    chunk = b"%x\r\n" % 65536 + b"a" * 65536 + b"\r\n"
    reply = b""
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
        try:
            for _ in range(800):
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while part := s.recv(65536):
                reply += part
        except OSError:
            pass
    if reply:  # the answer may be lost to the reset of a connection still sending
        status, _, body = _header(reply)
        assert status == 413, reply[:300]
        assert_envelope(json.loads(body), "EX408")
    assert _rss_kib(server.proc.pid) - before < 20 * 1024
    # slow: a 408 after the body timeout, not a connection held open
    status, _, body = _header(raw_exchange(server, head + b"Content-Length: 100\r\n\r\ntoken=", timeout=BODY_TIMEOUT_S + 10))
    assert status == 408
    assert_envelope(json.loads(body), "EX102", "did not arrive")
    # and a form of a normal size is still read: a wrong token is the login page's own 401
    r = request(server, "POST", "/governance/login", who=None, body="token=wrong",
                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 401 and "not valid" in r.text


# ================================================================ in-process pieces


def test_check_json_names_the_place_and_never_the_text():
    cases = [
        ({"filter": [{"value": ["ok", "\ud800"]}]}, "filter[0].value[1]", "EX101"),
        ({"a": {"\x00bad": 1}}, "a key of a", "EX101"),
        ({"weird key!": "\x00"}, "[?]", "EX101"),
        ({"deep": json.loads("[" * 20 + "1" + "]" * 20)}, f"{MAX_JSON_DEPTH} levels", "EX102"),
        ({"many": [0] * (MAX_JSON_VALUES + 1)}, f"{MAX_JSON_VALUES} values", "EX408"),
        ({"long": ["x" * 1000] * (MAX_JSON_CHARS // 1000 + 1)}, f"{MAX_JSON_CHARS} characters", "EX408"),
    ]
    for value, says, code in cases:
        with pytest.raises(ExploreError) as caught:
            check_json(value, "the arguments")
        assert caught.value.code == code and says in caught.value.message, caught.value
        assert "bad" not in caught.value.message and "\x00" not in caught.value.message
    check_json({"dataset": "workloads", "fields": ["name", "\U0001f600"], "filter": [{"value": [1, 2.5, None, True]}]})


def test_check_json_is_iterative():
    value: Any = 1
    for _ in range(200_000):  # far beyond the recursion limit
        value = [value]
    with pytest.raises(ExploreError) as caught:
        check_json(value)
    assert "levels deep" in caught.value.message


def test_a_refusal_that_echoes_a_lone_surrogate_still_renders():
    """Defense in depth: were a refusal ever to echo a lone surrogate, the answer still encodes."""
    e = ExploreError(Codes.INVALID_REQUEST, "no key '\ud800' \x00", hint="h")
    body = answer_response(Answer.refusal(e)).body.decode("utf-8")
    assert "\\\\ud800" in body and "\\\\u0000" in body
    assert scrub({"a": ["\udcff", {"\ud800": "ok"}], "n": 1}) == {"a": ["\\udcff", {"\\ud800": "ok"}], "n": 1}


# ================================================================ the audit takes hostile text, and keeps going

UNSTORABLE = [c for c in CASES["json"] if c["expect"].get("code") == "EX101" and ("\\u0000" in c["body"] or "\\ud" in c["body"])]


def test_the_audit_trail_takes_hostile_requests_and_keeps_going(server):
    """A NUL or a lone surrogate in an audit event once stopped the audit writer for good. Here the
    requests carrying them must each be recorded (escaped), and a plain request after them too."""
    assert len(UNSTORABLE) >= 5, [c["id"] for c in UNSTORABLE]
    ids = []
    for case in UNSTORABLE:
        r = request(server, "POST", "/api/v1/explore", body=case["body"])
        assert r.status == 400 and r.json["error"]["code"] == "EX101", (case["id"], r.text[:300])
        ids.append(r.json["meta"]["exploration_id"])
    marker = f"audit_marker_{uuid.uuid4().hex[:8]}"
    r = request(server, "POST", "/api/v1/explore", body=json.dumps({"dataset": marker, "fields": ["x"]}))
    assert r.status == 400
    ids.append(r.json["meta"]["exploration_id"])

    def recorded() -> list[str]:
        with psycopg.connect(server.audit_dsn, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('ontoos_audit.events') IS NULL").fetchone()[0]:
                return []
            return [i for (i,) in conn.execute("SELECT id FROM ontoos_audit.events WHERE id = ANY(%s)", (ids,))]

    deadline = time.monotonic() + 60
    while len(found := recorded()) < len(ids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(found) == sorted(ids), "the audit writer did not take every request (it stopped, or lost some)"
    with psycopg.connect(server.audit_dsn, autocommit=True) as conn:
        messages = [m for (m,) in conn.execute("SELECT message FROM ontoos_audit.events WHERE id = ANY(%s)", (ids[:-1],))]
    assert all("\x00" not in m for m in messages) and sum("cannot be used (U+" in m for m in messages) >= 5, messages
