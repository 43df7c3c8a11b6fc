"""SQL-injection scan of the REST endpoint with sqlmap, with a vulnerable control in the same run.

    .venv/bin/python -m tests.security.sqlmap_scan            # full: level 5, risk 3 (about 5 minutes)
    .venv/bin/python -m tests.security.sqlmap_scan --quick    # level 2, risk 1 (about 1 minute)

What it does, all on 127.0.0.1 and in a temporary directory:

1. a throwaway virtual environment with `sqlmap` from PyPI (or --sqlmap-venv DIR to reuse one);
2. a fresh embedded PostgreSQL (pgserver) with the demo lakehouse and the demo contract's grants;
3. the real server, `ontoos serve --http 127.0.0.1:PORT --config ...` (one analyst principal,
   audit on, as deployed), and the CONTROL (tests/security/vulnerable_app.py), a tiny app that
   pastes a parameter into SQL on the same PostgreSQL, behind the same bearer token;
4. a normalizing proxy in front of each (normalizing_proxy.py: requests forwarded unchanged,
   the answers' volatile exploration_id and elapsed_ms blanked, so sqlmap's page comparison is
   exact; --direct to scan without them);
5. sqlmap, non-interactive and time-bounded, against each target of `targets()`, one after
   another, the two control targets first (300 s per run and 900 s in all, at most, in full);
6. the verdict of each run read from sqlmap's console output and its `<output-dir>/<host>/log`
   (its exit code is 0 whatever it finds), the requests counted on both sides (sqlmap's traffic
   file, and the server's audit or the control's counter), every response body sqlmap got from
   the real server checked for leaks (tracebacks, PostgreSQL error texts, paths, secret values);
7. a summary on stdout and in tests/security/results/latest.json (--results PATH to change).

Exit status: 0 only if every real target is "not injectable" (sqlmap said so, found no
injection point, its log is empty, the run was not cut short, no response leaked, no 500, no
rate-limit refusal, no traceback on the server's stderr) AND every control target was found
injectable in its `name`. 1 otherwise; 2 if the set-up itself failed.

Raw output (sqlmap's console output, traffic files, the servers' stderr) is kept in
tests/security/.sqlmap-out/ (gitignored), replaced on each run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import http.client
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from tests import serving

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results" / "latest.json"
RAW = HERE / ".sqlmap-out"
MARK = ".sqlmap-scan-raw"
PRINCIPAL = "scanner"
ROLE = "analyst"
SECRET_MARKER = "ONTOOS-SECRET-"

# level/risk, the wall-clock bound of one sqlmap run, and of all of them together, per mode.
# A run cut short by its bound is "incomplete", which fails: raise the bounds on a slow machine.
MODES: dict[str, dict[str, Any]] = {
    "full": {"level": 5, "risk": 3, "time_limit": 300, "budget": 900},
    "quick": {"level": 2, "risk": 1, "time_limit": 90, "budget": 300},
}
MIN_RUN_S = 20  # a target that would get less than this is not started (and the scan fails)


def log(msg: str) -> None:
    print(msg, flush=True)


class SetupError(RuntimeError):
    """A tool (sqlmap, the database) that could not be set up."""


# ---------------------------------------------------------------- sqlmap, in its own venv


def ensure_sqlmap(venv_dir: Path, spec: str) -> tuple[Path, str]:
    """-> (the sqlmap executable, its version). Creates the venv and installs `spec` unless present."""
    exe = venv_dir / "bin" / "sqlmap"
    if not exe.exists():
        log(f"  creating a virtual environment for sqlmap in {venv_dir}")
        venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
        pip = [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", spec]
        r = subprocess.run(pip, check=False, capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not exe.exists():
            raise SetupError(f"pip install {spec} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    r = subprocess.run([str(exe), "--version"], check=False, capture_output=True, text=True, timeout=60)
    return exe, (r.stdout.strip() or r.stderr.strip())


# ---------------------------------------------------------------- PostgreSQL and the two servers


def start_database(data_dir: Path) -> tuple[Any, str]:
    """A fresh embedded PostgreSQL with the demo lakehouse and the default contract's grants."""
    import psycopg

    from ontoos_explore.cli.common import default_contract
    from ontoos_explore.contract import load_contract
    from ontoos_explore.engine import demo_data, embedded, grants

    server = embedded.start(data_dir)  # stopped by server.cleanup(), or when this process exits
    dsn = embedded.dsn_of(server)
    contract = load_contract(default_contract())
    with psycopg.connect(dsn) as conn:
        demo_data.ensure(conn)
    with psycopg.connect(dsn) as conn:
        grants.apply(conn, contract, "ontoos_q_")
    return server, dsn


