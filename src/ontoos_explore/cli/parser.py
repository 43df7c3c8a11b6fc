"""CLI, arguments: every command's flags, declared in one place."""

from __future__ import annotations

import argparse
from typing import NoReturn

from .common import UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(_with_suggestion(message) + f" (see '{self.prog} --help')")


def _with_suggestion(message: str) -> str:
    """argparse's "invalid choice: 'x' (choose from 'a', 'b')" with a did-you-mean in front of the list (the
    value and the choices quoted or not: Python 3.12.8 and later write them bare)."""
    import re

    from ..names import close_matches

    found = re.match(r"argument (?P<what>[^:]+): invalid choice: (?P<got>.*?) \(choose from (?P<all>.*)\)$", message)
    if not found:
        return message
    got = found["got"].strip("'")
    choices = [c.strip().strip("'") for c in found["all"].split(",")]
    close = close_matches(got, choices, n=1)
    what = found["what"]
    said = f"'{got}' is not a command" if what == "COMMAND" else f"'{got}' is not a choice of {what}"
    return said + (f"; did you mean '{close[0]}'?" if close else "") + f" ({', '.join(choices)})"


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a window of days, a count)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive: give 1 or more")
    return value


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("ontoos-explore")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        from .. import __version__

        return __version__

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

def _require_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-age", type=int, metavar="SECONDS",
                   help="refuse the answer (exit 2) unless its data was collected at most SECONDS ago")
    p.add_argument("--consistency", choices=("any", "fixed_read"),
                   help="fixed_read: refuse unless the rows and their evidence were read in one snapshot")

def _cursor_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cursor", metavar="CURSOR", help="meta.next_cursor of a truncated answer: its next page "
                                                      "(needs ONTOOS_SECRET, the one the servers sign with)")

def _dsn_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dsn", help="PostgreSQL to use (default: $ONTOOS_DSN, else the embedded server)")

