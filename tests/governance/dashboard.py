"""A real `ontoos serve --http` with the dashboard, for the governance tests that drive it over HTTP or
in a browser: its principals and tokens, the start, plain requests, and signing in as a browser does
(a session cookie and the CSRF token of its pages).

Each server writes its audit to a database of its own (`Dashboard.audit_dsn`), so a test reads the
events its own requests made and nothing else.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg.rows import dict_row

from tests import serving
from tests.databases import new_database
from tests.named_queries import HOSTS_BY_PROVIDER

ANA, VIC, REV, REV2 = "gov-dash-ana", "gov-dash-vic", "gov-dash-rev", "gov-dash-rev2"
TOKENS = {name: name.rsplit("-", 1)[1] + "-" + secrets.token_hex(16) for name in (ANA, VIC, REV, REV2)}
ROLES = {ANA: "analyst", VIC: "reader", REV: "admin", REV2: "admin"}
REVIEWERS = (REV, REV2)
COOKIE = "ontoos_session"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}

HAND_WRITTEN = HOSTS_BY_PROVIDER


@dataclass
class Dashboard:
    """A running `ontoos serve --http` with the dashboard, its registry file and its own audit."""

    srv: serving.Server
    registry: Path
    audit_dsn: str

    @property
    def port(self) -> int:
        return self.srv.port

    @property
    def base(self) -> str:
        return self.srv.base

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Resp:
    status: int
    headers: dict[str, str]
    body: str
    cookies: list[str]  # the Set-Cookie headers, as sent

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
        headers_ = r.getheaders()
        return Resp(r.status, {k.lower(): v for k, v in headers_}, r.read().decode("utf-8", "replace"),
                    [v for k, v in headers_ if k.lower() == "set-cookie"])
    finally:
        conn.close()


def start_dashboard(pg_dsn: str, workdir: Path, queries: list[dict[str, Any]] | None = None,
                    args: tuple[str, ...] = (), **config: Any) -> Dashboard:
    """`config`: top-level settings of the server configuration (session_hours, allow_self_approval,
    auth_failures, ...); `queries`: the registry file's entries (default: one hand-written query);
    `args`: more arguments of `ontoos serve` (--workers 2)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "server.yaml"
    path.write_text(yaml.safe_dump({**config, "principals": {
        name: {"role": ROLES[name], "token_sha256": hashlib.sha256(TOKENS[name].encode()).hexdigest(),
               **({"reviewer": True} if name in REVIEWERS else {})} for name in TOKENS}}), encoding="utf-8")
    registry = workdir / "queries.yaml"
    registry.write_text(yaml.safe_dump({"queries": [HAND_WRITTEN] if queries is None else queries}, sort_keys=False),
                        encoding="utf-8")
    port = serving.free_port()
    audit_dsn = new_database(pg_dsn, "dashboard")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update({"ONTOOS_DSN": pg_dsn, "ONTOOS_AUDIT_DSN": audit_dsn,
                "ONTOOS_PROMOTE_USES": "3", "ONTOOS_PROMOTE_PRINCIPALS": "2",
                "ONTOOS_DATA_DIR": str(workdir / "embedded-unused"), "PYTHONUNBUFFERED": "1"})
    with open(workdir / "stdout.log", "wb") as out, open(workdir / "stderr.log", "wb") as err:
        proc = subprocess.Popen([serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}", "--config",
                                 str(path), "--queries", str(registry), *args], cwd=workdir, env=env, stdout=out,
                                stderr=err,
                                stdin=subprocess.DEVNULL)
    srv = serving.Server("dashboard", "127.0.0.1", port, proc, workdir, workdir / "stderr.log")
    return Dashboard(srv.wait_healthy(), registry, audit_dsn)


# ---------------------------------------------------------------- a browser's session, over plain HTTP


@dataclass
class Signed:
    """A signed-in browser: its session cookie and the CSRF token its pages carry."""

    who: str
    cookie: str
    csrf: str

    @property
    def header(self) -> dict[str, str]:
        return {"Cookie": f"{COOKIE}={self.cookie}"}


CSRF_INPUT = re.compile(r'name="csrf" value="([^"]+)"')


def sign_in(dash: Dashboard, who: str) -> Signed:
    """POST the token to /governance/login as the form does; the page then gives the CSRF token."""
    r = call(dash, "POST", "/governance/login", headers={**FORM, "Origin": dash.origin},
             body=urllib.parse.urlencode({"token": TOKENS[who]}))
    assert r.status == 303 and r.headers["location"] == "/governance", (r.status, r.body[:300])
    [set_cookie] = r.cookies
    cookie = set_cookie.split(";")[0].split("=", 1)[1]
    page = call(dash, "GET", "/governance", headers={"Cookie": f"{COOKIE}={cookie}"})
    assert page.status == 200, page.body[:300]
    return Signed(who, cookie, CSRF_INPUT.search(page.body).group(1))


def post_form(dash: Dashboard, path: str, fields: dict[str, Any] | list[tuple[str, str]] | str | bytes,
              signed: Signed | None = None, *, headers: dict[str, str] | None = None,
              json_answer: bool = False) -> Resp:
    """A form POST as the dashboard's page sends it (its Origin, its session's cookie and CSRF token
    unless `fields` holds a csrf of its own); `headers` override; `json_answer` asks for the envelope."""
    h = {**FORM, "Origin": dash.origin, **(signed.header if signed else {})}
    if json_answer:
        h["Accept"] = "application/json"
    h.update(headers or {})
    if isinstance(fields, (str, bytes)):
        body = fields
    else:
        pairs = list(fields.items()) if isinstance(fields, dict) else list(fields)
        if signed is not None and not any(k == "csrf" for k, _ in pairs):
            pairs.append(("csrf", signed.csrf))
        body = urllib.parse.urlencode(pairs)
    return call(dash, "POST", path, headers=h, body=body)


def saved(dash: Dashboard) -> dict[str, dict[str, Any]]:
    return {q["id"]: q for q in yaml.safe_load(dash.registry.read_text(encoding="utf-8"))["queries"]}


# ---------------------------------------------------------------- the known traffic

REPEATED = "explore workloads fields name, replicas where namespace = '{ns}' and replicas > {n} order by name limit 5"
XSS = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


def explore(srv: Dashboard, who: str, body: dict[str, Any]) -> Any:
    return call(srv, "POST", "/api/v1/explore", token=TOKENS[who], body=body)


def explore_get(srv: Dashboard, who: str, params: list[tuple[str, str]]) -> Any:
    return call(srv, "GET", "/api/v1/explore?" + urllib.parse.urlencode(params), token=TOKENS[who])


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


# ---------------------------------------------------------------- the audit of one server


def events(dash: Dashboard, where: str = "TRUE", params: Any = None) -> list[dict[str, Any]]:
    with psycopg.connect(dash.audit_dsn) as conn, conn.cursor(row_factory=dict_row) as cur:
        if conn.execute("SELECT to_regclass('ontoos_audit.events')").fetchone()[0] is None:
            return []
        cur.execute(f"SELECT * FROM ontoos_audit.events WHERE {where} ORDER BY at, id", params)
        return cur.fetchall()


def wait_for_events(dash: Dashboard, where: str, params: Any = None, n: int = 1, timeout: float = 60) -> list[dict]:
    """The events matching `where`, once there are at least `n` (the writer flushes in batches)."""
    deadline = time.monotonic() + timeout
    while len(found := events(dash, where, params)) < n:
        assert time.monotonic() < deadline, f"the audit never recorded {n} events where {where} {params}"
        time.sleep(0.1)
    return found
