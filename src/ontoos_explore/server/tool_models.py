"""Server, the tools as data: each tool's input model (published as its input schema), the catalogue of
tools in the order they are listed, and the validation that names what is wrong with a call's arguments."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, ValidationError

from ..errors import Codes, InputError
from ..names import close_matches

INSTRUCTIONS = """\
Read-only exploration of an R&D-ontology lakehouse (code projects, Kubernetes workloads and containers,
images, code archives, the tables code reads and writes, databases, configs, hosts).
Workflow: ontoos_catalog to see the datasets and columns your role may read; ontoos_explore to ask
(dry_run: true first when unsure); on a refusal, read error.hint and, when present, send error.retry_with
as the next ontoos_explore arguments unchanged. Names are matched case-insensitively. Filters:
= != < <= > >=, in (...), between ... and ..., is [not] null, [not] like/ilike; strings in single quotes;
combine with and/or/not. Rows are capped by your role; meta.truncated true means more rows exist, and
meta.next_cursor, sent back as {"cursor": ...}, returns the next page.
Prefer a named query (ontoos_queries, ontoos_run_query) when one answers the question.
Every answer's meta.evidence says as of when its data was collected and whether that is fresh; quote it.
To insist on fresh data send "require": {"max_age_s": N}; ontoos_stats shows every dataset's freshness."""


# ---------------------------------------------------------------- the input models
# Each is validated strictly, and published as the tool's input schema. A field typed
# SkipValidation[...] is published with its type but read by the JSON-form reader, whose
# messages name the place ("'fields' must be a list of strings", "dataset must be a name").
# `refusals`: the message and hint for a field the model itself refuses.