@dataclass
class Proc:
    """A server we started, as a subprocess; stopped by its own pid only."""

    name: str
    port: int
    proc: subprocess.Popen
    stderr_path: Path
    _err: Any = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait_healthy(self, timeout: float = 120) -> None:
        serving.wait_healthy(self.proc, self.port, stderr=self.stderr, name=self.name, timeout=timeout, interval=0.2)

    def stop(self) -> int | None:
        code = serving.stop(self.proc)
        if self._err is not None:
            self._err.close()
        return code


def _spawn(name: str, cmd: list[str], env: dict[str, str], port: int, workdir: Path, raw: Path) -> Proc:
    stderr_path = raw / f"{name}.stderr.log"
    err = open(stderr_path, "wb")  # noqa: SIM115 (closed by Proc.stop)
    proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=err)
    p = Proc(name, port, proc, stderr_path, err)
    try:
        p.wait_healthy()
    except BaseException:
        p.stop()
        raise
    return p


def start_ontoos(dsn: str, token: str, workdir: Path, raw: Path) -> Proc:
    config = workdir / "server.yaml"
    digest = hashlib.sha256(token.encode("utf-8")).hexdigest()
    # rate_limit false: sqlmap sends thousands of requests a minute, and a refusal for the rate would void the scan
    config.write_text(f'principals:\n  {PRINCIPAL}: {{role: {ROLE}, token_sha256: "{digest}", rate_limit: false}}\n',
                      encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update(ONTOOS_DSN=dsn, ONTOOS_DATA_DIR=str(workdir / "embedded-unused"), PYTHONUNBUFFERED="1")
    port = serving.free_port()
    cmd = [serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}", "--config", str(config)]
    return _spawn("ontoos", cmd, env, port, workdir, raw)


def start_control(dsn: str, token: str, workdir: Path, raw: Path) -> Proc:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONTOOS_", "CONTROL_"))}
    env.update(CONTROL_DSN=dsn, CONTROL_TOKEN=token, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    port = serving.free_port()
    cmd = [sys.executable, "-m", "tests.security.vulnerable_app", f"127.0.0.1:{port}"]
    return _spawn("control", cmd, env, port, workdir, raw)


# ---------------------------------------------------------------- the targets


@dataclass
class Target:
    name: str
    kind: str  # "ontoos" (must not be injectable) or "control" (must be injectable)
    method: str
    path: str  # with the query string for GET
    data: str | None = None  # the JSON body for POST
    params: list[str] | None = None  # sqlmap -p; None: every parameter sqlmap finds (each JSON value)
    what: str = ""


def targets(control_name: str) -> list[Target]:
    flags = [("dataset", "workloads"), ("relation", "containers"), ("fields", "namespace,count()"),
             ("filter", "namespace=prod"), ("group_by", "namespace"), ("order_by", "-namespace"),
             ("limit", "5"), ("dry_run", "false")]
    predicate = [("dataset", "workloads"), ("fields", "name,namespace,replicas"),
                 ("filter", "namespace = 'prod' and replicas >= 1"), ("limit", "5")]
    text = [("query", ("explore workloads fields name, namespace, replicas where namespace = 'prod' "
                       "and kind = 'Deployment' order by name limit 5"))]
    body = {"dataset": "workloads", "relations": ["containers"], "fields": ["namespace", "count()"],
            "filter": "namespace = 'prod'", "group_by": ["namespace"], "order_by": ["-namespace"], "limit": 5,
            "dry_run": False}
    text_body = {"query": text[0][1]}

    def qs(pairs):
        return urlencode(pairs, quote_via=quote)

    return [
        Target("ontoos GET flags", "ontoos", "GET", "/api/v1/explore?" + qs(flags),
               what="the GET flag form: every query parameter, and the headers the level tests"),
        Target("ontoos GET filter predicate", "ontoos", "GET", "/api/v1/explore?" + qs(predicate),
               params=["filter"], what="the GET form with a quoted predicate in filter"),
        Target("ontoos GET text form", "ontoos", "GET", "/api/v1/explore?" + qs(text),
               params=["query"], what="the GET text form (?query=)"),
        Target("ontoos POST JSON", "ontoos", "POST", "/api/v1/explore", data=json.dumps(body),
               what="the POST JSON form: every JSON value, array elements included"),
        Target("ontoos POST JSON text form", "ontoos", "POST", "/api/v1/explore", data=json.dumps(text_body),
               what="the POST JSON text form ({\"query\": ...})"),
        Target("ontoos GET catalog", "ontoos", "GET", "/api/v1/catalog?" + qs([("dataset", "workloads")]),
               params=["dataset"], what="the catalog's one parameter"),
        Target("control GET", "control", "GET",
               "/control/explore?" + qs([("dataset", "workloads"), ("name", control_name)]),
               params=["dataset", "name"], what="the control, GET: name is pasted into SQL"),
        Target("control POST JSON", "control", "POST", "/control/explore",
               data=json.dumps({"dataset": "workloads", "name": control_name}),
               what="the control, POST JSON: name is pasted into SQL"),
    ]


# ---------------------------------------------------------------- reading sqlmap's output

# sqlmap names a parameter "GET parameter 'x'", "(custom) POST parameter 'JSON x'", or, for a header,
# "parameter 'User-Agent'"; the key kept here is "GET x", "POST JSON x", "header User-Agent".
PARAM = r"(?:\(custom\) )?(?:(\w+) )?parameter '([^']+)'"
INJECTABLE_LINE = re.compile(PARAM + r" (?:appears to be|is) '(.+?)' injectable")
TESTED = re.compile(r"testing for SQL injection on " + PARAM)
NOT_INJECTABLE = re.compile(PARAM + r" does not seem to be injectable")
HEURISTIC = re.compile(r"heuristic \(basic\) test shows that " + PARAM + r" might be injectable")
TECHNIQUE = re.compile(r"^\s*Title: (.+)$", re.MULTILINE)


def _key(place: str | None, name: str) -> str:
    return f"{place or 'header'} {name}"


CODES = re.compile(r"HTTP error codes detected during run:\s*\n?(.+)")
CODE_ITEM = re.compile(r"(\d{3}) \(([^)]*)\) - (\d+) times")


def parse_sqlmap(console: str, log_text: str) -> dict[str, Any]:
    # Per parameter, the last word wins: a candidate ("appears to be ... injectable") that sqlmap's own
    # false-positive check then drops ("does not seem to be injectable") is discarded, not found.
    state: dict[str, str] = {}
    for line in console.splitlines():
        if m := INJECTABLE_LINE.search(line):
            state[_key(m.group(1), m.group(2))] = "candidate"
        elif m := NOT_INJECTABLE.search(line):
            key = _key(m.group(1), m.group(2))
            state[key] = "discarded" if state.get(key) == "candidate" else "not injectable"
    tested = list(dict.fromkeys(_key(place, name) for place, name in TESTED.findall(console)))
    identified = "identified the following injection point" in console
    all_clean = "all tested parameters do not appear to be injectable" in console
    codes: dict[str, int] = {}
    for m in CODES.finditer(console):
        for code, _, n in CODE_ITEM.findall(m.group(1)):
            codes[code] = codes.get(code, 0) + int(n)
    warnings = sorted({line.split("] ", 1)[-1].strip() for line in console.splitlines()
                       if re.search(r"\[(WARNING|CRITICAL|ERROR)\]", line)
                       and "does not seem to be injectable" not in line
                       and "as the output directory" not in line})
    return {
        "tested": tested,
        "injectable": sorted(k for k, v in state.items() if v == "candidate"),
        "discarded_candidates": sorted(k for k, v in state.items() if v == "discarded"),
        "identified_injection_point": identified,
        "said_all_not_injectable": all_clean,
        "log_empty": not log_text.strip(),
        "heuristic_hits": sorted({_key(place, name) for place, name in HEURISTIC.findall(console)}),
        "techniques": sorted(set(TECHNIQUE.findall(log_text))),  # of the injection points sqlmap logged
        "http_error_codes": codes,
        "warnings": warnings[:40],
    }


def json_labels(data: str | None) -> dict[str, str]:
    """sqlmap calls a JSON array element '#n*' (the n-th value it marked): give it a readable name."""
    if not data:
        return {}
    labels: dict[str, str] = {}
    n = 0
    for key, value in json.loads(data).items():
        for i, v in enumerate(value if isinstance(value, list) else [value]):
            n += 1
            if isinstance(value, list) and not isinstance(v, (dict, list)):
                labels[f"POST JSON #{n}*"] = f"POST JSON {key}[{i}]"
    return labels


def verdict_of(parsed: dict[str, Any]) -> str:
    if parsed["injectable"] or parsed["identified_injection_point"] or not parsed["log_empty"]:
        return "injectable"
    if parsed["said_all_not_injectable"]:
        return "not injectable"
    return "incomplete"  # cut short by the time limit, or sqlmap gave up: proves nothing


# ---------------------------------------------------------------- the traffic file

RECORD_SEP = re.compile(r"\r?\n#{76}\r?\n")
RESPONSE_HEAD = re.compile(r"HTTP response \[#\d+\] \((\d{3})[^)]*\):")
# texts no answer of the real server may contain unless the request itself carried them
LEAK_PATTERNS = {
    "traceback": re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\.py\", line \d+"),
    "psycopg": re.compile(r"psycopg", re.IGNORECASE),
    "postgres error text": re.compile(r"syntax error at or near|ERROR:\s|SQLSTATE|unterminated quoted string|"
                                      r"invalid input syntax for|current transaction is aborted|"
                                      r"permission denied for|(?:relation|column|function|schema|role) \\?\"[^\"\\]+\\?\" does not exist|"
                                      r"LINE \d+:", re.IGNORECASE),
    "sql text": re.compile(r"\bSELECT\b.+\bFROM\b\s+\"?lake\"?\.", re.IGNORECASE | re.DOTALL),
    "physical relation": re.compile(r"\blake\.k8s_|\bk8s_workloads\b|\bk8s_containers\b"),
    "query role": re.compile(r"ontoos_q_"),
    "secret value": re.compile(re.escape(SECRET_MARKER)),
    "python path": re.compile(r"site-packages|/src/ontoos_explore|\.venv/"),
}


def read_traffic(path: Path, forbidden: dict[str, str]) -> dict[str, Any]:
    """Requests, status codes and leak findings from sqlmap's -t file."""
    if not path.exists():
        return {"requests": 0, "status": {}, "leaks": {}, "leak_examples": []}
    text = path.read_text(encoding="utf-8", errors="replace")
    status: dict[str, int] = {}
    leaks: dict[str, int] = {}
    examples: list[dict[str, str]] = []
    requests = 0
    for record in RECORD_SEP.split(text):
        if "HTTP request [#" not in record:
            continue
        requests += 1
        head = RESPONSE_HEAD.search(record)
        if head is None:
            status["none"] = status.get("none", 0) + 1
            continue
        status[head.group(1)] = status.get(head.group(1), 0) + 1
        request, response = record[:head.start()], record[head.end():]
        body = response.split("\r\n\r\n", 1)[-1] if "\r\n\r\n" in response else response.split("\n\n", 1)[-1]
        checks = dict(LEAK_PATTERNS)
        for label, s in forbidden.items():
            checks[label] = re.compile(re.escape(s))
        for label, pattern in checks.items():
            if pattern.search(body) and not pattern.search(_decoded(request)):
                leaks[label] = leaks.get(label, 0) + 1
                if len(examples) < 5:
                    examples.append({"label": label, "request": request.strip()[:600],
                                     "status": head.group(1), "body": body.strip()[:800]})
        if head.group(1) == "500" and len(examples) < 5:
            examples.append({"label": "status 500", "request": request.strip()[:600], "status": "500",
                             "body": body.strip()[:800]})
    return {"requests": requests, "status": dict(sorted(status.items())), "leaks": leaks,
            "leak_examples": examples}


def _decoded(request: str) -> str:
    from urllib.parse import unquote_plus

    return request + "\n" + unquote_plus(request)


# ---------------------------------------------------------------- counting on the server side


def audit_counts(dsn: str) -> dict[str, int]:
    """REST requests the real server recorded for the scanner principal, by outcome and code."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('ontoos_audit.events') IS NOT NULL").fetchone()[0]
        if not exists:
            return {}
        rows = conn.execute(
            "SELECT outcome || coalesce(':' || error_code, ''), count(*) FROM ontoos_audit.events "
            "WHERE principal = %s AND surface = 'rest' GROUP BY 1", [PRINCIPAL]).fetchall()
    return {k: int(n) for k, n in rows}


def settled_audit(dsn: str, timeout: float = 15) -> dict[str, int]:
    """The audit counts once the writer's queue has drained (two equal readings 0.5 s apart)."""
    deadline = time.monotonic() + timeout
    last = audit_counts(dsn)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = audit_counts(dsn)
        if now == last:
            return now
        last = now
    return last


def control_counts(control: Proc) -> dict[str, int]:
    conn = http.client.HTTPConnection("127.0.0.1", control.port, timeout=10)
    try:
        conn.request("GET", "/control/stats")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    keys = sorted(set(after) | set(before))
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys if after.get(k, 0) - before.get(k, 0)}


