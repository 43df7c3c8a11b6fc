"""Rejections: every case in tests/cases/rejections.yaml is refused exactly as written there.

Each case names a role of the demo contract, a source (text or JSON form) and
the refusal: type, subtype, code, the substrings that make the hint useful,
optionally the message, the position, the audit reason and the retry_with
behaviour. On top of each case's own expectations, every refusal's envelope
is checked for what it must never carry: the internal reason, a traceback,
SQL, or the name of a secret (or hidden) column the caller did not write.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ontoos_explore import ExploreError, compile_exploration
from ontoos_explore.contract import load_contract
from ontoos_explore.grammar import forms, limits

ROOT = Path(__file__).resolve().parents[2]
CASES_FILE = ROOT / "tests" / "cases" / "rejections.yaml"
CONTRACT = load_contract(ROOT / "contracts" / "demo.yaml")
CASES: list[dict[str, Any]] = yaml.safe_load(CASES_FILE.read_text(encoding="utf-8"))

# What the caller may see of an error; anything else is internal.
ERROR_KEYS = {"type", "subtype", "code", "message", "hint", "position", "retry_with"}
REQUIRED = ("id", "role", "source", "type", "subtype", "code", "hint_contains")
OPTIONAL = ("expand", "message_contains", "not_contains", "reason", "position", "retry_with",
            "retry_with_refused_as", "retry_with_contains")

SECRET_COLUMNS = sorted({c.name for ds in CONTRACT.datasets.values() for c in ds.columns.values() if c.secret})
HIDDEN_COLUMNS = sorted({c.name for ds in CONTRACT.datasets.values() for c in ds.columns.values() if c.hidden})
# Words of the request language itself (JSON-form keys such as "value"): a hint that
# shows the request format mentions them without revealing any column.
FORM_KEYS = sorted(set(forms.JSON_KEYS) | set(forms.FILTER_KEYS))

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)\}")
_COUNT = re.compile(r"\s*(?:(\d+)|(role|limits)\.([A-Za-z_]\w*))\s*(?:([+-])\s*(\d+))?\s*")


# ---------------------------------------------------------------- loading the cases


def _role(case: dict[str, Any]):
    return CONTRACT.role(case["role"])


def _lookup(path: str, case: dict[str, Any]) -> Any:
    """`role.<budget>` from the contract, `limits.<NAME>` from grammar.limits."""
    head, _, attr = path.partition(".")
    if head == "role":
        role = _role(case)
        assert role is not None, f"{case['id']}: ${{{path}}} needs a role of the contract"
        return getattr(role, attr)
    if head == "limits":
        return getattr(limits, attr)
    raise KeyError(f"{case['id']}: unknown placeholder ${{{path}}}")


def _count(expr: Any, case: dict[str, Any]) -> int:
    if isinstance(expr, int):
        return expr
    m = _COUNT.fullmatch(str(expr))
    assert m, f"{case['id']}: bad count {expr!r}"
    n = int(m.group(1)) if m.group(1) else int(_lookup(f"{m.group(2)}.{m.group(3)}", case))
    if m.group(4):
        n = n + int(m.group(5)) if m.group(4) == "+" else n - int(m.group(5))
    return n


def _expansions(case: dict[str, Any]) -> dict[str, list[str]]:
    out = {}
    for name, spec in (case.get("expand") or {}).items():
        out[name] = [spec["item"].replace("{i}", str(i)) for i in range(_count(spec["count"], case))]
    return out


def _expand_source(value: Any, case: dict[str, Any], exp: dict[str, list[str]]) -> Any:
    seps = {name: (spec.get("sep") or "") for name, spec in (case.get("expand") or {}).items()}
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: seps[m.group(1)].join(exp[m.group(1)]), value)
    if isinstance(value, list):
        items: list[Any] = []
        for v in value:
            whole = _PLACEHOLDER.fullmatch(v) if isinstance(v, str) else None
            if whole and whole.group(1) in exp:
                items.extend(exp[whole.group(1)])
            else:
                items.append(_expand_source(v, case, exp))
        return items
    if isinstance(value, dict):
        return {k: _expand_source(v, case, exp) for k, v in value.items()}
    return value


def source_of(case: dict[str, Any]) -> Any:
    return _expand_source(case["source"], case, _expansions(case))


def expected_text(text: str, case: dict[str, Any]) -> str:
    """An expectation with ${role.x} / ${limits.X} read from the contract and the grammar."""
    return _PLACEHOLDER.sub(lambda m: str(_lookup(m.group(1), case)), text)


def as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def refuse(source: Any, role: str) -> ExploreError:
    with pytest.raises(ExploreError) as info:
        compile_exploration(source, CONTRACT, role)
    return info.value


def written(source: Any) -> str:
    return source if isinstance(source, str) else json.dumps(source)


def mentions(text: str, name: str) -> bool:
    """`name` as a whole identifier in `text`, ignoring case."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text, re.IGNORECASE) is not None


