"""REST described and addressable: the OpenAPI document, the named-query endpoints, `.well-known`.

A real `ontoos serve --http` on the demo (its registry included):

- `GET /api/v1/openapi.json`, without a token: an OpenAPI 3.1 document that the
  OpenAPI meta-schema accepts, made from the models the endpoints validate
  with (its ExploreInput is the tool's input schema), with an ETag that
  `If-None-Match` turns into a 304;
- every answer of the live server to the document's examples matches the
  schema the document gives for its status;
- `GET /api/v1/queries`, `GET /api/v1/queries/{id}`, `POST /api/v1/queries/{id}/run`
  answer as the MCP tools do (the same envelopes), refusals included;
- `/.well-known/...` is a 404 envelope, not a 401, so MCP clients probing for
  OAuth fall back to the bearer header.
"""

from __future__ import annotations

import json
import time

import jsonschema
import pytest
from hypothesis import HealthCheck, Phase, settings
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from tests.databases import database_of, new_database
from tests.server.test_http import ALICE, REX, VERA, assert_error, call, start_server

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    audit_dsn = new_database(pg_dsn, "rest_api_audit")  # on, as deployed: template requests are filed there
    srv = start_server("rest-api", tmp_path_factory.mktemp("rest-api"), {"ONTOOS_DSN": pg_dsn,
                                                                         "ONTOOS_AUDIT_DSN": audit_dsn},
                       [pg_dsn, audit_dsn, database_of(audit_dsn)])
    yield srv
    srv.stop_cleanly()


@pytest.fixture(scope="module")
def document(server):
    r = call(server, "GET", "/api/v1/openapi.json")
    assert r.status == 200 and r.headers["content-type"].startswith("application/json"), r.text[:300]
    return r


def _validator(doc: dict, schema: dict) -> jsonschema.Draft202012Validator:
    """A validator of one schema of the document ({"$ref": "#/components/..."}), resolved in the document."""
    registry = Registry().with_resource("urn:openapi", DRAFT202012.create_resource(doc))
    return jsonschema.Draft202012Validator({"$ref": "urn:openapi" + schema["$ref"]}, registry=registry)