class FilterObject(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: str = Field(description="Column: name, or relation.name for a followed relation")
    op: str = Field("=", description="= != < <= > >= in, not in, between, is null, is not null, like, ilike, ...")
    value: str | int | float | bool | list[str | int | float | bool] | None = Field(
        None, description="A value; a list for in/between; absent for is null")


REQUIRE = ("What the answer's evidence must show, else it is refused (CONSISTENCY_UNVERIFIED) without rows: "
           "max_age_s, the data collected at most this many seconds ago; consistency \"fixed_read\", the rows "
           "and their evidence read in one snapshot")


class RequireInput(BaseModel):
    """The schema of `require` (read by `require.read`, which names what is wrong)."""

    model_config = ConfigDict(extra="forbid")
    max_age_s: int | None = Field(None, ge=0, description="Most seconds since the data was collected")
    consistency: Literal["any", "fixed_read"] = Field("any", description="fixed_read: rows and evidence, one snapshot")


class ExplorationInput(BaseModel):
    """The JSON form of an exploration (the README's "The language")."""

    model_config = ConfigDict(extra="forbid", strict=True)
    refusals: ClassVar[dict[str, tuple[str, str]]] = {}
    dataset: SkipValidation[str | None] = Field(None, description="Dataset to explore (see ontoos_catalog)")
    fields: SkipValidation[list[str] | None] = Field(
        None,
        description='Columns or aggregates, e.g. ["name", "count()", "sum(cpu_millis) as cpu", "relation.column"]')
    filter: SkipValidation[str | list[FilterObject] | None] = Field(
        None,
        description="A predicate, e.g. \"namespace = 'prod' and replicas > 2\", "
                    "or a list of {field, op, value} (ANDed)")
    relations: SkipValidation[list[str] | None] = Field(
        None, description="Relations to follow (joins), from ontoos_catalog")
    group_by: SkipValidation[list[str] | None] = Field(
        None, description="Columns to group by; every plain field must be listed when aggregating")
    order_by: SkipValidation[list[str] | None] = Field(
        None, description='Order keys: a column or alias; "-name" or "name desc" for descending')
    limit: SkipValidation[int | None] = Field(
        None, description="Most rows to return; lowered to your role's budget with a note")
    query: SkipValidation[str | None] = Field(
        None, description="The whole exploration in text form instead of the keys above")


CURSOR = "meta.next_cursor of a truncated answer: its next page (alone, or with the same question)"


class ExploreInput(ExplorationInput):
    """The JSON form of an exploration, plus dry_run, require and cursor (the next page)."""

    refusals: ClassVar[dict[str, tuple[str, str]]] = {
        "dry_run": ("'dry_run' must be true or false", 'e.g. "dry_run": true'),
        "cursor": ("'cursor' must be a string", "pass meta.next_cursor exactly as it came")}
    dry_run: bool = Field(False, description="Return the plan (datasets, limit, cost estimate, notes) instead of rows")
    require: SkipValidation[RequireInput | None] = Field(None, description=REQUIRE)
    cursor: str | None = Field(None, description=CURSOR)


class ExplainInput(ExplorationInput):
    """An exploration (the same arguments as ontoos_explore), or a named query: its id as `query`, and
    `params`."""

    params: SkipValidation[dict[str, Any] | None] = Field(
        None, description="With query naming a named query (from ontoos_queries): its parameter values")


class CatalogInput(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    refusals: ClassVar[dict[str, tuple[str, str]]] = {
        "dataset": ("'dataset' must be a string", 'e.g. {"dataset": "workloads"}'),
        "name": ("'name' must be a string", 'e.g. {"name": "namespace"}'),
        "sample": ("'sample' must be a whole number from 1 to 10", 'e.g. {"dataset": "workloads", "sample": 3}')}
    name: str | None = Field(None, description="Find anything by name: a dataset, dataset.column, a column name "
                                               "(every dataset that has it), an enum value, or a relation")
    dataset: str | None = Field(None, description="Describe this dataset; leave both out to list every readable "
                                                  "dataset")
    sample: int | None = Field(None, ge=1, le=10, description="With a dataset: also this many of its rows (at most "
                                                              "10), read as an exploration is")


class QueriesInput(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    refusals: ClassVar[dict[str, tuple[str, str]]] = {
        "domain": ("'domain' must be a string", 'e.g. {"domain": "fault"}'),
        "q": ("'q' must be a string", 'e.g. {"q": "table workloads"}'),
        "id": ("'id' must be a string", 'e.g. {"id": "hosts_by_provider"}')}
    id: str | None = Field(None, description="Only this named query (data.query instead of data.queries)")
    domain: str | None = Field(None, description="Only queries of this domain (product, architecture, rnd-commit, "
                                                 "ops, fault, incident)")
    q: str | None = Field(None, description="Only queries whose id, title, description, notes or scenarios hold "
                                            "every one of these words")


class RunQueryInput(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    refusals: ClassVar[dict[str, tuple[str, str]]] = {
        "id": ("'id' must be a string", 'e.g. {"id": "<a named query id from ontoos_queries>", "params": {}}'),
        "cursor": ("'cursor' must be a string", "pass meta.next_cursor exactly as it came")}
    id: str | None = Field(None, description="Named query id, from ontoos_queries (a cursor alone needs none)")
    params: SkipValidation[dict[str, Any]] = Field(default_factory=dict, description="Parameter values by name")
    require: SkipValidation[RequireInput | None] = Field(None, description=REQUIRE)
    cursor: str | None = Field(None, description=CURSOR)


class StatsInput(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    refusals: ClassVar[dict[str, tuple[str, str]]] = {
        "what": ("'what' must be \"freshness\"", 'e.g. {"what": "freshness"}')}
    what: Literal["freshness"] = Field("freshness", description="freshness: each readable dataset's evidence "
                                                                "(sources, batches, age against its threshold)")


class RequestInput(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    refusals: ClassVar[dict[str, tuple[str, str]]] = {
        "dataset": ("'dataset' must be a dataset's name", 'e.g. {"question": "...", "dataset": "workloads"}')}
    question: SkipValidation[str] = Field(description="What you need and could not ask, in words")
    dataset: str | None = Field(None, description="The dataset it is about, if one is")


class Meta(BaseModel):
    model_config = ConfigDict(extra="allow")
    exploration_id: str | None = None
    contract_hash: str | None = None


class Envelope(BaseModel):
    """A success envelope: data plus meta (rows, truncated, limit, notes, ...)."""

    model_config = ConfigDict(extra="allow")
    ok: Literal[True]
    data: dict[str, Any]
    meta: Meta


EXPLORE_ARGUMENTS = tuple(ExploreInput.model_fields)

QUERY_PREFIX = "ontoos_q_"  # a named query's own tool: this, then its id
READ_ONLY = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True, "open_world_hint": False}
# a tool that is not read-only says so: filing a request writes one (never destroys, each call a new one)
ANNOTATIONS = {"ontoos_request_query": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False,
                                        "open_world_hint": False}}

# name -> (title, description, input model); the order is the order tools are listed in.
TOOLS: dict[str, tuple[str, str, type[BaseModel]]] = {
    "ontoos_catalog": (
        "List or describe datasets",
        "List the datasets your role may read, or describe one: its readable columns (types, enum values), "
        "the relations that start there, and the limits. name finds a column, enum value or relation by name. "
        "Start here before ontoos_explore.",
        CatalogInput,
    ),
    "ontoos_explore": (
        "Explore the lakehouse",
        "Ask a structural question: a dataset, fields (columns or aggregates), an optional filter, relations to "
        "follow, group/order/limit. Returns rows. Use ontoos_catalog first for the names; a refusal carries a hint "
        "and often retry_with, the corrected arguments. dry_run shows the plan and cost without reading rows.",
        ExploreInput,
    ),
    "ontoos_queries": (
        "List named queries",
        "List the reviewed named queries you may run, with their parameters. Prefer one when it answers the question.",
        QueriesInput,
    ),
    "ontoos_run_query": (
        "Run a named query",
        "Run a reviewed named query by id with its parameters (see ontoos_queries). Same budgets and envelope as "
        "ontoos_explore; a truncated answer's meta.next_cursor, sent back as {\"cursor\": ...}, returns the next "
        "page.",
        RunQueryInput,
    ),
    "ontoos_explain": (
        "Explain a question before asking it",
        "The plan of an exploration (the same arguments as ontoos_explore) or of a named query (query: its id, "
        "params): datasets and relations with their cardinality, the limit that applies, the budgets, whether "
        "it is within the cost budget, and what to change. Reads no rows.",
        ExplainInput,
    ),
    "ontoos_request_query": (
        "Ask reviewers for a query",
        "When no exploration or named query can say what you need: file the question (and the dataset it is "
        "about) for reviewers, with your recent refusals. It writes a request; it reads nothing.",
        RequestInput,
    ),
    "ontoos_stats": (
        "How current the data is",
        "For each dataset you may read: its evidence, the sources and batches an answer from it would carry, "
        "how old they are against the dataset's freshness threshold, and whether it is unavailable. Reads no rows.",
        StatsInput,
    ),
}


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    if not model.model_fields:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    schema = model.model_json_schema()
    schema.setdefault("additionalProperties", False)
    return schema


# What a successful call's structured content is, said for the client that checks it. The SDK's client
# checks every result against its tool's output schema with `jsonschema`, which descends into a subschema
# for each property it names (~4 us in a loop, 15-20 where the call runs, in the agent's process): the
# envelope's keys are required, what they hold is said in words. In place, per call: 113-130 us of the
# client's with the envelope's properties typed, 46-58 with this. Every real envelope is checked against
# it, and its keys and its meta's keys against these words, by the MCP tests.
OUTPUT_SCHEMA: dict[str, Any] = {
    "title": "Envelope",
    "description": (
        "A success envelope: ok (true), data (columns and rows, a dry run's plan, or the catalogue), meta "
        "(exploration_id, fingerprint, dry_run, rows, truncated, limit, page, next_cursor, elapsed_ms, "
        "masked_columns, notes, contract_hash, evidence: collected_at, published_at, as_of, freshness, "
        "consistency, source_batch, batch_fingerprint, replica), _notice (min_cli_version, schema_drift, "
        "contract_hash). A refusal is an error result."),
    "type": "object",
    "required": ["ok", "data", "meta"],
}


def output_schema() -> dict[str, Any]:
    """The output schema every tool that answers with an envelope publishes (a copy)."""
    return {**OUTPUT_SCHEMA, "required": list(OUTPUT_SCHEMA["required"])}


MAX_DESCRIPTION = 2000  # bytes of a named query's tool description (UTF-8)


def query_input_schema(query: Any) -> dict[str, Any]:
    """A named query's tool input: its parameters' schema (nested objects for dotted names), and
    `require` and `cursor`, each unless a parameter takes its name."""
    schema = query.params_schema()
    properties = dict(schema["properties"])
    if "require" not in properties:
        properties["require"] = {**RequireInput.model_json_schema(), "description": REQUIRE}
        properties["require"].pop("title", None)
    if "cursor" not in properties:
        properties["cursor"] = {"type": "string", "description": CURSOR}
    return {**schema, "properties": properties}


def query_description(query: Any) -> str:
    """A named query's tool description, under MAX_DESCRIPTION bytes: what it is (title, description),
    what it returns, its notes, and what its authors say of it (domain, scenarios)."""
    parts = [query.title.rstrip(".") + "."]
    if query.description:
        parts.append(query.description)
    parts.append(f"Reviewed named query {query.id}; returns {', '.join(query.columns)} "
                 f"(at most {query.max_rows} rows).")
    parts.extend(query.notes)
    about = ", ".join(x for x in (query.domain and f"domain {query.domain}",
                                  query.scenarios and "scenarios " + " ".join(query.scenarios)) if x)
    if about:
        parts.append(about[0].upper() + about[1:] + ".")
    text = " ".join(p.strip() for p in parts if p.strip())
    raw = text.encode("utf-8")
    if len(raw) <= MAX_DESCRIPTION:
        return text
    return raw[: MAX_DESCRIPTION - 3].decode("utf-8", "ignore").rstrip() + "…"


def validate(tool: str, model: type[BaseModel], arguments: dict[str, Any]) -> BaseModel:
    """`arguments` as the tool's input model, or the refusal: an unknown argument first (with
    did-you-mean, and retry_with the call with it renamed when one name is close), then the first
    field the model refuses, in the model's order."""
    try:
        return model.model_validate(arguments)
    except ValidationError as e:
        errors = e.errors(include_url=False)
    allowed = tuple(model.model_fields)
    unknown = [k for k in arguments if k not in allowed]
    if unknown:
        key = str(unknown[0])
        close = close_matches(key, allowed, n=1)
        retry = None
        if close and close[0] not in arguments and len(unknown) == 1:
            retry = {(close[0] if k == key else k): v for k, v in arguments.items()}
        listing = f"arguments: {', '.join(allowed)}" if allowed else f"{tool} takes no arguments"
        raise InputError(Codes.INVALID_REQUEST, f"{tool} has no argument '{key[:40]}'",
                         hint=(f"did you mean '{close[0]}'? " if close else "") + listing, retry_with=retry)
    refused = {err["loc"][0] for err in errors if err.get("loc")}
    for name in allowed:
        if name in refused:
            message, hint = model.refusals.get(name) or (f"'{name}' is not valid", f"see the input schema of {tool}")
            raise InputError(Codes.INVALID_REQUEST, message, hint=hint)
    raise InputError(Codes.INVALID_REQUEST, "the arguments are not valid", hint=f"see the input schema of {tool}")
