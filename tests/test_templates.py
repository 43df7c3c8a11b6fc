"""The template cache answers exactly what the whole pipeline answers.

For explorations drawn over the demo contract, the same text with other
literal values (same kinds mostly, other kinds, enum values, quotes,
backslashes, over-long strings, out-of-range integers now and then) must
compile through a primed cache to exactly the query the uncached pipeline
builds, or be refused with exactly its envelope and reason.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ontoos_explore import ExploreError, load_contract
from ontoos_explore.grammar.render import to_json_form, to_text
from ontoos_explore.ir import Lit
from ontoos_explore.pipeline import compile_exploration
from ontoos_explore.templates import TemplateCache, template_of

from .conftest import CASES, ROOT
from .properties.strategies import contract_explorations

CONTRACT = load_contract(ROOT / "contracts" / "demo.yaml")
ROLES = sorted(CONTRACT.roles)
ENUM_VALUES = sorted({v for ds in CONTRACT.datasets.values() for c in ds.columns.values() for v in (c.values or ())})


def outcome(text: str, role: str, cache: TemplateCache | None):
    try:
        q = compile_exploration(text, CONTRACT, role, cache=cache)
    except ExploreError as e:
        return ("refused", e.to_envelope(), e.reason, e.detail)
    # params compared with their types: False == 0 and Decimal(1) == 1 in Python
    return ("ok", q, tuple((type(p), p) for p in q.params))


def relit(node, new):
    """The same IR with every literal replaced by new(literal)."""
    if isinstance(node, Lit):
        return new(node)
    if isinstance(node, tuple):
        return tuple(relit(x, new) for x in node)
    if isinstance(node, BaseModel):
        return node.model_copy(update={k: relit(getattr(node, k), new) for k in type(node).model_fields})
    return node


_strings = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
    st.sampled_from(ENUM_VALUES + ["", "'", "''", "\\", "\\'", '"', "%", "a%", "2026-01-31", "2026-01-31T12:00:00",
                                   "3", "-7", "2.5", "true", "FALSE", "x" * 1001, "\x01"]),
)


def _other(data, lit: Lit) -> Lit:
    kind = lit.kind if data.draw(st.integers(0, 4)) else data.draw(st.sampled_from(["string", "integer", "decimal", "boolean"]))
    if kind == "string":
        value = data.draw(_strings)
    elif kind == "integer":
        value = data.draw(st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, 1, -1, 2**63, -(2**63) - 1, 10**30]))
    elif kind == "decimal":
        value = data.draw(st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-10**6, max_value=10**6))
    else:
        value = data.draw(st.booleans())
    return Lit(kind=kind, value=value)


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_primed_cache_answers_as_the_whole_pipeline(data):
    e = data.draw(contract_explorations(CONTRACT))
    role = data.draw(st.sampled_from(ROLES))
    twin = relit(e, lambda lit: _other(data, lit))
    first, second = to_text(e), to_text(twin)
    cache = TemplateCache()
    primed = outcome(first, role, cache)
    assert primed == outcome(first, role, None)
    assert outcome(second, role, cache) == outcome(second, role, None)
    if primed[0] == "ok" and template_of(first)[0] == template_of(second)[0]:
        assert cache.hits + cache.fallbacks + cache.exact_hits == 1  # the twin met the entry (or was the same text)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_json_form_and_the_ir_hit_as_the_whole_pipeline_answers(data):
    e = data.draw(contract_explorations(CONTRACT))
    role = data.draw(st.sampled_from(ROLES))
    twin = relit(e, lambda lit: _other(data, lit))
    form = data.draw(st.sampled_from(["json", "ir"]))
    first, second = (to_json_form(e), to_json_form(twin)) if form == "json" else (e, twin)
    cache = TemplateCache()
    assert outcome(first, role, cache) == outcome(first, role, None)
    assert outcome(second, role, cache) == outcome(second, role, None)
    assert outcome(first, role, cache) == outcome(first, role, None)  # asked again: the exact table's answer


def test_the_json_form_asked_again_exactly_is_the_query_it_compiled_to():
    cache = TemplateCache()
    body = {"dataset": "workloads", "fields": ["name", "replicas"], "filter": "replicas >= 2 and name like 'api%'",
            "limit": 10}
    first = compile_exploration(body, CONTRACT, "analyst", cache=cache)
    assert compile_exploration(dict(body), CONTRACT, "analyst", cache=cache) is first
    assert cache.exact_hits == 1 and first == compile_exploration(body, CONTRACT, "analyst", cache=None)
    # another role, or the same keys in another order, is an entry of its own
    other = compile_exploration(body, CONTRACT, "admin", cache=cache)
    assert other is not first and cache.exact_hits == 1
    compile_exploration(dict(reversed(body.items())), CONTRACT, "analyst", cache=cache)
    assert cache.exact_hits == 1


def test_json_values_python_holds_equal_are_not_one_exact_entry():
    """1, 1.0, True and Decimal('1') are equal as dict values: each is still its own entry, and answered
    as the whole pipeline answers it (a boolean for an integer column is refused)."""
    from decimal import Decimal

    cache = TemplateCache()
    for value in (1, True, Decimal("1.0"), 1, True):
        body = {"dataset": "workloads", "fields": ["name"], "filter": [{"field": "replicas", "op": ">=", "value": value}]}
        assert outcome(body, "analyst", cache) == outcome(body, "analyst", None)
    assert outcome({"dataset": "workloads", "fields": ["name"],
                    "filter": [{"field": "replicas", "op": ">=", "value": True}]}, "analyst", cache)[0] == "refused"


def test_json_filter_objects_hit_with_their_new_values():
    cache = TemplateCache()
    body = {"dataset": "workloads", "fields": ["name"],
            "filter": [{"field": "replicas", "op": ">=", "value": 2}, {"field": "kind", "op": "in", "value": ["Job"]}]}
    first = compile_exploration(body, CONTRACT, "analyst", cache=cache)
    body["filter"] = [{"field": "replicas", "op": ">=", "value": 5}, {"field": "kind", "op": "in", "value": ["CronJob"]}]
    second = compile_exploration(body, CONTRACT, "analyst", cache=cache)
    assert cache.hits == 1 and second.sql is first.sql
    assert second == compile_exploration(body, CONTRACT, "analyst", cache=None)
    body["filter"][1]["value"] = ["cronjob"]  # not an enum value: the whole path's refusal
    assert outcome(body, "analyst", cache) == outcome(body, "analyst", None)
    assert outcome(body, "analyst", cache)[0] == "refused"


def test_the_query_key_is_matched_as_text_before_parsing():
    cache = TemplateCache()
    compile_exploration({"query": TEXT}, CONTRACT, "analyst", cache=cache)
    hit = compile_exploration({"query": TEXT.replace(">= 2", ">= 3")}, CONTRACT, "analyst", cache=cache)
    assert cache.hits == 1 and hit.params[0] == 3
    assert compile_exploration(TEXT, CONTRACT, "analyst", cache=cache).sql is hit.sql  # the same entry as the text
    bad = {"query": TEXT.replace("'api%'", "'" + "x" * 1001 + "'")}
    assert outcome(bad, "analyst", cache) == outcome(bad, "analyst", None)


def _golden():
    import yaml

    return [(c["role"], c["source"]) for c in yaml.safe_load((CASES / "golden.yaml").read_text()) if isinstance(c["source"], str)]


@pytest.mark.parametrize(("role", "text"), _golden())
def test_golden_cases_hit_with_identical_queries(role, text):
    cache = TemplateCache(exact=False)
    whole = compile_exploration(text, CONTRACT, role, cache=None)
    assert compile_exploration(text, CONTRACT, role, cache=cache) == whole
    again = compile_exploration(text, CONTRACT, role, cache=cache)
    assert again == whole and again.sql == whole.sql
    assert cache.hits == 1 and cache.stats()["exact_entries"] == 0
    exact = TemplateCache()
    first = compile_exploration(text, CONTRACT, role, cache=exact)
    assert compile_exploration(text, CONTRACT, role, cache=exact) is first == whole
    assert exact.exact_hits == 1 and exact.hits == 0


TEXT = "explore workloads fields name, replicas where replicas >= 2 and name like 'api%' limit 10"


def test_a_hit_binds_the_new_values_and_keeps_the_guarded_sql():
    cache = TemplateCache()
    first = compile_exploration(TEXT, CONTRACT, "analyst", cache=cache)
    second = compile_exploration(TEXT.replace(">= 2", ">= 5").replace("'api%'", "'db%'"), CONTRACT, "analyst", cache=cache)
    assert cache.stats() | {"bytes": 0, "exact_bytes": 0} == {"entries": 1, "hits": 1, "misses": 1, "fallbacks": 0,
                                                             "bytes": 0, "exact_entries": 2, "exact_hits": 0,
                                                             "exact_bytes": 0}
    assert second.sql is first.sql
    assert second.params[:2] == (5, "db%") and second.params[2:] == first.params[2:]  # always-filters kept
    assert second.fingerprint == first.fingerprint
    assert "replicas >= 5" in second.normalized and "'db%'" in second.normalized


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        (">= 2", ">= 'many'", "EX301"),  # a string: converted on the hit, refused by the whole path
        (">= 2", ">= 99999999999999999999", "EX301"),  # out of range for a 64-bit integer
        ("'api%'", "'" + "x" * 1001 + "'", "EX405"),  # over the role's literal budget
    ],
)
def test_a_value_the_binder_refuses_is_refused_the_same_way(old, new, code):
    cache = TemplateCache()
    compile_exploration(TEXT, CONTRACT, "analyst", cache=cache)
    text = TEXT.replace(old, new)
    with pytest.raises(ExploreError) as cached:
        compile_exploration(text, CONTRACT, "analyst", cache=cache)
    with pytest.raises(ExploreError) as whole:
        compile_exploration(text, CONTRACT, "analyst", cache=None)
    assert cached.value.to_envelope() == whole.value.to_envelope()
    assert cached.value.to_envelope()["error"]["code"] == code


def test_an_enum_value_is_checked_on_a_hit():
    cache = TemplateCache()
    text = "explore workloads fields name where kind = 'Deployment'"
    compile_exploration(text, CONTRACT, "analyst", cache=cache)
    with pytest.raises(ExploreError) as e:
        compile_exploration(text.replace("Deployment", "deployment"), CONTRACT, "analyst", cache=cache)
    assert e.value.retry_with is not None  # the whole path's answer: case-sensitive did-you-mean
    assert cache.fallbacks == 1 and cache.hits == 0


def test_roles_never_share_entries():
    cache = TemplateCache()
    compile_exploration(TEXT, CONTRACT, "analyst", cache=cache)
    # viewer's read sets differ and its literal budget is 200: its own answer, not analyst's entry
    long = TEXT.replace("'api%'", "'" + "x" * 300 + "'")
    assert outcome(long, "viewer", cache) == outcome(long, "viewer", None)
    assert outcome(TEXT, "admin", cache) == outcome(TEXT, "admin", None)
    assert cache.hits == 0


def test_another_contract_never_meets_an_entry(tmp_path):
    cache = TemplateCache()
    compile_exploration(TEXT, CONTRACT, "analyst", cache=cache)
    changed = tmp_path / "demo.yaml"
    changed.write_text((ROOT / "contracts" / "demo.yaml").read_text().replace("max_literal_length: 200", "max_literal_length: 201"))
    other = load_contract(changed)
    assert other.hash != CONTRACT.hash
    compile_exploration(TEXT, other, "analyst", cache=cache)
    assert cache.hits == 0 and len(cache) == 2


def test_the_cache_is_bounded():
    cache = TemplateCache(size=3)
    for n in range(6):
        compile_exploration(f"explore workloads fields name limit {n + 1}", CONTRACT, "analyst", cache=cache)
    assert len(cache) == 3
    for n in range(6):  # the JSON form: an entry and the alias of its own template, each counted
        compile_exploration({"dataset": "workloads", "fields": ["name"], "limit": n + 1}, CONTRACT, "analyst",
                            cache=cache)
        assert len(cache) <= 3


def test_the_cache_is_bounded_in_bytes_too():
    big = "explore workloads fields name where replicas in (" + ", ".join(str(i) for i in range(150)) + ")"
    one = TemplateCache()
    compile_exploration(big, CONTRACT, "analyst", cache=one)
    entry_bytes = one.bytes
    assert entry_bytes > 2000
    cache = TemplateCache(max_bytes=int(entry_bytes * 2.5))
    for n in range(5):
        compile_exploration(big + f" limit {n + 1}", CONTRACT, "analyst", cache=cache)
    assert len(cache) == 2 and cache.bytes <= cache.max_bytes


def test_a_text_asked_again_skips_the_template_and_a_refusal_is_never_kept():
    cache = TemplateCache()
    first = compile_exploration(TEXT, CONTRACT, "analyst", cache=cache)
    assert compile_exploration(TEXT, CONTRACT, "analyst", cache=cache) is first
    assert compile_exploration(TEXT, CONTRACT, "admin", cache=cache) is not first  # per role
    refused = TEXT.replace(">= 2", ">= 'many'")
    for _ in range(2):
        with pytest.raises(ExploreError) as e:
            compile_exploration(refused, CONTRACT, "analyst", cache=cache)
        assert e.value.to_envelope()["error"]["code"] == "EX301"
    assert cache.exact_hits == 1 and cache.stats()["exact_entries"] == 2


def test_the_table_of_texts_is_bounded_to_a_quarter():
    cache = TemplateCache(size=8)
    for n in range(6):
        compile_exploration(f"explore workloads fields name limit {n + 1}", CONTRACT, "analyst", cache=cache)
    assert cache.stats()["exact_entries"] == 2 and len(cache) == 6
    big = "explore workloads fields name where replicas in (" + ", ".join(str(i) for i in range(150)) + ")"
    probe = TemplateCache()
    compile_exploration(big, CONTRACT, "analyst", cache=probe)
    small = TemplateCache(max_bytes=probe.exact_bytes * 6)  # a quarter: room for one big text, not two
    for n in range(3):
        compile_exploration(big + f" limit {n + 1}", CONTRACT, "analyst", cache=small)
    assert small.stats()["exact_entries"] == 1 and small.exact_bytes <= small.exact_max_bytes
    tiny = TemplateCache(size=3)  # a quarter of 3 entries: none
    compile_exploration(TEXT, CONTRACT, "analyst", cache=tiny)
    assert tiny.stats()["exact_entries"] == 0
    off = TemplateCache(exact=False)
    compile_exploration(TEXT, CONTRACT, "analyst", cache=off)
    compile_exploration(TEXT, CONTRACT, "analyst", cache=off)
    assert off.exact_hits == 0 and off.hits == 1


def test_template_of_marks_literals_and_keeps_the_limit():
    template, lits = template_of("explore w fields a where a = 'it''s' and b in (1, -2.50) and c = TRUE limit 7")
    assert template == "explore w fields a where a = \x00s and b in (\x00i, \x00d) and c = \x00b limit 7"
    assert lits == [("string", "it's"), ("integer", 1), ("decimal", Decimal("-2.50")), ("boolean", True)]
    # digits inside names are not literals
    assert template_of("explore d0 fields r12.c3")[1] == []


def test_timestamps_compile_alike_through_a_hit():
    cache = TemplateCache()
    text = "explore projects fields name where created_at >= '2024-01-01'"
    compile_exploration(text, CONTRACT, "analyst", cache=cache)
    q = compile_exploration(text.replace("2024-01-01", "2025-06-30"), CONTRACT, "analyst", cache=cache)
    assert isinstance(q.params[0], dt.datetime) and cache.hits == 1


def test_the_json_form_asked_again_with_other_values_is_not_parsed_again():
    """Its own template (its strings with their literals slotted) becomes an alias of the parsed form's
    entry, so the next values bind without Lark; what it gives is what the whole pipeline gives."""
    from ontoos_explore.pipeline import compile_whole, parse_source, resolve_role

    parsed: list[object] = []

    def counting_parse(source):
        parsed.append(source)
        return parse_source(source)

    cache, role = TemplateCache(), resolve_role(CONTRACT, "analyst")
    body = {"dataset": "workloads", "fields": ["name", "namespace"], "filter": "namespace = 'prod' and replicas > 2",
            "order_by": ["name"], "limit": 20}
    cache.compile(body, CONTRACT, role, compile_whole, counting_parse)
    assert len(parsed) == 1
    for ns, n in (("staging", 5), ("it's", 0), ("payments", -3)):
        again = {**body, "filter": f"namespace = '{ns.replace(chr(39), chr(39) * 2)}' and replicas > {n}"}
        got = cache.compile(again, CONTRACT, role, compile_whole, counting_parse)
        assert got == compile_exploration(again, CONTRACT, "analyst", cache=None)
        assert got.params[:2] == (ns, n)
    assert len(parsed) == 1 and cache.hits == 3
    # another shape (a field more), a filter of objects, an unknown key: parsed, as before
    for other in ({**body, "fields": ["name", "namespace", "kind"]},
                  {**body, "filter": [{"field": "namespace", "op": "=", "value": "prod"}]}):
        assert cache.compile(other, CONTRACT, role, compile_whole, counting_parse) == \
            compile_exploration(other, CONTRACT, "analyst", cache=None)
    assert len(parsed) == 3


@pytest.mark.parametrize("change", [
    {"filter": "namespace = 'prod\x00' and replicas > 2"},  # a NUL: the parser's refusal, not a hit
    {"filter": "namespace = '" + "x" * 1001 + "' and replicas > 2"},  # over the literal budget
    {"filter": "namespace = 'prod' and replicas > 'many'"},  # another kind: another template
    {"fields": ["name", "namespace, kind"]},  # commas inside one entry
    {"fields": ["name", "coalesce(namespace, 'a\\',b')"]},  # a comma the entry check sees outside quotes
])
def test_a_json_form_the_parser_refuses_is_refused_the_same_way_after_a_hit(change):
    cache = TemplateCache()
    body = {"dataset": "workloads", "fields": ["name", "namespace"], "filter": "namespace = 'prod' and replicas > 2"}
    compile_exploration(body, CONTRACT, "analyst", cache=cache)
    compile_exploration({**body, "filter": "namespace = 'qa' and replicas > 1"}, CONTRACT, "analyst", cache=cache)
    assert cache.hits == 1
    assert outcome({**body, **change}, "analyst", cache) == outcome({**body, **change}, "analyst", None)
