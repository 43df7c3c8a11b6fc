"""CLI surface: `ontoos` -> the Python API, answers as JSON envelopes or tables.

Exit codes: 0 ok, 2 rejected (the caller's input), 1 anything else. Bad input
never prints a traceback; set ONTOOS_DEBUG=1 to see one for internal errors.
Heavy imports happen after the arguments are parsed, so `--help` is fast.
"""

from __future__ import annotations

import os
import sys

from .common import EXIT_INTERNAL, EXIT_REJECTED, UsageError, _emit, _envelope_for_usage, exit_code
from .explore import cmd_catalog, cmd_check_sql, cmd_compile, cmd_demo, cmd_explore, cmd_grants
from .governance import cmd_audit, cmd_promote, cmd_queries
from .parser import build_parser
from .serve import cmd_serve

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
        from ..errors import ContractError, ExploreError, InternalError

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
