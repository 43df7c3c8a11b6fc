"""CLI, `ontoos token new --principal NAME --role ROLE [--reviewer]`: a bearer token, shown once.

The token is 32 random bytes (URL-safe text, prefixed `ontoos_` so a secret
scanner can find one that leaked); the server keeps only its SHA-256, so what
is printed for the configuration is the line to add under `principals:`. At a
terminal both go to stdout as text; piped, one JSON envelope (`data.token`,
`data.token_sha256`, `data.config_line`). The role must be one of the
contract's (did-you-mean otherwise); the principal's name a plain identifier.
"""

from __future__ import annotations

import re
import secrets
import sys

from .common import EXIT_OK, UsageError, _emit, _load

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


def new_token() -> str:
    return "ontoos_" + secrets.token_urlsafe(32)


def cmd_token(args) -> int:
    from ..pipeline import resolve_role
    from ..server.config import token_hash

    if not NAME.fullmatch(args.principal or ""):
        raise UsageError("--principal takes a name of letters, digits, '_', '.' or '-' (starting with a letter)")
    role = resolve_role(_load(args), args.role)  # AuthError EX501 with a did-you-mean for a role it lacks
    token = new_token()
    digest = token_hash(token)
    extra = ", reviewer: true" if args.reviewer else ""
    line = f'{args.principal}: {{role: {role.name}, token_sha256: "{digest}"{extra}}}'
    if sys.stdout.isatty():
        sys.stdout.write(f"token for {args.principal} (shown once, keep it secret):\n  {token}\n"
                         f"add under principals: in the server configuration:\n  {line}\n")
    else:
        _emit({"ok": True, "data": {"principal": args.principal, "role": role.name, "reviewer": bool(args.reviewer),
                                    "token": token, "token_sha256": digest, "config_line": line}, "meta": {}})
    return EXIT_OK