# ---------------------------------------------------------------- one sqlmap run


@dataclass
class Run:
    name: str
    kind: str
    method: str
    path: str
    what: str
    expected: str
    verdict: str = "not run"
    passed: bool = False
    duration_s: float = 0.0
    time_limit_s: int = 0
    sqlmap_exit: int | None = None
    sqlmap_requests: int = 0
    server_requests: int = 0
    server_outcomes: dict[str, int] = field(default_factory=dict)
    response_status: dict[str, int] = field(default_factory=dict)
    parameters_tested: list[str] = field(default_factory=list)
    injectable: list[str] = field(default_factory=list)
    discarded_candidates: list[str] = field(default_factory=list)
    techniques: list[str] = field(default_factory=list)
    heuristic_hits: list[str] = field(default_factory=list)
    http_error_codes: dict[str, int] = field(default_factory=dict)
    leaks: dict[str, int] = field(default_factory=dict)
    leak_examples: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def sqlmap_command(exe: Path, base: str, target: Target, token: str, outdir: Path, traffic: Path,
                   mode: dict[str, Any], time_limit: int) -> list[str]:
    cmd = [
        str(exe), "-u", base + target.path, "--method", target.method,
        "-H", f"Authorization: Bearer {token}",
        "--dbms=PostgreSQL", f"--level={mode['level']}", f"--risk={mode['risk']}", "--technique=BEUSTQ",
        "--time-sec=2", "--timeout=10", "--retries=1", f"--time-limit={time_limit}", "--threads=1",
        "--batch", "--non-interactive", "--answers=create=N,follow=N,quit=N",
        "--flush-session", f"--output-dir={outdir}", "-t", str(traffic), "--disable-coloring",
    ]
    if target.data is not None:
        cmd += ["--data", target.data, "-H", "Content-Type: application/json"]
    if target.params:
        cmd += ["-p", ",".join(target.params)]
    return cmd


