"""Server, governance forms: a reviewer's request -> checked fields, the page's fixed messages, small helpers.

Form input is checked before it is used (UTF-8, no control characters,
bounded lengths, an identifier for an id): a 400, never a 500. The page's
messages are keys of a fixed table (`?done=approved&id=...`), never text
from the URL.
"""

from __future__ import annotations

import json
import unicodedata
import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse

from ..errors import BudgetError, Codes, InputError
from ..governance import promote as promotion
from ..names import fold, is_identifier

# The page's messages: a key of the redirect (`?done=...&id=...`) -> its text; nothing else is shown.
DONE = {
    "promoted": "promoted {id} (pending): it runs once a reviewer approves it below",
    "approved": "approved {id}: agents can run it with ontoos_run_query",
    "closed": "closed request {id}",
    "retired": "retired {id}: it no longer runs",
    "rejected": "rejected {id}: it never runs, and its fingerprint is not offered again",
}
LOGIN_DONE = {"signed_out": "You are signed out: the session has ended."}

MAX_FORM = 64 * 1024
MAX_FIELDS = 300
FIELD_LIMITS = {"token": 4096, "csrf": 200, "fingerprint": 64, "id": 63, "title": promotion.MAX_TITLE, "keep": 2000,
                "answered_by": 63}
# what a field may not hold: control characters (C0, DEL, C1), surrogates, private use, and the bidi controls
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _origin(value: str) -> str:
    """An origin as compared: lower case, without its scheme's default port."""
    v = value.strip().lower()
    for scheme, port in (("http://", ":80"), ("https://", ":443")):
        if v.startswith(scheme) and v.endswith(port):
            return v[: -len(port)]
    return v


def _codes():
    from ..errors import all_codes

    return all_codes()


def _suggest_id(candidate: dict[str, Any]) -> str:
    base = fold(candidate.get("dataset") or "exploration")
    return f"{base}_{candidate['fingerprint'][:6]}"


def _suggest_title(candidate: dict[str, Any]) -> str:
    return f"{candidate.get('dataset') or 'exploration'} ({candidate['fingerprint'][:6]})"


def _shown(example: Any) -> str:
    return example if isinstance(example, str) else json.dumps(example)


def _ident(value: str) -> str:
    if not is_identifier(value):
        raise InputError(Codes.INVALID_NAME, "the id must be an identifier (letters, digits and _, at most 63)",
                         hint="e.g. workloads_by_namespace")
    return value


def _chosen(keep: list[str]) -> dict[str, frozenset[str]]:
    """The examples ticked on the promote form: `keep` values, each the JSON [parameter, example]."""
    chosen: dict[str, set[str]] = {}
    for raw in keep:
        try:
            name, value = json.loads(raw)
        except (ValueError, TypeError):
            raise InputError(Codes.INVALID_REQUEST, "a kept example is not one the promote form offers",
                             hint="promote from the form at /governance/promote?fingerprint=...") from None
        if not isinstance(name, str) or isinstance(value, (dict, list)):
            raise InputError(Codes.INVALID_REQUEST, "a kept example is not one the promote form offers",
                             hint="promote from the form at /governance/promote?fingerprint=...")
        chosen.setdefault(name, set()).add(promotion.example_key(value))
    return {k: frozenset(v) for k, v in chosen.items()}


def _describe(name: str, form: Form) -> str:
    """What an action was asked to do, for the audit (ids and fingerprints as sent, cut short)."""
    parts = [name] + [f"{k}={form.one_or_none(k)[:70]!r}" for k in ("id", "fingerprint") if form.one_or_none(k)]
    return " ".join(parts)


def _done(key: str, ident: str, path: str = "/governance") -> RedirectResponse:
    return RedirectResponse(path + "?" + urllib.parse.urlencode({"done": key, "id": ident}), status_code=303)


def _notice(request: Request, table: dict[str, str]) -> str | None:
    """The message of `?done=<key>` (with `id`, an identifier, where the message names one); else none."""
    text = table.get(request.query_params.get("done") or "")
    if text is None:
        return None
    if "{id}" in text:
        ident = request.query_params.get("id")
        if not is_identifier(ident):
            return None
        return text.format(id=ident)
    return text


# ---------------------------------------------------------------- forms


class Form:
    """A form's fields, read and checked once (`_form`)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]

    def one_or_none(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if len(values) == 1 else None

    def one(self, name: str) -> str:
        """The field sent once ('' when not sent); sent twice, a 400 (which one counts is ambiguous)."""
        values = self.all(name)
        if len(values) > 1:
            raise InputError(Codes.INVALID_REQUEST, f"'{name}' is sent more than once", hint="send each field once")
        return values[0] if values else ""


async def _form(request: Request) -> Form:
    """The body as an HTML form: application/x-www-form-urlencoded, UTF-8, at most MAX_FORM bytes and
    MAX_FIELDS fields; each field within its length and free of control characters, surrogates and
    bidi controls (400, naming the field, never echoing it)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    chunks, size = [], 0
    async for chunk in request.stream():  # refused as soon as it is too large, not after reading it all
        size += len(chunk)
        if size > MAX_FORM:
            raise BudgetError(Codes.INPUT_TOO_LARGE, "the form is too large", hint="send at most 64 KiB")
        chunks.append(chunk)
    if ctype != "application/x-www-form-urlencoded":
        raise InputError(Codes.INVALID_REQUEST, "the body is not an HTML form",
                         hint="send Content-Type: application/x-www-form-urlencoded, as the dashboard's forms do")
    try:
        text = b"".join(chunks).decode("utf-8")
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FIELDS, encoding="utf-8",
                                       errors="strict")
    except UnicodeDecodeError:
        raise InputError(Codes.INVALID_REQUEST, "the form is not UTF-8", hint="send the form as UTF-8") from None
    except ValueError:
        raise InputError(Codes.INVALID_REQUEST, f"the form has more than {MAX_FIELDS} fields",
                         hint="send the dashboard's form as it is") from None
    for name, value in pairs:
        if name not in FIELD_LIMITS:
            continue  # a field no route reads (a browser's button name, ...): never used
        if len(value) > FIELD_LIMITS[name]:
            raise InputError(Codes.INVALID_REQUEST, f"'{name}' is longer than {FIELD_LIMITS[name]} characters",
                             hint=f"send at most {FIELD_LIMITS[name]} characters")
        if bad := next((c for c in value if c in _BIDI or unicodedata.category(c) in ("Cc", "Cs", "Co")), None):
            raise InputError(Codes.INVALID_REQUEST, f"'{name}' holds a control character (U+{ord(bad):04X})",
                             hint="send printable text only")
    return Form(pairs)
