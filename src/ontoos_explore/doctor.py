"""Doctor: a deployment checked end to end -> a list of `Check`s (ok, warn, fail, skip), each with its details.

    checks = await diagnose(contract_path, settings, server="http://127.0.0.1:8765", token="...")
    exit_code(checks)   # 0 clean (warnings allowed), 2 a check failed

In order: the contract (loads, its hash); the database (reachable, version,
primary or standby and a standby's replay lag); drift (each finding with its
place in the contract file); the query roles and their grants (against what
`ontoos grants` makes); the publish log and each dataset's freshness (stale
or unknown is a warning: it is the lake's state, not the service's); the
registry (every entry guard-verified on load, then EXPLAINed as a role that
may run it, with its parameters' examples); and with a server URL, the
server's health and whether the token is accepted. A check that cannot run
because an earlier one failed is skipped, saying why.
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from . import drift as drift_
from .contract import Contract, load_contract
from .engine.executor import REPLAY_LAG
from .engine.settings import Settings
from .errors import ContractError, ExploreError
from .evidence import render, spec_for
from .names import fold

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
GRANT_KINDS = ("missing_role", "grant_missing", "grant_extra")


@dataclass
class Check:
    name: str
    status: str
    summary: str
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "summary": self.summary, "details": self.details}


def exit_code(checks: list[Check]) -> int:
    return 2 if any(c.status == FAIL for c in checks) else 0


async def diagnose(contract_path: Path, settings: Settings, server: str | None = None,
                   token: str | None = None) -> list[Check]:
    checks: list[Check] = []
    try:
        contract = load_contract(contract_path)
    except ContractError as e:
        checks.append(Check("contract", FAIL, "the contract does not load", [{"message": m} for m in
                                                                            e.message.splitlines()]))
        return checks + _skipped("the contract does not load", server)
    checks.append(Check("contract", OK, f"{contract_path}: {len(contract.datasets)} datasets, {len(contract.roles)} "
                                        f"roles, hash {contract.hash}", [{"hash": contract.hash}]))
    try:
        dsn = settings.dsn or _embedded(settings, contract)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            catalog, found = await drift_.inspect(conn, contract, settings)
            lag = (await (await conn.execute(REPLAY_LAG)).fetchone())[0]
            checks += [_database(catalog, lag), _drift(found), _grants(found, settings)]
            try:
                checks.append(await _freshness(conn, contract, found))
            except psycopg.Error as e:  # the log is there but fails to read (a view that errors, a timeout)
                checks.append(Check("freshness", FAIL, "the publish log fails to read",
                                    [{"sqlstate": getattr(e, "sqlstate", None) or type(e).__name__}]))
    except (psycopg.Error, OSError, ExploreError) as e:
        checks.append(Check("database", FAIL, "the database cannot be reached", [{"error": type(e).__name__}]))
        return checks + _skipped("the database cannot be reached", server)[1:]
    checks.append(await _registry(contract, settings, dsn, found))
    checks.append(_spool(settings, dsn))
    if server is not None:
        checks.append(_server(server, token))
    return checks


def _spool(settings: Settings, dsn: str) -> Check:
    """Audit events left on this machine's disk by server processes that ended before writing them."""
    from .governance.audit.spool import directory_for, waiting

    if not settings.audit or settings.audit_spool is None:
        return Check("spool", SKIP, "the audit or its spool is off (ONTOOS_AUDIT, ONTOOS_AUDIT_SPOOL)")
    directory = directory_for(settings.audit_spool, settings.audit_dsn or dsn)
    left = [{"owner": owner, "events": n} for owner, n, alive in waiting(directory) if not alive and n]
    running = sum(1 for _, _, alive in waiting(directory) if alive)
    if not left:
        return Check("spool", OK, f"no audit events wait on this machine's disk ({running} server processes "
                                  "spooling now)", [{"directory": str(directory)}])
    events = sum(d["events"] for d in left)
    return Check("spool", WARN, f"{events} audit events left by {len(left)} ended server processes wait in "
                                f"{directory}: the next server to start on this machine writes them", left)


def _skipped(why: str, server: str | None) -> list[Check]:
    names = ["database", "drift", "grants", "freshness", "registry"] + (["server"] if server else [])
    return [Check(n, SKIP, f"not checked: {why}") for n in names]


def _embedded(settings: Settings, contract: Contract) -> str:
    from .runtime import prepare_embedded

    return prepare_embedded(settings, contract)


def _database(catalog, lag: float | None) -> Check:
    role = "standby" if catalog.standby else "primary"
    detail: dict[str, Any] = {"version": catalog.version, "standby": catalog.standby}
    if catalog.standby:
        detail["replay_lag_s"] = None if lag is None else round(float(lag), 3)
    text = f"PostgreSQL {catalog.version}, {role}" + (f", replaying {float(lag):.1f} s behind" if lag else "")
    return Check("database", OK, text, [detail])


def _drift(found) -> Check:
    findings = [f.to_json() for f in found.findings if f.kind not in GRANT_KINDS + ("publish_log",)]
    if not findings:
        return Check("drift", OK, "every table, column and type the contract names is there")
    degraded = (f"{len(found.datasets)} dataset(s), {len(found.columns)} column(s), {len(found.relations)} "
                "relation(s) degraded")
    return Check("drift", FAIL, f"{len(findings)} finding(s): {degraded}", findings)


def _grants(found, settings: Settings) -> Check:
    if not settings.query_roles:
        return Check("grants", SKIP, "query roles are off (ONTOOS_QUERY_ROLES): nothing to compare")
    findings = [f.to_json() for f in found.findings if f.kind in GRANT_KINDS]
    if not findings:
        return Check("grants", OK, "each query role exists and reads exactly what ontoos grants gives it")
    return Check("grants", FAIL, f"{len(findings)} role(s) or grant(s) differ: run ontoos grants --apply", findings)