def run_target(exe: Path, target: Target, base: str, token: str, mode: dict[str, Any], time_limit: int,
               workdir: Path, raw: Path, count_before, count_after, forbidden: dict[str, str]) -> Run:
    slug = re.sub(r"[^a-z0-9]+", "-", target.name.lower()).strip("-")
    outdir = workdir / "sqlmap" / slug
    outdir.mkdir(parents=True, exist_ok=True)
    traffic = raw / f"{slug}.traffic.txt"
    console_path = raw / f"{slug}.console.txt"
    cmd = sqlmap_command(exe, base, target, token, outdir, traffic, mode, time_limit)
    run = Run(target.name, target.kind, target.method, target.path.split("?")[0], target.what,
              expected="injectable" if target.kind == "control" else "not injectable")
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONIOENCODING": "utf-8", "NO_PROXY": "*", "no_proxy": "*"}
    before = count_before()
    t0 = time.perf_counter()
    with open(console_path, "wb") as out:
        try:
            r = subprocess.run(cmd, check=False, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                               cwd=workdir, timeout=time_limit + 60)
            run.sqlmap_exit = r.returncode
        except subprocess.TimeoutExpired:
            run.notes.append("sqlmap overran its time limit and was killed")
    run.duration_s = round(time.perf_counter() - t0, 1)
    run.time_limit_s = time_limit
    after = count_after()
    console = console_path.read_text(encoding="utf-8", errors="replace").replace(token, "<token>")
    console_path.write_text(console, encoding="utf-8")
    log_file = outdir / "127.0.0.1" / "log"
    log_text = log_file.read_text(encoding="utf-8", errors="replace") if log_file.exists() else ""
    if log_text.strip():
        (raw / f"{slug}.sqlmap-log.txt").write_text(log_text, encoding="utf-8")
    parsed = parse_sqlmap(console, log_text)
    labels = json_labels(target.data)
    for k in ("tested", "injectable", "discarded_candidates", "heuristic_hits"):
        parsed[k] = [labels.get(p, p) for p in parsed[k]]
    run.verdict = verdict_of(parsed)
    run.parameters_tested = parsed["tested"]
    run.injectable = parsed["injectable"]
    run.heuristic_hits = parsed["heuristic_hits"]
    run.techniques = parsed["techniques"]
    run.http_error_codes = parsed["http_error_codes"]
    run.warnings = parsed["warnings"]
    run.discarded_candidates = parsed["discarded_candidates"]
    if run.discarded_candidates:
        run.notes.append(f"sqlmap's false-positive check discarded a candidate on {', '.join(run.discarded_candidates)}")
    if traffic.exists():  # the token is dead with its server, but no file keeps it
        traffic.write_text(traffic.read_text(encoding="utf-8", errors="replace").replace(token, "<token>"),
                           encoding="utf-8")
    tr = read_traffic(traffic, forbidden if target.kind == "ontoos" else {})
    run.sqlmap_requests = tr["requests"]
    run.response_status = tr["status"]
    if target.kind == "ontoos":
        run.leaks, run.leak_examples = tr["leaks"], tr["leak_examples"]
    run.server_outcomes = _delta(after, before)
    if any(k.endswith(":EX412") for k in run.server_outcomes):
        run.notes.append("the server refused requests for the rate limit (EX412): those payloads were never tested")
    run.server_requests = sum(run.server_outcomes.values())
    if target.kind == "control":
        run.server_requests = run.server_outcomes.get("requests", 0)
        run.passed = run.verdict == "injectable" and any(p.split()[-1] == "name" for p in run.injectable)
    else:
        run.passed = (run.verdict == "not injectable" and bool(run.parameters_tested) and not run.leaks
                      and not tr["status"].get("500") and not any(k.endswith(":EX412") for k in run.server_outcomes))
    return run


