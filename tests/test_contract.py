"""Contract stage: loading, validation errors (file:line: place), hashing, lookups.

Broken contracts and hash cases are data under tests/cases/contracts/. A second,
hand-written contract (inventory.yaml) with entirely different names is
compiled against to show that no code knows the demo contract's names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ontoos_explore import compile_exploration, load_contract
from ontoos_explore.contract import parse_contract
from ontoos_explore.errors import ContractError, ExploreError
from ontoos_explore.names import fold

ROOT = Path(__file__).resolve().parents[1]
CASES = Path(__file__).resolve().parent / "cases" / "contracts"
DEMO = ROOT / "contracts" / "demo.yaml"
PACKAGED_DEMO = ROOT / "src" / "ontoos_explore" / "data" / "demo.yaml"
INVENTORY = CASES / "inventory.yaml"
BASES = {"demo": DEMO, "inventory": INVENTORY}
HEX16 = re.compile(r"[0-9a-f]{16}")


def apply_edits(text: str, edits: list[list[str]]) -> str:
    for old, new in edits:
        assert text.count(old) == 1, f"case data: {old!r} must occur exactly once, found {text.count(old)}"
        text = text.replace(old, new)
    return text


def line_of(text: str, needle: str) -> int:
    """The 1-based number of the one line of `text` that contains `needle`."""
    hits = [i for i, line in enumerate(text.split("\n"), start=1) if needle in line]
    assert len(hits) == 1, f"case data: {needle!r} must be on exactly one line, found on {hits}"
    return hits[0]


def raw(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- loading


def test_demo_contract_loads_with_every_dataset_relation_and_role():
    c = load_contract(DEMO)
    data = raw(DEMO)
    assert sorted(c.datasets) == sorted(data["datasets"])
    assert sorted(c.relations) == sorted(data["relations"])
    assert sorted(c.roles) == sorted(data["roles"])
    assert sorted(c.read_sets) == sorted(data["read_sets"])
    for name, d in data["datasets"].items():
        ds = c.dataset(name)
        assert ds.name == name
        assert ds.relation == d["relation"]
        assert list(ds.columns) == list(d["columns"])  # order kept
        for cname, col in d["columns"].items():
            assert ds.column(cname).type == col["type"]
            assert ds.column(cname).readable == (not col.get("secret") and not col.get("hidden"))
    assert HEX16.fullmatch(c.hash)


def test_packaged_demo_contract_is_the_documented_one():
    # The CLI's default contract is the packaged copy; the README documents contracts/demo.yaml.
    assert PACKAGED_DEMO.read_bytes() == DEMO.read_bytes()
    assert load_contract(PACKAGED_DEMO).hash == load_contract(DEMO).hash


def test_inventory_contract_loads():
    c = load_contract(INVENTORY)
    assert sorted(c.datasets) == ["buyers", "depots", "shipments"]
    assert sorted(c.relations) == ["buyer", "orders_placed", "origin"]
    assert sorted(c.roles) == ["auditor", "clerk"]
    assert c.dataset("buyers").column("card_number").secret
    assert c.dataset("shipments").column("is_test_order").hidden
    assert c.dataset("shipments").always_filter[0].column == "is_test_order"
    # nothing of the demo's names is in it
    demo = load_contract(DEMO)
    assert not {fold(n) for n in c.datasets} & {fold(n) for n in demo.datasets}
    assert not {fold(n) for n in c.roles} & {fold(n) for n in demo.roles}


INVENTORY_EXPLORATIONS = [
    pytest.param(
        "auditor",
        "explore shipments via origin fields origin.region, sum(total_eur) as total "
        "where status = 'open' group by origin.region order by total desc limit 5",
        [
            'FROM "sales"."order_headers" AS "t0"',
            'INNER JOIN "stock"."warehouse_sites" AS "t1" ON "t0"."site_no" = "t1"."site_no"',
            '"t1"."region" AS "origin.region"',
            'SUM("t0"."total_eur") AS "total"',
            'WHERE "t0"."status" = $1 AND "t0"."is_test_order" = $2',
            'GROUP BY "t1"."region"',
            "LIMIT 6",
        ],
        ["open", False],
        id="join-aggregate-always-filter",
    ),
    pytest.param(
        "auditor",
        "EXPLORE Buyers FIELDS Full_Name, TIER limit 999",
        ['"t0"."full_name" AS "full_name"', '"t0"."tier" AS "tier"', 'FROM "crm"."customer_accounts" AS "t0"', "LIMIT 51"],
        [],
        id="case-insensitive-names-dataset-row-cap",
    ),
    pytest.param(
        "clerk",
        {"dataset": "depots", "fields": ["site_code", "region"],
         "filter": [{"field": "region", "op": "in", "value": ["north", "south"]}], "order_by": ["-opened_on"]},
        ['FROM "stock"."warehouse_sites" AS "t0"', '"t0"."region" IN ($1, $2)', 'ORDER BY "t0"."opened_on" DESC', "LIMIT 41"],
        ["north", "south"],
        id="json-form-role-row-cap",
    ),
    pytest.param(
        "auditor",
        "explore buyers via orders_placed fields full_name, count() "
        "where orders_placed.status = 'shipped' group by full_name",
        [
            'FROM "crm"."customer_accounts" AS "t0"',
            'INNER JOIN "sales"."order_headers" AS "t1" ON "t0"."acct_no" = "t1"."acct_no"',
            '"t1"."status" = $1 AND "t1"."is_test_order" = $2',
        ],
        ["shipped", False],
        id="always-filter-on-joined-dataset",
    ),
]


@pytest.mark.parametrize("role,source,fragments,params", INVENTORY_EXPLORATIONS)
def test_inventory_contract_compiles_explorations(role, source, fragments, params):
    c = load_contract(INVENTORY)
    q = compile_exploration(source, c, role)
    for fragment in fragments:
        assert fragment in q.sql
    assert list(q.params) == params
    assert q.contract_hash == c.hash
    # nothing from the demo contract leaks into SQL for another contract
    for demo_word in ("lake", "k8s", "workloads", "is_deleted"):
        assert demo_word not in q.sql


def test_inventory_relation_note_is_reported():
    c = load_contract(INVENTORY)
    q = compile_exploration("explore shipments via origin fields order_no where order_no > 1", c, "auditor")
    assert "origin: Every shipment leaves from exactly one depot." in q.notes


@pytest.mark.parametrize(
    "role,source,code,reason",
    [
        ("auditor", "explore buyers fields card_number", "EX201", "SECRET_COLUMN_DENIED"),
        ("auditor", "explore shipments fields order_no where is_test_order = true", "EX201", "HIDDEN_COLUMN_DENIED"),
        ("clerk", "explore buyers fields acct_no", "EX202", "OUT_OF_SCOPE"),
        ("clerk", "explore shipments via buyer fields order_no where order_no > 1", "EX203", "OUT_OF_SCOPE"),
        ("auditor", "explore shipments fields order_no", "EX406", None),  # heavy without a filter
    ],
)
def test_inventory_contract_policies_apply(role, source, code, reason):
    c = load_contract(INVENTORY)
    with pytest.raises(ExploreError) as ei:
        compile_exploration(source, c, role)
    assert ei.value.code == code
    if reason:
        assert ei.value.reason == reason
    envelope = str(ei.value.to_envelope())
    for protected in ("card_number", "is_test_order"):
        if protected not in source:
            assert protected not in envelope


def test_inventory_secret_answers_like_missing():
    c = load_contract(INVENTORY)
    errors = []
    for col in ("card_number", "card_numbx"):  # secret vs missing, equally long, no close match
        with pytest.raises(ExploreError) as ei:
            compile_exploration(f"explore buyers fields {col}", c, "auditor")
        errors.append(str(ei.value.to_envelope()).replace(col, "<name>"))
    assert errors[0] == errors[1]


def test_exists_with_names_the_parents_in_order_and_is_part_of_the_hash():
    plain = INVENTORY.read_text()
    text = apply_edits(plain, [
        ["    heavy: true\n    always_filter:", "    heavy: true\n    exists_with: [Buyer]\n    always_filter:"],
        ["    max_rows: 50\n    columns:", "    max_rows: 50\n    always_filter:\n      - {column: full_name, op: is not null}\n    columns:"],
    ])
    c = parse_contract(text, "inventory.yaml")
    assert [r.name for r in c.parents_of("SHIPMENTS")] == ["buyer"]  # resolved, case-insensitively
    assert c.parents_of("buyers") == () and c.parents_of("nothing") == ()
    assert c.dataset("shipments").exists_with == ("Buyer",)  # as written
    assert c.hash != parse_contract(apply_edits(plain, [["    max_rows: 50\n    columns:",
                                                         "    max_rows: 50\n    always_filter:\n      - {column: full_name, "
                                                         "op: is not null}\n    columns:"]]), "x.yaml").hash


# ---------------------------------------------------------------- validation errors

BROKEN = yaml.safe_load((CASES / "broken.yaml").read_text(encoding="utf-8"))["cases"]


def build_case(case: dict) -> str:
    if "text" in case:
        return case["text"]
    return apply_edits(BASES[case["base"]].read_text(encoding="utf-8"), case.get("edits", []))


@pytest.mark.parametrize("case", BROKEN, ids=[c["id"] for c in BROKEN])
def test_broken_contract_names_file_line_and_place(case, tmp_path):
    text = build_case(case)
    path = tmp_path / f"{case['id']}.yaml"
    path.write_text(text, encoding="utf-8")
    line = line_of(text, case["line_of"]) if "line_of" in case else 1

    with pytest.raises(ContractError) as ei:
        load_contract(path)
    e = ei.value
    assert e.code == "EX902"
    assert e.subtype == "CONTRACT_INVALID"
    first = e.message.splitlines()[0]
    prefix = f"{path}:{line}: " + (f"{case['place']}: " if "place" in case else "")
    assert first.startswith(prefix), f"expected {prefix!r}, got {first!r}"
    for s in case.get("says", []):
        assert s in e.message
    for s in case.get("hint", []):
        assert e.hint and s in e.hint
    env = e.to_envelope()
    assert env["ok"] is False and env["error"]["code"] == "EX902"
    assert "Traceback" not in str(env)


def test_broken_case_ids_are_unique():
    ids = [c["id"] for c in BROKEN]
    assert len(ids) == len(set(ids))


def test_parse_contract_names_the_given_source():
    text = apply_edits(INVENTORY.read_text(), [["  crm: [buyers]", "  crm: [buyerz]"]])
    with pytest.raises(ContractError) as ei:
        parse_contract(text, source="my-contract.yaml")
    assert ei.value.message.startswith(f"my-contract.yaml:{line_of(text, 'crm: [buyerz]')}: read_sets.crm.0: ")


def test_missing_contract_file(tmp_path):
    path = tmp_path / "nowhere" / "contract.yaml"
    with pytest.raises(ContractError) as ei:
        load_contract(path)
    assert ei.value.code == "EX902"
    assert str(path) in ei.value.message
    assert ei.value.hint and "ONTOOS_CONTRACT" in ei.value.hint
    assert "Traceback" not in ei.value.message


def test_directory_as_contract_file(tmp_path):
    with pytest.raises(ContractError) as ei:
        load_contract(tmp_path)
    assert ei.value.code == "EX902"
    assert str(tmp_path) in ei.value.message


def test_contract_not_utf8(tmp_path):
    text = apply_edits(INVENTORY.read_text(), [["description: Customer accounts.", "description: Comptes clients déclarés."]])
    path = tmp_path / "latin1.yaml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ContractError) as ei:
        load_contract(path)
    assert ei.value.code == "EX902"
    assert str(path) in ei.value.message
    assert "UTF-8" in ei.value.message


@pytest.mark.parametrize("key", ["no", "on"])
def test_yaml11_boolean_words_are_not_silently_renamed(key, tmp_path):
    """A column written `no:` must be the column `no`, or the contract refused
    at its place; never silently a column named 'False'."""
    text = apply_edits(INVENTORY.read_text(), [["      opened_on: {type: date}", f"      {key}: {{type: date}}"]])
    path = tmp_path / "bools.yaml"
    path.write_text(text)
    try:
        c = load_contract(path)
    except ContractError as e:
        assert e.message.startswith(f"{path}:{line_of(text, f'      {key}: ')}: datasets.depots.columns")
    else:
        assert c.dataset("depots").column(key) is not None
        assert set(c.dataset("depots").columns) == {"site_no", "site_code", "region", key}


def test_many_errors_are_summarised_with_a_count(tmp_path):
    # many errors at once: the message stays short and says how many more there are
    text = INVENTORY.read_text()
    for col in ("site_code", "full_name"):
        text = text.replace(f"      {col}:", f"      {col}_bad:", 1)
    bad = "\n".join(line.replace("{type: integer", "{tpye: integer") for line in text.split("\n"))
    path = tmp_path / "many.yaml"
    path.write_text(bad)
    with pytest.raises(ContractError) as ei:
        load_contract(path)
    lines = ei.value.message.splitlines()
    assert 1 < len(lines) <= 6
    assert lines[-1].startswith("(and ") and lines[-1].endswith(" more)")
    assert all(line.startswith(f"{path}:") for line in lines[:-1])


# ---------------------------------------------------------------- content hash

HASH_CASES = yaml.safe_load((CASES / "hash_cases.yaml").read_text(encoding="utf-8"))


def test_hash_is_16_hex_and_stable():
    a, b = load_contract(INVENTORY), load_contract(INVENTORY)
    assert HEX16.fullmatch(a.hash)
    assert a.hash == b.hash
    assert a.hash != load_contract(DEMO).hash


def test_reformatted_contract_hashes_the_same():
    # keys reordered, block vs flow style, comments, quoting, explicit defaults
    assert load_contract(CASES / "inventory_reformatted.yaml").hash == load_contract(INVENTORY).hash


def test_demo_reformatted_by_yaml_dump_hashes_the_same(tmp_path):
    data = raw(DEMO)
    path = tmp_path / "demo_dumped.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=True, default_flow_style=False))
    rev = tmp_path / "demo_reversed.yaml"
    reversed_top = {k: data[k] for k in reversed(list(data))}
    rev.write_text(yaml.safe_dump(reversed_top, sort_keys=False, default_flow_style=True, width=10_000))
    h = load_contract(DEMO).hash
    assert load_contract(path).hash == h
    assert load_contract(rev).hash == h


@pytest.mark.parametrize("case", HASH_CASES["same"], ids=[c["id"] for c in HASH_CASES["same"]])
def test_formatting_edit_keeps_hash(case):
    base = INVENTORY.read_text()
    edited = apply_edits(base, case["edits"])
    assert edited != base
    assert parse_contract(edited).hash == parse_contract(base).hash


@pytest.mark.parametrize("case", HASH_CASES["different"], ids=[c["id"] for c in HASH_CASES["different"]])
def test_semantic_edit_changes_hash(case):
    base = INVENTORY.read_text()
    h = parse_contract(apply_edits(base, case["edits"])).hash
    assert HEX16.fullmatch(h)
    assert h != parse_contract(base).hash


def test_semantic_edits_all_hash_differently_from_each_other():
    base = INVENTORY.read_text()
    hashes = {parse_contract(apply_edits(base, c["edits"])).hash for c in HASH_CASES["different"]}
    assert len(hashes) == len(HASH_CASES["different"])


# ---------------------------------------------------------------- lookups and scope


@pytest.mark.parametrize("path", [DEMO, INVENTORY], ids=["demo", "inventory"])
def test_lookups_are_case_insensitive(path):
    c = load_contract(path)
    for name, ds in c.datasets.items():
        for variant in (name, name.upper(), name.title(), name.swapcase()):
            assert c.dataset(variant) is ds
        for cname, col in ds.columns.items():
            assert ds.column(cname.upper()) is col
            assert ds.column(cname.swapcase()) is col
        assert c.dataset(name + "_x") is None
        assert ds.column("no_such_column_here") is None
    for name, rel in c.relations.items():
        assert c.relation(name.upper()) is rel
        assert c.relation(name.title()) is rel
    for name, role in c.roles.items():
        assert c.role(name.upper()) is role
        assert c.role(name.swapcase()) is role
    assert c.role("nobody_at_all") is None
    assert c.relation("nothing_like_this") is None


def test_case_folding_is_ascii_only():
    c = load_contract(DEMO)
    # U+212A KELVIN SIGN lower-cases to 'k' in Python, not in PostgreSQL
    assert c.dataset("wor\u212aloads") is None
    assert c.dataset("WORKLOADS") is c.dataset("workloads")


@pytest.mark.parametrize("path", [DEMO, INVENTORY], ids=["demo", "inventory"])
def test_scope_is_union_of_read_sets(path):
    c = load_contract(path)
    data = raw(path)
    for rname, rdata in data["roles"].items():
        expected = {fold(ds) for s in rdata["read_sets"] for ds in data["read_sets"][s]}
        role = c.role(rname)
        assert c.scope(role) == frozenset(expected)
        assert {fold(d.name) for d in c.readable_datasets(role)} == expected


def test_inventory_scope_by_role():
    c = load_contract(INVENTORY)
    assert c.scope(c.role("clerk")) == {"depots", "shipments"}
    assert c.scope(c.role("auditor")) == {"depots", "shipments", "buyers"}


def test_relations_from_is_case_insensitive():
    c = load_contract(INVENTORY)
    assert {r.name for r in c.relations_from("SHIPMENTS")} == {"buyer", "origin"}
    assert {r.name for r in c.relations_from("buyers")} == {"orders_placed"}
    assert c.relations_from("depots") == ()


@pytest.mark.parametrize("key, says", [
    (["nope"], "'nope' is not a column of dataset 'workloads'"),
    (["is_deleted"], "key column 'is_deleted' of 'workloads' is hidden or secret"),
    (["env_dump"], "key column 'env_dump' of 'workloads' is hidden or secret"),
    (["workload_id", "Workload_ID"], "key column 'Workload_ID' is listed twice"),
])
def test_a_key_is_readable_columns_of_its_own_dataset(key, says):
    data = yaml.safe_load((Path(__file__).parent.parent / "contracts" / "demo.yaml").read_text(encoding="utf-8"))
    data["datasets"]["workloads"]["key"] = key
    with pytest.raises(ContractError) as e:
        parse_contract(yaml.safe_dump(data, sort_keys=False), "keys.yaml")
    assert says in e.value.message and "datasets.workloads.key" in e.value.message
