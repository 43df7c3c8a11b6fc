"""The README's commands are the ones CI runs, and its `ontoos` examples work.

- The first fenced block holds exactly the two command lines `.ci/run` runs.
- Every `ontoos ... --role ...` command in a code block either compiles (the
  README shows an ok answer after it) or is a refusal example (the README shows
  the refusal with it); both are checked against `cli.main`.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from ontoos_explore.cli import main
from ontoos_explore.contract import parse_contract
from ontoos_explore.errors import ContractError

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    """(language, body) of every fenced code block, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(README)]


def commands(body: str) -> list[list[str]]:
    """The `ontoos ...` commands of a block (with or without a `$ ` prompt),
    joined across backslash-newlines and quoted newlines, as argv lists."""
    out: list[list[str]] = []
    buf: str | None = None
    for line in body.split("\n"):
        if buf is None:
            stripped = line.strip()
            if stripped.startswith("$ "):
                stripped = stripped[2:]
            if not stripped.startswith("ontoos "):
                continue
            buf = stripped
        else:
            buf += "\n" + line
        joined = buf.replace("\\\n", " ")
        if buf.endswith("\\"):
            continue
        try:
            argv = shlex.split(joined)
        except ValueError:  # an open quote: the command goes on
            continue
        out.append(argv)
        buf = None
    assert buf is None, f"unterminated command in README: {buf!r}"
    return out


def role_commands() -> list:
    """Every README `ontoos` command with --role, with what the README shows for it:
    ('refusal', shown envelope) when its block shows `"ok": false`, else
    ('ok', shown answer) from the next block when that is a JSON `"ok": true`."""
    found = []
    bs = blocks()
    for i, (_, body) in enumerate(bs):
        for argv in commands(body):
            if "--role" not in argv:
                continue
            if argv[1] == "explore" and "--format" in argv and "table" in argv:
                found.append(("table", argv, body))
            elif '"ok": false' in body:
                shown = json.loads(body[body.index("{"):])
                found.append(("refusal", argv, shown))
            elif i + 1 < len(bs) and bs[i + 1][0] == "json" and '"ok": true' in bs[i + 1][1]:
                found.append(("ok", argv, json.loads(bs[i + 1][1])))
            else:
                found.append(("unclassified", argv, None))
    return found


ROLE_COMMANDS = role_commands()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("ONTOOS_CONTRACT", "ONTOOS_ROLE", "ONTOOS_DEBUG"):
        monkeypatch.delenv(var, raising=False)


# ---------------------------------------------------------------- CI runs the README's commands


def test_first_block_is_exactly_two_command_lines():
    lang, body = blocks()[0]
    lines = [line for line in body.split("\n") if line.strip()]
    assert len(lines) == 2, lines
    assert all(not line.lstrip().startswith("#") for line in lines)


def test_the_first_command_installs_only_what_the_demo_needs():
    _, body = blocks()[0]
    first, second = [line for line in body.split("\n") if line.strip()]
    assert "pip install -q -e . " in first and "[" not in first and first.endswith("ontoos demo")
    assert "-e '.[test]'" in second and second.endswith("pytest -q")


def test_ci_runs_the_readme_commands_verbatim():
    _, body = blocks()[0]
    ci_lines = CI_RUN.split("\n")
    for line in (x for x in body.split("\n") if x.strip()):
        assert line in ci_lines, f"README line not in .ci/run: {line!r}"


def test_ci_script_runs_nothing_else():
    # besides the README's two lines, only shell setup and the browser the tests need: nothing else sneaks in
    _, body = blocks()[0]
    readme = {x for x in body.split("\n") if x.strip()}
    extra = [x for x in CI_RUN.split("\n") if x.strip() and not x.startswith("#") and x not in readme]
    setup = [x for x in extra if x.split()[0] not in ("set", "cd", "rm")]
    assert setup == ["command -v chromium >/dev/null || { apt-get update -q && apt-get install -y -q chromium; }"], setup


# ---------------------------------------------------------------- the ontoos examples


def test_readme_has_role_commands_of_both_kinds():
    kinds = [k for k, _, _ in ROLE_COMMANDS]
    assert kinds.count("ok") >= 3  # the three forms of one question
    assert kinds.count("refusal") >= 1


@pytest.mark.parametrize("kind,argv,shown", ROLE_COMMANDS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(ROLE_COMMANDS)])
def test_readme_command_behaves_as_shown(kind, argv, shown, capsys, monkeypatch, request):
    assert kind in ("ok", "refusal", "table"), f"README command shows no answer: {argv}"
    assert argv[0] == "ontoos"
    if kind == "table":  # a run on the demo lakehouse: every line shown is printed (timing and "..." aside)
        monkeypatch.setenv("ONTOOS_DSN", request.getfixturevalue("pg_dsn"))
        assert main(argv[1:]) == 0
        printed = capsys.readouterr().out.splitlines()
        shown_lines = [line for line in shown.splitlines() if line and not line.startswith(("$", " "))]
        assert shown_lines
        for line in shown_lines:
            if line.endswith(" ms"):
                assert any(p.startswith(line.rsplit(",", 1)[0]) for p in printed), line
            elif line.endswith("..."):
                assert any(p.startswith(line[:-3].rstrip(", ")) for p in printed), line
            else:
                assert line in printed, line
        return
    code = main(argv[1:])
    out, _ = capsys.readouterr()
    got = json.loads(out)
    if kind == "ok":
        assert code == 0, out
        for key in ("ok", "sql", "params", "fingerprint", "columns", "limit"):
            assert got[key] == shown[key], key
        # the notes shown are the real ones ("..." elides the rest)
        for note in shown["notes"]:
            if note != "...":
                assert note in got["notes"]
    else:
        assert code == 2, out
        assert got["ok"] is False
        for key in ("type", "subtype", "code", "message", "position", "retry_with"):
            if key in shown["error"]:
                assert got["error"][key] == shown["error"][key], key
        hint = shown["error"].get("hint", "")
        assert got["error"]["hint"].startswith(hint.split("...")[0].rstrip(", "))


def test_readme_forms_compile_to_the_same_bytes(capsys):
    answers = []
    for kind, argv, _ in ROLE_COMMANDS:
        if kind == "ok":
            assert main(argv[1:]) == 0
            answers.append(json.loads(capsys.readouterr().out))
    assert len({(a["sql"], json.dumps(a["params"]), a["fingerprint"]) for a in answers}) == 1


# ---------------------------------------------------------------- the contract error example


def test_readme_contract_error_example_is_real():
    flat = " ".join(README.split())  # the example may wrap across lines
    m = re.search(r"`(demo\.yaml):(\d+): (relations\.(\w+)\.to): '(\w+)' is not a dataset of this contract`", flat)
    assert m, "the README's contract error example moved"
    _, line, place, relation, wrong = m.groups()
    text = (ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8")
    lines = text.split("\n")
    # find the relation's `to:` line and put the misspelt name there
    start = lines.index(f"  {relation}:", lines.index("relations:"))
    to_index = next(i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("to:"))
    assert to_index + 1 == int(line), "the README's line number does not match demo.yaml"
    lines[to_index] = f"    to: {wrong}"
    with pytest.raises(ContractError) as ei:
        parse_contract("\n".join(lines), source="demo.yaml")
    assert ei.value.message == m.group(0).strip("`")