# ---------------------------------------------------------------- main


def provenance() -> dict[str, Any]:
    """Which code was scanned: the commit, and whether src/ had changes not committed."""

    def git(*a: str) -> str:
        r = subprocess.run(["git", *a], check=False, cwd=ROOT, capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else ""

    dirty = git("status", "--porcelain", "--", "src")
    return {"commit": git("rev-parse", "HEAD") or None, "src_uncommitted_files": len(dirty.splitlines())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.security.sqlmap_scan", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="level 2, risk 1: about a minute")
    ap.add_argument("--sqlmap-venv", type=Path, help="reuse (or create) sqlmap's venv here instead of a temporary one")
    ap.add_argument("--sqlmap-spec", default="sqlmap", help="what pip installs (default: sqlmap)")
    ap.add_argument("--budget", type=int, help="seconds for all the sqlmap runs together (default: 900 full, 300 quick)")
    ap.add_argument("--direct", action="store_true",
                    help="scan the servers directly, without the proxies that blank exploration_id and elapsed_ms "
                         "(see normalizing_proxy.py): noisier, and sqlmap then skips tests after false candidates")
    ap.add_argument("--only", help="run only the targets whose name contains this text (the controls always run)")
    ap.add_argument("--results", type=Path, default=RESULTS, help=f"the JSON summary (default {RESULTS.relative_to(ROOT)})")
    ap.add_argument("--raw", type=Path, default=RAW,
                    help=f"where the raw output goes, replaced on each run (default {RAW.relative_to(ROOT)})")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (database, sqlmap output dirs)")
    args = ap.parse_args(argv)
    mode_name = "quick" if args.quick else "full"
    mode = dict(MODES[mode_name])
    if args.budget:
        mode["budget"] = args.budget

    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="ontoos-sqlmap-"))
    raw = args.raw.resolve()
    if raw.exists() and any(raw.iterdir()):
        if not (raw / MARK).exists():  # never wipe a folder this script did not make
            log(f"{raw} exists and was not made by this script: give --raw a new or empty folder")
            return 2
        shutil.rmtree(raw)
    raw.mkdir(parents=True, exist_ok=True)
    (raw / MARK).write_text("raw output of python -m tests.security.sqlmap_scan; replaced on each run\n")
    procs: list[Proc] = []
    proxies: list[Any] = []
    runs: list[Run] = []
    pg = None
    try:
        log(f"sqlmap scan ({mode_name}: level {mode['level']}, risk {mode['risk']}, "
            f"at most {mode['time_limit']} s per target and {mode['budget']} s in all), work dir {workdir}")
        t = time.perf_counter()
        exe, version = ensure_sqlmap(args.sqlmap_venv or workdir / "sqlmap-venv", args.sqlmap_spec)
        log(f"  sqlmap {version} ready in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        pg, dsn = start_database(workdir / "pg")
        log(f"  embedded PostgreSQL with the demo lakehouse ready in {time.perf_counter() - t:.1f} s")
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            control_name = conn.execute("SELECT name FROM lake.k8s_workloads WHERE NOT is_deleted "
                                        "ORDER BY workload_id LIMIT 1").fetchone()[0]
        token = "scan-" + secrets.token_urlsafe(24)
        ontoos = start_ontoos(dsn, token, workdir, raw)
        procs.append(ontoos)
        control = start_control(dsn, token, workdir, raw)
        procs.append(control)
        log(f"  ontoos serve on {ontoos.base} (pid {ontoos.proc.pid}), control on {control.base} "
            f"(pid {control.proc.pid})")
        base = {"ontoos": ontoos.base, "control": control.base}
        if not args.direct:
            from .normalizing_proxy import NormalizingProxy

            for kind, srv in (("ontoos", ontoos), ("control", control)):
                proxies.append(proxy := NormalizingProxy(srv.port))
                base[kind] = f"http://127.0.0.1:{proxy.port}"
            log(f"  sqlmap goes through the normalizing proxies {base['ontoos']} and {base['control']}")
        forbidden = {"the DSN": dsn, "the work dir": str(workdir), "the checkout": str(ROOT),
                     "the venv": sys.prefix}
        from psycopg.conninfo import conninfo_to_dict

        if (host := conninfo_to_dict(dsn).get("host") or "").startswith("/"):
            forbidden["the PostgreSQL socket dir"] = host

        deadline = time.monotonic() + mode["budget"]
        # the controls first: a scan that cannot find the planted injection proves nothing about the rest
        for target in sorted(targets(control_name), key=lambda t: t.kind != "control"):
            if args.only and args.only.lower() not in target.name.lower() and target.kind != "control":
                continue
            time_limit = int(min(mode["time_limit"], deadline - time.monotonic()))
            if time_limit < MIN_RUN_S:
                skipped = Run(target.name, target.kind, target.method, target.path.split("?")[0], target.what,
                              expected="injectable" if target.kind == "control" else "not injectable",
                              verdict="not run", notes=[f"the {mode['budget']} s budget of the whole scan ran out"])
                runs.append(skipped)
                log(f"- {target.name}: NOT RUN, the budget ran out")
                continue
            if target.kind == "ontoos":
                before, after = (lambda: settled_audit(dsn)), (lambda: settled_audit(dsn))
            else:
                before = after = (lambda c=control: control_counts(c))
            log(f"- {target.name}: {target.method} {target.path[:110]}")
            run = run_target(exe, target, base[target.kind], token, mode, time_limit, workdir, raw, before, after,
                             forbidden)
            runs.append(run)
            log(f"    {run.verdict} ({'PASS' if run.passed else 'FAIL'}, expected {run.expected}); "
                f"{len(run.parameters_tested)} parameters, {run.sqlmap_requests} requests sent, "
                f"{run.server_requests} seen by the server, {run.duration_s} s; statuses {run.response_status}")
            if run.injectable:
                log(f"    injectable: {', '.join(run.injectable)}")
            if run.leaks:
                log(f"    LEAKS in responses: {run.leaks}")
            for note in run.notes:
                log(f"    note: {note}")
    except (SetupError, serving.ServeError) as e:
        log(f"set-up failed: {e}")
        return 2
    finally:
        for proxy in proxies:
            proxy.stop()
        server_stderr = {}
        for p in procs:
            code = p.stop()
            text = p.stderr()
            server_stderr[p.name] = {
                "exit_code": code,
                "tracebacks": text.count("Traceback (most recent call last)"),
                "unhandled_errors": text.count("unhandled error"),
                "bytes": len(text.encode()),
            }
        if pg is not None:
            with contextlib.suppress(Exception):
                pg.cleanup()  # our handle is the only one: this stops PostgreSQL
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    duration = round(time.perf_counter() - started, 1)
    ok = bool(runs) and all(r.passed for r in runs) and any(r.kind == "control" for r in runs)
    ontoos_stderr = server_stderr.get("ontoos", {})
    if ontoos_stderr.get("tracebacks") or ontoos_stderr.get("unhandled_errors"):
        ok = False
    summary = {
        "generated_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "command": "python -m tests.security.sqlmap_scan" + (" --quick" if args.quick else ""),
        "mode": mode_name,
        "verdict": "pass" if ok else "fail",
        "duration_s": duration,
        "sqlmap": {"version": version, "level": mode["level"], "risk": mode["risk"], "technique": "BEUSTQ",
                   "dbms": "PostgreSQL", "time_sec": 2, "time_limit_per_target_s": mode["time_limit"],
                   "budget_s": mode["budget"], "threads": 1,
                   "through_normalizing_proxy": not args.direct},
        "code": provenance(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.system()},
        "totals": {
            "ontoos_requests_sent": sum(r.sqlmap_requests for r in runs if r.kind == "ontoos"),
            "ontoos_requests_audited": sum(r.server_requests for r in runs if r.kind == "ontoos"),
            "ontoos_parameters_tested": sum(len(r.parameters_tested) for r in runs if r.kind == "ontoos"),
            "control_requests_sent": sum(r.sqlmap_requests for r in runs if r.kind == "control"),
        },
        "server_stderr": server_stderr,
        "targets": [asdict(r) for r in runs],
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    log("")
    log(f"{'target':32} {'expected':15} {'verdict':15} {'params':>6} {'sent':>7} {'seen':>7} {'s':>6}")
    for r in runs:
        log(f"{r.name:32} {r.expected:15} {r.verdict:15} {len(r.parameters_tested):>6} {r.sqlmap_requests:>7} "
            f"{r.server_requests:>7} {r.duration_s:>6}  {'PASS' if r.passed else 'FAIL'}")
    log(f"server stderr: {server_stderr}")
    log(f"verdict: {summary['verdict'].upper()} in {duration} s; summary in {args.results}; raw output in {raw}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
