"""CLI, the servers: MCP over stdio, MCP and the HTTP API over streamable HTTP.

Both serve the named queries of `settings.queries` (--queries, ONTOOS_QUERIES,
else queries.yaml in the working directory; on the demo contract, the shipped
demo registry until that file is written: `store.store_for`) as a
`LiveRegistry`: a change to the file (`ontoos promote`, `ontoos queries
approve`, the dashboard, an edit) is served within a second, without a
restart, and MCP sessions hear of it (tools/list_changed).
"""

from __future__ import annotations

import dataclasses
import json
import sys

from ..server.logs import say
from .common import EXIT_INTERNAL, EXIT_OK, EXIT_REJECTED, UsageError, _envelope_for_usage, _load, _role, _settings, exit_code


# The event loop gets the interpreter back from the worker thread (a large compile, offload.py) only
# at a switch interval, and waits for it once for each step of a request (accept, read, answer). With
# five clients sending the largest requests back to back (tests/server/test_event_loop.py), /healthz
# took a median of 40 ms (p90 80-110 ms) at Python's 5 ms, 10.5 ms (p90 22-27 ms) at 1 ms.
SWITCH_INTERVAL_S = 0.001


def cmd_serve(args) -> int:
    if args.http and args.workers > 1:  # before the metrics library is imported: it reads this once
        _metrics_directory()
    from ..errors import ExploreError
    from ..server.config import ServerConfig, load_config
    from ..server.run import live_registry, log_to_stderr

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    contract = _load(args)
    settings = _settings(args)
    log_to_stderr(fmt=settings.log_format)
    config = load_config(settings.config, contract) if settings.config else ServerConfig()
    registry = live_registry(settings, contract)
    if registry.error is not None:
        say(f"{registry.error.message}; serving no named queries until it can be read", "WARNING")
    for ident, problem in registry.problems:
        say(f"named query {ident} skipped: {problem}", "WARNING")
    if args.stdio:
        if args.demo:
            raise UsageError("--demo is for --http: it prints a sign-in URL for the dashboard")
        if args.workers != 1:
            raise UsageError("--workers is for --http: serve --stdio serves the one caller that started it")
        try:
            return _serve_stdio(args, contract, settings, config, registry)
        except (ExploreError, UsageError) as e:  # stdout is the protocol channel: diagnostics go to stderr
            env = e.to_envelope() if isinstance(e, ExploreError) else _envelope_for_usage(str(e))
            sys.stderr.write(json.dumps(env) + "\n")
            return exit_code(e) if isinstance(e, ExploreError) else EXIT_REJECTED
    return _serve_http(args, contract, settings, config, registry)

def _serve_stdio(args, contract, settings, config, registry) -> int:
    import asyncio

    from ..runtime import resolve_dsn
    from ..server.config import Authenticator, Principal
    from ..server.run import run_stdio

    if args.principal:
        principal = Authenticator(config, contract).by_name(args.principal)
        if principal is None:
            raise UsageError(f"--principal {args.principal} is not in the server configuration")
    else:
        from ..pipeline import resolve_role

        role = resolve_role(contract, _role(args))
        principal = Principal("stdio", role.name)
    dsn = resolve_dsn(settings, contract)
    asyncio.run(run_stdio(contract, settings, dsn, principal, registry))
    return EXIT_OK

