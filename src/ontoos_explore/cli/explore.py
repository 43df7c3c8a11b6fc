"""CLI, the exploration commands: compile, explore, catalog, check-sql, grants, demo."""

from __future__ import annotations

import sys

from .. import pages
from ..cursors import Cursors
from .common import (cli_principal, EXIT_OK, EXIT_REJECTED, _audit_cli, _emit, _load, _params, _registry, _read_file, _read_source,
                     _require, _role, _settings, _table, _with_explorer, emit_refusal, exit_code, output_format, render_result)


def cmd_compile(args) -> int:
    from ..pipeline import compile_exploration

    contract = _load(args)
    role = _role(args)
    compiled = compile_exploration(_read_source(args), contract, role)
    _emit(compiled.to_json())
    return EXIT_OK

def cmd_catalog(args) -> int:
    from ..catalog import describe_dataset, list_datasets

    contract = _load(args)
    role = _role(args)
    fmt = output_format(args)
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

def cmd_describe(args) -> int:
    from ..lookup import lookup

    contract = _load(args)
    role = _role(args)
    found = lookup(contract, role, args.name)
    if args.sample is not None:  # a few rows too: an exploration, audited as one
        from ..sample import with_sample

        settings = _settings(args)
        answer, dsn = _with_explorer(contract, settings, lambda explorer: with_sample(
            explorer, role, found, args.sample, explorer.lake.drift,
            lambda data: {"ok": True, "data": data, "meta": {"contract_hash": contract.hash}}))
        _audit_cli(settings, dsn, contract, answer, role, f"describe {args.name} --sample {args.sample}")
        (_emit if answer.ok else lambda env: emit_refusal(args, env))(answer.envelope)
        return EXIT_OK if answer.ok else exit_code(answer.error)
    if output_format(args) == "json":
        _emit({"ok": True, "data": found, "meta": {"contract_hash": contract.hash}})
        return EXIT_OK
    for m in found["matches"]:
        print(_described(m))
    return EXIT_OK


def _described(m: dict) -> str:
    """One match, in a line (a dataset: its name, columns and relations, concisely)."""
    if m["kind"] == "dataset":
        cols = ", ".join(f"{c['name']} {c['type']}" + (f" ({'|'.join(c['values'])})" if c.get("values") else "")
                         for c in m["columns"])
        rels = "; ".join(f"{r['name']} -> {r['to']} ({r['cardinality']})" for r in m["relations"])
        return f"dataset {m['name']}: {m['description']}\n  columns: {cols}" + (f"\n  relations: {rels}" if rels else "")
    if m["kind"] == "column":
        values = f" ({'|'.join(m['values'])})" if m.get("values") else ""
        return f"column {m['dataset']}.{m['column']}: {m['type']}{values}" + (
            f" - {m['description']}" if m.get("description") else "")
    if m["kind"] == "enum_value":
        return f"value '{m['value']}' of {m['dataset']}.{m['column']} ({'|'.join(m['values'])})"
    note = f" - {m['note']}" if m.get("note") else ""
    return f"relation {m['relation']}: {m['from']} -> {m['to']} ({m['cardinality']}){note}"


def cmd_check_sql(args) -> int:
    """The guard and the contract's named-query rules (`policy.named.verify_sql`) on hand-written SQL."""
    from ..errors import BindError, Codes
    from ..names import did_you_mean, fold
    from ..policy.named import verify_sql

    contract = _load(args)
    known = {fold(k) for k in contract.read_sets}
    for name in args.read_set:
        if fold(name) not in known:
            hint, _ = did_you_mean(name, contract.read_sets, "read sets")
            raise BindError(Codes.UNKNOWN_READ_SET, f"'{name}' is not a read set of this contract", hint=hint)
    bind = _bind_list(args.bind, args.params)
    sql = _read_file(args.file)
    max_rows = args.max_rows if args.max_rows is not None else max(r.max_rows for r in contract.roles.values())
    n_params = args.params if bind is None or args.params is not None else len(bind)
    verdict = verify_sql(sql, contract, args.read_set, max_rows, n_params, bind)
    out = verdict.to_json(sql)
    out["meta"] = {"read_sets": args.read_set, "max_rows": max_rows, "contract_hash": contract.hash}
    _emit(out)
    return EXIT_OK if verdict.ok else EXIT_REJECTED

