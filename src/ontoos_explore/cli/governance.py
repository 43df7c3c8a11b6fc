"""CLI, governance: audit reports, promotion, the named-query registry."""

from __future__ import annotations

import json
import sys

from .common import (cli_principal, EXIT_OK, UsageError, _audit_cli, _emit, _load, _params, _registry, _require, _role, _settings, _table, _with_explorer,
                     emit_refusal, exit_code, output_format, render_result)


def cmd_audit(args) -> int:
    import psycopg

    from ..governance import report as rep
    from ..governance.audit import ensure_schema
    from ..runtime import resolve_dsn

    contract = _load(args)
    _check_filters(contract, args)
    settings = _settings(args)
    dsn = settings.audit_dsn or resolve_dsn(settings, contract)
    from ..governance.promote import promoted_fingerprints

    with psycopg.connect(dsn) as conn:
        ensure_schema(conn)
        data = rep.report(conn, rep.Filters(args.days, args.dataset, args.subtype, args.principal,
                                                   args.surface, args.outcome), rep.Rule.from_settings(settings),
                          promoted_fingerprints(_registry(args)))
    fmt = output_format(args)
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

    from ..governance.authoring import authored
    from ..governance.promote import Examples, promote
    from ..runtime import resolve_dsn

    contract = _load(args)
    settings = _settings(args)
    dsn = settings.audit_dsn or resolve_dsn(settings, contract)
    path = _registry(args)
    # examples: the safe kinds only, unless asked (free text is what other principals typed; every agent reads it)
    examples = Examples(keep_text=bool(getattr(args, "keep_text_examples", False)))
    with psycopg.connect(dsn) as conn:
        entry = promote(conn, contract, path, args.fingerprint, args.id, args.title, args.description,
                        examples=examples, promoted_by=cli_principal())
    written = authored(entry.model_dump(mode="json", exclude_none=True))  # as the file has it
    _emit({"ok": True, "data": {"registry": str(path.path), "query": written}})
    return EXIT_OK

def _import_export(args, store, contract) -> int:
    """export: the registry's document as YAML on stdout. import FILE: the file's document becomes the
    registry (ONTOOS_REGISTRY=database: how a reviewed file reaches every process), each entry verified
    as a server would (one that does not verify is reported, and skipped when served)."""
    from ..governance.registry import Registry
    from ..governance.store import RegistryStore, _dump

    if args.action == "export":
        sys.stdout.write(_dump(store.read()[0]))
        return EXIT_OK
    if not args.id:
        raise UsageError("queries import needs the YAML file, e.g. ontoos queries import queries.yaml")
    source = RegistryStore(args.id)
    if not source.path.is_file():
        raise UsageError(f"queries import: no such file: {args.id}")
    data, _ = source.read()
    problems = Registry.load(source, contract).problems
    store.write(data)
    _emit({"ok": True, "data": {"imported": len(data.get("queries") or []), "into": str(store.path),
                                "skipped": [{"id": i, "problem": p} for i, p in problems]}})
    return EXIT_OK