def build_parser() -> argparse.ArgumentParser:
    from ..governance.vocabulary import OUTCOMES, SURFACES
    from .examples import add_examples

    parser = _Parser(prog="ontoos", description="Guarded exploration of a governed lakehouse.")
    parser.add_argument("--version", action="version", version=f"ontoos-explore {_version()}")
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
    _cursor_arg(x)
    _require_args(x)

    e = sub.add_parser("explain", help="the plan of an exploration or a named query, without reading rows",
                       description="What an exploration (text, JSON or flag form) or a named query (--named ID "
                                   "-p name=value) would read, the limit and budgets that apply, whether it is "
                                   "within the cost budget, and what to change.")
    _contract_arg(e)
    _role_arg(e)
    _source_args(e)
    _dsn_arg(e)
    e.add_argument("--named", metavar="ID", help="explain this named query instead")
    e.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="with --named: a parameter (repeatable)")
    e.add_argument("--queries", metavar="FILE", help="registry YAML (default: $ONTOOS_QUERIES, else queries.yaml)")

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

    b = sub.add_parser("describe", help="find anything by name: a dataset, column, enum value or relation",
                       description="Look a name up among what the role may read: a dataset, dataset.column, a "
                                   "column name (every dataset that has it), an enum value, or a relation.")
    _contract_arg(b)
    _role_arg(b)
    _format_arg(b)
    b.add_argument("name", help="the name to look up")
    b.add_argument("--sample", type=int, metavar="N", help="a dataset: also N of its rows (1 to 10), read as an "
                                                            "exploration is (policy, masking, budgets, audit)")
    _dsn_arg(b)

    g = sub.add_parser("check-sql", help="verify hand-written SQL with the guard",
                       description="Run the guard on SQL (e.g. a named query) against a read set of the contract. "
                                   "Prints the verdict as JSON; exit 0 allowed, 2 refused.")
    _contract_arg(g)
    g.add_argument("--read-set", action="append", required=True, metavar="NAME",
                   help="read set whose datasets may be read (repeatable)")
    g.add_argument("--max-rows", type=int, metavar="N",
                   help="row budget: LIMIT must be at most N+1 (default: the largest max_rows of any role)")
    g.add_argument("--params", type=int, metavar="N", help="number of $n parameters that will be bound (default: any, without gaps)")
    g.add_argument("--bind", metavar="JSON", help="what each $n is bound to, as a registry entry's bind list: a JSON "
                   'list of parameter names and {"value": ..., "type": ...} constants; with it, $n always-filters '
                   "are verified (default --params: its length)")
    g.add_argument("file", nargs="?", default="-", metavar="FILE", help="file holding the SQL, or - for stdin (default)")

    v = sub.add_parser("serve", help="serve MCP (stdio or streamable HTTP) and the HTTP API",
                       description="Serve the tools over MCP on stdio, or MCP plus the REST API over HTTP.")
    how = v.add_mutually_exclusive_group(required=True)
    how.add_argument("--stdio", action="store_true", help="MCP on stdin/stdout, for one caller (--role or --principal)")
    how.add_argument("--http", metavar="HOST:PORT", help="MCP at /mcp and the API at /api/v1, with bearer tokens")
    _contract_arg(v)
    _dsn_arg(v)
    v.add_argument("--workers", type=int, default=1, metavar="N",
                   help="http: N server processes on the one port, supervised (default 1); MCP is then stateless")
    v.add_argument("--config", metavar="FILE", help="server configuration: principals and token hashes (default: $ONTOOS_CONFIG)")
    v.add_argument("--demo", action="store_true",
                   help="http: also a reviewer principal 'demo' with a token made for this run, printed with the "
                        "sign-in URL (e.g. ontoos serve --http 127.0.0.1:8765 --demo)")
    v.add_argument("--role", help="stdio: the contract role to serve as")
    v.add_argument("--principal", help="stdio: a principal of --config to serve as")
    v.add_argument("--queries", metavar="FILE",
                   help="named-query registry YAML, served as it changes (default: $ONTOOS_QUERIES, else queries.yaml)")

    a = sub.add_parser("audit", help="governance report from the audit trail",
                       description="Rejections by subtype, dataset, column, principal and day; recent rejections; "
                                   "recurring explorations; promotion candidates.")
    _dsn_arg(a)
    _contract_arg(a)
    _format_arg(a)
    a.add_argument("--days", type=positive, default=14, help="time window in days, 1 or more (default: 14)")
    a.add_argument("--dataset", help="only this dataset")
    a.add_argument("--subtype", help="only this error subtype")
    a.add_argument("--principal", help="only this principal's events")
    a.add_argument("--surface", choices=SURFACES, help="only this surface")
    a.add_argument("--outcome", choices=OUTCOMES, help="only events that ended so")
    a.add_argument("--queries", metavar="FILE", help="registry YAML: its fingerprints are no longer candidates "
                                                     "(default: $ONTOOS_QUERIES, else queries.yaml)")

    m = sub.add_parser("promote", help="turn a recurring exploration into a pending named query",
                       description="Write the fingerprint's exploration into the registry as a named query "
                                   "(status pending), after the guard has verified its SQL.")
    _dsn_arg(m)
    _contract_arg(m)
    m.add_argument("fingerprint")
    m.add_argument("--id", required=True, help="the named query's id")
    m.add_argument("--title", required=True)
    m.add_argument("--description", default="")
    m.add_argument("--keep-text-examples", action="store_true",
                   help="keep the free-text examples callers typed (by default only enum values and numeric, "
                        "boolean and date ranges are kept: every agent reads the examples)")
    m.add_argument("--queries", metavar="FILE", help="registry YAML (default: $ONTOOS_QUERIES, else queries.yaml)")

    n = sub.add_parser("queries", help="named queries: list, show, run, approve, reject, retire; request one that "
                                       "does not exist; import a file into the registry, export it")
    n.add_argument("action", choices=("list", "show", "run", "approve", "reject", "retire", "request", "import",
                                      "export"))
    n.add_argument("id", nargs="?", help="the named query's id (request: the question, in words; import: the YAML "
                                         "file whose entries become the registry)")
    n.add_argument("--dataset", help="request: the dataset the question is about")
    n.add_argument("--domain", help="list: only queries of this domain (product, architecture, rnd-commit, ops, "
                                    "fault, incident)")
    n.add_argument("-q", metavar="WORDS", help="list: only queries whose text holds every one of these words")
    n.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help="run: a parameter (repeatable)")
    _cursor_arg(n)
    n.add_argument("--queries", metavar="FILE", help="registry YAML (default: $ONTOOS_QUERIES, else queries.yaml)")
    _contract_arg(n)
    _role_arg(n)
    _dsn_arg(n)
    _format_arg(n)
    _require_args(n)

    o = sub.add_parser("doctor", help="check the deployment: database, contract, drift, grants, freshness, registry",
                       description="Check everything the service depends on and say what is wrong, with its place "
                                   "in the contract. Exit 0 clean (warnings allowed), 2 problems found, 1 could not run.")
    _contract_arg(o)
    _dsn_arg(o)
    o.add_argument("--json", action="store_true", help="JSON (the default when stdout is not a terminal)")
    o.add_argument("--queries", metavar="FILE", help="registry YAML (default: $ONTOOS_QUERIES, else queries.yaml)")
    o.add_argument("--server", metavar="URL", help="also check a running server: its health, and the token")
    o.add_argument("--token-file", metavar="FILE", help="with --server: a file holding a bearer token to try")

    t = sub.add_parser("stats", help="what the service can say about the lake: freshness",
                       description="freshness: each dataset the role may read, with the evidence its answers carry.")
    t.add_argument("what", choices=("freshness",))
    _contract_arg(t)
    _role_arg(t)
    _dsn_arg(t)
    _format_arg(t)

    k = sub.add_parser("token", help="make a bearer token for a principal (shown once) and its configuration line",
                       description="Print a new random token once, and the line to add under principals: in the "
                                   "server configuration (its SHA-256: the server never keeps the token). "
                                   "Example: ontoos token new --principal ann --role analyst")
    k.add_argument("action", choices=("new",))
    k.add_argument("--principal", required=True, help="the principal's name, as the configuration names it")
    k.add_argument("--role", required=True, help="a role of the contract")
    k.add_argument("--reviewer", action="store_true", help="may use the governance dashboard")
    _contract_arg(k)

    sh = sub.add_parser("completion", help="the shell completion script for bash, zsh or fish",
                        description="Print the completion script of this parser for a shell (argcomplete's). "
                                    "Examples: eval \"$(ontoos completion bash)\" in ~/.bashrc; "
                                    "ontoos completion fish > ~/.config/fish/completions/ontoos.fish")
    sh.add_argument("shell", choices=("bash", "zsh", "fish"))

    d = sub.add_parser("demo", help="run example explorations on the embedded demo lakehouse",
                       description="Start the embedded PostgreSQL, load the demo lakehouse if needed, and run "
                                   "example explorations: joins, aggregates, a clamp note, and refusals.")
    _contract_arg(d)
    _dsn_arg(d)
    d.add_argument("--role", default="analyst", help="role to act as (default: analyst)")
    d.add_argument("--load", action="store_true", help="with --dsn: (re)load the demo lakehouse there (drops schema lake)")
    add_examples(sub)
    return parser


# ---------------------------------------------------------------- output
