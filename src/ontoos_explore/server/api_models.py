"""Server, the REST API's own models: the error envelope and the bodies only REST takes.

The request models of the tools (`tool_models.py`) are the REST bodies too: what
`POST /api/v1/explore` validates is `ExploreInput`, what
`POST /api/v1/queries/{id}/run` validates is `RunBody` (RunQueryInput without
the id, which is in the path). The OpenAPI document (`openapi.py`) is made from
these same classes, so it cannot say other than what the endpoints check.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

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