def cmd_queries(args) -> int:
    from ..governance.registry import Registry, matching

    contract = _load(args)
    store = _registry(args)
    if args.action in ("import", "export"):  # before the registry is read: an import mends one that cannot be
        return _import_export(args, store, contract)
    registry = Registry.load(store, contract)
    for ident, problem in registry.problems:
        sys.stderr.write(f"ontoos: named query {ident} skipped: {problem}\n")
    if args.action == "list":
        rows = [{"id": q.id, "title": q.title, "status": q.status, "domain": q.domain,
                 "parameters": [p.name for p in q.parameters]}
                for q in matching(list(registry.entries.values()), args.domain, args.q)]
        if output_format(args) == "table":
            print(_table([[r["id"], r["status"], r["domain"] or "", r["title"], ", ".join(r["parameters"])]
                          for r in rows], ["id", "status", "domain", "title", "parameters"]))
            return EXIT_OK
        _emit({"ok": True, "data": {"queries": rows, "skipped": [i for i, _ in registry.problems]}})
        return EXIT_OK
    if not args.id and not (args.action == "run" and args.cursor):  # a cursor alone names its query
        raise UsageError(f"queries {args.action} needs an ID" if args.action != "request" else
                         'queries request needs the question, e.g. ontoos queries request "which teams own ..."')
    if args.action == "request":
        return _request(args, contract)
    if args.action in ("approve", "reject", "retire"):
        from ..governance import promote

        # the CLI's governance commands are for whoever runs them: no reviewer to tell from the promoter
        change = {"approve": lambda: promote.approve(store, args.id, cli_principal(), allow_self=True),
                  "reject": lambda: promote.reject(store, args.id, cli_principal()),
                  "retire": lambda: promote.retire(store, args.id, cli_principal())}[args.action]
        entry = change()
        _emit({"ok": True, "data": {{"approve": "approved", "reject": "rejected", "retire": "retired"}[args.action]:
                                    entry.get("id", args.id), "status": entry.get("status")}})
        return EXIT_OK
    from ..names import fold

    entry = registry.entries.get(fold(args.id)) if args.id else None
    if args.action == "show":
        if entry is None:
            raise UsageError(f"the registry has no valid query '{args.id}'")
        shown = {**entry.describe(), "status": entry.status, "sql": entry.sql}
        if output_format(args) == "table":
            params = ", ".join(f"{k}: {v.get('type', '')}" for k, v in shown["parameters"].get("properties", {}).items())
            print("\n".join([f"{shown['id']}  ({shown['status']})", shown["title"],
                              *([shown["description"]] if shown["description"] else []),
                              f"parameters: {params or 'none'}", f"columns: {', '.join(shown['columns'])}",
                              f"max rows: {shown['max_rows']}", *[f"note: {n}" for n in shown["notes"]],
                              "", shown["sql"].rstrip()]))
            return EXIT_OK
        _emit({"ok": True, "data": shown})
        return EXIT_OK
    if args.action == "run" and entry is not None and entry.status != "approved":  # the registry's own reader
        from ..errors import Codes, InputError

        if entry.status == "pending":
            raise InputError(Codes.UNKNOWN_QUERY, f"'{entry.id}' is pending, not approved: it does not run yet",
                             hint=f"a reviewer approves it first (ontoos queries approve {entry.id}, or the dashboard)")
        raise InputError(Codes.UNKNOWN_QUERY, f"'{entry.id}' is {entry.status}: it no longer runs",
                         hint=f"ontoos queries show {entry.id} (or its dashboard page) says who {entry.status} it "
                              "and when")
    from .. import pages
    from ..cursors import Cursors
    from ..envelope import Answer
    from ..errors import ExploreError

    params = _params(args.param)
    role = _role(args)
    require = _require(args)
    settings = _settings(args)

    cursors = Cursors(settings.secret, settings.cursor_ttl_s) if settings.secret else None

    async def work(explorer):
        try:
            return await pages.run_named(explorer, cursors, registry, role, cli_principal(), args.id, params,
                                         cursor=args.cursor, require=require)
        except ExploreError as e:  # refused before it ran (unknown id, bad parameters): the one refusal shape
            return Answer.refusal(e, contract_hash=contract.hash, notice=explorer.lake.notice_for(role))

    answer, dsn = _with_explorer(contract, settings, work)
    asked = f"queries run {args.id} {json.dumps(params)}" if args.id else f"queries run --cursor {args.cursor}"
    _audit_cli(settings, dsn, contract, answer, role, asked)
    fmt = output_format(args)
    if not answer.ok:
        emit_refusal(args, answer.envelope)
    elif fmt == "json":
        _emit(answer.envelope)
    else:
        print(render_result(answer.envelope))
    return EXIT_OK if answer.ok else exit_code(answer.error)


def _request(args, contract) -> int:
    """`ontoos queries request QUESTION [--dataset D]`: a template request, filed for reviewers."""
    import psycopg

    from ..catalog import describe_dataset
    from ..governance import requests
    from ..runtime import resolve_dsn

    question = requests.question_of(args.id)
    role = _role(args)
    dataset = describe_dataset(contract, role, args.dataset)["name"] if args.dataset else None
    settings = _settings(args)
    dsn = settings.audit_dsn or resolve_dsn(settings, contract)
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            filed = requests.file(conn, principal=cli_principal(), role=role, surface="cli",
                                  question=question, dataset=dataset)
    except psycopg.Error:
        from ..errors import UpstreamError

        raise UpstreamError("the audit store is unavailable", reason="REQUEST_NOT_FILED") from None
    _emit({"ok": True, "data": filed, "meta": {"contract_hash": contract.hash}})
    return EXIT_OK


def _check_filters(contract, args) -> None:
    """`--subtype` a subtype of the error table and `--dataset` one of the contract's, else refused with a
    did-you-mean (a filter that can match nothing would print an empty report as if all were well)."""
    from ..errors import Codes, InputError
    from ..errors.codes import all_rows
    from ..names import did_you_mean, fold

    if args.subtype is not None:
        subtypes = sorted({row.subtype for row in all_rows()})
        if args.subtype.upper() not in subtypes:
            hint, _ = did_you_mean(args.subtype.upper(), subtypes, "subtypes")
            raise InputError(Codes.INVALID_REQUEST, f"--subtype {args.subtype!r} is not a subtype of the error table",
                             hint=hint)
        args.subtype = args.subtype.upper()
    if args.dataset is not None:
        names = {fold(n): n for n in contract.datasets}
        if fold(args.dataset) not in names:
            hint, _ = did_you_mean(args.dataset, list(names.values()), "datasets")
            raise InputError(Codes.INVALID_REQUEST, f"--dataset {args.dataset!r} is not a dataset of the contract",
                             hint=hint)
        args.dataset = names[fold(args.dataset)]
