"""Server, the REST API described: the OpenAPI 3.1 document at GET /api/v1/openapi.json.

Made once per process from the pydantic models the endpoints validate with
(`tool_models.py`: ExploreInput, CatalogInput's fields, QueriesInput's,
RequestInput; `api_models.py`: RunBody, ErrorEnvelope, GovernanceQuery's
fields, GovernanceAnswer) and the success envelope; every operation lists the statuses its refusals can take, each with
the error envelope. The query parameters of the GET forms are those the routes
read: `query_string.py`'s `SINGLE` (each described in TEXT_PARAMS, a test holds
the two to the same names) and `MULTI`, `rest.LISTING_PARAMS`. The document is served with an
ETag (its SHA-256), so a client generator or a cache asks again for nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from pydantic.json_schema import models_json_schema

from ..governance.report import VIEWS
from .api_models import ErrorEnvelope, GovernanceAnswer, GovernanceQuery, RunBody
from .query_string import MULTI
from .rest import LISTING_PARAMS
from .tool_models import CatalogInput, Envelope, ExploreInput, QueriesInput, RequestInput

REF = "#/components/schemas/{model}"
# every status a refusal of a data endpoint can take (the error table's rows), and what it means here
REFUSALS = {
    "400": "The request cannot be read, or the exploration names what the contract does not have",
    "401": "No token, or one that is not valid",
    "403": "The role may not read it, or a budget refuses it",
    "406": "The Accept header names no media type this endpoint gives",
    "408": "The body did not arrive in time",
    "410": "The cursor has expired, or is not one this service issued",
    "412": "The evidence cannot meet the caller's require (CONSISTENCY_UNVERIFIED)",
    "413": "The body is too large",
    "415": "The body is not JSON",
    "429": "A rate limit, an in-flight cap or a per-address limit (Retry-After says when)",
    "500": "The service failed (never a database message)",
    "503": "The database is unavailable, or this process is shutting down (Retry-After)",
    "504": "The time budget ran out",
}
GET_REFUSALS = tuple(s for s in REFUSALS if s not in ("408", "413", "415"))
TEXT_PARAMS = {
    "query": "The whole exploration as text, e.g. `explore workloads fields name where namespace = 'prod' limit 5`",
    "dataset": "The dataset to explore (with fields, filter, ... as flags)",
    "limit": "At most this many rows",
    "dry_run": "true: the plan and its cost class, no rows",
    "max_age_s": "Refuse the answer unless its data was collected at most this many seconds ago",
    "consistency": "fixed_read: refuse the answer unless its evidence was read in the rows' own snapshot",
    "cursor": "meta.next_cursor of a truncated answer: its next page",
}


def _param(name: str, description: str, schema: dict[str, Any], where: str = "query", required: bool = False,
           **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "description": description, "schema": schema, **extra}


CSV_CONTENT = {"text/csv": {"schema": {"type": "string", "description": "A header row, then the rows (RFC 4180, "
                                                                    "UTF-8); meta in X-Ontoos-* headers"}}}
FORMAT = {"name": "format", "in": "query", "required": False, "schema": {"type": "string", "enum": ["json", "csv"]},
          "description": "How the answer is sent (wins over Accept): csv gives the rows as CSV"}


def _responses(ok: str, statuses: tuple[str, ...], schema: str = "Envelope", csv: bool = False,
               cached: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": ok, "content": {
        "application/json": {"schema": {"$ref": REF.format(model=schema)}}, **(CSV_CONTENT if csv else {})}}}
    if cached:
        out["200"]["headers"] = {"ETag": {"schema": {"type": "string"}, "description": "What the answer says"}}
        out["304"] = {"description": "Not modified: If-None-Match named the ETag of what it would say"}
    for status in statuses:
        out[status] = {"description": REFUSALS[status], "content": {
            "application/json": {"schema": {"$ref": REF.format(model="ErrorEnvelope")}}}}
    return out


def _body(model: str, example: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": REF.format(model=model)},
                                                               "example": example}}}


def _explore_params() -> list[dict[str, Any]]:
    params = [_param(k, d, {"type": "integer", "minimum": 0} if k in ("limit", "max_age_s") else
                     {"type": "string", "enum": ["fixed_read", "unverified"]} if k == "consistency" else
                     {"type": "string", "enum": ["true", "false"]} if k == "dry_run" else {"type": "string"})
              for k, d in TEXT_PARAMS.items()]
    for k in MULTI:
        params.append(_param(k, f"One or more {k.replace('_', ' ')} (repeat the parameter, or separate by commas)",
                             {"type": "array", "items": {"type": "string"}}, style="form", explode=True))
    return params


def _fields_as_params(model, only: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The model's fields as query parameters (`only`: those of these names, the ones the route reads)."""
    schema = model.model_json_schema()
    out = []
    for name, prop in schema.get("properties", {}).items():
        if only is not None and name not in only:
            continue
        typed = [t for t in prop.get("anyOf", [prop]) if t.get("type") != "null"][0]
        out.append(_param(name, prop.get("description", ""), {k: v for k, v in typed.items() if k != "title"}))
    return out