# ---------------------------------------------------------------- the case file itself


def test_the_case_file_is_well_formed():
    assert len(CASES) >= 45
    ids = [c["id"] for c in CASES]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    for case in CASES:
        missing = [k for k in REQUIRED if k not in case]
        assert not missing, f"{case.get('id')}: missing {missing}"
        unknown = [k for k in case if k not in REQUIRED + OPTIONAL]
        assert not unknown, f"{case['id']}: unknown keys {unknown}"
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", case["id"]), case["id"]
        assert isinstance(case["source"], (str, dict)), case["id"]
        assert as_list(case["hint_contains"]), f"{case['id']}: hint_contains must name at least one substring"
        if "retry_with_refused_as" in case or "retry_with_contains" in case:
            assert case.get("retry_with") is True, f"{case['id']}: retry_with details need retry_with: true"


def test_every_subtype_the_caller_can_get_here_is_covered():
    """The issue's refusals, by subtype and code: none is left without a case."""
    codes = {c["code"] for c in CASES}
    for code in ("EX101", "EX102", "EX103", "EX201", "EX202", "EX203", "EX204", "EX205", "EX301", "EX302",
                 "EX303", "EX304", "EX305", "EX306", "EX307", "EX308", "EX401", "EX402", "EX403", "EX404",
                 "EX405", "EX406", "EX408", "EX409", "EX501"):
        assert code in codes, f"no case for {code}"
    reasons = {c.get("reason") for c in CASES}
    assert {"SECRET_COLUMN_DENIED", "HIDDEN_COLUMN_DENIED", "OUT_OF_SCOPE", "UNKNOWN_FIELD"} <= reasons