def _schema_of(doc: dict, path: str, method: str, status: int) -> dict:
    responses = doc["paths"][path][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {path} answered {status}, which the document does not list"
    return responses[str(status)]["content"]["application/json"]["schema"]


def test_the_document_is_openapi_3_1_with_every_endpoint(document):
    from openapi_spec_validator import validate

    doc = document.json
    validate(doc)  # the OpenAPI 3.1 meta-schema (raises on anything out of place)
    assert doc["openapi"] == "3.1.0"
    assert {"/api/v1/explore", "/api/v1/catalog", "/api/v1/queries", "/api/v1/queries/{id}",
            "/api/v1/queries/{id}/run", "/api/v1/requests", "/api/v1/governance/{view}",
            "/api/v1/openapi.json"} <= set(doc["paths"])
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "A principal's token from the server configuration"}
    # each data endpoint's refusals are the error envelope, for every status its errors can take
    post = doc["paths"]["/api/v1/explore"]["post"]["responses"]
    assert {"200", "400", "401", "403", "412", "413", "429", "503", "504"} <= set(post)
    assert post["403"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorEnvelope"}


def test_the_document_names_only_what_the_endpoints_read(server, document):
    """Each query parameter the document gives a GET route is one that route reads (never refused as an
    unknown parameter, whatever else it says of the value), and the run body it describes has the fields
    the endpoint validates (RunQueryInput's, but the id, which is in the path)."""
    from ontoos_explore.server.api_models import RunBody
    from ontoos_explore.server.openapi import TEXT_PARAMS
    from ontoos_explore.server.query_string import SINGLE
    from ontoos_explore.server.tool_models import RunQueryInput

    doc = document.json
    assert set(TEXT_PARAMS) == set(SINGLE)
    assert {k: (f.annotation, f.description) for k, f in RunBody.model_fields.items()} == \
        {k: (f.annotation, f.description) for k, f in RunQueryInput.model_fields.items() if k != "id"}
    assert doc["paths"]["/api/v1/explore"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ExploreInput"}
    checked = 0
    for path in ("/api/v1/explore", "/api/v1/catalog", "/api/v1/queries", "/api/v1/governance/{view}"):
        for p in doc["paths"][path]["get"]["parameters"]:
            if p["in"] != "query":
                continue
            r = call(server, "GET", path.replace("{view}", "recent") + f"?{p['name']}=1",
                     token=REX if "governance" in path else ALICE)
            assert r.status < 500, (path, p["name"], r.text[:200])
            if r.status >= 400:
                message = r.json["error"]["message"]
                assert "unknown query parameter" not in message and "no parameter" not in message, (path, p["name"])
            checked += 1
    assert checked >= 25
    stray = call(server, "GET", "/api/v1/queries?id=hosts_by_provider", token=ALICE)
    assert stray.status == 400 and "unknown query parameter" in stray.json["error"]["message"]
    assert "id" not in {p["name"] for p in doc["paths"]["/api/v1/queries"]["get"]["parameters"]}


def test_an_etag_makes_the_second_fetch_free(server, document):
    tag = document.headers["etag"]
    again = call(server, "GET", "/api/v1/openapi.json", headers={"If-None-Match": tag})
    assert again.status == 304 and again.text == "" and again.headers["etag"] == tag
    other = call(server, "GET", "/api/v1/openapi.json", headers={"If-None-Match": '"something-else"'})
    assert other.status == 200 and other.text == document.text


@pytest.mark.parametrize("method, path, body, status", [
    ("post", "/api/v1/explore", {"dataset": "workloads", "fields": ["name", "namespace"], "limit": 3}, 200),
    ("post", "/api/v1/explore", {"dataset": "workloads", "fields": ["namespce"]}, 400),
    ("post", "/api/v1/explore", {"dataset": "hosts", "fields": ["hostname"]}, 400),  # outside the reader's read set
    ("get", "/api/v1/catalog", None, 200),
    ("get", "/api/v1/queries", None, 200),
    ("post", "/api/v1/queries/{id}/run", {"params": {"provider": "aws"}}, 200),
    ("post", "/api/v1/queries/{id}/run", {"params": {"provider": "mars"}}, 400),
    ("get", "/api/v1/governance/{view}", None, 200),
    ("get", "/api/v1/governance/{view}?outcome=refusd", None, 400),
])
def test_live_answers_match_the_documented_schema(server, document, method, path, body, status):
    doc = document.json
    token = REX if "governance" in path else ALICE if "hosts" not in json.dumps(body) else VERA
    url = path.replace("{id}", "hosts_by_provider").replace("{view}", "recent")
    path = path.split("?")[0]
    r = call(server, method.upper(), url, token=token, body=body)
    assert r.status == status, r.text[:400]
    _validator(doc, _schema_of(doc, path, method, r.status)).validate(r.json)


def test_named_queries_over_rest_answer_as_the_tools_do(server):
    listed = call(server, "GET", "/api/v1/queries", token=ALICE)
    ids = [q["id"] for q in listed.json["data"]["queries"]]
    assert "hosts_by_provider" in ids and listed.json["ok"] is True
    one = call(server, "GET", "/api/v1/queries/hosts_by_provider", token=ALICE)
    assert one.status == 200 and one.json["data"]["query"]["id"] == "hosts_by_provider"
    assert one.json["data"]["query"] == next(q for q in listed.json["data"]["queries"] if q["id"] == "hosts_by_provider")
    ran = call(server, "POST", "/api/v1/queries/hosts_by_provider/run", token=ALICE, body={"params": {"provider": "aws"}})
    assert ran.status == 200 and ran.json["data"]["columns"][0] == "hostname" and ran.json["data"]["rows"]
    filtered = call(server, "GET", "/api/v1/queries?domain=ops", token=ALICE)
    assert {q["domain"] for q in filtered.json["data"]["queries"]} == {"ops"}


def test_named_query_refusals_over_rest(server):
    unknown = call(server, "GET", "/api/v1/queries/hosts_by_provder", token=ALICE)
    err = assert_error(unknown, 400, "validation", "CAPABILITY_NOT_FOUND", "EX208")  # as running it is refused
    assert "hosts_by_provider" in err["hint"]  # did you mean
    hidden = call(server, "GET", "/api/v1/queries/hosts_by_provider", token=VERA)  # not the reader's to run
    assert (hidden.status, hidden.json["error"]["subtype"]) == (400, "CAPABILITY_NOT_FOUND")
    assert hidden.json["error"]["message"] == "'hosts_by_provider' is not a named query you may run"
    extra = call(server, "POST", "/api/v1/queries/hosts_by_provider/run", token=ALICE,
                 body={"params": {"provider": "aws"}, "id": "other"})
    err = assert_error(extra, 400, "validation", "INVALID_REQUEST")
    assert "path" in err["hint"]
    not_an_object = call(server, "POST", "/api/v1/queries/hosts_by_provider/run", token=ALICE, body=[1])
    assert_error(not_an_object, 400, "validation", "INVALID_REQUEST")
    stray = call(server, "GET", "/api/v1/queries?kind=ops", token=ALICE)
    assert "unknown query parameter 'kind'" in assert_error(stray, 400, "validation", "INVALID_REQUEST")["message"]
    assert call(server, "GET", "/api/v1/queries").status == 401  # a token is needed, as everywhere


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server",
                                  "/.well-known/openid-configuration", "/.well-known/oauth-protected-resource/mcp"])
