"""CLI surface: `ontoos compile | catalog | demo`, through `cli.main(argv)` and,
for a few cases, the installed console script in a subprocess.

Every answer on stdout is one JSON envelope (except table output and the demo);
exit 0 ok, 2 refused, 1 anything else; never a Python traceback.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ontoos_explore import compile_exploration, load_contract
from ontoos_explore.catalog import describe_dataset, list_datasets
from ontoos_explore.cli import main
from ontoos_explore.errors import ExploreError

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "contracts" / "demo.yaml"
INVENTORY = Path(__file__).resolve().parent / "cases" / "contracts" / "inventory.yaml"
EXAMPLES = ROOT / "src" / "ontoos_explore" / "data" / "demo_examples.yaml"
ONTOOS = Path(sys.executable).parent / "ontoos"
ENVELOPE_KEYS = {"ok", "sql", "params", "fingerprint", "notes", "contract_hash"}

# The README's question, in every form the CLI reads.
TEXT = ("explore workloads via containers fields name, count() "
        "where namespace = 'prod-fp' group by name order by name desc limit 20")
JSON_FORM = {"dataset": "workloads", "relations": ["containers"], "fields": ["name", "count()"],
             "filter": "namespace = 'prod-fp'", "group_by": ["name"], "order_by": ["-name"], "limit": 20}
FLAGS = ["--dataset", "workloads", "--relation", "containers", "--fields", "name,count()",
         "--filter", "namespace=prod-fp", "--group-by", "name", "--order-by", "-name", "--limit", "20"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("ONTOOS_CONTRACT", "ONTOOS_ROLE", "ONTOOS_DEBUG"):
        monkeypatch.delenv(var, raising=False)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_envelope(out: str) -> dict:
    """stdout must be exactly one JSON object (one line, as stdout is not a terminal)."""
    assert out.endswith("\n") and out.count("\n") == 1, f"not one line: {out[:500]!r}"
    obj = json.loads(out)
    assert isinstance(obj, dict)
    return obj


def script_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update(extra)
    return env


def run_script(*argv, input: bytes | None = None, **env: str) -> subprocess.CompletedProcess:
    assert ONTOOS.exists(), f"console script not found at {ONTOOS}"
    return subprocess.run([str(ONTOOS), *argv], input=input, capture_output=True, timeout=60,
                          env=script_env(**env), cwd=ROOT)


def expected_readme_query():
    return compile_exploration(TEXT, load_contract(DEMO), "analyst")


# ---------------------------------------------------------------- compile: every form, same bytes


def forms(tmp_path: Path) -> dict[str, tuple[list[str], str | None]]:
    text_file = tmp_path / "question.txt"
    text_file.write_text(TEXT + "\n")
    json_file = tmp_path / "question.json"
    json_file.write_text(json.dumps(JSON_FORM, indent=2))
    return {
        "q": (["-q", TEXT], None),
        "query-long": (["--query", TEXT], None),
        "file-text": (["-f", str(text_file)], None),
        "file-json": (["-f", str(json_file)], None),
        "stdin-text": (["-f", "-"], TEXT),
        "stdin-json": (["-f", "-"], "  " + json.dumps(JSON_FORM)),
        "json": (["--json", json.dumps(JSON_FORM)], None),
        "flags": (FLAGS, None),
    }


@pytest.mark.parametrize("form", ["q", "query-long", "file-text", "file-json", "stdin-text", "stdin-json", "json", "flags"])
def test_compile_every_form_gives_the_same_answer(form, tmp_path, capsys, monkeypatch):
    argv, stdin = forms(tmp_path)[form]
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code, out, err = run(capsys, "compile", "--role", "analyst", *argv)
    assert code == 0, out
    got = one_envelope(out)
    assert ENVELOPE_KEYS <= set(got)
    assert got["ok"] is True
    q = expected_readme_query()
    assert got["sql"] == q.sql
    assert got["params"] == ["prod-fp", False, False]  # workloads.is_deleted, then its project's
    assert got["fingerprint"] == q.fingerprint
    assert got["notes"] == list(q.notes)
    assert got["contract_hash"] == load_contract(DEMO).hash
    assert got["columns"] == ["name", "count()"]
    assert got["limit"] == 20
    assert "LIMIT 21" in got["sql"]
    assert err == ""


def test_compile_with_explicit_contract_and_role_env(capsys, monkeypatch):
    monkeypatch.setenv("ONTOOS_ROLE", "auditor")
    monkeypatch.setenv("ONTOOS_CONTRACT", str(INVENTORY))
    code, out, _ = run(capsys, "compile", "-q", "explore buyers fields full_name limit 3")
    assert code == 0, out
    got = one_envelope(out)
    assert '"crm"."customer_accounts"' in got["sql"]
    assert got["contract_hash"] == load_contract(INVENTORY).hash
    # flags override the environment
    code, out, _ = run(capsys, "compile", "--role", "clerk", "-q", "explore buyers fields full_name")
    assert code == 2
    assert one_envelope(out)["error"]["code"] == "EX202"
    code, out, _ = run(capsys, "compile", "--contract", str(DEMO), "--role", "viewer", "-q", "explore workloads fields name")
    assert code == 0
    assert '"lake"."k8s_workloads"' in one_envelope(out)["sql"]


@pytest.mark.parametrize(
    "order_args,expected",
    [
        (["--order-by", "-name"], 'ORDER BY "t0"."name" DESC'),
        (["--order-by=-name"], 'ORDER BY "t0"."name" DESC'),
        (["--order-by", "name"], 'ORDER BY "t0"."name" ASC, "t0"."workload_id" ASC LIMIT'),
        (["--order-by", "-replicas", "--order-by", "name"], 'ORDER BY "t0"."replicas" DESC, "t0"."name" ASC, "t0"."workload_id" ASC LIMIT'),
        (["--order-by", "-replicas,name"], 'ORDER BY "t0"."replicas" DESC, "t0"."name" ASC, "t0"."workload_id" ASC LIMIT'),
    ],
)
def test_order_by_descending_flag(order_args, expected, capsys):
    code, out, _ = run(capsys, "compile", "--role", "analyst", "--dataset", "workloads",
                       "--fields", "name,replicas", *order_args)
    assert code == 0, out
    assert expected in one_envelope(out)["sql"]


def test_flag_filter_and_limit(capsys):
    code, out, _ = run(capsys, "compile", "--role", "analyst", "--dataset", "workloads", "--fields", "name",
                       "--filter", "replicas=3", "--filter", "namespace != 'x'", "--limit", "7")
    assert code == 0, out
    got = one_envelope(out)
    assert got["params"] == [3, "x", False, False]
    assert "LIMIT 8" in got["sql"]


# ---------------------------------------------------------------- refusals and errors


def test_refusal_exits_2_with_envelope(capsys):
    code, out, err = run(capsys, "compile", "--role", "analyst", "-q", "explore workloads fields name, namspace")
    assert code == 2
    env = one_envelope(out)
    assert env["ok"] is False
    e = env["error"]
    assert (e["type"], e["subtype"], e["code"]) == ("validation", "UNKNOWN_FIELD", "EX201")
    assert e["position"] == {"line": 1, "column": 32}
    assert e["retry_with"] == {"dataset": "workloads", "fields": ["name", "namespace"]}
    assert "sql" not in env
    assert "Traceback" not in out + err


def test_secret_column_refusal_is_identical_to_missing_column(capsys):
    # env_dump is secret; env_dmpp does not exist and is no closer to a readable column
    _, a, _ = run(capsys, "compile", "--role", "admin", "-q", "explore workloads fields env_dump")
    _, b, _ = run(capsys, "compile", "--role", "admin", "-q", "explore workloads fields env_dmpp")
    assert a.replace("env_dump", "X") == b.replace("env_dmpp", "X")
    assert "secret" not in a.lower()


def test_unknown_role_exits_2(capsys):
    code, out, _ = run(capsys, "compile", "--role", "analyts", "-q", "explore workloads fields name")
    assert code == 2
    e = one_envelope(out)["error"]
    assert e["code"] == "EX501"
    assert e["type"] == "auth"
    assert "analyst" in e["hint"]


def test_missing_role_exits_2_with_invalid_request(capsys):
    code, out, _ = run(capsys, "compile", "-q", "explore workloads fields name")
    assert code == 2
    e = one_envelope(out)["error"]
    assert e["subtype"] == "INVALID_REQUEST" and e["code"] == "EX102"
    assert "--role" in e["message"] and "ONTOOS_ROLE" in e["message"]


def test_missing_exploration_exits_2(capsys):
    code, out, _ = run(capsys, "compile", "--role", "analyst")
    assert code == 2
    assert one_envelope(out)["error"]["code"] == "EX102"


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", "--bogus"],
        ["--bogus"],
        ["frobnicate"],
        ["compile", "--role", "analyst", "-q", "explore workloads fields name", "--json", "{}"],
        ["catalog", "--role", "analyst", "--format", "xml"],
        ["compile", "--role", "analyst", "--dataset", "workloads", "--fields", "name", "--limit", "ten"],
        ["catalog", "--role", "analyst", "workloads", "extra"],
        ["compile", "--role"],
    ],
    ids=["unknown-option", "unknown-global-option", "unknown-command", "two-sources", "bad-choice", "bad-int",
         "extra-positional", "option-without-value"],
)
def test_bad_command_line_is_one_envelope(argv, capsys):
    code, out, err = run(capsys, *argv)
    assert code == 2
    env = one_envelope(out)
    assert env["ok"] is False
    assert env["error"]["code"] == "EX102"
    assert env["error"]["hint"]
    assert "Traceback" not in out + err


def test_missing_contract_file_exits_1(capsys, tmp_path, monkeypatch):
    """A contract path that names no file is a bad setting (EX907, naming the flag or variable);
    EX902 is for a contract file that is there and invalid."""
    missing = tmp_path / "no-such-contract.yaml"
    code, out, _ = run(capsys, "compile", "--contract", str(missing), "--role", "analyst", "-q", "explore workloads fields name")
    assert code == 1
    e = one_envelope(out)["error"]
    assert e["subtype"] == "SETTING_INVALID" and e["code"] == "EX907"
    assert str(missing) in e["message"] and e["message"].endswith("no such file")
    assert e["message"].startswith("--contract=") and e["hint"].startswith("--contract takes the path of a file")
    monkeypatch.setenv("ONTOOS_CONTRACT", str(missing))
    code, out, _ = run(capsys, "catalog", "--role", "analyst")
    assert code == 1
    e = one_envelope(out)["error"]
    assert e["code"] == "EX907" and e["message"].startswith("ONTOOS_CONTRACT=")


def test_a_registry_file_that_cannot_be_read_is_an_envelope_and_is_left_alone(capsys, tmp_path):
    registry = tmp_path / "queries.yaml"
    registry.write_text("queries:\n  - id: a\n    title: x: y\n", encoding="utf-8")
    before = registry.read_bytes()
    for argv in (["queries", "list"], ["queries", "approve", "a"], ["queries", "show", "a"]):
        code, out, err = run(capsys, *argv, "--queries", str(registry))
        e = one_envelope(out)["error"]
        assert code == 2 and e["code"] == "EX102", argv
        assert e["message"].startswith("the registry file queries.yaml cannot be read: line 3"), e["message"]
        assert "nothing was written" in e["hint"] and "Traceback" not in out + err
    assert registry.read_bytes() == before


def test_invalid_contract_names_file_and_line(capsys, tmp_path):
    text = INVENTORY.read_text().replace("  crm: [buyers]", "  crm: [buyerz]")
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    line = text.split("\n").index("  crm: [buyerz]") + 1
    code, out, _ = run(capsys, "catalog", "--contract", str(path), "--role", "auditor")
    assert code == 1
    e = one_envelope(out)["error"]
    assert e["code"] == "EX902"
    assert e["message"].startswith(f"{path}:{line}: read_sets.crm.0: ")


def test_json_array_is_refused_as_not_an_object(capsys):
    code, out, _ = run(capsys, "compile", "--role", "analyst", "--json", '["explore workloads fields name"]')
    assert code == 2
    e = one_envelope(out)["error"]
    assert e["code"] == "EX102"
    assert "object" in e["message"], e["message"]


def test_json_string_is_not_the_json_form(capsys):
    # --json takes the JSON form, an object; a JSON string is not one
    code, out, _ = run(capsys, "compile", "--role", "analyst", "--json", '"explore workloads fields name"')
    assert code == 2
    assert one_envelope(out)["error"]["code"] == "EX102"


# ---------------------------------------------------------------- catalog


def test_catalog_json_lists_the_roles_datasets(capsys):
    code, out, _ = run(capsys, "catalog", "--role", "viewer", "--format", "json")
    assert code == 0
    env = one_envelope(out)
    c = load_contract(DEMO)
    assert env["ok"] is True
    assert env["data"] == json.loads(json.dumps(list_datasets(c, "viewer")))
    assert env["meta"]["contract_hash"] == c.hash


def test_catalog_json_is_the_default_off_a_terminal(capsys):
    code, out, _ = run(capsys, "catalog", "--role", "analyst", "hosts")
    assert code == 0
    env = one_envelope(out)
    assert env["data"] == json.loads(json.dumps(describe_dataset(load_contract(DEMO), "analyst", "hosts")))


def demo_protected() -> tuple[set[str], dict]:
    data = yaml.safe_load(DEMO.read_text())
    secret = {n for d in data["datasets"].values() for n, c in d["columns"].items() if c.get("secret") or c.get("hidden")}
    return secret, data


def test_catalog_table_lists_readable_columns_only(capsys):
    protected, data = demo_protected()
    for ds in ("workloads", "configs", "hosts", "projects"):
        code, out, _ = run(capsys, "catalog", "--role", "admin", "--format", "table", ds)
        assert code == 0
        assert not out.lstrip().startswith("{")
        tokens = set(out.replace(",", " ").split())
        for name, col in data["datasets"][ds]["columns"].items():
            if col.get("secret") or col.get("hidden"):
                assert name not in tokens, f"{name} shown for {ds}"
            else:
                assert name in tokens
        for name in protected:
            assert name not in tokens


def test_catalog_table_listing(capsys):
    code, out, _ = run(capsys, "catalog", "--role", "viewer", "--format", "table")
    assert code == 0
    _, data = demo_protected()
    first_words = {line.split()[0] for line in out.splitlines()[2:] if line.strip()}
    scope = {ds for s in data["roles"]["viewer"]["read_sets"] for ds in data["read_sets"][s]}
    assert first_words == scope


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_catalog_unknown_and_out_of_scope_datasets_exit_2(fmt, capsys):
    _, a, _ = run(capsys, "catalog", "--role", "viewer", "--format", fmt, "hosts")  # out of scope for viewer
    _, b, _ = run(capsys, "catalog", "--role", "viewer", "--format", fmt, "qqqqq")  # does not exist
    code, _, _ = run(capsys, "catalog", "--role", "viewer", "--format", fmt, "hosts")
    assert code == 2
    ea, eb = one_envelope(a)["error"], one_envelope(b)["error"]
    assert ea["code"] == eb["code"] == "EX202"
    assert json.dumps(ea).replace("hosts", "N") == json.dumps(eb).replace("qqqqq", "N")


def test_catalog_non_identifier_exits_2(capsys):
    code, out, _ = run(capsys, "catalog", "--role", "analyst", "../etc/passwd")
    assert code == 2
    e = one_envelope(out)["error"]
    assert e["type"] == "validation" and e["code"] == "EX103"


def test_catalog_needs_a_role(capsys):
    code, out, _ = run(capsys, "catalog")
    assert code == 2
    assert one_envelope(out)["error"]["code"] == "EX102"


# ---------------------------------------------------------------- demo


def test_demo_prints_every_example_and_refusal(capsys, monkeypatch, pg_dsn):
    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    code, out, err = run(capsys, "demo")
    assert code == 0
    examples = yaml.safe_load(EXAMPLES.read_text(encoding="utf-8"))
    c = load_contract(DEMO)
    assert examples["examples"] and examples["refusals"]
    for ex in examples["examples"]:
        q = compile_exploration(ex["source"], c, "analyst")
        assert ex["title"] in out
        assert q.sql in out
        assert " ".join(q.columns[:1]) in out  # the result table's header
    assert "row" in out and "lowered to" in out  # rows were printed, and the clamp note
    for ex in examples["refusals"]:
        with pytest.raises(ExploreError) as ei:
            compile_exploration(ex["source"], c, "analyst")
        assert ex["title"] in out
        assert json.dumps(ei.value.to_error()) in out
    assert "answered, but" not in out and "refused: {" not in out
    assert "Traceback" not in out + err
    assert "ONTOOS-SECRET-" not in out


def test_demo_fails_when_an_example_is_refused(capsys, monkeypatch, pg_dsn):
    # viewer may read fewer datasets: some examples are refused, so the demo reports failure
    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    code, out, _ = run(capsys, "demo", "--role", "viewer")
    assert code == 1
    assert "refused: {" in out


# ---------------------------------------------------------------- no tracebacks, ever


def bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str], int]]:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("explore workloads fields name where name = 'caf\xe9'".encode("latin-1"))
    locked = tmp_path / "locked.txt"
    locked.write_text("explore nowhere fields nothing")
    locked.chmod(0)
    nul_file = tmp_path / "nul.txt"
    nul_file.write_bytes(b"explore workloads fields name\x00")
    binary_contract = tmp_path / "contract.bin"
    binary_contract.write_bytes(bytes(range(256)))
    c = ["compile", "--role", "analyst"]
    return {
        "garbage-text": (c + ["-q", "%%% ;; DROP TABLE $$$ )))"], 2),
        "nul-byte": (c + ["-q", "explore workloads fields name\x00"], 2),
        "lone-surrogate": (c + ["-q", "explore workloads fields n\udcffame"], 2),
        "huge-text": (c + ["-q", "explore workloads fields " + "name, " * 20_000 + "name"], 2),
        "deep-nesting": (c + ["-q", "explore workloads fields name where " + "not (" * 5000 + "name = 'a'" + ")" * 5000], 2),
        "long-literal": (c + ["-q", "explore workloads fields name where name = '" + "x" * 5000 + "'"], 2),
        "invalid-json": (c + ["--json", '{"dataset": '], 2),
        "json-array": (c + ["--json", "[1, 2]"], 2),
        "json-nan": (c + ["--json", '{"dataset": "workloads", "fields": ["name"], "limit": NaN}'], 2),
        "json-infinity": (c + ["--json", '{"dataset": "workloads", "fields": ["name"], "limit": -Infinity}'], 2),
        "json-duplicate-keys": (c + ["--json", '{"dataset": "workloads", "dataset": "hosts", "fields": ["name"]}'], 2),
        "json-deep": (c + ["--json", "[" * 100_000], 2),
        "json-huge": (c + ["--json", '{"dataset": "' + "w" * 300_000 + '"}'], 2),
        "json-bad-filter": (c + ["--json", '{"dataset": "workloads", "fields": ["name"], "filter": {"field": "name", "op": "in", "value": "x"}}'], 2),
        "json-null-dataset": (c + ["--json", '{"dataset": null, "fields": [null]}'], 2),
        "file-not-utf8": (c + ["-f", str(latin1)], 2),
        "file-unreadable": (c + ["-f", str(locked)], 2),
        "file-nul": (c + ["-f", str(nul_file)], 2),
        "file-is-directory": (c + ["-f", str(tmp_path)], 2),
        "file-missing": (c + ["-f", str(tmp_path / "missing.txt")], 2),
        "empty-fields-flag": (c + ["--dataset", "workloads", "--fields", ""], 2),
        "bad-filter-flag": (c + ["--dataset", "workloads", "--fields", "name", "--filter", "(((("], 2),
        "role-with-nul": (["compile", "--role", "analyst\x00", "-q", "explore workloads fields name"], 2),
        "contract-is-directory": (["compile", "--contract", str(tmp_path), "--role", "analyst", "-q", "x"], 1),
        "contract-is-binary": (["catalog", "--contract", str(binary_contract), "--role", "analyst"], 1),
        "catalog-path-name": (["catalog", "--role", "analyst", "lake.hosts"], 2),
    }


BAD_IDS = ["garbage-text", "nul-byte", "lone-surrogate", "huge-text", "deep-nesting", "long-literal", "invalid-json",
           "json-array", "json-nan", "json-infinity", "json-duplicate-keys", "json-deep", "json-huge", "json-bad-filter",
           "json-null-dataset", "file-not-utf8", "file-unreadable", "file-nul", "file-is-directory", "file-missing",
           "empty-fields-flag", "bad-filter-flag", "role-with-nul", "contract-is-directory", "contract-is-binary",
           "catalog-path-name"]


@pytest.mark.parametrize("name", BAD_IDS)
def test_bad_input_never_shows_a_traceback(name, tmp_path, capsys):
    argv, expected_code = bad_inputs(tmp_path)[name]
    code, out, err = run(capsys, *argv)
    assert "Traceback" not in out and "Traceback" not in err
    env = one_envelope(out)
    assert env["ok"] is False
    assert env["error"]["type"] != "internal" or expected_code == 1
    assert code == expected_code, env
    assert len(out) < 20_000  # an error does not echo a huge input back


def test_bad_input_list_is_complete(tmp_path):
    assert sorted(bad_inputs(tmp_path)) == sorted(BAD_IDS)


# ---------------------------------------------------------------- the real console script (a few)


def test_script_compile_text_and_stdin_agree():
    a = run_script("compile", "--role", "analyst", "-q", TEXT)
    b = run_script("compile", "-f", "-", input=json.dumps(JSON_FORM).encode(), ONTOOS_ROLE="analyst")
    assert a.returncode == 0 and b.returncode == 0, (a.stdout, b.stdout)
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert ENVELOPE_KEYS <= set(ja)
    for key in ("sql", "params", "fingerprint", "contract_hash"):
        assert ja[key] == jb[key]
    assert ja["sql"] == expected_readme_query().sql
    assert a.stderr == b"" and b.stderr == b""


def test_script_refusals_and_bad_bytes_are_envelopes(tmp_path):
    runs = [
        (run_script("compile", "--role", "analyst", "-q", "explore workloads fields env_dump"), 2, "EX201"),
        (run_script("compile", "--role", "analyst", "-q", b"explore workloads fields n\xffame"), 2, None),
        (run_script("compile", "--role", "analyst", "-f", "-", input=b"\xff\xfe garbage"), 2, None),
        (run_script("compile", "--frobnicate"), 2, "EX102"),
        (run_script("catalog", "--contract", str(tmp_path / "none.yaml"), "--role", "analyst"), 1, "EX907"),
        (run_script("compile", "-q", "explore workloads fields name", ONTOOS_CONTRACT=str(INVENTORY), ONTOOS_ROLE="clerk"), 2, "EX202"),
    ]
    for proc, code, ex in runs:
        out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8", "replace")
        assert "Traceback" not in out + err, out + err
        assert proc.returncode == code, out
        env = json.loads(out)
        assert env["ok"] is False
        if ex:
            assert env["error"]["code"] == ex


def test_script_demo_and_help(pg_dsn):
    demo = run_script("demo", ONTOOS_DSN=pg_dsn)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    text = demo.stdout.decode()
    examples = yaml.safe_load(EXAMPLES.read_text(encoding="utf-8"))
    # the named query first (as a tool an agent would call), then every exploration
    assert text.count("   sql: SELECT ") == len(examples["named"]) + len(examples["examples"])
    assert text.index("## " + examples["named"][0]["title"]) < text.index("## " + examples["examples"][0]["title"])
    assert text.count("## Refused: ") == len(examples["refusals"])
    helped = run_script("compile", "--help")
    assert helped.returncode == 0
    assert b"--role" in helped.stdout and b"Traceback" not in helped.stdout + helped.stderr


@pytest.mark.parametrize("evidence, says", [
    ({"collected_at": "2026-12-01T07:43:00Z", "freshness": {"class": "exact", "age_seconds": 32400,
      "threshold_seconds": 86400, "fresh": True}, "consistency": "fixed_read",
      "source_batch": {"gitlab": "b1", "k8s": "b2"}},
     "evidence: collected 2026-12-01T07:43:00Z; 9.0 h old, fresh (threshold 24.0 h); batches gitlab b1, k8s b2 "
     "(read with the rows)"),
    ({"collected_at": None, "freshness": {"class": "estimated", "age_seconds": 1800, "threshold_seconds": 129600,
      "fresh": True, "estimated_from": ["registry"]}, "consistency": "fixed_read", "source_batch": {"registry": "r"}},
     "evidence: estimated from publish times (no collection time from registry); 30 min old, fresh"),
    ({"collected_at": "2026-11-28T06:00:00Z", "freshness": {"class": "exact", "age_seconds": 288000,
      "threshold_seconds": 129600, "fresh": False}, "consistency": "unverified", "source_batch": {"cmdb": "c"}},
     "80.0 h old, STALE (threshold 36.0 h); batches cmdb c (not read with the rows)"),
    ({"freshness": {"class": "unknown", "unknown_because": "no source feeds hosts"}},
     "evidence: freshness unknown (no source feeds hosts)"),
], ids=["exact", "estimated", "stale", "unknown"])
def test_an_answers_evidence_reads_as_one_line(evidence, says):
    from ontoos_explore.cli.common import describe_evidence

    assert says in describe_evidence(evidence)


def test_the_demo_shows_each_answers_evidence(capsys, monkeypatch, pg_dsn):
    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    code, out, _ = run(capsys, "demo")
    assert code == 0
    shown = [line.strip() for line in out.splitlines() if line.strip().startswith("evidence: ")]
    examples = yaml.safe_load(EXAMPLES.read_text(encoding="utf-8"))
    assert len(shown) == len(examples["named"]) + len(examples["examples"]) and any("fresh" in line and "batches" in line for line in shown)