@functools.lru_cache(maxsize=4)
def document(version: str) -> bytes:
    """The document, as the bytes served."""
    models = [ExploreInput, RunBody, RequestInput, Envelope, ErrorEnvelope, GovernanceAnswer]
    _, top = models_json_schema([(m, "validation") for m in models], ref_template=REF)
    schemas = top.get("$defs", {})
    data_refusals = tuple(REFUSALS)
    paths = {
        "/api/v1/explore": {
            "post": {"operationId": "explore", "summary": "Ask an exploration (the JSON form)",
                     "parameters": [FORMAT],
                     "requestBody": _body("ExploreInput", {"dataset": "workloads", "fields": ["name", "namespace"],
                                                           "filter": "kind = 'Deployment'", "limit": 5}),
                     "responses": _responses("The rows, and what they are (meta, with the evidence)", data_refusals,
                                             csv=True)},
            "get": {"operationId": "exploreGet", "summary": "Ask an exploration as a query string",
                    "parameters": [*_explore_params(), FORMAT],
                    "responses": _responses("The rows, and what they are (meta, with the evidence)", GET_REFUSALS,
                                            csv=True)},
        },
        "/api/v1/catalog": {"get": {
            "operationId": "catalog", "summary": "List or describe the datasets your role may read",
            "parameters": _fields_as_params(CatalogInput),
            "responses": _responses("The datasets, one dataset's columns and relations, or what a name is",
                                    GET_REFUSALS, cached=True)}},
        "/api/v1/queries": {"get": {
            "operationId": "listQueries", "summary": "The reviewed named queries you may run",
            "parameters": _fields_as_params(QueriesInput, LISTING_PARAMS),
            "responses": _responses("data.queries: each with its parameters", GET_REFUSALS)}},
        "/api/v1/queries/{id}": {"get": {
            "operationId": "getQuery", "summary": "One named query: its parameters, columns, notes",
            "parameters": [_param("id", "The named query's id", {"type": "string"}, "path", True)],
            "responses": _responses("data.query", GET_REFUSALS)}},
        "/api/v1/queries/{id}/run": {"post": {
            "operationId": "runQuery", "summary": "Run a named query with its parameters",
            "parameters": [_param("id", "The named query's id", {"type": "string"}, "path", True), FORMAT],
            "requestBody": _body("RunBody", {"params": {"provider": "aws"}}),
            "responses": _responses("The rows, as an exploration's", data_refusals, csv=True)}},
        "/api/v1/requests": {"post": {
            "operationId": "requestQuery", "summary": "Ask reviewers for a query no exploration can answer",
            "requestBody": _body("RequestInput", {"question": "which hosts run two versions of one image?"}),
            "responses": _responses("The request filed", data_refusals)}},
        "/api/v1/governance/{view}": {"get": {
            "operationId": "governanceView", "summary": "A governance report (reviewers): every view, or one; "
                                                        "a table view pages and comes as CSV",
            "parameters": [_param("view", "report (every view), or one view; by_subtype, by_dataset, by_principal, "
                                          "by_column, recent and recurring are tables that page",
                                  {"type": "string", "enum": ["report", *VIEWS]}, "path", True),
                           *_fields_as_params(GovernanceQuery)],
            "responses": _responses("data.<view>: its rows (and data.page: which of how many), or the whole report",
                                    GET_REFUSALS, schema="GovernanceAnswer", csv=True)}},
        "/api/v1/openapi.json": {"get": {
            "operationId": "openapi", "summary": "This document", "security": [],
            "responses": {"200": {"description": "The OpenAPI 3.1 document",
                                  "content": {"application/json": {"schema": {"type": "object"}}}},
                          "304": {"description": "Not modified (If-None-Match)"}}}},
        "/healthz": {"get": {"operationId": "healthz", "summary": "Alive", "security": [],
                             "responses": {"200": {"description": "This process answers",
                                                   "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        "/readyz": {"get": {"operationId": "readyz", "summary": "Ready for requests", "security": [],
                            "responses": {
                                "200": {"description": "The database answers and the contract is loaded",
                                        "content": {"application/json": {"schema": {"type": "object"}}}},
                                "503": {"description": "Not ready: the database is away, or the process drains",
                                        "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    }
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "ontoos-explore", "version": version,
                 "description": "A guarded exploration API over a data lake: every question is checked against "
                                "its contract (readable columns, read sets, budgets), compiled, checked again, "
                                "run read-only and audited. Refusals are the error envelope, with a hint."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                      "description": "A principal's token from the server "
                                                                     "configuration"}}},
    }
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def document_etag(body: bytes) -> str:
    """A strong validator of the document's bytes."""
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