async def _freshness(conn, contract: Contract, found) -> Check:
    log_findings = [f.to_json() for f in found.findings if f.kind == "publish_log"]
    if contract.evidence is None:
        return Check("freshness", WARN, "the contract names no publish log: every answer's freshness is unknown")
    if log_findings:
        return Check("freshness", WARN, "the publish log cannot be read: answers say their freshness is unknown",
                     log_findings)
    from .engine.publish_log import batches, current_batches_sql

    everything = frozenset(fold(name) for name in contract.datasets)
    specs = {ds.name: spec_for(contract, [ds], everything) for ds in contract.datasets.values()}
    sources = tuple(sorted({s for spec in specs.values() for s in spec.sources}))
    cur = psycopg.AsyncRawCursor(conn)
    await cur.execute(current_batches_sql(contract.evidence.schema_name, contract.evidence.table_name, sources))
    current = batches(await cur.fetchall())
    now = dt.datetime.now(dt.timezone.utc)
    details, worry = [], 0
    for name, spec in sorted(specs.items()):
        ev = render(spec, current, consistent=False, now=now)
        fresh = ev["freshness"]
        details.append({"dataset": name, **fresh, "source_batch": ev["source_batch"]})
        worry += fresh["fresh"] is not True
    if not worry:
        return Check("freshness", OK, f"{len(details)} datasets, each within its freshness threshold", details)
    return Check("freshness", WARN, f"{worry} of {len(details)} datasets stale or of unknown freshness", details)


async def _registry(contract: Contract, settings: Settings, dsn: str, found) -> Check:
    from .engine.executor import Executor
    from .engine.pool import open_pool
    from .governance.registry import Registry
    from .governance.store import RegistryFileError
    from .governance.store_db import DatabaseStore, registry_dsn

    database = registry_dsn(settings)
    path = settings.queries if database is None else DatabaseStore(database).path
    if database is None and (path is None or not Path(path).is_file()):
        return Check("registry", SKIP, f"no registry file ({path}): no named queries to check")
    try:
        registry = Registry.load(path if database is None else DatabaseStore(database), contract)
    except RegistryFileError as e:
        return Check("registry", FAIL, f"{path} cannot be read", [{"message": e.message}])
    details: list[dict[str, Any]] = [{"id": i, "status": "invalid", "problem": p} for i, p in registry.problems]
    lake = drift_.LakeState(contract, drift=found)
    pool = await open_pool(dsn, settings)
    try:
        executor = Executor(pool, settings)
        for entry in registry.entries.values():
            details.append(await _explain(contract, registry, executor, lake, entry))
    finally:
        await pool.close()
    bad = [d for d in details if d["status"] not in ("ok", "unchecked")]
    unchecked = [d for d in details if d["status"] == "unchecked"]
    summary = (f"{len(registry.entries)} entries verified, {len(registry.entries) - len(unchecked)} EXPLAINed"
               + (f", {len(bad)} with problems" if bad else "") + (f", {len(unchecked)} without examples"
                                                                    if unchecked else ""))
    return Check("registry", FAIL if bad else WARN if unchecked else OK, summary, details)


async def _explain(contract: Contract, registry, executor, lake, entry) -> dict[str, Any]:
    """EXPLAIN one entry as the first role that may run it, with each parameter's first example (its
    default where it has none: what a caller leaving it out asks)."""
    role = next((r for r in contract.roles.values()
                 if entry in registry.visible(r.name, ("approved", "pending"))), None)
    if role is None:
        return {"id": entry.id, "status": "unreadable", "problem": "no role may read every dataset it reads"}
    missing = [p.name for p in entry.parameters if p.required and not p.examples and p.default is None]
    if missing:
        return {"id": entry.id, "status": "unchecked", "problem": f"no example for {', '.join(missing)} to EXPLAIN with"}
    params = {p.name: p.examples[0] for p in entry.parameters if p.examples}
    try:
        q = registry.compiled(role.name, entry.id, params, ("approved", "pending"))
        refused = lake.refusal(q)
        if refused is not None:
            raise refused
        out = await executor.run(q, dry_run=True)
    except ExploreError as e:
        return {"id": entry.id, "status": "failed", "role": role.name, "code": e.code, "problem": e.message}
    from .service import cost_class

    return {"id": entry.id, "status": "ok", "role": role.name, "entry_status": entry.status,
            "cost_class": cost_class(out.cost, q.plan.max_cost)}


def _server(url: str, token: str | None) -> Check:
    """The server's /healthz and /readyz, and whether `token` is accepted (GET /api/v1/catalog)."""
    base = url.rstrip("/")
    details: dict[str, Any] = {"url": base}
    try:
        health = _get(f"{base}/healthz")[1]
        status, ready = _get(f"{base}/readyz")
    except (urllib.error.URLError, OSError, ValueError) as e:
        return Check("server", FAIL, f"{base} does not answer", [{"url": base, "error": type(e).__name__}])
    details.update(ready=ready.get("ready"), drift=ready.get("drift"), notice=health.get("_notice"))
    problems = [] if status == 200 else [f"not ready ({status})"]
    if token is not None:
        accepted = _get(f"{base}/api/v1/catalog", token)[0]
        details["token_accepted"] = accepted == 200
        if accepted != 200:
            problems.append(f"the token is refused ({accepted})")
    text = "; ".join(problems) or f"alive and ready (contract {health.get('contract_hash')})"
    return Check("server", FAIL if problems else OK, text, [details])


def _get(url: str, token: str | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"{}")
        except ValueError:
            return e.code, {}