def _bind_list(text: str | None, n_params: int | None) -> tuple | None:
    """--bind: a JSON list as a registry entry's `bind` (a caller's parameter name, or a constant
    {"value": ..., "type": ...}), checked by the registry's own model."""
    if text is None:
        return None
    from pydantic import TypeAdapter, ValidationError

    from ..errors import Codes, InputError
    from ..governance.registry import Constant

    hint = 'e.g. --bind \'["namespace", {"value": false, "type": "boolean"}]\': a parameter name or a constant per $n'
    try:
        bind = tuple(TypeAdapter(list[str | Constant]).validate_json(text))
    except ValidationError:
        raise InputError(Codes.INVALID_REQUEST, "--bind must be a JSON list of parameter names and "
                                                "{\"value\", \"type\"} constants", hint=hint) from None
    if n_params is not None and n_params != len(bind):
        raise InputError(Codes.INVALID_REQUEST, f"--params {n_params} but --bind has {len(bind)} values",
                         hint="give one --bind value per $n, or leave --params out")
    return bind


def cmd_explore(args) -> int:
    contract = _load(args)
    role = _role(args)
    _may_explore(contract, role)
    given = any(getattr(args, k, None) for k in ("query", "file", "json", "dataset"))
    source = _read_source(args) if given or not args.cursor else None  # a cursor alone asks its own question
    require = _require(args)
    settings = _settings(args)
    cursors = Cursors(settings.secret, settings.cursor_ttl_s) if settings.secret else None
    answer, dsn = _with_explorer(contract, settings, lambda explorer: pages.explore(
        explorer, cursors, source, role, cli_principal(), cursor=args.cursor, dry_run=args.dry_run, require=require))
    _audit_cli(settings, dsn, contract, answer, role, source if source is not None else f"--cursor {args.cursor}")
    fmt = output_format(args)
    if not answer.ok:
        emit_refusal(args, answer.envelope)
    elif fmt == "json" or args.dry_run:
        _emit(answer.envelope)
    else:
        print(render_result(answer.envelope))
    return EXIT_OK if answer.ok else exit_code(answer.error)

def cmd_explain(args) -> int:
    from ..explain import explain
    from ..governance.registry import Registry
    from .common import UsageError

    contract = _load(args)
    role = _role(args)
    given = any(getattr(args, k, None) for k in ("query", "file", "json", "dataset"))
    if args.named and given:
        raise UsageError("--named explains a named query: give it, or an exploration, not both")
    if args.param and not args.named:
        raise UsageError("-p gives a named query's parameters: it goes with --named ID")
    registry = Registry.load(_registry(args), contract)  # a named query asked as {"query": ID} too
    if args.named:
        source = {"query": args.named, "params": _params(args.param)}
    else:
        source = _read_source(args)
        if isinstance(source, str):
            source = {"query": source}
    plan, _ = _with_explorer(contract, _settings(args), lambda explorer: explain(explorer, source, role, registry))
    _emit({"ok": True, "data": plan, "meta": {"contract_hash": contract.hash}})
    return EXIT_OK


def _may_explore(contract, role: str) -> None:
    """A role the contract keeps to named queries (`explore: false`) has no explore here either."""
    from ..errors import Codes, InputError
    from ..pipeline import resolve_role

    if not resolve_role(contract, role).explore:
        raise InputError(Codes.UNKNOWN_TOOL, f"role {role} does not explore: the contract keeps it to named queries",
                         hint="ontoos queries list shows what it may run; ontoos queries run ID asks one")


def cmd_grants(args) -> int:
    from ..engine import grants

    contract = _load(args)
    settings = _settings(args)
    if not args.apply:
        sys.stdout.write(grants.script(contract, settings.role_prefix))
        return EXIT_OK
    import psycopg

    from ..runtime import prepare_embedded

    dsn = settings.dsn or prepare_embedded(settings, contract)
    with psycopg.connect(dsn) as conn:
        roles = grants.apply(conn, contract, settings.role_prefix)
    _emit({"ok": True, "applied": roles, "contract_hash": contract.hash})
    return EXIT_OK

def cmd_demo(args) -> int:
    import asyncio

    from ..demo import run_demo
    from ..governance.registry import Registry
    from ..runtime import open_explorer, resolve_dsn

    contract = _load(args)
    settings = _settings(args)
    if settings.dsn and args.load:
        import psycopg

        from ..engine import demo_data, grants

        with psycopg.connect(settings.dsn) as conn:
            demo_data.load(conn)
            grants.apply(conn, contract, settings.role_prefix)
    dsn = resolve_dsn(settings, contract)
    registry = Registry.load(_registry(args), contract)

    async def go():
        async with open_explorer(contract, settings, dsn) as explorer:
            return await run_demo(explorer, args.role, render_result, registry=registry)

    return asyncio.run(go())
