"""Server, dashboard views: a reviewer's URL -> checked filters and page; a report table -> cells, links, exports.

The dashboard's URLs say what they show, with query parameters of the
filters' own names: `window` (`7d`, or a number of days), `dataset`,
`subtype`, `principal`, `surface`, `outcome`; `page` and `size` choose a page
of a table, `format=csv|json` downloads the whole table (at most EXPORT_MAX
rows) with the same filters. An unknown parameter or a bad value is a 400
naming it (with a did-you-mean), never ignored.

Each listing (`LISTINGS`) is one report view (governance/report.py) with a
title, the columns it shows and where each cell leads: a rejection to its
event, a principal to its events, a column to the attempts on it, a
fingerprint to its detail. Cells are built here, as (text, href) parts, so
the templates only lay them out; long text is cut at CUT characters (the
whole is on the detail page). Times are shown in UTC, with the zone.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import QueryParams
from starlette.responses import Response

from ..errors import Codes, InputError
from ..governance import report as rep
from ..governance.vocabulary import OUTCOMES, SURFACES
from ..names import did_you_mean, is_identifier
from ..pages import NAMED
from .negotiate import CSV_MEDIA, csv_body, csv_cell

CUT = 120  # characters of a long value shown in a table
EXPORT_MAX = 10_000  # rows in one download
MAX_SIZE = 200  # rows on one page
WINDOWS = (1, 7, 14, 30, 90, 365)
FILTERS = ("window", "dataset", "subtype", "principal", "surface", "outcome")
PAGING = ("page", "size", "format")
WINDOW = re.compile(r"([0-9]{1,3})d?")
SUBTYPE = re.compile(r"[A-Z][A-Z_]{0,39}")
SURFACE_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
NUMBER = re.compile(r"[0-9]{1,6}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class Listing:
    path: str  # under /governance/
    view: str  # the report's view
    title: str
    columns: tuple[str, ...]  # shown, in order (the export has every column of the view)
    headers: tuple[str, ...]


LISTINGS: dict[str, Listing] = {l.path: l for l in (
    Listing("events", "events", "Events", ("at", "principal", "surface", "outcome", "subtype", "dataset", "exploration",
                                           "message"),
            ("when", "who", "surface", "outcome", "subtype", "dataset", "exploration", "message")),
    Listing("columns", "by_column", "Secret and hidden columns reached for",
            ("dataset", "column_name", "reason", "n", "who", "last"),
            ("dataset", "column", "reason", "attempts", "who", "last seen")),
    Listing("subtypes", "by_subtype", "Rejections by subtype", ("key", "n"), ("subtype", "rejections")),
    Listing("datasets", "by_dataset", "Rejections by dataset", ("key", "n"), ("dataset", "rejections")),
    Listing("principals", "by_principal", "Rejections by principal", ("key", "n"), ("principal", "rejections")),
    Listing("fingerprints", "recurring", "Recurring explorations", ("example", "uses", "ok", "principals", "last"),
            ("exploration (the newest use)", "uses", "answered", "principals", "last used")),
)}


def _refuse(message: str, hint: str) -> InputError:
    return InputError(Codes.INVALID_REQUEST, message, hint=hint)


def one(q: QueryParams, name: str) -> str | None:
    """A parameter given at most once (twice: a 400); an empty value is None."""
    values = q.getlist(name)
    if len(values) > 1:
        raise _refuse(f"'{name}' is given {len(values)} times", f"give {name} once")
    return values[0] if values and values[0] != "" else None


def check_names(q: QueryParams, allowed: tuple[str, ...]) -> None:
    """Every parameter is one the page takes. The refusal names none of the URL's text (a page that
    said what a link put in it could be made to say anything): only the names it does take."""
    for name in q.keys():
        if name not in allowed:
            hint, _ = did_you_mean(name[:40], allowed, "parameters") if allowed else ("it takes none", None)
            raise _refuse("this page takes no parameter of that name", hint)


def no_blanks(q: QueryParams) -> None:
    """For the JSON API (no HTML form sends its empty fields there): a parameter given empty is refused.
    Call after `check_names`, so the name it says is one the endpoint takes."""
    for name, value in q.multi_items():
        if value == "":
            raise _refuse(f"'{name}' is empty", f"leave {name} out, or give it a value")


def filters_of(q: QueryParams, *, extra: tuple[str, ...] = ()) -> rep.Filters:
    """The filters of a dashboard URL (or of the JSON API's, which also takes the older `days`)."""
    check_names(q, FILTERS + PAGING + ("days",) + extra)
    window, days = one(q, "window"), one(q, "days")
    if window is not None and days is not None:
        raise _refuse("'window' and 'days' are given both", "give window (days is its older name)")
    window = window or days or "14"
    if not (m := WINDOW.fullmatch(window)) or not 1 <= int(m.group(1)) <= rep.MAX_DAYS:
        raise _refuse("'window' must be a number of days, 1 to 365", "e.g. window=7d")
    dataset, subtype, principal = one(q, "dataset"), one(q, "subtype"), one(q, "principal")
    surface, outcome = one(q, "surface"), one(q, "outcome")
    if dataset is not None and not is_identifier(dataset):
        raise _refuse("'dataset' must be a dataset's name", "e.g. dataset=workloads")
    if subtype is not None and not SUBTYPE.fullmatch(subtype):
        raise _refuse("'subtype' must be an error subtype", "e.g. subtype=UNKNOWN_FIELD")
    if principal is not None and (len(principal) > 200 or _CONTROL.search(principal)):
        raise _refuse("'principal' must be a principal's name", "e.g. principal=alice")
    if surface is not None and not SURFACE_NAME.fullmatch(surface):
        raise _refuse("'surface' must be a surface's name", "surfaces: " + ", ".join(SURFACES))
    if outcome is not None and outcome not in OUTCOMES:
        hint, _ = did_you_mean(outcome[:40], OUTCOMES, "outcomes")
        raise _refuse("'outcome' must be ok, refused or failed", hint)
    return rep.Filters(days=int(m.group(1)), dataset=dataset, subtype=subtype, principal=principal, surface=surface,
                       outcome=outcome)


def page_of(q: QueryParams) -> rep.Page:
    number, size = one(q, "page") or "1", one(q, "size") or "20"
    if not NUMBER.fullmatch(number) or int(number) < 1:
        raise _refuse("'page' must be a page number, from 1", "e.g. page=2")
    if not NUMBER.fullmatch(size) or not 1 <= int(size) <= MAX_SIZE:
        raise _refuse(f"'size' must be a number of rows, 1 to {MAX_SIZE}", "e.g. size=50")
    return rep.Page(int(number), int(size))


def export_format(q: QueryParams) -> str | None:
    """'csv', 'json' or None (the page)."""
    fmt = one(q, "format")
    if fmt is not None and fmt not in ("csv", "json", "html"):
        raise _refuse("'format' must be csv or json", "format=csv or format=json (the page itself without it)")
    return None if fmt == "html" else fmt


def format_and_page(q: QueryParams) -> tuple[str | None, rep.Page]:
    """What a table's URL asks for: its page, or (format=) a download of all of it, EXPORT_MAX rows at most."""
    fmt = export_format(q)
    return fmt, page_of(q) if fmt is None else rep.Page(1, EXPORT_MAX)


# ------------------------------------------------------------------ URLs

def url(path: str, params: dict[str, Any] | None = None) -> str:
    shown = {k: str(v) for k, v in (params or {}).items() if v not in (None, "")}
    return path + ("?" + urllib.parse.urlencode(shown) if shown else "")


def quoted(*parts: str) -> str:
    return "/".join(urllib.parse.quote(p, safe="") for p in parts)


def events_url(f: rep.Filters, **narrow: Any) -> str:
    return url("/governance/events", {**f.query(), **narrow})


def column_url(dataset: str, column: str, f: rep.Filters | None = None) -> str:
    return url(f"/governance/columns/{quoted(dataset, column)}", {"window": f"{f.days}d"} if f else None)


def fingerprint_url(fp: str, f: rep.Filters | None = None) -> str:
    return url(f"/governance/fingerprints/{quoted(fp)}", {"window": f"{f.days}d"} if f else None)


def query_url(ident: str) -> str:
    return f"/governance/queries/{quoted(ident)}"


def event_url(ident: str) -> str:
    return f"/governance/events/{quoted(ident)}"


# ------------------------------------------------------------------ cells

def when(value: Any) -> str:
    """A time as the pages show it: UTC, to the second, with its zone."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "" if value is None else str(value)


def cut(value: Any, limit: int = CUT) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


Part = tuple[str, str | None]  # (text, href or None)


def cells(listing: Listing, row: dict[str, Any], f: rep.Filters) -> list[list[Part]]:
    """Each shown column of a row, as parts that lead somewhere."""
    out = []
    for col in listing.columns:
        out.append(_cell(listing.view, col, row, f))
    return out


def _cell(view: str, col: str, row: dict[str, Any], f: rep.Filters) -> list[Part]:
    value = row.get(col)
    if col in ("at", "first", "last"):
        return [(when(value), event_url(row["id"]) if col == "at" and "id" in row else None)]
    if view == "by_column":
        if col == "column_name":
            return [(str(value), column_url(row["dataset"], str(value), f))]
        if col == "who":
            return _joined([(p, events_url(f, principal=p)) for p in sorted(value or [])])
    if view in ("events", "recent"):
        if col == "principal":
            return [(str(value), events_url(f, principal=value))]
        if col == "subtype" and value:
            return [(str(value), events_url(f, subtype=value))]
        if col in ("exploration", "message"):
            return [(cut(value), event_url(row["id"]) if value and len(str(value)) > CUT else None)]
    if view in ("by_subtype", "by_dataset", "by_principal") and col == "key" and value is None:
        return [("(none)", None)]
    if view in ("by_subtype", "by_dataset", "by_principal") and col == "key":
        key = {"by_subtype": "subtype", "by_dataset": "dataset", "by_principal": "principal"}[view]
        return [(str(value), events_url(f, outcome="refused", **{key: value}))]
    if view == "candidates" and col == "fingerprint":
        return [("Review and promote", url("/governance/promote", {"fingerprint": value}))]
    if view in ("recurring", "candidates") and col == "example":
        fp = str(row["fingerprint"])
        return [(cut(value), query_url(fp[len(NAMED):]) if fp.startswith(NAMED) else fingerprint_url(fp, f))]
    return [("" if value is None else str(value), None)]


def _joined(parts: list[Part]) -> list[Part]:
    out: list[Part] = []
    for i, part in enumerate(parts):
        if i:
            out.append((", ", None))
        out.append(part)
    return out


# ------------------------------------------------------------------ exports

def export(table: rep.Table, fmt: str, name: str, f: rep.Filters, as_of: str) -> Response:
    """The whole table (as far as it was read: `EXPORT_MAX` rows) as CSV or as the JSON envelope."""
    truncated = table.total > len(table.rows)
    headers = {"X-Ontoos-Total": str(table.total), "X-Ontoos-Truncated": "true" if truncated else "false",
               "Content-Disposition": f'attachment; filename="ontoos-{name}.{fmt}"'}
    if fmt == "json":
        body = {"ok": True, "data": {"columns": list(table.columns), "rows": table.rows, "total": table.total},
                "meta": {"filters": f.shown(), "truncated": truncated, "as_of": as_of}}
        return Response(json.dumps(body, ensure_ascii=False, default=str).encode("utf-8"),
                        media_type="application/json", headers=headers)
    rows = ([row.get(c) for c in table.columns] for row in table.rows)
    return Response(csv_body(table.columns, rows, _csv_cell), media_type=CSV_MEDIA, headers=headers)


def _csv_cell(value: Any) -> str:
    """A cell as `negotiate.csv_cell` writes it; text that a spreadsheet would run as a formula (it
    starts with = + - @, a tab or a carriage return: callers wrote it) gets a leading apostrophe."""
    text = csv_cell(value)
    return "'" + text if isinstance(value, str) and text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def as_of() -> str:
    return when(dt.datetime.now(dt.timezone.utc))
