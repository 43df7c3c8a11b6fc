"""CLI, checking the deployment: `ontoos doctor` and `ontoos stats freshness`."""

from __future__ import annotations

import sys

from .common import EXIT_OK, UsageError, _emit, _read_file, _role, _settings, _table, default_contract, output_format

MARK = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def cmd_doctor(args) -> int:
    import asyncio

    from ..doctor import diagnose, exit_code

    settings = _settings(args)
    token = None
    if args.token_file:
        if not args.server:
            raise UsageError("--token-file goes with --server URL")
        token = _read_file(args.token_file).strip()
    path = settings.contract or default_contract()
    checks = asyncio.run(diagnose(path, settings, args.server, token))
    code = exit_code(checks)
    if args.json or not sys.stdout.isatty():
        _emit({"ok": code == 0, "exit": code, "checks": [c.to_json() for c in checks]})
    else:
        _print_checks(checks, code)
    for check in checks:
        if check.name == "server" and check.details:
            warn_if_outdated((check.details[0].get("notice") or {}).get("min_cli_version"))
    return code


def _print_checks(checks, code: int) -> None:
    for c in checks:
        print(f"{MARK[c.status]:<5} {c.name:<10} {c.summary}")
        for d in c.details if c.status in ("warn", "fail") else ():
            if d.get("fresh") is not True and d.get("status") != "ok":  # what is wrong, not what is fine
                print("      " + _detail(d))
    failed = sum(c.status == "fail" for c in checks)
    print(f"\n{failed} check(s) failed; exit {code}" if failed else "\nno problems found; exit 0")


def _detail(d: dict) -> str:
    if "place" in d:
        return f"{d['where'] or d['place']}: {d['place']}: {d['message']}"
    if "dataset" in d:
        fresh = "fresh" if d.get("fresh") else "STALE" if d.get("fresh") is False else "unknown"
        why = d.get("unknown_because") or (f"{d['age_seconds'] / 3600:.1f} h old, threshold "
                                           f"{(d['threshold_seconds'] or 0) / 3600:.1f} h")
        return f"{d['dataset']}: {d['class']}, {fresh} ({why})"
    if "id" in d:
        return f"{d['id']}: {d['status']}" + (f": {d['problem']}" if d.get("problem") else "")
    return ", ".join(f"{k}={v}" for k, v in d.items())


def warn_if_outdated(minimum: str | None) -> None:
    """As a client of a server: warn (never fail) when this CLI is older than it expects."""
    from .. import __version__

    if minimum and _version(__version__) < _version(minimum):
        sys.stderr.write(f"ontoos: warning: this CLI is {__version__}, older than the server expects "
                         f"(min_cli_version {minimum}); upgrade ontoos-explore\n")


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def cmd_stats(args) -> int:
    from ..stats import freshness
    from .common import _load, _with_explorer

    contract = _load(args)
    role = _role(args)
    async def work(explorer):
        return await freshness(explorer, role), explorer.lake.notice_for(role)

    (data, notice), _ = _with_explorer(contract, _settings(args), work)
    fmt = output_format(args)
    if fmt == "json":
        _emit({"ok": True, "data": data, "meta": {"contract_hash": contract.hash}, "_notice": notice})
        return EXIT_OK
    rows = []
    for d in data["datasets"]:
        fresh = d["evidence"]["freshness"]
        state = {True: "fresh", False: "STALE", None: "unknown"}[fresh["fresh"]]
        age = "" if fresh["age_seconds"] is None else f"{fresh['age_seconds'] / 3600:.1f} h"
        batches = ", ".join(f"{s} {b}" for s, b in d["evidence"]["source_batch"].items())
        threshold = "" if fresh["threshold_seconds"] is None else f"{fresh['threshold_seconds'] / 3600:.1f} h"
        rows.append([d["name"], fresh["class"], age, threshold, state,
                     d["evidence"]["collected_at"] or "", batches or fresh.get("unknown_because", "")])
    print(_table(rows, ["dataset", "class", "age", "threshold", "state", "collected_at", "batches"]))
    return EXIT_OK
