"""Support for the hardening suites (no tests here): one server set-up, shared by
test_hostile, test_hostile_fuzz, test_auth, test_rate_limit and test_disconnect.

The server is a real `ontoos serve --http` (uvicorn) in a subprocess, started
the way tests/server/test_http.py starts its own, but with:

- a contract that is the demo contract plus `sleepy`, a view that sleeps 0.2 s
  per row (made here with pg_sleep, which never goes through the language),
  readable only by the role `patient` (a 30 s time budget): the slow query
  the disconnect tests abandon;
- its own database roles (prefix `ontoos_hx_`), so its grants touch nothing
  the other suites use;
- principals with and without rate limits, and a server-wide default limit;
- a body timeout of 2 s (ONTOOS_BODY_TIMEOUT), so a body that never arrives
  is a quick 408 here;
- an audit database of its own (`Server.audit_dsn`), so what a test reads
  there is what this server recorded, whatever ran before.

Each module's server fixture stops it with `stop_cleanly()` in its teardown:
the shutdown must be clean, with no traceback on stderr.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import secrets
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import yaml

from ontoos_explore import load_contract
from ontoos_explore.engine import grants
from tests import serving
from tests.conftest import CASES, ROOT
from tests.databases import database_of, new_database
from tests.serving import Server, assert_clean, pg_socket_dir

PREFIX = "ontoos_hx_"
BODY_TIMEOUT_S = 2
SLOW_SCHEMA = "hostile_slow"
SLEEP_PER_ROW_S = 0.2  # a LIMIT 100 exploration (101 rows fetched) sleeps 20 s
SLOW_SQL = [
    f"DROP SCHEMA IF EXISTS {SLOW_SCHEMA} CASCADE",
    f"CREATE SCHEMA {SLOW_SCHEMA}",
    f"CREATE TABLE {SLOW_SCHEMA}.things (id integer PRIMARY KEY, label text)",
    f"INSERT INTO {SLOW_SCHEMA}.things SELECT g, 'thing ' || g FROM generate_series(1, 400) g",
    f"CREATE VIEW {SLOW_SCHEMA}.sleepy AS SELECT id, label FROM {SLOW_SCHEMA}.things "
    f"WHERE pg_sleep({SLEEP_PER_ROW_S}) IS NOT NULL",
]

# Rate limits refill once in 1,000 minutes (SLOW): a bucket emptied in a test stays empty however
# slowly the test runs, so no outcome depends on time. Refilling is tested on a fake clock.
SLOW = 0.001
SERVER_RATE = {"per_minute": SLOW, "burst": 3}  # the default of every principal without its own
# principal -> (role, token, its own rate_limit: a dict, False for none, None for the server's);
# each rate-limited one is used up by one test only (test_rate_limit), so none depends on another
PRINCIPALS: dict[str, tuple[str, str, Any]] = {
    "alice": ("analyst", "alice-" + secrets.token_hex(16), False),
    "vera": ("reader", "vera-" + secrets.token_hex(16), False),
    "rex": ("admin", "rex-" + secrets.token_hex(16), False),
    "pat": ("patient", "pat-" + secrets.token_hex(16), False),
    "fuzz": ("analyst", "fuzz-" + secrets.token_hex(16), False),
    "dora": ("analyst", "dora-" + secrets.token_hex(16), None),
    "tina": ("reader", "tina-" + secrets.token_hex(16), {"per_minute": SLOW, "burst": 3}),
    "mia": ("analyst", "mia-" + secrets.token_hex(16), {"per_minute": SLOW, "burst": 2}),
    "max": ("reader", "max-" + secrets.token_hex(16), {"per_minute": SLOW, "burst": 3}),
    "sam": ("reader", "sam-" + secrets.token_hex(16), {"per_minute": SLOW, "burst": 3}),
    "lea": ("analyst", "lea-" + secrets.token_hex(16), {"per_minute": SLOW, "burst": 2}),
}
REVIEWERS = ("rex",)
METRICS = ("rex",)  # may read /metrics from anywhere


def token(name: str) -> str:
    return PRINCIPALS[name][1]


def hostile_contract(path: Path) -> Path:
    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8"))
    data["datasets"]["sleepy"] = {
        "relation": f"{SLOW_SCHEMA}.sleepy",
        "description": "A view that sleeps per row: the slow query of the disconnect tests.",
        "columns": {"id": {"type": "integer"}, "label": {"type": "text"}},
    }
    data["read_sets"]["slow"] = ["sleepy"]
    data["roles"]["patient"] = {"read_sets": ["slow"], "max_rows": 100, "timeout_ms": 30000}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def write_config(path: Path, **extra: Any) -> Path:
    """The hostile principals; `extra`: more top-level settings (e.g. auth_failures)."""
    principals = {}
    for name, (role, tok, rate) in PRINCIPALS.items():
        entry: dict[str, Any] = {"role": role, "token_sha256": hashlib.sha256(tok.encode()).hexdigest()}
        if name in REVIEWERS:
            entry["reviewer"] = True
        if name in METRICS:
            entry["metrics"] = True
        if rate is not None:
            entry["rate_limit"] = rate
        principals[name] = entry
    path.write_text(yaml.safe_dump({"rate_limit": SERVER_RATE, **extra, "principals": principals}, sort_keys=False),
                    encoding="utf-8")
    return path


def prepare_database(pg_dsn: str, contract_path: Path) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_views WHERE schemaname = %s AND viewname = 'sleepy'",
                              (SLOW_SCHEMA,)).fetchone()
        if not exists:
            for stmt in SLOW_SQL:
                conn.execute(stmt)
    with psycopg.connect(pg_dsn) as conn:
        grants.apply(conn, load_contract(contract_path), PREFIX)


def start_hostile_server(name: str, pg_dsn: str, workdir: Path, config_extra: dict | None = None,
                         args: tuple[str, ...] = (), *, read_dsn: str | None = None, port: int | None = None,
                         **env_extra: str) -> Server:
    """`ontoos serve --http` (and `args`) on a free loopback port (or `port`) with the hostile contract and
    config, and its audit in a new database (unless `env_extra` sets ONTOOS_AUDIT_DSN). The lake is
    prepared on `pg_dsn`; the server reads from `read_dsn` when given (a primary's standbys)."""
    workdir.mkdir(parents=True, exist_ok=True)
    contract = hostile_contract(workdir / "contract.yaml")
    prepare_database(pg_dsn, contract)
    config = write_config(workdir / "server.yaml", **(config_extra or {}))
    audit_dsn = env_extra.pop("ONTOOS_AUDIT_DSN", None) or new_database(pg_dsn, "audit")
    port = port or serving.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update({"ONTOOS_DSN": read_dsn or pg_dsn, "ONTOOS_AUDIT_DSN": audit_dsn, "ONTOOS_CONTRACT": str(contract),
                "ONTOOS_ROLE_PREFIX": PREFIX, "ONTOOS_BODY_TIMEOUT": str(BODY_TIMEOUT_S),
                "ONTOOS_DATA_DIR": str(workdir / "embedded-unused"), "PYTHONUNBUFFERED": "1", **env_extra})
    stderr_path = workdir / "stderr.log"
    with open(workdir / "stdout.log", "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}", "--config", str(config), *args],
            cwd=workdir, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    forbidden = [str(workdir), str(ROOT), "site-packages", pg_dsn, read_dsn or pg_dsn, audit_dsn, database_of(audit_dsn), SLOW_SCHEMA,
                 "pg_sleep", PREFIX]
    if sock := pg_socket_dir(pg_dsn):
        forbidden.append(sock)
    return Server(name, "127.0.0.1", port, proc, workdir, stderr_path, forbidden=forbidden,
                  audit_dsn=audit_dsn).wait_healthy()


# ---------------------------------------------------------------- requests


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8")  # every answer must be UTF-8

    @property
    def json(self) -> Any:
        return json.loads(self.text)


def request(srv: Server, method: str, path: str, *, body: bytes | str | None = None, who: str | None = "alice",
            headers: dict[str, str] | None = None, timeout: float = 30, request_text: str = "") -> Reply:
    """One request with http.client; `who` names a principal (its bearer token), None sends none."""
    h = {"Content-Type": "application/json"} if body is not None else {}
    h.update(headers or {})
    if who is not None:
        h["Authorization"] = f"Bearer {token(who)}"
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    try:
        try:
            conn.request(method, path, body=body, headers=h)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer (and close) before it has read a body it refuses
        r = conn.getresponse()
        reply = Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()
    assert_clean(srv, reply.raw.decode("utf-8", "replace"), request_text or (path + " " + str(body)[:2000]),
                 f"{method} {path[:80]}")
    return reply


def raw_exchange(srv: Server, data: bytes, timeout: float = 10) -> bytes:
    """Bytes on a socket, the answer as bytes (until the server closes, or the timeout)."""
    out = b""
    with socket.create_connection((srv.host, srv.port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return out
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return out


ERROR_KEYS = {"type", "subtype", "code", "message"}


def assert_envelope(env: Any, code: str | None = None, says: str | None = None,
                    max_message: int | None = 500) -> dict[str, Any]:
    """A well-formed refusal: ok false, the error keys, a hint, the expected code, and (on the
    server's surfaces) a message of at most 500 characters, however much input it quotes."""
    assert isinstance(env, dict) and env.get("ok") is False, env
    assert "data" not in env and isinstance(env.get("meta"), dict), env
    err = env["error"]
    assert ERROR_KEYS <= set(err), err
    if max_message is not None:
        assert len(err["message"]) <= max_message, err["message"][:200]
    assert err["type"] in ("validation", "policy", "auth", "network", "internal"), err
    assert isinstance(err.get("hint"), str) and err["hint"], f"no hint: {err}"
    if code is not None:
        assert err["code"] == code, err
    if says is not None:
        assert says.lower() in (err["message"] + " " + err["hint"]).lower(), (says, err)
    return err


# ---------------------------------------------------------------- the cases file

_REPEAT = re.compile(r"<<(repeat|list) (\d+):(.*?)>>", re.DOTALL)


def expand(text: str) -> str:
    """`<<repeat N:TEXT>>` is TEXT N times; `<<list N:ITEM>>` is ITEM N times joined by ', '."""
    def one(m: re.Match) -> str:
        kind, n, item = m.group(1), int(m.group(2)), m.group(3)
        return item * n if kind == "repeat" else ", ".join([item] * n)

    return _REPEAT.sub(one, text)


def load_cases() -> dict[str, list[dict[str, Any]]]:
    data = yaml.safe_load((CASES / "hostile.yaml").read_text(encoding="utf-8"))
    for group in data.values():
        for case in group:
            for key in ("body", "path"):
                if isinstance(case.get(key), str):
                    case[key] = expand(case[key])
    return data
