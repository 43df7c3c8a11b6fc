"""CLI, shared: output (JSON envelopes, tables), reading sources, settings, exit codes.

The settings (ontoos_explore/settings.py) are read once per run, by `main`
before the command: `--dsn`, `--contract`, `--role`, `--queries` and
`--config` override their variables, which override the defaults.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


EXIT_OK, EXIT_INTERNAL, EXIT_REJECTED = 0, 1, 2

def exit_code(error) -> int:
    """The exit code of the error's row: 2 when the caller's input was refused; 1 for anything else."""
    return error.error_code.exit

class UsageError(Exception):
    """A command line that cannot be read; rendered as an INVALID_REQUEST envelope."""

def default_contract() -> Path:
    from importlib import resources

    return Path(str(resources.files("ontoos_explore").joinpath("data/demo.yaml")))

def output_format(args) -> str:
    """--format, else a table on a terminal and JSON otherwise."""
    return getattr(args, "format", None) or ("table" if sys.stdout.isatty() else "json")


def emit_refusal(args, envelope: dict[str, Any]) -> None:
    """A refusal an answer carries, as `main` shows the ones it catches: at a terminal a sentence on
    stderr (`human.refusal_text`), else the envelope on stdout."""
    from . import _refuse

    _refuse(args, envelope)


def _emit(obj: Any) -> None:
    indent = 2 if sys.stdout.isatty() else None
    sys.stdout.write(json.dumps(obj, indent=indent, ensure_ascii=False, default=str) + "\n")

def _envelope_for_usage(message: str) -> dict[str, Any]:
    from ..errors import Codes, InputError

    return InputError(Codes.INVALID_REQUEST, message, hint="ontoos COMMAND --help lists the options").to_envelope()

def _table(rows: list[list[Any]], headers: list[str]) -> str:
    cells = [headers] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------- commands

FLAGS = ("dsn", "contract", "role", "queries", "config")  # the settings a command line may give


def read_settings(args):
    """The run's settings: its flags over the environment over the defaults (SettingError, EX907)."""
    from ..settings import read

    return read(**{name: getattr(args, name, None) for name in FLAGS})

def _settings(args):
    """The settings `main` read for this run (read here, once, for a caller that did not)."""
    settings = getattr(args, "settings", None)
    if settings is None:
        settings = args.settings = read_settings(args)
    return settings

def _load(args) -> Any:
    from ..contract import load_contract

    args.loaded = load_contract(_settings(args).contract or default_contract())  # its _notice stamps refusals
    return args.loaded

def _role(args) -> str:
    role = _settings(args).role
    if not role:
        raise UsageError("--role is required (or set ONTOOS_ROLE)")
    return role

def _read_file(path: str) -> str:
    """A -f/--file argument's text: `-` is stdin; an unreadable file is a usage error."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None


def _read_source(args) -> Any:
    from ..errors import Codes, InputError
    from ..grammar.forms import from_flags, loads_strict

    if args.query is not None:
        return args.query
    if args.json is not None:
        body = loads_strict(args.json)
        if not isinstance(body, dict):
            raise InputError(Codes.INVALID_REQUEST, "--json must be a JSON object",
                             hint='e.g. {"dataset": "...", "fields": ["..."]}, or {"query": "<text form>"}')
        return body
    if args.file is not None:
        text = _read_file(args.file)
        return loads_strict(text) if text.lstrip().startswith("{") else text
    if args.dataset is not None:
        return from_flags(args.dataset, args.fields, args.filter, args.relation, args.group_by, args.order_by, args.limit)
    raise UsageError("give the exploration with -q TEXT, -f FILE, --json JSON, or --dataset and --fields")

def cli_principal() -> str:
    """Who asks from the CLI (its audit events, its promotions, its requests and cursors): the user
    running it, or "cli" when this uid has no name."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no name for this uid
        return "cli"


def _audit_cli(settings, dsn: str, contract, answer, role: str, source) -> None:
    """The CLI is a surface too: one event per run, written before exit."""
    if not settings.audit:
        return
    from ..governance.audit import event_for, record_sync

    event = event_for(answer, principal=cli_principal(), role=role, surface="cli", source=source,
                      contract=contract)
    try:
        record_sync(settings.audit_dsn or dsn, [event])
    except Exception:  # the answer still stands; say so on stderr, not stdout
        sys.stderr.write("ontoos: the audit store is unavailable; this run was not recorded\n")

def render_result(env: dict[str, Any]) -> str:
    """A result envelope as a readable table, with the meta that matters below it."""
    data, meta = env["data"], env["meta"]
    lines = [_table(data["rows"], data["columns"])]
    more = " (truncated: more rows exist)" if meta["truncated"] else ""
    lines.append(f"{meta['rows']} row{'s' if meta['rows'] != 1 else ''}{more}, {meta['elapsed_ms']:.1f} ms")
    lines += [f"note: {n}" for n in meta["notes"]]
    if meta["masked_columns"]:
        lines.append("masked: " + ", ".join(meta["masked_columns"]))
    if meta.get("evidence"):
        lines.append(describe_evidence(meta["evidence"]))
    return "\n".join(lines)


def describe_evidence(ev: dict[str, Any]) -> str:
    """`meta.evidence` in one line: as of when, how old against the threshold, which batches."""
    f = ev["freshness"]
    if f["class"] == "unknown":
        return f"evidence: freshness unknown ({f.get('unknown_because', 'no evidence')})"
    verdict = "fresh" if f["fresh"] else "STALE"
    when = (f"collected {ev['collected_at']}" if f["class"] == "exact"
            else f"estimated from publish times (no collection time from {', '.join(f.get('estimated_from', []))})")
    batches = ", ".join(f"{s} {b}" for s, b in ev["source_batch"].items())
    read = "read with the rows" if ev["consistency"] == "fixed_read" else "not read with the rows"
    return (f"evidence: {when}; {_hours(f['age_seconds'])} old, {verdict} (threshold {_hours(f['threshold_seconds'])}); "
            f"batches {batches} ({read})")


def _hours(seconds: int) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds // 60} min"

def _registry_file(args) -> Path:
    """The registry file: --queries, else ONTOOS_QUERIES, else queries.yaml (the servers' default too)."""
    return _settings(args).queries


def _registry(args):
    """The registry's store (`store.store_for`): the registry file, read as the shipped demo registry on
    the demo contract until it is written."""
    from ..governance.store import store_for
    from ..governance.store_db import registry_dsn

    settings = _settings(args)
    return store_for(settings.queries, settings.contract, registry_dsn(settings))


def _require(args):
    """--max-age and --consistency -> a Require (None when neither is given); checked as the JSON form's."""
    from ..require import read

    asked = {k: v for k, v in (("max_age_s", args.max_age), ("consistency", args.consistency)) if v is not None}
    return read(asked) if asked else None


def _params(items: list[str]) -> dict[str, str]:
    """-p NAME=VALUE flags -> the named query's parameters (their text: the registry types them)."""
    params = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"-p takes NAME=VALUE, not {item!r}")
        params[name] = value
    return params


def _with_explorer(contract, settings, work):
    """`await work(explorer)` on the database the settings name (the embedded one by default), the
    contract compared with it first: (its result, the DSN, for the audit)."""
    import asyncio

    from ..runtime import open_explorer, resolve_dsn

    dsn = resolve_dsn(settings, contract)

    async def go():
        async with open_explorer(contract, settings, dsn) as explorer:
            return await work(explorer)

    return asyncio.run(go()), dsn