# ---------------------------------------------------------------- each case


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_rejection(case):
    source = source_of(case)
    role = case["role"]
    err = refuse(source, role)

    # the category, exactly
    assert (err.type, err.subtype, err.code) == (case["type"], case["subtype"], case["code"]), repr(err)

    # a hint that helps: each expected substring is in it
    for want in as_list(case["hint_contains"]):
        want = expected_text(want, case)
        assert err.hint and want in err.hint, f"hint {err.hint!r} lacks {want!r}"
    for want in as_list(case.get("message_contains")):
        want = expected_text(want, case)
        assert want in err.message, f"message {err.message!r} lacks {want!r}"

    if "reason" in case:
        assert err.reason == case["reason"]

    if "position" in case:
        pos = case["position"]
        if pos is None:
            assert err.position is None, f"unexpected position {err.position}"
        else:
            assert err.position is not None, "the error carries no position"
            assert (err.position.line, err.position.column) == (pos["line"], pos["column"])

    envelope = err.to_envelope()
    for text in as_list(case.get("not_contains")):
        assert text not in json.dumps(envelope), f"the envelope mentions {text!r}"

    if case.get("retry_with") is False:
        assert err.retry_with is None, f"unexpected retry_with {err.retry_with}"
    elif case.get("retry_with") is True:
        retry = err.retry_with
        assert isinstance(retry, dict) and retry, "retry_with is missing"
        assert envelope["error"]["retry_with"] == retry
        for key, value in (case.get("retry_with_contains") or {}).items():
            assert retry.get(key) == value, f"retry_with[{key!r}] is {retry.get(key)!r}, not {value!r}"
        refused_as = case.get("retry_with_refused_as")
        if refused_as is None:
            try:
                compile_exploration(retry, CONTRACT, role)
            except ExploreError as again:
                pytest.fail(f"retry_with {retry} is refused again: {again!r}")
        else:
            again = refuse(retry, role)
            assert again.subtype == refused_as, repr(again)
            assert again.subtype != err.subtype or again.code != err.code, "the retry repeats the same refusal"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_envelope_never_leaks(case):
    source = source_of(case)
    err = refuse(source, case["role"])
    envelope = err.to_envelope()
    dumped = json.dumps(envelope)  # JSON-serializable, or this raises

    assert set(envelope) == {"ok", "error", "meta"}
    assert envelope["ok"] is False
    assert set(envelope["error"]) <= ERROR_KEYS
    assert {"type", "subtype", "code", "message"} <= set(envelope["error"])
    assert json.loads(dumped) == envelope

    # the audit reason stays on the exception
    if err.reason != err.subtype:
        assert err.reason not in dumped
    for reason in ("SECRET_COLUMN_DENIED", "HIDDEN_COLUMN_DENIED", "OUT_OF_SCOPE"):
        assert reason not in dumped

    # no internals, no SQL
    assert "Traceback" not in dumped
    caller_text = written(source)
    if "SELECT" not in caller_text:
        assert "SELECT" not in dumped
    for physical in {ds.relation for ds in CONTRACT.datasets.values()}:
        if physical not in caller_text:
            assert physical not in dumped, f"the physical table {physical} is named"

    # no protected column the caller did not write (a name that is also a word of the
    # request format, such as "value", is left to the differential test in test_no_leak.py)
    for name in SECRET_COLUMNS + HIDDEN_COLUMNS:
        if name.lower() in FORM_KEYS or mentions(caller_text, name):
            continue
        assert not mentions(dumped, name), f"the envelope names protected column {name!r}"


# ---------------------------------------------------------------- the maxima the hints state


def _at_most(role_name: str, what: str) -> Any:
    role = CONTRACT.role(role_name)
    fields = ", ".join(f"name as n{i}" for i in range(role.max_fields))
    preds = " and ".join(f"replicas > {i}" for i in range(role.max_predicates))
    values = ", ".join(f"'n{i}'" for i in range(role.max_in_list))
    literal = "x" * role.max_literal_length
    head = "explore workloads fields name"
    return {
        "max_fields": f"explore workloads fields {fields}",
        "max_predicates": f"{head} where {preds}",
        "max_in_list": f"{head} where name in ({values})",
        "max_literal_length": f"{head} where name = '{literal}'",
        "max_text": head + " " * (limits.MAX_TEXT - len(head)),
        "max_depth": f"{head} where " + "not " * limits.MAX_DEPTH + "replicas > 1",
    }[what]


@pytest.mark.parametrize("what", ["max_fields", "max_predicates", "max_in_list", "max_literal_length",
                                  "max_text", "max_depth"])
def test_the_maximum_a_hint_states_is_accepted(what):
    """A hint saying "at most N" is only true if exactly N compiles (N + 1 is in the cases)."""
    source = _at_most("viewer", what)
    if what == "max_text":
        assert len(source) == limits.MAX_TEXT
    try:
        compile_exploration(source, CONTRACT, "viewer")
    except ExploreError as e:
        pytest.fail(f"the stated maximum ({what}) is refused: {e!r} hint={e.hint!r}")


def test_a_misspelt_alias_in_order_by_is_offered_the_alias(demo):
    body = {"dataset": "workloads", "fields": ["namespace", "count() as n"], "group_by": ["namespace"],
            "order_by": ["-nn"]}
    with pytest.raises(ExploreError) as e:
        compile_exploration(body, demo, "analyst")
    assert e.value.code == "EX201" and e.value.hint.startswith("did you mean the alias 'n'?")
    assert e.value.retry_with == {**body, "order_by": ["-n"]}
    assert compile_exploration(e.value.retry_with, demo, "analyst").columns == ("namespace", "n")
