"""Server, the REST API's GET form: a query string -> the tool's arguments (the JSON form).

    explore_arguments(request.query_params)   # {"dataset": ..., "fields": [...], ..., "dry_run": True,
                                              #  "require": {"max_age_s": 3600}}
    catalog_arguments(request.query_params)   # {} or {"dataset": ...}

Single-valued keys once, list keys repeatable and split on top-level commas,
a filter as a CLI flag (`k=v` takes the rest as the value; anything else is a
predicate). The flags are read by `grammar.forms.from_flags` and written back
as the JSON form (`grammar.render.to_json_form`), so a GET asks exactly what
the same POST asks, through the same `Tools.call`.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.datastructures import QueryParams

from ..errors import Codes, InputError
from ..grammar.forms import from_flags
from ..grammar.render import to_json_form

SINGLE = ("dataset", "limit", "dry_run", "query", "max_age_s", "consistency", "cursor")
OPTIONS = ("dry_run", "max_age_s", "consistency", "cursor")  # what the call asks of the answer, not the exploration
MULTI = ("fields", "filter", "relation", "group_by", "order_by")
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no")
INTEGER = re.compile(r"[+-]?[0-9]{1,4000}")  # ASCII digits only: int() would also take "５" or "1_0"


def explore_arguments(params: QueryParams) -> dict[str, Any]:
    """ontoos_explore's arguments from the GET form; InputError (EX102, or the flags' own) if unreadable."""
    for key in params.keys():
        if key not in SINGLE + MULTI:
            raise InputError(Codes.INVALID_REQUEST, f"unknown query parameter '{key[:40]}'",
                             hint=f"parameters: {', '.join(SINGLE + MULTI)}")
    for key in SINGLE:
        if len(params.getlist(key)) > 1:
            raise InputError(Codes.INVALID_REQUEST, f"'{key}' is given more than once", hint=f"give '{key}' once")
    dry_run = params.get("dry_run", "false").strip().lower()
    if dry_run not in TRUE + FALSE:
        raise InputError(Codes.INVALID_REQUEST, "'dry_run' must be true or false", hint="e.g. dry_run=true")
    flag: dict[str, Any] = {"dry_run": True} if dry_run in TRUE else {}
    require = _require(params)
    if require:
        flag["require"] = require
    if "cursor" in params:
        flag["cursor"] = params["cursor"]
        if not any(k in params for k in ("query", "dataset")):  # the cursor alone asks its own question
            return flag
    if "query" in params:
        others = [k for k in params.keys() if k not in ("query", *OPTIONS)]
        if others:  # as the JSON form: one or the other, never a text silently winning over flags
            raise InputError(Codes.INVALID_REQUEST, f"'query' cannot be combined with '{others[0]}'",
                             hint="put the whole exploration in the text of 'query', or leave 'query' out")
        return {"query": params["query"], **flag}
    if "dataset" not in params:
        raise InputError(Codes.INVALID_REQUEST, "'dataset' is required",
                         hint="e.g. /api/v1/explore?dataset=workloads&fields=name,namespace&filter=namespace=prod")
    limit = params.get("limit")
    if limit is not None:
        if not INTEGER.fullmatch(limit.strip()):
            raise InputError(Codes.INVALID_REQUEST, "'limit' must be an integer", hint="e.g. limit=20")
        limit = int(limit)
    exploration = from_flags(params["dataset"], params.getlist("fields"), params.getlist("filter"),
                             params.getlist("relation"), params.getlist("group_by"), params.getlist("order_by"), limit)
    return {**to_json_form(exploration), **flag}


def catalog_arguments(params: QueryParams) -> dict[str, Any]:
    """ontoos_catalog's arguments from the GET form: nothing, one dataset, or one name to look up; and
    `sample`, a row count (checked by the tool's model)."""
    for key in params.keys():
        if key not in ("dataset", "name", "sample"):
            raise InputError(Codes.INVALID_REQUEST, f"unknown query parameter '{key[:40]}'",
                             hint="the catalog takes dataset or name (and sample), e.g. /api/v1/catalog?dataset=workloads "
                                  "or /api/v1/catalog?name=namespace")
    for key in ("dataset", "name", "sample"):
        if len(params.getlist(key)) > 1:
            raise InputError(Codes.INVALID_REQUEST, f"'{key}' is given more than once", hint=f"give '{key}' once")
    out: dict[str, Any] = {k: params[k] for k in ("name", "dataset") if k in params}
    if "sample" in params:
        if not INTEGER.fullmatch(params["sample"].strip()):
            raise InputError(Codes.INVALID_REQUEST, "'sample' must be a whole number from 1 to 10", hint="e.g. sample=3")
        out["sample"] = int(params["sample"])
    return out


def without_format(params: QueryParams) -> QueryParams:
    """The parameters but `format` (csv|json: how the answer is sent, read by the REST layer)."""
    if "format" not in params:
        return params
    return QueryParams([(k, v) for k, v in params.multi_items() if k != "format"])


def query_arguments(params: QueryParams, names: tuple[str, ...]) -> dict[str, Any]:
    """A GET form of single string parameters `names` (the named-query listing's `domain`, `q`): -> the
    arguments; InputError EX102 for any other parameter or one given twice."""
    for key in params.keys():
        if key not in names:
            raise InputError(Codes.INVALID_REQUEST, f"unknown query parameter '{key[:40]}'",
                             hint=f"parameters: {', '.join(names)}" if names else "this endpoint takes none")
    for key in names:
        if len(params.getlist(key)) > 1:
            raise InputError(Codes.INVALID_REQUEST, f"'{key}' is given more than once", hint=f"give '{key}' once")
    return {k: params[k] for k in names if k in params}


def _require(params: QueryParams) -> dict[str, Any]:
    """`max_age_s` and `consistency` -> the JSON form's `require` (checked there: `require.read`)."""
    out: dict[str, Any] = {}
    if "max_age_s" in params:
        age = params["max_age_s"].strip()
        if not INTEGER.fullmatch(age):
            raise InputError(Codes.INVALID_REQUEST, "'max_age_s' must be a whole number of seconds",
                             hint="e.g. max_age_s=3600")
        out["max_age_s"] = int(age)
    if "consistency" in params:
        out["consistency"] = params["consistency"].strip()
    return out