def test_well_known_paths_are_not_found_not_unauthorized(server, path):
    r = call(server, "GET", path)
    assert r.status == 404, (r.status, r.text[:200])
    assert r.json["ok"] is False and r.json["error"]["subtype"] == "INVALID_REQUEST"
    assert "www-authenticate" not in r.headers


# ---------------------------------------------------------------- the document, fuzzed against the live server

@pytest.fixture(scope="module")
def api_schema(server):
    import schemathesis
    from schemathesis.config import SchemathesisConfig

    # input outside the document must be refused with one of this API's 4xx envelopes (a cursor it did not
    # issue is a 410, which the check's default list lacks)
    config = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {
        "expected-statuses": [400, 401, 403, 404, 406, 410, 412, 413, 415, 422]}}})
    return schemathesis.openapi.from_url(server.base + "/api/v1/openapi.json", config=config)


# the operations fuzzed (the document's own, but those that take no input and the 304 of its ETag)
FUZZED = [("/api/v1/explore", "POST"), ("/api/v1/explore", "GET"), ("/api/v1/catalog", "GET"),
          ("/api/v1/queries", "GET"), ("/api/v1/queries/{id}", "GET"), ("/api/v1/queries/{id}/run", "POST"),
          ("/api/v1/requests", "POST"), ("/api/v1/governance/{view}", "GET")]


@pytest.mark.parametrize("mode", ["positive", "negative"])
@pytest.mark.parametrize("path, method", FUZZED, ids=[f"{m} {p}" for p, m in FUZZED])
def test_no_input_from_the_document_gets_a_500_or_an_undocumented_answer(api_schema, path, method, mode):
    """Schemathesis generates requests from the document (bounded, derandomized), those it allows and
    (negative) those it does not, and checks each answer: no 5xx, a documented status, the documented
    content type and schema, and input outside the document refused with a 4xx. Not every input the
    document allows is answered 200 (a dataset name the contract lacks is a 400 envelope, as documented)."""
    from hypothesis import given
    from schemathesis import GenerationMode
    from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

    statuses = set()

    @given(case=api_schema[path][method].as_strategy(GenerationMode(mode)))
    @settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.generate], database=None)
    def check(case):
        # (its unauthenticated probes would trip the per-address limit of requests without a token, which
        # then answers 429 FLOODED: the 401s are tested in test_auth.py and the table of errors)
        token = REX if "governance" in path else ALICE  # the reports are a reviewer's
        response = case.call_and_validate(headers={"Authorization": f"Bearer {token}"},
                                          excluded_checks=[positive_data_acceptance, ignored_auth])
        statuses.add(response.status_code)

    check()
    assert statuses and max(statuses) < 500, statuses


# ---------------------------------------------------------------- CSV, 406, the catalog's ETag

def test_an_answer_as_csv_carries_its_meta_in_headers(server):
    import csv
    import io

    body = {"dataset": "workloads", "fields": ["name", "namespace"], "order_by": ["name"], "limit": 3}
    as_json = call(server, "POST", "/api/v1/explore", token=ALICE, body=body).json
    r = call(server, "POST", "/api/v1/explore", token=ALICE, body=body, headers={"Accept": "text/csv"})
    assert r.status == 200 and r.headers["content-type"] == "text/csv; charset=utf-8; header=present"
    rows = list(csv.reader(io.StringIO(r.text)))
    assert rows == [as_json["data"]["columns"], *as_json["data"]["rows"]]
    assert r.headers["x-ontoos-truncated"] == "true" and r.headers["x-ontoos-rows"] == "3"
    assert r.headers["x-ontoos-next-cursor"] and r.headers["x-ontoos-exploration-id"] != as_json["meta"]["exploration_id"]
    assert json.loads(r.headers["x-ontoos-evidence"])["source_batch"] == as_json["meta"]["evidence"]["source_batch"]
    by_param = call(server, "GET", "/api/v1/explore?dataset=workloads&fields=name,namespace&order_by=name&limit=3"
                                   "&format=csv", token=ALICE)
    assert list(csv.reader(io.StringIO(by_param.text))) == rows  # format= wins over the (absent) Accept
    ran = call(server, "POST", "/api/v1/queries/hosts_by_provider/run?format=csv", token=ALICE,
               body={"params": {"provider": "aws"}})
    assert ran.status == 200 and ran.text.splitlines()[0] == "hostname,cluster,region,vcpus,memory_gb"
    refused = call(server, "POST", "/api/v1/explore", token=ALICE, body={"dataset": "workloads", "fields": ["nme"]},
                   headers={"Accept": "text/csv"})  # a refusal is the envelope, whatever was asked for
    assert refused.status == 400 and refused.json["error"]["subtype"] == "UNKNOWN_FIELD"
    planned = call(server, "POST", "/api/v1/explore", token=ALICE, body={**body, "dry_run": True},
                   headers={"Accept": "text/csv"})  # a plan has no rows: it stays the JSON envelope
    assert planned.status == 200 and planned.headers["content-type"].startswith("application/json")
    assert planned.json["ok"] is True and "rows" not in planned.json["data"]


