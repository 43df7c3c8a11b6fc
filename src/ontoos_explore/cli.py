"""CLI surface: `ontoos` -> the Python API, answers as JSON envelopes or tables.

Exit codes: 0 ok, 2 rejected (the caller's input), 1 anything else. Bad input
never prints a traceback; set ONTOOS_DEBUG=1 to see one for internal errors.
Heavy imports happen after the arguments are parsed, so `--help` is fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

EXIT_OK, EXIT_INTERNAL, EXIT_REJECTED = 0, 1, 2


def exit_code(error) -> int:
    """2 when the caller's input was refused; 1 for anything else (the database, a bug)."""
    return EXIT_REJECTED if error.type in ("validation", "policy", "auth") else EXIT_INTERNAL


class UsageError(Exception):
    """A command line that cannot be read; rendered as an INVALID_REQUEST envelope."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def default_contract() -> Path:
    from importlib import resources

    return Path(str(resources.files("ontoos_explore").joinpath("data/demo.yaml")))


def _contract_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--contract", metavar="PATH", help="contract YAML (default: $ONTOOS_CONTRACT, else the demo contract)")


def _role_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", help="contract role to act as (default: $ONTOOS_ROLE)")


def _format_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("json", "table"), help="output format (default: table on a terminal, else json)")


def _source_args(c: argparse.ArgumentParser) -> None:
    src = c.add_mutually_exclusive_group()
    src.add_argument("-q", "--query", metavar="TEXT", help="the exploration in text form")
    src.add_argument("-f", "--file", metavar="FILE", help="a file (or - for stdin) holding the text form or a JSON object")
    src.add_argument("--json", metavar="JSON", help="the exploration in JSON form")
    src.add_argument("--dataset", help="flag form: the dataset to explore")
    c.add_argument("--fields", action="append", default=[], metavar="F[,F...]", help="flag form: fields (repeatable)")
    c.add_argument("--filter", action="append", default=[], metavar="PRED", help="flag form: a filter, k=v or a predicate (repeatable, ANDed)")
    c.add_argument("--relation", action="append", default=[], metavar="R", help="flag form: a relation to follow (repeatable)")
    c.add_argument("--group-by", action="append", default=[], metavar="REF", help="flag form: group by (repeatable)")
    c.add_argument("--order-by", action="append", default=[], metavar="KEY", help="flag form: order key, -key for descending (repeatable)")
    c.add_argument("--limit", type=int, help="flag form: the most rows to return")


def _dsn_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dsn", help="PostgreSQL to use (default: $ONTOOS_DSN, else the embedded server)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ontoos", description="Guarded exploration of a governed lakehouse.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("compile", help="compile an exploration to SQL without running it",
                       description="Compile an exploration (text, JSON or flag form) to PostgreSQL SQL with $n parameters.")
    _contract_arg(c)
    _role_arg(c)
    _source_args(c)

    x = sub.add_parser("explore", help="run an exploration and print the rows",
                       description="Run an exploration (text, JSON or flag form) read-only on PostgreSQL.")
    _contract_arg(x)
    _role_arg(x)
    _source_args(x)
    _dsn_arg(x)
    _format_arg(x)
    x.add_argument("--dry-run", action="store_true", help="plan only: what would be read, and the cost estimate")

    r = sub.add_parser("grants", help="print (or apply) the database roles and column grants of the contract",
                       description="One NOLOGIN role per contract role, with SELECT on exactly its allowed columns.")
    _contract_arg(r)
    _dsn_arg(r)
    r.add_argument("--apply", action="store_true", help="run the statements (default: print them)")

    k = sub.add_parser("catalog", help="list what a role may read",
                       description="List the datasets a role may read, or describe one of them.")
    _contract_arg(k)
    _role_arg(k)
    _format_arg(k)
    k.add_argument("dataset", nargs="?", help="describe this dataset")

    g = sub.add_parser("check-sql", help="verify hand-written SQL with the guard",
                       description="Run the guard on SQL (e.g. a named query) against a read set of the contract. "
                                   "Prints the verdict as JSON; exit 0 allowed, 2 refused.")
    _contract_arg(g)
    g.add_argument("--read-set", action="append", required=True, metavar="NAME",
                   help="read set whose datasets may be read (repeatable)")
    g.add_argument("--max-rows", type=int, metavar="N",
                   help="row budget: LIMIT must be at most N+1 (default: the largest max_rows of any role)")
    g.add_argument("--params", type=int, metavar="N", help="number of $n parameters that will be bound (default: any, without gaps)")
    g.add_argument("file", nargs="?", default="-", metavar="FILE", help="file holding the SQL, or - for stdin (default)")

    v = sub.add_parser("serve", help="serve MCP (stdio or streamable HTTP) and the HTTP API",
                       description="Serve the tools over MCP on stdio, or MCP plus the REST API over HTTP.")
    how = v.add_mutually_exclusive_group(required=True)
    how.add_argument("--stdio", action="store_true", help="MCP on stdin/stdout, for one caller (--role or --principal)")
    how.add_argument("--http", metavar="HOST:PORT", help="MCP at /mcp and the API at /api/v1, with bearer tokens")
    _contract_arg(v)
    _dsn_arg(v)
    v.add_argument("--config", metavar="FILE", help="server configuration: principals and token hashes (default: $ONTOOS_CONFIG)")
    v.add_argument("--role", help="stdio: the contract role to serve as")
    v.add_argument("--principal", help="stdio: a principal of --config to serve as")
    v.add_argument("--queries", metavar="FILE", help="named-query registry YAML (default: $ONTOOS_QUERIES)")

    a = sub.add_parser("audit", help="governance report from the audit trail",
                       description="Rejections by subtype, dataset, column, principal and day; recent rejections; "
                                   "recurring explorations; promotion candidates.")
    _dsn_arg(a)
    _contract_arg(a)
    _format_arg(a)
    a.add_argument("--days", type=int, default=14, help="time window in days (default: 14)")
    a.add_argument("--dataset", help="only this dataset")
    a.add_argument("--subtype", help="only this error subtype")
    a.add_argument("--queries", metavar="FILE", help="registry YAML: its fingerprints are no longer candidates")

    m = sub.add_parser("promote", help="turn a recurring exploration into a pending named query",
                       description="Write the fingerprint's exploration into the registry as a named query "
                                   "(status pending), after the guard has verified its SQL.")
    _dsn_arg(m)
    _contract_arg(m)
    m.add_argument("fingerprint")
    m.add_argument("--id", required=True, help="the named query's id")
    m.add_argument("--title", required=True)
    m.add_argument("--description", default="")
    m.add_argument("--queries", metavar="FILE", help="registry YAML (default: $ONTOOS_QUERIES, else queries.yaml)")

    n = sub.add_parser("queries", help="named queries: list, show, run, approve")
    n.add_argument("action", choices=("list", "show", "run", "approve"))
    n.add_argument("id", nargs="?")
    n.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help="run: a parameter (repeatable)")
    n.add_argument("--queries", metavar="FILE", help="registry YAML (default: $ONTOOS_QUERIES, else queries.yaml)")
    _contract_arg(n)
    _role_arg(n)
    _dsn_arg(n)
    _format_arg(n)

    d = sub.add_parser("demo", help="run example explorations on the embedded demo lakehouse",
                       description="Start the embedded PostgreSQL, load the demo lakehouse if needed, and run "
                                   "example explorations: joins, aggregates, a clamp note, and refusals.")
    _contract_arg(d)
    _dsn_arg(d)
    d.add_argument("--role", default="analyst", help="role to act as (default: analyst)")
    d.add_argument("--load", action="store_true", help="with --dsn: (re)load the demo lakehouse there (drops schema lake)")
    return parser


# ---------------------------------------------------------------- output


def _emit(obj: Any) -> None:
    indent = 2 if sys.stdout.isatty() else None
    sys.stdout.write(json.dumps(obj, indent=indent, ensure_ascii=False, default=str) + "\n")


def _envelope_for_usage(message: str) -> dict[str, Any]:
    from .errors import Codes, InputError

    return InputError(Codes.INVALID_REQUEST, message, hint="ontoos COMMAND --help lists the options").to_envelope()


def _table(rows: list[list[Any]], headers: list[str]) -> str:
    cells = [headers] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------- commands


def _load(args) -> Any:
    from .contract import load_contract

    path = args.contract or os.environ.get("ONTOOS_CONTRACT") or default_contract()
    return load_contract(path)


def _role(args) -> str:
    role = args.role or os.environ.get("ONTOOS_ROLE")
    if not role:
        raise UsageError("--role is required (or set ONTOOS_ROLE)")
    return role


def _read_source(args) -> Any:
    from .errors import Codes, InputError
    from .grammar.forms import from_flags, loads_strict

    if args.query is not None:
        return args.query
    if args.json is not None:
        body = loads_strict(args.json)
        if not isinstance(body, dict):
            raise InputError(Codes.INVALID_REQUEST, "--json must be a JSON object",
                             hint='e.g. {"dataset": "...", "fields": ["..."]}, or {"query": "<text form>"}')
        return body
    if args.file is not None:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            try:
                text = Path(args.file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise UsageError(f"cannot read {args.file}: {getattr(e, 'strerror', None) or e}")
        return loads_strict(text) if text.lstrip().startswith("{") else text
    if args.dataset is not None:
        return from_flags(args.dataset, args.fields, args.filter, args.relation, args.group_by, args.order_by, args.limit)
    raise UsageError("give the exploration with -q TEXT, -f FILE, --json JSON, or --dataset and --fields")


def cmd_compile(args) -> int:
    from .pipeline import compile_exploration

    contract = _load(args)
    role = _role(args)
    compiled = compile_exploration(_read_source(args), contract, role)
    _emit(compiled.to_json())
    return EXIT_OK


def cmd_catalog(args) -> int:
    from .catalog import describe_dataset, list_datasets

    contract = _load(args)
    role = _role(args)
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    if args.dataset:
        info = describe_dataset(contract, role, args.dataset)
        if fmt == "json":
            _emit({"ok": True, "data": info, "meta": {"contract_hash": contract.hash}})
            return EXIT_OK
        print(f"{info['name']}: {info['description']}")
        flags = [f"max_rows {info['max_rows']}"] + (["heavy: needs a filter"] if info["heavy"] else [])
        print(", ".join(flags) + "\n")
        print(_table([[c["name"], c["type"], c.get("description", ""), ", ".join(c.get("values", []))]
                      for c in info["columns"]], ["column", "type", "description", "values"]))
        if info["relations"]:
            print()
            print(_table([[r["name"], r["to"], r["cardinality"], r.get("note", "")] for r in info["relations"]],
                         ["relation", "to", "cardinality", "note"]))
        return EXIT_OK
    info = list_datasets(contract, role)
    if fmt == "json":
        _emit({"ok": True, "data": info, "meta": {"contract_hash": contract.hash}})
        return EXIT_OK
    print(_table([[d["name"], "yes" if d["heavy"] else "", d["max_rows"], d["description"]] for d in info["datasets"]],
                 ["dataset", "heavy", "max_rows", "description"]))
    return EXIT_OK


def cmd_check_sql(args) -> int:
    from .allowed import allowed_for_read_sets
    from .errors import BindError, Codes
    from .guard import check
    from .names import did_you_mean, fold

    contract = _load(args)
    known = {fold(k) for k in contract.read_sets}
    for name in args.read_set:
        if fold(name) not in known:
            hint, _ = did_you_mean(name, contract.read_sets, "read sets")
            raise BindError(Codes.UNKNOWN_READ_SET, f"'{name}' is not a read set of this contract", hint=hint)
    if args.file == "-":
        sql = sys.stdin.read()
    else:
        try:
            sql = Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read {args.file}: {getattr(e, 'strerror', None) or e}")
    max_rows = args.max_rows if args.max_rows is not None else max(r.max_rows for r in contract.roles.values())
    verdict = check(sql, allowed_for_read_sets(contract, args.read_set, max_rows), args.params)
    out = verdict.to_json(sql)
    out["meta"] = {"read_sets": args.read_set, "max_rows": max_rows, "contract_hash": contract.hash}
    _emit(out)
    return EXIT_OK if verdict.ok else EXIT_REJECTED


def _settings(args):
    from .engine.settings import Settings

    return Settings.from_env(dsn=getattr(args, "dsn", None))


def cmd_explore(args) -> int:
    import asyncio

    from .runtime import open_explorer, resolve_dsn

    contract = _load(args)
    role = _role(args)
    source = _read_source(args)
    settings = _settings(args)
    dsn = resolve_dsn(settings, contract)

    async def go():
        async with open_explorer(contract, settings, dsn) as explorer:
            return await explorer.explore(source, role, dry_run=args.dry_run)

    answer = asyncio.run(go())
    _audit_cli(settings, dsn, contract, answer, role, source)
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json" or not answer.ok or args.dry_run:
        _emit(answer.envelope)
    else:
        print(render_result(answer.envelope))
    return EXIT_OK if answer.ok else exit_code(answer.error)


def _audit_cli(settings, dsn: str, contract, answer, role: str, source) -> None:
    """The CLI is a surface too: one event per run, written before exit."""
    if not settings.audit:
        return
    import getpass

    from .governance.audit import event_for, record_sync

    event = event_for(answer, principal=f"cli:{getpass.getuser()}", role=role, surface="cli", source=source,
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
    return "\n".join(lines)


def cmd_grants(args) -> int:
    from .engine import grants

    contract = _load(args)
    settings = _settings(args)
    if not args.apply:
        sys.stdout.write(grants.script(contract, settings.role_prefix))
        return EXIT_OK
    import psycopg

    from .runtime import prepare_embedded

    dsn = settings.dsn or prepare_embedded(settings, contract)
    with psycopg.connect(dsn) as conn:
        roles = grants.apply(conn, contract, settings.role_prefix)
    _emit({"ok": True, "applied": roles, "contract_hash": contract.hash})
    return EXIT_OK


def cmd_serve(args) -> int:
    from .errors import ExploreError
    from .governance.registry import Registry
    from .server.config import ServerConfig, load_config
    from .server.run import log_to_stderr, registry_path

    log_to_stderr()
    contract = _load(args)
    settings = _settings(args)
    config_path = args.config or os.environ.get("ONTOOS_CONFIG")
    config = load_config(config_path, contract) if config_path else ServerConfig()
    registry = Registry.load(registry_path(args.queries), contract)
    for ident, problem in registry.problems:
        sys.stderr.write(f"ontoos: named query {ident} skipped: {problem}\n")
    if args.stdio:
        try:
            return _serve_stdio(args, contract, settings, config, registry)
        except (ExploreError, UsageError) as e:  # stdout is the protocol channel: diagnostics go to stderr
            env = e.to_envelope() if isinstance(e, ExploreError) else _envelope_for_usage(str(e))
            sys.stderr.write(json.dumps(env) + "\n")
            return exit_code(e) if isinstance(e, ExploreError) else EXIT_REJECTED
    return _serve_http(args, contract, settings, config, registry)


def _serve_stdio(args, contract, settings, config, registry) -> int:
    import asyncio

    from .runtime import resolve_dsn
    from .server.config import Authenticator, Principal
    from .server.run import run_stdio

    if args.principal:
        principal = Authenticator(config, contract).by_name(args.principal)
        if principal is None:
            raise UsageError(f"--principal {args.principal} is not in the server configuration")
    else:
        from .pipeline import resolve_role

        role = resolve_role(contract, args.role or os.environ.get("ONTOOS_ROLE") or _role(args))
        principal = Principal("stdio", role.name)
    dsn = resolve_dsn(settings, contract)
    asyncio.run(run_stdio(contract, settings, dsn, principal, registry))
    return EXIT_OK


def _serve_http(args, contract, settings, config, registry) -> int:
    from .runtime import resolve_dsn
    from .server.run import http_app, registry_path

    host, _, port = args.http.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError("--http takes HOST:PORT, e.g. 127.0.0.1:8765")
    if not config.principals:
        sys.stderr.write("ontoos: no principals configured (--config): every request will be refused\n")
    import uvicorn

    dsn = resolve_dsn(settings, contract)
    from .governance.report import Rule

    rule = Rule.from_env()
    uvicorn.run(http_app(contract, settings, dsn, config, registry, registry_path(args.queries), rule, host, int(port)),
                host=host, port=int(port), log_level="warning", lifespan="on")
    return EXIT_OK


def _registry_file(args) -> Path:
    return Path(args.queries or os.environ.get("ONTOOS_QUERIES") or "queries.yaml")


def cmd_audit(args) -> int:
    import psycopg

    from .governance import report as rep
    from .governance.audit import ensure_schema
    from .runtime import resolve_dsn

    contract = _load(args)
    settings = _settings(args)
    dsn = settings.audit_dsn or resolve_dsn(settings, contract)
    from .governance.promote import promoted_fingerprints

    with psycopg.connect(dsn) as conn:
        ensure_schema(conn)
        data = rep.report(conn, rep.Filters(args.days, args.dataset, args.subtype), rep.Rule.from_env(),
                          promoted_fingerprints(_registry_file(args)))
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        _emit({"ok": True, "data": data})
        return EXIT_OK
    t = data["totals"]
    print(f"{t['requests']} requests, {t['refused']} refused, {t['failed']} failed, {t['principals']} principals "
          f"in {args.days} days\n")
    sections = [
        ("Secret and hidden columns reached for", data["by_column"], ["dataset", "column_name", "reason", "n", "who"]),
        ("Rejections by subtype", data["by_subtype"], ["key", "n"]),
        ("Rejections by dataset", data["by_dataset"], ["key", "n"]),
        ("Rejections by principal", data["by_principal"], ["key", "n"]),
        ("Rejections by day", data["by_day"], ["day", "n"]),
        ("Recent rejections", data["recent"], ["at", "principal", "subtype", "message"]),
        ("Recurring explorations", data["recurring"], ["fingerprint", "uses", "principals", "example"]),
        ("Promotion candidates", data["candidates"], ["fingerprint", "uses", "principals", "example"]),
    ]
    for title, rows, cols in sections:
        print(f"## {title}")
        print(_table([[", ".join(r[c]) if isinstance(r[c], list) else r[c] for c in cols] for r in rows], cols) + "\n")
    return EXIT_OK


def cmd_promote(args) -> int:
    import psycopg

    from .governance.promote import promote
    from .runtime import resolve_dsn

    contract = _load(args)
    settings = _settings(args)
    dsn = settings.audit_dsn or resolve_dsn(settings, contract)
    path = _registry_file(args)
    with psycopg.connect(dsn) as conn:
        entry = promote(conn, contract, path, args.fingerprint, args.id, args.title, args.description)
    _emit({"ok": True, "data": {"registry": str(path), "query": entry.model_dump(mode="json", exclude_none=True)}})
    return EXIT_OK


def cmd_queries(args) -> int:
    from .governance.promote import set_status
    from .governance.registry import Registry

    contract = _load(args)
    path = _registry_file(args)
    registry = Registry.load(path, contract)
    for ident, problem in registry.problems:
        sys.stderr.write(f"ontoos: named query {ident} skipped: {problem}\n")
    if args.action == "list":
        rows = [{"id": q.id, "title": q.title, "status": q.status, "parameters": [p.name for p in q.parameters]}
                for q in registry.entries.values()]
        _emit({"ok": True, "data": {"queries": rows, "skipped": [i for i, _ in registry.problems]}})
        return EXIT_OK
    if not args.id:
        raise UsageError(f"queries {args.action} needs an ID")
    if args.action == "approve":
        set_status(path, args.id, "approved")
        _emit({"ok": True, "data": {"approved": args.id}})
        return EXIT_OK
    from .names import fold

    entry = registry.entries.get(fold(args.id))
    if args.action == "show":
        if entry is None:
            raise UsageError(f"the registry has no valid query '{args.id}'")
        _emit({"ok": True, "data": {**entry.describe(), "status": entry.status, "sql": entry.sql}})
        return EXIT_OK
    import asyncio

    from .runtime import open_explorer, resolve_dsn

    params = {}
    for item in args.param:
        name, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"-p takes NAME=VALUE, not {item!r}")
        params[name] = value
    role = _role(args)
    settings = _settings(args)
    dsn = resolve_dsn(settings, contract)

    async def go():
        async with open_explorer(contract, settings, dsn) as explorer:
            try:
                return await registry.run(explorer, role, args.id, params)
            except ExploreError as e:
                from .service import Answer

                return Answer(e.to_envelope(contract_hash=contract.hash), error=e)

    from .errors import ExploreError

    answer = asyncio.run(go())
    _audit_cli(settings, dsn, contract, answer, role, f"queries run {args.id} {json.dumps(params)}")
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json" or not answer.ok:
        _emit(answer.envelope)
    else:
        print(render_result(answer.envelope))
    return EXIT_OK if answer.ok else exit_code(answer.error)


def cmd_demo(args) -> int:
    import asyncio

    from .demo import run_demo
    from .runtime import open_explorer, resolve_dsn

    contract = _load(args)
    settings = _settings(args)
    if settings.dsn and args.load:
        import psycopg

        from .engine import demo_data, grants

        with psycopg.connect(settings.dsn) as conn:
            demo_data.load(conn)
            grants.apply(conn, contract, settings.role_prefix)
    dsn = resolve_dsn(settings, contract)

    async def go():
        async with open_explorer(contract, settings, dsn) as explorer:
            return await run_demo(explorer, args.role, render_result)

    return asyncio.run(go())


COMMANDS = {"compile": cmd_compile, "explore": cmd_explore, "catalog": cmd_catalog, "check-sql": cmd_check_sql,
            "grants": cmd_grants, "serve": cmd_serve, "audit": cmd_audit, "promote": cmd_promote,
            "queries": cmd_queries, "demo": cmd_demo}


VALUE_FLAGS = ("--order-by", "--filter", "--fields", "--group-by")


def _attach_values(argv: list[str]) -> list[str]:
    """`--order-by -replicas` reads as an option to argparse; glue such values on."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in VALUE_FLAGS and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _quiet_libraries() -> None:
    """The pool logs connection failures with socket paths and server texts: keep
    them off a user's terminal (the envelope says what matters); ONTOOS_DEBUG shows them."""
    import logging

    if not os.environ.get("ONTOOS_DEBUG"):
        logging.getLogger("psycopg").setLevel(logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    try:
        args = parser.parse_args(_attach_values(list(sys.argv[1:] if argv is None else argv)))
        if args.command is None:
            parser.print_help()
            return EXIT_REJECTED
        return COMMANDS[args.command](args)
    except UsageError as e:
        _emit(_envelope_for_usage(str(e)))
        return EXIT_REJECTED
    except Exception as e:  # the border: translate, never print a traceback
        from .errors import ContractError, ExploreError, InternalError

        if isinstance(e, ContractError):
            _emit(e.to_envelope())
            return EXIT_INTERNAL
        if isinstance(e, ExploreError):
            _emit(e.to_envelope())
            return exit_code(e)
        if os.environ.get("ONTOOS_DEBUG"):
            raise
        _emit(InternalError(reason=type(e).__name__).to_envelope())
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