def _serve_http(args, contract, settings, config, registry) -> int:
    from ..runtime import resolve_dsn
    from ..server.lifecycle import Drain, ListenError, listen, start_lines
    from ..server.run import http_app

    if args.workers < 1:
        raise UsageError("--workers takes a number of processes, 1 or more")
    host, _, port = args.http.rpartition(":")
    host = host.strip("[]")  # [::1]:8765
    if not host or not port.isdigit():
        raise UsageError("--http takes HOST:PORT, e.g. 127.0.0.1:8765")
    if getattr(args, "demo", False):
        _demo_allowed(contract, host)
    try:
        sock = listen(host, int(port))  # first: an address in use is said before anything starts
    except ListenError as e:
        say(str(e), "ERROR")
        return EXIT_INTERNAL
    demo_lines: list[str] = []
    if getattr(args, "demo", False):
        config, demo_lines = _demo_reviewer(contract, config, host, int(port))
    if not config.principals:
        say("no principals configured (--config): every request will be refused", "WARNING")
    from ..server.connections import serve

    dsn = resolve_dsn(settings, contract)
    from ..governance.report import Rule

    rule = Rule.from_settings(settings)
    workers = args.workers
    if workers > 1:  # a session one process opened another could not serve; limits are the deployment's
        settings = dataclasses.replace(settings, mcp_stateless=True, shared_limits=True)
        if settings.secret is None:  # cursors and dashboard sessions must open in every worker
            import secrets

            settings = dataclasses.replace(settings, secret=secrets.token_urlsafe(32))
            say("ONTOOS_SECRET is not set: the workers share a random secret of this server (its cursors and "
                "dashboard sessions end with it; other servers refuse them)", "WARNING")

    def one_server(index: int, lines: list[str] | None) -> int:
        drain = Drain(settings.drain_timeout_s)
        app = http_app(contract, settings, dsn, config, registry, settings.queries, rule, host, int(port),
                       drain=drain, quiet=index > 0)
        # uvicorn, with the header timeout and the connection caps it lacks (server/connections.py), and the drain
        as_json = {"log_config": None} if settings.log_format == "json" else {}  # uvicorn's records: ours, as JSON
        return serve(app, host, int(port), header_timeout_s=settings.header_timeout_s,
                     per_client=settings.connections_per_client, drain=drain, sock=sock, lines=lines, **as_json)

    lines = start_lines(host, int(port)) + demo_lines
    if workers == 1:
        status = one_server(0, lines)
    else:
        from ..server.workers import supervise

        from prometheus_client import multiprocess

        status = supervise(workers, lambda index: one_server(index, None), lines,
                           on_exit=lambda pid: multiprocess.mark_process_dead(pid))
    return EXIT_OK if status == 0 else status


def _demo_allowed(contract, host: str) -> None:
    """--demo adds an admin reviewer whose token is printed: only on the demo contract, only on loopback."""
    import ipaddress

    from ..contract import load_contract
    from .common import default_contract

    if contract.hash != load_contract(default_contract()).hash:
        raise UsageError("--demo serves the embedded demo only: leave out --contract (and ONTOOS_CONTRACT), or "
                         "give principals in --config")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError("--demo listens on loopback only (127.0.0.1, ::1 or localhost): its token is printed")


def _demo_reviewer(contract, config, host: str, port: int):
    """`serve --http --demo`: a reviewer principal `demo` with a token of this run, made here and said once
    with the sign-in URL (as Datasette's --root). -> (the configuration with it, the lines to say)."""
    from ..server.config import PrincipalConfig, token_hash
    from .tokens import new_token

    role = "admin" if contract.role("admin") is not None else next(iter(contract.roles))
    token = new_token()
    demo = PrincipalConfig(role=role, token_sha256=token_hash(token), reviewer=True)
    config = config.model_copy(update={"principals": {**config.principals, "demo": demo}})
    base = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    return config, [f"ontoos: demo: sign in at {base}/governance/login with the token {token} (principal demo, role "
                    f"{role}, a reviewer; this run only)",
                    f"ontoos: demo: curl -H 'Authorization: Bearer {token}' '{base}/api/v1/explore?dataset=workloads"
                    f"&fields=name,namespace&limit=5'"]


def _metrics_directory() -> None:
    """Where the workers' metrics are summed (the library's multiprocess mode): a directory of this
    server's own, removed when it exits, unless PROMETHEUS_MULTIPROC_DIR names one already."""
    import atexit
    import os
    import shutil
    import tempfile

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    path = tempfile.mkdtemp(prefix="ontoos-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    owner = os.getpid()
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(path, ignore_errors=True))
