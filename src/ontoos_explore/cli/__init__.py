"""CLI surface: `ontoos` -> the Python API, answers as JSON envelopes or tables.

Exit codes: 0 ok, 2 rejected (the caller's input), 1 anything else. Bad input
never prints a traceback; set ONTOOS_DEBUG=on to see one for internal errors.
A refusal is the envelope on stdout when stdout is piped (or with --format
json), and a sentence on stderr at a terminal (`human.py`). Output to a pipe
closed early (`| head`) ends quietly, exit 0.
Heavy imports happen after the arguments are parsed, so `--help` is fast.
The deployment settings are read once, before the command runs: a bad one is
an EX907 envelope (exit 1). For `serve --stdio`, whose stdout is the
protocol's, a refusal goes to stderr.
"""

from __future__ import annotations

import os
import sys

from .common import EXIT_INTERNAL, EXIT_OK, EXIT_REJECTED, UsageError, _emit, _envelope_for_usage, exit_code, read_settings
from .explore import (cmd_catalog, cmd_check_sql, cmd_compile, cmd_demo, cmd_describe, cmd_explain, cmd_explore,
                      cmd_grants)
from .governance import cmd_audit, cmd_promote, cmd_queries
from .doctor import cmd_doctor, cmd_stats
from .parser import build_parser
from .serve import cmd_serve
from .tokens import cmd_token

COMMANDS = {"compile": cmd_compile, "explore": cmd_explore, "explain": cmd_explain, "catalog": cmd_catalog,
            "describe": cmd_describe,
            "check-sql": cmd_check_sql,
            "grants": cmd_grants, "serve": cmd_serve, "audit": cmd_audit, "promote": cmd_promote,
            "queries": cmd_queries, "demo": cmd_demo, "doctor": cmd_doctor, "stats": cmd_stats, "token": cmd_token}

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

def _debug(args=None) -> bool:
    """The `debug` setting: the run's, or (before it is read, or when it could not be) ONTOOS_DEBUG
    read alone, a bad value counting as off."""
    settings = getattr(args, "settings", None)
    if settings is not None:
        return settings.debug
    from ..errors import ExploreError
    from ..settings import read_one

    try:
        return read_one("debug", os.environ.get("ONTOOS_DEBUG"))
    except ExploreError:
        return False

def _quiet_libraries() -> None:
    """The pool logs connection failures with socket paths and server texts: keep
    them off a user's terminal (the envelope says what matters); ONTOOS_DEBUG shows them."""
    import logging

    if not _debug():
        logging.getLogger("psycopg").setLevel(logging.CRITICAL)

def cmd_completion(args) -> int:
    """`ontoos completion SHELL`: argcomplete's script for the shell, completing from this parser."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["ontoos"], shell=args.shell))
    return EXIT_OK


COMMANDS["completion"] = cmd_completion


def main(argv: list[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell asking for completions (the script above): answered, exits
        import argcomplete

        argcomplete.autocomplete(parser)
    args = None
    try:
        args = parser.parse_args(_attach_values(list(sys.argv[1:] if argv is None else argv)))
        if args.command is None:
            parser.print_help()
            return EXIT_REJECTED
        args.settings = read_settings(args)
        return COMMANDS[args.command](args)
    except UsageError as e:
        _refuse(args, _envelope_for_usage(str(e)))
        return EXIT_REJECTED
    except BrokenPipeError:  # the reader went (`| head`): what is left has nowhere to go, and that is fine
        _drop_stdout()
        return EXIT_OK
    except Exception as e:  # the border: translate, never print a traceback
        from ..errors import ContractError, ExploreError, InternalError

        if isinstance(e, ContractError):
            _refuse(args, e.to_envelope())
            return EXIT_INTERNAL
        if isinstance(e, ExploreError):
            _refuse(args, e.to_envelope())
            return exit_code(e)
        if _debug(args):
            raise
        _refuse(args, InternalError(reason=type(e).__name__).to_envelope())
        return EXIT_INTERNAL

def _refuse(args, envelope: dict) -> None:
    """The refusal: the envelope on stdout (piped, or --format json), on stderr when stdout carries a
    protocol (`serve --stdio`), or at a terminal a sentence on stderr (`human.refusal_text`)."""
    envelope = _noticed(args, envelope)
    if getattr(args, "stdio", False):
        import json

        sys.stderr.write(json.dumps(envelope) + "\n")
    elif _at_terminal() and not _json_asked(args):
        from .human import refusal_text

        sys.stderr.write(refusal_text(envelope, getattr(args, "query", None)) + "\n")
    else:
        try:
            _emit(envelope)
        except BrokenPipeError:
            _drop_stdout()


def _noticed(args, envelope: dict) -> dict:
    """A refusal of a run that loaded its contract carries that contract's `_notice`, as every answer
    does (made before the database was compared, it says no drift: nothing was found yet)."""
    contract = getattr(args, "loaded", None)
    if contract is None or "_notice" in envelope:
        return envelope
    from ..drift.state import LakeState

    settings = args.settings  # read before any contract is loaded (`_load`)
    return {**envelope, "_notice": LakeState(contract, settings.min_cli_version).notice_for(settings.role)}


def _json_asked(args) -> bool:
    """--format json, or doctor's --json (elsewhere --json is the exploration's JSON form)."""
    return getattr(args, "format", None) == "json" or (getattr(args, "command", None) == "doctor"
                                                         and getattr(args, "json", False) is True)


def _at_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced, or closed
        return False


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit finds no closed pipe either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
