"""Server, MCP in-process: the production server (`build_server`) driven by the official SDK client.

The server is built exactly as `run_stdio` builds it (Tools + Explorer + Executor on a real
pool over the demo lakehouse), and every test runs under both client modes: "auto" (the
2026-07-28 direct dispatch) and "legacy" (the initialize handshake over memory streams).
Every response any test sees is checked for a traceback, SQL text and the secret marker.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from ontoos_explore import load_contract
from ontoos_explore.engine.demo_data import SECRET_MARKER
from ontoos_explore.engine.executor import Executor
from ontoos_explore.governance.registry import Registry
from tests.named_queries import HOSTS_BY_PROVIDER
from ontoos_explore.server.config import DEFAULT_IN_FLIGHT, Principal
from ontoos_explore.server.mcp_server import build_server, fixed
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio

TOOL_NAMES = ["ontoos_catalog", "ontoos_explore", "ontoos_queries", "ontoos_run_query", "ontoos_explain", "ontoos_request_query",
              "ontoos_stats"]
FORBIDDEN = ("Traceback", "SELECT", SECRET_MARKER)
ERROR_KEYS = {"type", "subtype", "code", "message", "hint"}
VIEWER_DATASETS = ["archives", "containers", "images", "projects", "repo_stats", "workloads"]

# A registry with one approved, one pending and one broken entry (its SQL reads a secret column).
REGISTRY = {
    "queries": [
        {
            "id": "workloads_in_namespace",
            "title": "Workloads of a namespace",
            "description": "Names and replicas of the workloads in one namespace.",
            "status": "approved",
            "read_sets": ["published"],
            "parameters": [
                {"name": "namespace", "type": "text", "description": "Kubernetes namespace", "examples": ["prod"]},
                {"name": "min_replicas", "type": "integer", "description": "Fewest replicas", "required": False},
            ],
            "sql": 'SELECT "w"."name" AS "name", "w"."replicas" AS "replicas" FROM "lake"."k8s_workloads" AS "w" '
                   'INNER JOIN "lake"."gitlab_projects" AS "p" ON "p"."project_id" = "w"."project_id" '
                   'WHERE "w"."namespace" = $1 AND ("w"."replicas" >= $2 OR $2 IS NULL) AND "w"."is_deleted" = $3 '
                   'AND "p"."is_deleted" = $3 ORDER BY "w"."name" LIMIT 101',
            # the contract's always-filters, bound as a constant (a registry entry must keep them); a
            # workload exists only with its project, so the project is joined and filtered too
            "bind": ["namespace", "min_replicas", {"value": False, "type": "boolean"}],
            "columns": ["name", "replicas"],
            "max_rows": 100,
        },
        {
            "id": "workloads_unreviewed",
            "title": "Not reviewed yet",
            "status": "pending",
            "read_sets": ["published"],
            "sql": 'SELECT "w"."name" AS "name" FROM "lake"."k8s_workloads" AS "w" INNER JOIN "lake"."gitlab_projects" '
                   'AS "p" ON "p"."project_id" = "w"."project_id" WHERE "w"."is_deleted" = $1 AND "p"."is_deleted" = $1 '
                   'LIMIT 11',
            "bind": [{"value": False, "type": "boolean"}],
            "columns": ["name"],
            "max_rows": 10,
        },
        {
            "id": "leaky_env",
            "title": "Reads a secret column",
            "status": "approved",
            "read_sets": ["published"],
            "sql": 'SELECT "w"."env_dump" AS "env_dump" FROM "lake"."k8s_workloads" AS "w" LIMIT 11',
            "columns": ["env_dump"],
            "max_rows": 10,
        },
    ]
}

HOSTS_QUERY = HOSTS_BY_PROVIDER  # the viewer cannot read hosts


# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture(params=["auto", "legacy"])
def mode(request) -> str:
    return request.param


def write_registry(path: Path, queries: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"queries": queries}, sort_keys=False), encoding="utf-8")
    return path


class Session:
    """An SDK client plus the checks every response must pass."""

    def __init__(self, client: Client, tools: list[Any]) -> None:
        self.client = client
        self.tools = {t.name: t for t in tools}

    async def call(self, name: str, arguments: dict[str, Any]):
        r = await self.client.call_tool(name, arguments)
        blob = "\n".join(c.text for c in r.content if c.type == "text") + json.dumps(r.structured_content)
        for bad in FORBIDDEN:
            assert bad not in blob, f"{bad!r} in the answer to {name} {arguments}: {blob[:2000]}"
        return r

    async def ok(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        r = await self.call(name, arguments)
        assert r.is_error is False, r.content[0].text
        env = r.structured_content
        assert isinstance(env, dict) and env["ok"] is True
        assert len(r.content) == 1 and r.content[0].type == "text"
        assert json.loads(r.content[0].text) == env  # the same envelope as JSON text
        errors = sorted(Draft202012Validator(self.tools[name].output_schema).iter_errors(env), key=str)
        assert not errors, errors[0]
        assert set(env) == {"ok", "data", "meta", "_notice"}
        # what an envelope holds is said in the schema's words: every key an answer carries is named there
        words = set(re.findall(r"[a-z_]+", self.tools[name].output_schema["description"]))
        keys = set(env["meta"]) | set(env["meta"].get("evidence") or {}) | set(env["_notice"])
        assert keys <= words, sorted(keys - words)
        assert env["_notice"]["contract_hash"] == env["meta"]["contract_hash"] and env["_notice"]["schema_drift"] is False
        assert re.fullmatch(r"[0-9a-f]{16}", env["meta"]["exploration_id"])
        return env

    async def refused(self, name: str, arguments: dict[str, Any], code: str, subtype: str) -> dict[str, Any]:
        r = await self.call(name, arguments)
        assert r.is_error is True, r.structured_content
        assert r.structured_content is None  # error results carry no structured content (TS clients reject it)
        assert len(r.content) == 1 and r.content[0].type == "text"
        env = json.loads(r.content[0].text)
        assert env["ok"] is False and set(env) == {"ok", "error", "meta", "_notice"}
        err = env["error"]
        assert ERROR_KEYS <= set(err), err
        assert (err["code"], err["subtype"]) == (code, subtype), err
        assert err["type"] in ("validation", "policy", "auth", "network", "internal")
        assert isinstance(err["message"], str) and err["message"]
        assert isinstance(err["hint"], str) and err["hint"]
        assert re.fullmatch(r"[0-9a-f]{16}", env["meta"]["exploration_id"])
        if "retry_with" in err:  # a retry must itself be valid arguments of the tool
            assert not list(Draft202012Validator(self.tools[name].input_schema).iter_errors(err["retry_with"]))
        return err


@pytest.fixture
def connect(demo, pool, mode):
    """connect(role, contract=demo, registry=None) -> an async context manager yielding a Session."""
    p, settings = pool

    @contextlib.asynccontextmanager
    async def go(role: str = "analyst", contract=None, registry: Registry | None = None):
        c = contract or demo
        tools = Tools(c, Explorer(c, Executor(p, settings)), registry)
        server = build_server(tools, fixed(Principal("alice", role)))
        async with Client(server, mode=mode) as client:
            listed = await client.list_tools()
            yield Session(client, listed.tools)

    return go


@pytest.fixture
async def analyst(connect):
    async with connect("analyst") as s:
        yield s


@pytest.fixture
async def viewer(connect):
    async with connect("viewer") as s:
        yield s


@pytest.fixture
async def reader(connect):
    """The published read set with the viewer's budgets, exploring (the demo's viewer keeps to named queries)."""
    async with connect("reader") as s:
        yield s


def contract_variant(tmp_path: Path, edit) -> Any:
    """The demo contract with `edit(data)` applied, loaded from a file under tmp_path."""
    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_contract(path)


# ---------------------------------------------------------------- discovery


async def test_tools_list_names_order_and_metadata(analyst):
    listed = await analyst.client.list_tools()
    assert [t.name for t in listed.tools] == TOOL_NAMES
    for t in listed.tools:
        assert t.title and isinstance(t.title, str)
        assert t.description and len(t.description) < 400, (t.name, len(t.description or ""))
        assert t.input_schema["type"] == "object" and isinstance(t.input_schema.get("properties"), dict)
        Draft202012Validator.check_schema(t.input_schema)
        assert t.output_schema is not None and t.output_schema["type"] == "object"
        Draft202012Validator.check_schema(t.output_schema)
        a = t.annotations
        assert a is not None
        writes = t.name == "ontoos_request_query"  # it files a request: honestly not read-only, nor idempotent
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (
            not writes, False, not writes, False)


async def test_instructions_mention_the_catalog_tool(analyst):
    assert analyst.client.server_info is not None and analyst.client.server_info.name == "ontoos-explore"
    instructions = analyst.client.instructions
    assert instructions and "ontoos_catalog" in instructions and "ontoos_explore" in instructions
    assert "retry_with" in instructions


async def test_explore_input_schema_describes_every_property(analyst):
    schema = analyst.tools["ontoos_explore"].input_schema
    assert set(schema["properties"]) >= {"dataset", "fields", "filter", "relations", "group_by", "order_by",
                                         "limit", "query", "dry_run"}
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"ontoos_explore.{name} has no description"
    for model, sub in schema.get("$defs", {}).items():
        for name, prop in sub.get("properties", {}).items():
            assert prop.get("description"), f"{model}.{name} has no description"
    assert schema.get("additionalProperties") is False


# ---------------------------------------------------------------- success


async def test_explore_success_envelope(analyst):
    env = await analyst.ok("ontoos_explore", {"dataset": "workloads", "fields": ["name", "namespace"],
                                              "filter": "namespace = 'prod'", "order_by": ["name"], "limit": 3})
    assert env["data"]["columns"] == ["name", "namespace"]
    rows = env["data"]["rows"]
    assert len(rows) == 3 and all(ns == "prod" for _, ns in rows)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    meta = env["meta"]
    assert re.fullmatch(r"[0-9a-f]{16}", meta["fingerprint"])
    assert (meta["rows"], meta["truncated"], meta["limit"]) == (3, True, 3)
    assert meta["notes"] == []
    assert "sql" not in env["data"] and "params" not in meta


async def test_explore_text_form_and_aggregates_with_notes(analyst):
    env = await analyst.ok("ontoos_explore", {
        "query": "explore workloads via containers fields namespace, sum(containers.cpu_millis) as cpu "
                 "group by namespace order by cpu desc limit 3"})
    assert env["data"]["columns"] == ["namespace", "cpu"]
    cpus = [cpu for _, cpu in env["data"]["rows"]]
    assert len(cpus) == 3 and cpus == sorted(cpus, reverse=True)
    assert any("containers" in n for n in env["meta"]["notes"])


async def test_dry_run_returns_the_plan_and_no_rows(analyst, reader):
    args = {"dataset": "workloads", "relations": ["containers"], "fields": ["namespace", "sum(containers.cpu_millis) as cpu"],
            "group_by": ["namespace"], "limit": 100000, "dry_run": True}
    for session, clamped in ((analyst, 500), (reader, 100)):
        env = await session.ok("ontoos_explore", args)
        assert set(env["data"]) == {"plan"}
        plan = env["data"]["plan"]
        assert plan["datasets"] == ["workloads", "containers"]
        assert plan["relations"] == ["containers"]
        assert plan["limit"] == clamped
        assert plan["within_budget"] is True and plan["cost_class"] in ("low", "moderate", "high") and "estimated_cost" not in plan
        assert env["meta"]["dry_run"] is True
        assert "rows" not in env["meta"] and "rows" not in env["data"]
        assert any(f"lowered to {clamped}" in n for n in env["meta"]["notes"]), env["meta"]["notes"]
    # the same question without dry_run reads rows
    run = await analyst.ok("ontoos_explore", {**args, "dry_run": False, "limit": 5})
    assert run["data"]["columns"] == ["namespace", "cpu"] and run["data"]["rows"]


async def test_concurrent_calls_share_the_small_pool(analyst):
    """As many calls at once as a principal may run (4), over a pool of fewer connections: they wait
    their turn for one and all answer."""
    results: dict[int, dict] = {}
    n = DEFAULT_IN_FLIGHT

    async def one(i: int) -> None:
        results[i] = await analyst.ok("ontoos_explore", {"dataset": "hosts", "fields": ["hostname"],
                                                        "order_by": ["hostname"], "limit": i + 1})

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    assert [results[i]["meta"]["rows"] for i in range(n)] == list(range(1, n + 1))
    assert all(results[i]["data"]["rows"] == results[n - 1]["data"]["rows"][: i + 1] for i in range(n))


# ---------------------------------------------------------------- refusals of ontoos_explore


async def test_unknown_field_retry_with_closes_the_loop(analyst):
    args = {"dataset": "workloads", "fields": ["name", "namspace"], "limit": 4}
    err = await analyst.refused("ontoos_explore", args, "EX201", "UNKNOWN_FIELD")
    assert err["type"] == "validation"
    assert "did you mean 'namespace'" in err["hint"]
    assert err["retry_with"] == {"dataset": "workloads", "fields": ["name", "namespace"], "limit": 4}
    env = await analyst.ok("ontoos_explore", err["retry_with"])  # the self-correction loop, unchanged
    assert env["data"]["columns"] == ["name", "namespace"] and len(env["data"]["rows"]) == 4


async def test_unknown_field_without_a_close_name_has_no_retry(analyst):
    err = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name", "qqqzzz"]},
                                "EX201", "UNKNOWN_FIELD")
    assert "retry_with" not in err and "did you mean" not in err["hint"]
    assert "readable columns of workloads" in err["hint"]


async def test_unknown_dataset_retry_with(analyst):
    err = await analyst.refused("ontoos_explore", {"dataset": "wrkloads", "fields": ["name"], "limit": 1},
                                "EX202", "UNKNOWN_DATASET")
    assert "did you mean 'workloads'" in err["hint"]
    env = await analyst.ok("ontoos_explore", err["retry_with"])
    assert env["meta"]["rows"] == 1


async def test_secret_column_answers_like_a_missing_column(analyst, connect, tmp_path):
    """workloads.env_dump is secret; a contract without that column must give the same refusal."""
    secret_args = [
        {"dataset": "workloads", "fields": ["name", "env_dump"]},
        {"dataset": "workloads", "fields": ["name"], "filter": "env_dump like '%SECRET%'"},
        {"dataset": "workloads", "fields": ["name"], "order_by": ["env_dump"]},
        {"dataset": "projects", "relations": ["workloads"], "fields": ["name", "workloads.env_dump"]},
        {"query": "explore workloads fields name, env_dump"},
    ]
    seen = [await analyst.refused("ontoos_explore", a, "EX201", "UNKNOWN_FIELD") for a in secret_args]

    def drop_env_dump(data):
        del data["datasets"]["workloads"]["columns"]["env_dump"]

    without = contract_variant(tmp_path, drop_env_dump)
    async with connect("analyst", contract=without) as other:
        missing = [await other.refused("ontoos_explore", a, "EX201", "UNKNOWN_FIELD") for a in secret_args]
    assert seen == missing
    assert all("env_dump" not in e["hint"] for e in seen)


async def test_hidden_column_answers_like_a_missing_column(analyst):
    hidden = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name", "is_deleted"]},
                                   "EX201", "UNKNOWN_FIELD")
    missing = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name", "qx_dltd_zz"]},
                                    "EX201", "UNKNOWN_FIELD")
    assert hidden == json.loads(json.dumps(missing).replace("qx_dltd_zz", "is_deleted"))
    near = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name", "is_delete"]},
                                 "EX201", "UNKNOWN_FIELD")
    assert "is_deleted" not in near["hint"] and "retry_with" not in near


async def test_dataset_outside_scope_answers_like_a_missing_dataset(reader, connect, tmp_path):
    args = {"dataset": "hosts", "fields": ["hostname"]}
    out_of_scope = await reader.refused("ontoos_explore", args, "EX202", "UNKNOWN_DATASET")

    def drop_hosts(data):
        del data["datasets"]["hosts"]
        data["relations"] = {k: r for k, r in data["relations"].items() if "hosts" not in (r["from"], r["to"])}
        data["read_sets"] = {k: [d for d in v if d != "hosts"] for k, v in data["read_sets"].items()}

    without = contract_variant(tmp_path, drop_hosts)
    async with connect("reader", contract=without) as other:
        missing = await other.refused("ontoos_explore", args, "EX202", "UNKNOWN_DATASET")
    assert out_of_scope == missing
    near = await reader.refused("ontoos_explore", {"dataset": "hostz", "fields": ["hostname"]}, "EX202", "UNKNOWN_DATASET")
    assert "hosts" not in near["hint"] and "retry_with" not in near
    assert near["hint"] == "readable datasets: " + ", ".join(VIEWER_DATASETS)


async def test_relation_to_a_dataset_outside_scope_is_not_offered(reader):
    err = await reader.refused("ontoos_explore", {"dataset": "workloads", "relations": ["configs"], "fields": ["name"]},
                               "EX203", "UNKNOWN_RELATION")
    assert "configs" not in err["hint"] and "cluster_hosts" not in err["hint"]


async def test_syntax_error_in_filter(analyst):
    err = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name"],
                                                   "filter": "namespace = = 'prod'"}, "EX101", "SYNTAX_ERROR")
    assert "filter" in err["message"] and err["hint"].startswith("expected")
    assert err["position"] == {"line": 1, "column": 13}


async def test_type_mismatch(analyst):
    err = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name"],
                                                   "filter": "replicas = 'many'"}, "EX301", "TYPE_MISMATCH")
    assert "replicas" in err["message"] and "integer" in err["hint"]
    enum = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name"],
                                                    "filter": [{"field": "kind", "op": "=", "value": "Pod"}]},
                                 "EX301", "TYPE_MISMATCH")
    assert "Deployment" in enum["hint"]


async def test_budget_too_many_fields_for_viewer(reader, analyst):
    fields = ["name", "namespace", "cluster", "kind", "replicas", "created_at", "workload_id", "project_id",
              "name as a", "name as b", "name as c"]
    err = await reader.refused("ontoos_explore", {"dataset": "workloads", "fields": fields},
                               "EX401", "QUERY_BUDGET_EXCEEDED")
    assert err["type"] == "policy" and "10" in err["hint"]
    env = await analyst.ok("ontoos_explore", {"dataset": "workloads", "fields": fields, "limit": 1})
    assert len(env["data"]["columns"]) == 11


async def test_heavy_dataset_needs_a_filter(analyst):
    for extra in ({}, {"dry_run": True}):
        err = await analyst.refused("ontoos_explore", {"dataset": "table_refs", "fields": ["file_path"], **extra},
                                    "EX406", "QUERY_BUDGET_EXCEEDED")
        assert err["type"] == "policy" and "where" in err["hint"]
    env = await analyst.ok("ontoos_explore", {"dataset": "table_refs", "fields": ["file_path"],
                                              "filter": "access = 'read'", "limit": 2})
    assert env["meta"]["rows"] == 2


async def test_unknown_argument_key_did_you_mean_with_retry(analyst):
    err = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limt": 3},
                                "EX102", "INVALID_REQUEST")
    assert "did you mean 'limit'" in err["hint"]
    assert err["retry_with"] == {"dataset": "workloads", "fields": ["name"], "limit": 3}
    env = await analyst.ok("ontoos_explore", err["retry_with"])
    assert env["meta"]["rows"] == 3


async def test_unknown_key_retry_keeps_dry_run(analyst):
    """The instructions say to send retry_with unchanged: a dry run must stay a dry run."""
    err = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limt": 3, "dry_run": True},
                                "EX102", "INVALID_REQUEST")
    assert err.get("retry_with", {}).get("dry_run") is True, err
    env = await analyst.ok("ontoos_explore", err["retry_with"])
    assert "plan" in env["data"] and "rows" not in env["data"]


async def test_misspelt_dry_run_key_is_suggested(analyst):
    err = await analyst.refused("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "dry_rn": True},
                                "EX102", "INVALID_REQUEST")
    assert "did you mean 'dry_run'" in err["hint"], err["hint"]
    assert err.get("retry_with") == {"dataset": "workloads", "fields": ["name"], "dry_run": True}


@pytest.mark.parametrize("args, message", [
    ({"dataset": "workloads", "fields": 42}, "'fields' must be a list of strings"),
    ({"dataset": "workloads", "fields": {"name": True}}, "'fields' must be a list of strings"),
    ({"dataset": "workloads", "fields": ["name", 7]}, "'fields' must be a list of strings"),
    ({"dataset": "workloads", "fields": ["name"], "limit": "3"}, "'limit' must be an integer"),
    ({"dataset": "workloads", "fields": ["name"], "limit": True}, "'limit' must be an integer"),
    ({"dataset": "workloads", "fields": ["name"], "limit": 2.5}, "'limit' must be an integer"),
    ({"dataset": "workloads", "fields": ["name"], "dry_run": "yes"}, "'dry_run' must be true or false"),
    ({"dataset": "workloads", "fields": ["name"], "dry_run": None}, "'dry_run' must be true or false"),
    ({"dataset": "workloads", "fields": ["name"], "filter": 5}, "'filter' must be a predicate string"),
])
async def test_wrong_argument_types_are_tool_errors(analyst, args, message):
    err = await analyst.refused("ontoos_explore", args, "EX102", "INVALID_REQUEST")
    assert err["message"].startswith(message), err


async def test_non_identifier_dataset_is_a_tool_error(analyst):
    err = await analyst.refused("ontoos_explore", {"dataset": 5, "fields": ["name"]}, "EX103", "SYNTAX_ERROR")
    assert "ontoos_catalog" in err["hint"]


# ---------------------------------------------------------------- ontoos_catalog


async def test_catalog_lists_only_the_viewers_datasets(viewer, analyst, demo):
    listed = await viewer.ok("ontoos_catalog", {})
    assert listed["data"]["role"] == "viewer"
    assert [d["name"] for d in listed["data"]["datasets"]] == VIEWER_DATASETS
    assert listed["data"]["budget"]["max_fields"] == 10
    full = await analyst.ok("ontoos_catalog", {})
    assert [d["name"] for d in full["data"]["datasets"]] == sorted(demo.datasets)
    assert {"hosts", "configs"} <= {d["name"] for d in full["data"]["datasets"]}


async def test_catalog_never_shows_secret_or_hidden_columns(viewer, analyst, demo):
    for session, names in ((viewer, VIEWER_DATASETS), (analyst, sorted(demo.datasets))):
        for name in names:
            env = await session.ok("ontoos_catalog", {"dataset": name})
            data = env["data"]
            ds = demo.datasets[name]
            unreadable = {c.name for c in ds.columns.values() if c.secret or c.hidden}
            shown = [c["name"] for c in data["columns"]]
            assert shown == [c.name for c in ds.readable_columns()]
            assert not unreadable & set(shown)
            assert not any(f'"{u}"' in json.dumps(data) for u in unreadable), (name, unreadable)
            assert all(r["to"] in names for r in data["relations"]), data["relations"]
    wl = await viewer.ok("ontoos_catalog", {"dataset": "workloads"})
    assert {r["to"] for r in wl["data"]["relations"]} == {"projects", "containers"}
    wl_a = await analyst.ok("ontoos_catalog", {"dataset": "workloads"})
    assert {"configs", "hosts"} <= {r["to"] for r in wl_a["data"]["relations"]}


async def test_catalog_unknown_dataset_did_you_mean(analyst):
    err = await analyst.refused("ontoos_catalog", {"dataset": "hostz"}, "EX202", "UNKNOWN_DATASET")
    assert "did you mean 'hosts'" in err["hint"]
    assert "retry_with" not in err


async def test_catalog_out_of_scope_answers_like_nonexistent(viewer):
    hidden = await viewer.refused("ontoos_catalog", {"dataset": "hosts"}, "EX202", "UNKNOWN_DATASET")
    missing = await viewer.refused("ontoos_catalog", {"dataset": "zqxwvu"}, "EX202", "UNKNOWN_DATASET")
    assert hidden == json.loads(json.dumps(missing).replace("zqxwvu", "hosts"))
    near = await viewer.refused("ontoos_catalog", {"dataset": "hostz"}, "EX202", "UNKNOWN_DATASET")
    assert "hosts" not in near["hint"]
    assert near["hint"] == "readable datasets: " + ", ".join(VIEWER_DATASETS)


async def test_catalog_bad_arguments(viewer):
    err = await viewer.refused("ontoos_catalog", {"datset": "workloads"}, "EX102", "INVALID_REQUEST")
    assert "did you mean 'dataset'" in err["hint"]
    err = await viewer.refused("ontoos_catalog", {"dataset": 5}, "EX102", "INVALID_REQUEST")
    assert "string" in err["message"]
    await viewer.refused("ontoos_catalog", {"dataset": "hosts; drop"}, "EX103", "SYNTAX_ERROR")


# ---------------------------------------------------------------- named queries


async def test_queries_without_a_registry_list_nothing(analyst, connect, demo, tmp_path):
    env = await analyst.ok("ontoos_queries", {})
    assert env["data"] == {"queries": []}
    err = await analyst.refused("ontoos_run_query", {"id": "anything"}, "EX208", "CAPABILITY_NOT_FOUND")
    assert "ontoos_explore" in err["hint"]
    empty = Registry.load(tmp_path / "absent.yaml", demo)
    async with connect("analyst", registry=empty) as s:
        assert (await s.ok("ontoos_queries", {}))["data"] == {"queries": []}


async def test_queries_lists_the_approved_entry_with_a_parameter_schema(connect, demo, tmp_path):
    registry = Registry.load(write_registry(tmp_path / "queries.yaml", REGISTRY["queries"]), demo)
    assert [ident for ident, _ in registry.problems] == ["leaky_env"]  # broken: reads a secret column
    for role in ("analyst", "viewer"):
        async with connect(role, registry=registry) as s:
            env = await s.ok("ontoos_queries", {})
            queries = env["data"]["queries"]
            assert [q["id"] for q in queries] == ["workloads_in_namespace"]  # not the pending one, not the broken one
            q = queries[0]
            assert q["title"] == "Workloads of a namespace" and q["columns"] == ["name", "replicas"]
            schema = q["parameters"]
            Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object" and schema["required"] == ["namespace"]
            assert schema["properties"]["namespace"]["type"] == "string"
            assert schema["properties"]["min_replicas"]["type"] == "integer"
            v = Draft202012Validator(schema)
            assert v.is_valid({"namespace": "prod"}) and v.is_valid({"namespace": "prod", "min_replicas": 2})
            assert not v.is_valid({}) and not v.is_valid({"namespace": "prod", "extra": 1})
            assert not v.is_valid({"namespace": "prod", "min_replicas": "two"})
            assert "env_dump" not in json.dumps(env)
            await s.refused("ontoos_queries", {"verbose": True}, "EX102", "INVALID_REQUEST")


async def test_run_query(connect, demo, tmp_path, pg_dsn):
    registry = Registry.load(write_registry(tmp_path / "queries.yaml", REGISTRY["queries"]), demo)
    async with connect("analyst", registry=registry) as s:
        env = await s.ok("ontoos_run_query", {"id": "workloads_in_namespace", "params": {"namespace": "prod"}})
        assert env["data"]["columns"] == ["name", "replicas"]
        rows = env["data"]["rows"]
        assert rows and [r[0] for r in rows] == sorted(r[0] for r in rows)
        assert env["meta"]["fingerprint"] == "named:workloads_in_namespace"
        assert env["meta"]["limit"] == 100 and env["meta"]["rows"] == len(rows) <= 100
        some = await s.ok("ontoos_run_query", {"id": "Workloads_In_Namespace",
                                               "params": {"namespace": "prod", "min_replicas": 6}})
        assert some["data"]["rows"] and all(r >= 6 for _, r in some["data"]["rows"])
        assert len(some["data"]["rows"]) < len(rows) or env["meta"]["truncated"]

        err = await s.refused("ontoos_run_query", {"id": "workloads_in_namespace",
                                                   "params": {"namespace": "prod", "min_replicas": "many"}},
                              "EX301", "TYPE_MISMATCH")
        assert "min_replicas" in err["message"]
        err = await s.refused("ontoos_run_query", {"id": "workloads_in_namespace", "params": {"namespace": 5}},
                              "EX301", "TYPE_MISMATCH")
        assert "namespace" in err["message"]
        err = await s.refused("ontoos_run_query", {"id": "workloads_in_namespace", "params": {}},
                              "EX102", "INVALID_REQUEST")
        assert "'namespace' is required" in err["message"] and "prod" in err["hint"]
        err = await s.refused("ontoos_run_query", {"id": "workloads_in_namespace"}, "EX102", "INVALID_REQUEST")
        assert "'namespace' is required" in err["message"]
        err = await s.refused("ontoos_run_query", {"id": "workloads_in_namespace",
                                                   "params": {"namespace": "prod", "nmespace": "x"}},
                              "EX102", "INVALID_REQUEST")
        assert "did you mean 'namespace'" in err["hint"]
        err = await s.refused("ontoos_run_query", {"id": "workloads_in_namespace", "params": "prod"},
                              "EX102", "INVALID_REQUEST")
        err = await s.refused("ontoos_run_query", {"id": "workloads_in_namespac", "params": {"namespace": "prod"}},
                              "EX208", "CAPABILITY_NOT_FOUND")
        assert "did you mean 'workloads_in_namespace'" in err["hint"]
        # pending and broken entries do not exist for the caller
        for ident in ("workloads_unreviewed", "leaky_env"):
            err = await s.refused("ontoos_run_query", {"id": ident}, "EX208", "CAPABILITY_NOT_FOUND")
            assert "workloads_unreviewed" not in err["hint"] and "leaky_env" not in err["hint"]
        err = await s.refused("ontoos_run_query", {"i": "workloads_in_namespace"}, "EX102", "INVALID_REQUEST")
        assert "did you mean 'id'" in err["hint"]


async def test_run_query_outside_scope_answers_like_nonexistent(connect, demo, tmp_path):
    registry = Registry.load(write_registry(tmp_path / "queries.yaml", [*REGISTRY["queries"], HOSTS_QUERY]), demo)
    async with connect("analyst", registry=registry) as s:
        assert [q["id"] for q in (await s.ok("ontoos_queries", {}))["data"]["queries"]] == \
            ["workloads_in_namespace", "hosts_by_provider"]
        env = await s.ok("ontoos_run_query", {"id": "hosts_by_provider", "params": {"provider": "aws"}})
        assert env["data"]["rows"]
        await s.refused("ontoos_run_query", {"id": "hosts_by_provider", "params": {"provider": "ibm"}},
                        "EX301", "TYPE_MISMATCH")
    async with connect("viewer", registry=registry) as s:
        assert [q["id"] for q in (await s.ok("ontoos_queries", {}))["data"]["queries"]] == ["workloads_in_namespace"]
        hidden = await s.refused("ontoos_run_query", {"id": "hosts_by_provider", "params": {"provider": "aws"}},
                                 "EX208", "CAPABILITY_NOT_FOUND")
        missing = await s.refused("ontoos_run_query", {"id": "zqxw_by_provider", "params": {"provider": "aws"}},
                                  "EX208", "CAPABILITY_NOT_FOUND")
        assert hidden == json.loads(json.dumps(missing).replace("zqxw_by_provider", "hosts_by_provider"))
        near = await s.refused("ontoos_run_query", {"id": "hosts_by_providr"}, "EX208", "CAPABILITY_NOT_FOUND")
        assert "hosts_by_provider" not in near["hint"]


async def test_named_query_reading_a_hidden_column_is_skipped(connect, demo, tmp_path):
    """configs.is_sensitive is hidden and its always-filter hides sensitive entries; a named query
    must not become a way around either (expected: skipped at load like a secret column)."""
    sensitive = {
        "id": "sensitive_config_keys",
        "title": "Sensitive config keys",
        "status": "approved",
        "read_sets": ["engineering"],
        "parameters": [{"name": "flag", "type": "boolean"}],
        "sql": 'SELECT "c"."key" AS "key", "c"."is_sensitive" AS "is_sensitive" FROM "lake"."config_entries" AS "c" '
               'WHERE "c"."is_sensitive" = $1 LIMIT 51',
        "bind": ["flag"],
        "columns": ["key", "is_sensitive"],
        "max_rows": 50,
    }
    registry = Registry.load(write_registry(tmp_path / "queries.yaml", [sensitive]), demo)
    async with connect("analyst", registry=registry) as s:
        listed = (await s.ok("ontoos_queries", {}))["data"]["queries"]
        r = await s.call("ontoos_run_query", {"id": "sensitive_config_keys", "params": {"flag": True}})
    assert [ident for ident, _ in registry.problems] == ["sensitive_config_keys"], r.content[0].text[:300]
    assert listed == []
    assert r.is_error is True


# ---------------------------------------------------------------- protocol errors


async def test_unknown_tool_is_a_protocol_error(analyst):
    with pytest.raises(MCPError) as caught:
        await analyst.client.call_tool("ontoos_delete_everything", {"dataset": "workloads"})
    assert caught.value.error.code == INVALID_PARAMS
    message = caught.value.error.message
    assert "ontoos_delete_everything" in message and all(n in message for n in TOOL_NAMES)
    assert not any(bad in message for bad in FORBIDDEN)
    # the session is still usable afterwards
    env = await analyst.ok("ontoos_catalog", {})
    assert env["data"]["datasets"]


async def test_missing_arguments_are_an_empty_object(analyst):
    r = await analyst.client.call_tool("ontoos_catalog", None)
    assert r.is_error is False and r.structured_content["data"]["role"] == "analyst"
    err = await analyst.refused("ontoos_explore", {}, "EX102", "INVALID_REQUEST")
    assert "dataset" in err["message"] or "dataset" in err["hint"]


# ---------------------------------------------------------------- evidence: stats and requirements


async def test_stats_gives_each_readable_dataset_its_evidence_and_nothing_of_the_others(viewer, analyst, demo):
    env = await viewer.ok("ontoos_stats", {})
    names = [d["name"] for d in env["data"]["datasets"]]
    assert names == VIEWER_DATASETS and env["data"]["role"] == "viewer"
    by_name = {d["name"]: d for d in env["data"]["datasets"]}
    assert by_name["workloads"]["evidence"]["freshness"]["class"] == "exact"
    assert set(by_name["workloads"]["evidence"]["source_batch"]) == {"gitlab", "k8s"}  # its project's too
    assert by_name["images"]["evidence"]["freshness"]["class"] == "estimated"  # registry: publish time only
    assert all(d["status"] == "ok" and d["evidence"]["consistency"] == "unverified" for d in env["data"]["datasets"])
    wide = {d["name"]: d for d in (await analyst.ok("ontoos_stats", {"what": "freshness"}))["data"]["datasets"]}
    assert wide["hosts"]["evidence"]["freshness"]["unknown_because"] == "no source feeds hosts"
    assert wide["tables"]["evidence"]["freshness"]["fresh"] is False  # cmdb: stale past its threshold
    err = await viewer.refused("ontoos_stats", {"what": "sizes"}, "EX102", "INVALID_REQUEST")
    assert "freshness" in err["message"]


async def test_stats_is_read_only_annotated(viewer):
    tool = viewer.tools["ontoos_stats"]
    assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False


async def test_a_freshness_requirement_over_mcp(analyst):
    met = await analyst.ok("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limit": 1,
                                               "require": {"max_age_s": 10**8, "consistency": "fixed_read"}})
    assert met["data"]["rows"] and met["meta"]["evidence"]["consistency"] == "fixed_read"
    err = await analyst.refused("ontoos_explore", {"dataset": "tables", "fields": ["table_name"],
                                                   "require": {"max_age_s": 3600}}, "EX701", "CONSISTENCY_UNVERIFIED")
    assert "older than the 3600 s required" in err["message"]
    err = await analyst.refused("ontoos_explore", {"dataset": "tables", "fields": ["table_name"],
                                                   "require": {"max_age": 1}}, "EX102", "INVALID_REQUEST")
    assert "did you mean 'max_age_s'" in err["hint"]
    err = await analyst.refused("ontoos_run_query", {"id": "nosuch", "require": {"max_age_s": 1}},
                                "EX208", "CAPABILITY_NOT_FOUND")
    schema = analyst.tools["ontoos_explore"].input_schema
    assert "require" in schema["properties"]


async def test_catalog_finds_a_column_by_name_and_answers_an_unreadable_one_as_unknown(viewer, analyst):
    env = await viewer.ok("ontoos_catalog", {"name": "namespace"})
    assert [(m["kind"], m["dataset"]) for m in env["data"]["matches"]] == [("column", "projects"),
                                                                          ("column", "workloads")]
    env = await analyst.ok("ontoos_catalog", {"name": "hostname"})
    assert env["data"]["matches"][0]["dataset"] == "hosts"
    err = await viewer.refused("ontoos_catalog", {"name": "hostname"}, "EX209", "UNKNOWN_NAME")
    assert "hosts" not in err["hint"]
    err = await viewer.refused("ontoos_catalog", {"name": "x", "dataset": "workloads"}, "EX102", "INVALID_REQUEST")
    assert "not both" in err["message"]


async def test_explain_over_mcp_an_exploration_and_a_named_query(connect, demo, tmp_path):
    registry = Registry.load(write_registry(tmp_path / "q.yaml", REGISTRY["queries"]), demo)
    async with connect("viewer", registry=registry) as viewer:
        env = await viewer.ok("ontoos_explain", {"dataset": "workloads", "relations": ["containers"],
                                                 "fields": ["name", "containers.name"]})
        assert env["data"]["relations"][0]["repeats_rows"] is True and env["data"]["kind"] == "exploration"
        env = await viewer.ok("ontoos_explain", {"query": "workloads_in_namespace", "params": {"namespace": "prod"}})
        assert env["data"]["kind"] == "named_query" and env["data"]["datasets"][0]["name"] == "workloads"
        await viewer.refused("ontoos_explain", {"query": "no_such_query"}, "EX208", "CAPABILITY_NOT_FOUND")
        await viewer.refused("ontoos_explain", {"dataset": "hosts", "fields": ["hostname"]}, "EX202",
                             "UNKNOWN_DATASET")
        assert viewer.tools["ontoos_explain"].annotations.read_only_hint is True


async def test_a_request_without_an_audit_store_says_where_it_would_go(viewer):
    err = await viewer.refused("ontoos_request_query", {"question": "owners of workloads?"}, "EX906", "DATABASE_SETUP")
    assert "ONTOOS_AUDIT=on" in err["hint"]
    tool = viewer.tools["ontoos_request_query"]
    assert tool.annotations.read_only_hint is False and tool.annotations.idempotent_hint is False


async def test_a_role_the_contract_does_not_let_explore_has_no_explore_tool(connect, tmp_path):
    def no_explore(data):
        data["roles"]["viewer"]["explore"] = False

    variant = contract_variant(tmp_path, no_explore)
    async with connect("viewer", contract=variant) as viewer:
        listed = [t.name for t in (await viewer.client.list_tools()).tools]
        assert listed == [n for n in TOOL_NAMES if n != "ontoos_explore"]
        visible = [n for n in TOOL_NAMES if n != "ontoos_explore"]
        for name in ("ontoos_explore", "ontoos_nosuch"):  # the one it may not call is one that does not exist
            with pytest.raises(MCPError) as caught:
                await viewer.client.call_tool(name, {"dataset": "workloads", "fields": ["name"]})
            message = caught.value.error.message
            assert caught.value.error.code == INVALID_PARAMS and message.startswith(f"Unknown tool: {name}. ")
            assert message.endswith("Tools: " + ", ".join(visible))
            said = message.removeprefix(f"Unknown tool: {name}. ")
            assert "ontoos_explore" not in said  # not suggested, not listed
        env = await viewer.ok("ontoos_catalog", {})  # the rest answers as before
        assert env["data"]["role"] == "viewer"
    async with connect("analyst", contract=variant) as analyst:  # another role still explores
        assert "ontoos_explore" in [t.name for t in (await analyst.client.list_tools()).tools]
        await analyst.ok("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limit": 1})


async def test_over_rest_a_role_that_may_not_explore_is_told_there_is_no_such_tool(demo, pool, tmp_path):
    from ontoos_explore.errors import Codes

    def no_explore(data):
        data["roles"]["viewer"]["explore"] = False

    variant = contract_variant(tmp_path, no_explore)
    p, settings = pool
    tools = Tools(variant, Explorer(variant, Executor(p, settings)))
    answer = await tools.call("ontoos_explore", {"dataset": "workloads", "fields": ["name"]},
                              Principal("vic", "viewer"), "rest")
    assert answer.error.error_code is Codes.UNKNOWN_TOOL and "ontoos_explore" not in answer.envelope["error"]["hint"]


async def test_a_misspelt_tool_or_query_is_capability_not_found_with_what_was_meant(connect, demo, tmp_path):
    registry = Registry.load(write_registry(tmp_path / "q.yaml", REGISTRY["queries"]), demo)
    async with connect("reader", registry=registry) as reader:
        with pytest.raises(MCPError) as caught:
            await reader.client.call_tool("ontoos_explor", {})
        assert "Did you mean ontoos_explore?" in caught.value.error.message
        err = await reader.refused("ontoos_run_query", {"id": "workloads_in_namespac"}, "EX208", "CAPABILITY_NOT_FOUND")
        assert "did you mean 'workloads_in_namespace'?" in err["hint"]


def test_on_the_cli_a_role_that_may_not_explore_is_refused_too(tmp_path, capsys, monkeypatch):
    from ontoos_explore.cli import main

    def no_explore(data):
        data["roles"]["viewer"]["explore"] = False

    contract_variant(tmp_path, no_explore)  # writes tmp_path/variant.yaml
    monkeypatch.delenv("ONTOOS_DSN", raising=False)
    code = main(["explore", "--contract", str(tmp_path / "variant.yaml"), "--role", "viewer",
                 "-q", "explore workloads fields name"])
    err = json.loads(capsys.readouterr().out)["error"]
    assert code == 2 and (err["code"], err["subtype"]) == ("EX104", "CAPABILITY_NOT_FOUND")
    assert "named queries" in err["message"] and "ontoos queries" in err["hint"]