@pytest.mark.parametrize("path, headers", [
    ("/api/v1/explore?dataset=workloads&fields=name", {"Accept": "application/xml"}),
    ("/api/v1/explore?dataset=workloads&fields=name&format=xlsx", {}),
    ("/api/v1/catalog", {"Accept": "text/csv"}),  # the catalog is JSON only
])
def test_a_media_type_the_route_cannot_give_is_406_before_anything_runs(server, path, headers):
    r = call(server, "GET", path, token=ALICE, headers=headers)
    err = assert_error(r, 406, "validation", "INVALID_REQUEST", "EX102")
    assert "application/json" in err["hint"]


def test_the_catalog_carries_an_etag_and_answers_304_to_it(server):
    first = call(server, "GET", "/api/v1/catalog?dataset=workloads", token=ALICE)
    tag = first.headers["etag"]
    assert tag.startswith('W/"')
    again = call(server, "GET", "/api/v1/catalog?dataset=workloads", token=ALICE, headers={"If-None-Match": tag})
    assert again.status == 304 and again.text == "" and again.headers["etag"] == tag
    other = call(server, "GET", "/api/v1/catalog?dataset=hosts", token=ALICE, headers={"If-None-Match": tag})
    assert other.status == 200 and other.headers["etag"] != tag  # another answer, another tag
    reader = call(server, "GET", "/api/v1/catalog", token=VERA)
    assert reader.headers["etag"] != call(server, "GET", "/api/v1/catalog", token=ALICE).headers["etag"]


def test_governance_views_over_rest_page_and_answer_csv(server):
    """A reviewer's reports: a table view pages (data.page says which rows of how many) and comes as CSV
    with the same rows; a view that is no table (the report, totals) is 406 for CSV; an empty value, an
    unknown parameter or an analyst's token is refused."""
    import csv
    import io

    for _ in range(3):  # three refusals naming a dataset of this test's own
        assert call(server, "POST", "/api/v1/explore", token=ALICE,
                    body={"dataset": "nowhere_rest", "fields": ["x"]}).status == 400
    url = "/api/v1/governance/recent?dataset=nowhere_rest&principal=alice&subtype=UNKNOWN_DATASET"
    deadline = time.monotonic() + 30
    while (r := call(server, "GET", url + "&size=2", token=REX)).json["data"]["page"]["total"] < 3:
        assert time.monotonic() < deadline, "the audit never recorded the three refusals"
        time.sleep(0.1)
    assert r.json["data"]["page"] == {"number": 1, "size": 2, "total": 3, "pages": 2, "first_row": 1, "last_row": 2}
    second = call(server, "GET", url + "&size=2&page=2", token=REX).json["data"]
    assert second["page"]["first_row"] == second["page"]["last_row"] == 3
    ids = [e["id"] for e in r.json["data"]["recent"] + second["recent"]]
    assert len(set(ids)) == 3
    as_csv = call(server, "GET", url, token=REX, headers={"Accept": "text/csv"})
    assert as_csv.status == 200 and as_csv.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [e["id"] for e in table] == ids and as_csv.headers["x-ontoos-total"] == "3"
    for path, headers, status in (("/api/v1/governance/report?format=csv", {}, 406),
                                  ("/api/v1/governance/totals", {"Accept": "text/csv"}, 406),
                                  ("/api/v1/governance/by_column?subtype=", {}, 400),
                                  ("/api/v1/governance/by_column?windw=7d", {}, 400),
                                  ("/api/v1/governance/by_colum", {}, 400)):
        refused = call(server, "GET", path, token=REX, headers=headers)
        assert refused.status == status and refused.json["ok"] is False, (path, refused.text[:300])
    assert "did you mean 'by_column'?" in call(server, "GET", "/api/v1/governance/by_colum", token=REX).json[
        "error"]["hint"]
    assert call(server, "GET", "/api/v1/governance/recent", token=ALICE).status == 403
    # a POST reads its arguments from its body only: one in the query string is refused, not ignored
    stray = call(server, "POST", "/api/v1/explore?limit=1", token=ALICE, body={"dataset": "workloads", "fields": ["name"]})
    assert stray.status == 400 and "query string" in stray.json["error"]["message"]
