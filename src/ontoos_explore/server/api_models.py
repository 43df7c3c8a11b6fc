"""Server, the REST API's own models: the error envelope and the bodies only REST takes.

The request models of the tools (`tool_models.py`) are the REST bodies too: what
`POST /api/v1/explore` validates is `ExploreInput`. `POST /api/v1/queries/{id}/run`
validates its body as `RunQueryInput` with the path's id; `RunBody` describes that
body in the document: RunQueryInput's fields but the id, with the same types and
descriptions (tests/server/test_rest_api.py holds the two together). The OpenAPI
document (`openapi.py`) is made from these classes and from the parameter names
the routes read (`rest.LISTING_PARAMS`, `query_string.SINGLE`, `MULTI`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from . import dashboard_views as dv
from .tool_models import CURSOR, REQUIRE, RequireInput


class Position(BaseModel):
    model_config = ConfigDict(extra="allow")
    line: int | None = None
    column: int | None = None
    offset: int | None = None


class ErrorBody(BaseModel):
    """What was refused and how to ask instead."""

    model_config = ConfigDict(extra="allow")
    type: Literal["validation", "auth", "policy", "network", "internal"]
    subtype: str = Field(description="A stable name of the kind of refusal, e.g. UNKNOWN_COLUMN, RATE_LIMITED")
    code: str = Field(description="EXnnn, one row of the error table", pattern=r"^EX\d{3}$")
    message: str
    hint: str | None = Field(None, description="What to do instead")
    position: Position | None = Field(None, description="Where in the text form the problem is")
    retry_with: dict[str, Any] | None = Field(None, description="The corrected arguments, when one is certain")


class Notice(BaseModel):
    model_config = ConfigDict(extra="allow")
    min_cli_version: str
    schema_drift: bool
    contract_hash: str


class ErrorEnvelope(BaseModel):
    """Every refusal, on every endpoint and status."""

    model_config = ConfigDict(extra="allow", title="ErrorEnvelope")
    ok: Literal[False]
    error: ErrorBody
    meta: dict[str, Any] = Field(description="exploration_id (the audit event's id), contract_hash, retry_after_s")
    notice: Notice | None = Field(None, alias="_notice")


class RunBody(BaseModel):
    """POST /api/v1/queries/{id}/run: the parameters (and a cursor for the next page)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    params: SkipValidation[dict[str, Any]] = Field(default_factory=dict, description="Parameter values by name")
    require: SkipValidation[RequireInput | None] = Field(None, description=REQUIRE)
    cursor: str | None = Field(None, description=CURSOR)


def _pattern(regex) -> str:
    return "^" + regex.pattern + "$"


class GovernanceQuery(BaseModel):
    """The query parameters of GET /api/v1/governance/{view}: the dashboard's filters and a page. Their
    patterns are the ones `dashboard_views.filters_of` checks (the same compiled expressions)."""

    model_config = ConfigDict(extra="forbid")
    window: str | None = Field(None, pattern=_pattern(dv.WINDOW),
                               description="The last N days (7d, or 7), 1 to 365; 14 by default")
    days: str | None = Field(None, pattern=_pattern(dv.WINDOW), description="The older name of window")
    dataset: str | None = Field(None, description="Only events of this dataset")
    subtype: str | None = Field(None, pattern=_pattern(dv.SUBTYPE), description="Only this error subtype")
    principal: str | None = Field(None, max_length=200, description="Only this principal's events")
    surface: str | None = Field(None, pattern=_pattern(dv.SURFACE_NAME), description="cli, dashboard, mcp, rest, ...")
    outcome: Literal["ok", "refused", "failed"] | None = Field(None, description="Only events that ended so")
    page: int | None = Field(None, ge=1, le=999_999, description="Which page of a table view (from 1)")
    size: int | None = Field(None, ge=1, le=dv.MAX_SIZE, description="Rows on a page of a table view (20)")
    format: Literal["json", "csv"] | None = Field(None, description="csv: a table view's rows as CSV (wins over Accept)")


class TablePage(BaseModel):
    number: int
    size: int
    total: int = Field(description="How many rows the view has in all, with these filters")
    pages: int
    first_row: int
    last_row: int


class GovernanceAnswer(BaseModel):
    """A governance view: data holds the view's rows under its name (with `page` for a table view), or for
    `report` every view; meta the contract hash and the filters as read."""

    model_config = ConfigDict(extra="allow", title="GovernanceAnswer")
    ok: Literal[True]
    data: dict[str, Any]
    meta: dict[str, Any]
