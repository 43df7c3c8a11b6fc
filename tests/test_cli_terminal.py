"""The CLI as a person at a terminal meets it, and as a pipe does (real processes, a real pseudo-terminal).

- At a terminal a refusal is a sentence on stderr (the message, the text with a caret under the
  place, the hint, the corrected arguments), nothing on stdout, the same exit code; piped, or with
  --format json, the envelope on stdout as before.
- Output to a pipe the reader closed (`| head`) ends quietly: exit 0, nothing on stderr.
- `ontoos --version`; a mistyped command gets a did-you-mean.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess

from tests import serving

TYPO = ["compile", "--role", "analyst", "-q", "explore workloads fields namspace"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}


def _at_terminal(args: list[str]) -> tuple[int, str, str]:
    """Run `ontoos args` with stdout on a pseudo-terminal: (exit code, what the terminal showed, stderr)."""
    master, slave = pty.openpty()
    try:
        done = subprocess.run([serving.ontoos_executable(), *args], stdout=slave, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, timeout=60, env=_env())
        os.close(slave)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    return done.returncode, shown.decode("utf-8", "replace"), done.stderr


def test_at_a_terminal_a_refusal_is_a_sentence_with_a_caret():
    code, shown, err = _at_terminal(TYPO)
    assert code == 2 and shown == ""
    lines = err.splitlines()
    assert lines[0] == "error: 'namspace' is not a readable column of workloads"
    assert lines[1] == "  explore workloads fields namspace"
    assert lines[2] == "  " + " " * len("explore workloads fields ") + "^"  # under the n of namspace
    assert lines[3].startswith("hint: did you mean 'namespace'?")
    assert lines[4] == 'retry with: {"dataset": "workloads", "fields": ["namespace"]}'
    assert "Traceback" not in err and '"ok"' not in err


def test_piped_or_asked_for_json_the_envelope_is_on_stdout():
    piped = subprocess.run([serving.ontoos_executable(), *TYPO], capture_output=True, text=True, timeout=60,
                           env=_env())
    assert piped.returncode == 2 and piped.stderr == ""
    assert json.loads(piped.stdout)["error"]["subtype"] == "UNKNOWN_FIELD"
    code, shown, err = _at_terminal(["catalog", "--role", "analyst", "--format", "json", "workloadz"])
    assert code == 2 and err == "" and json.loads(shown)["error"]["subtype"] == "UNKNOWN_DATASET"
    code, shown, err = _at_terminal(["catalog", "--role", "analyst", "workloadz"])  # the same, for a person
    assert code == 2 and shown == ""
    assert err.startswith("error: 'workloadz' is not a readable dataset\nhint: did you mean 'workloads'?")


def test_a_pipe_closed_early_ends_quietly():
    proc = subprocess.Popen([serving.ontoos_executable(), "catalog", "--role", "analyst", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=_env())
    proc.stdout.close()  # `| head` that read nothing: every write meets a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert err == ""


def test_version_and_a_mistyped_command():
    version = subprocess.run([serving.ontoos_executable(), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip().startswith("ontoos-explore 0.")
    code, _, err = _at_terminal(["compil", "--role", "analyst", "-q", "explore workloads"])
    assert code == 2 and err.startswith("error: 'compil' is not a command; did you mean 'compile'?")


def test_a_window_of_days_must_be_positive():
    for days, says in (("0", "0 is not positive: give 1 or more"), ("-3", "-3 is not positive"),
                       ("two", "'two' is not a whole number")):
        done = subprocess.run([serving.ontoos_executable(), "audit", "--days", days], capture_output=True, text=True,
                              timeout=60, env=_env())
        err = json.loads(done.stdout)["error"]
        assert done.returncode == 2 and err["code"] == "EX102" and says in err["message"], (days, err)


def test_a_new_token_and_its_configuration_line_sign_the_principal_in(tmp_path):
    from ontoos_explore import load_contract
    from ontoos_explore.cli.common import default_contract
    from ontoos_explore.server.config import Authenticator, load_config

    done = subprocess.run([serving.ontoos_executable(), "token", "new", "--principal", "ann", "--role", "analyst",
                           "--reviewer"], capture_output=True, text=True, timeout=60, env=_env())
    data = json.loads(done.stdout)["data"]
    assert done.returncode == 0 and data["token"].startswith("ontoos_") and len(data["token"]) > 40
    config = tmp_path / "server.yaml"
    config.write_text("principals:\n  " + data["config_line"] + "\n", encoding="utf-8")
    contract = load_contract(default_contract())
    signed = Authenticator(load_config(config, contract), contract).authenticate(data["token"])
    assert (signed.name, signed.role, signed.reviewer) == ("ann", "analyst", True)
    assert data["token"] not in config.read_text()  # the configuration holds its hash only
    again = subprocess.run([serving.ontoos_executable(), "token", "new", "--principal", "ann", "--role", "analyst"],
                           capture_output=True, text=True, timeout=60, env=_env())
    assert json.loads(again.stdout)["data"]["token"] != data["token"]
    code, shown, _ = _at_terminal(["token", "new", "--principal", "bo", "--role", "analist"])
    assert code == 2 and shown == ""
    _, shown, _ = _at_terminal(["token", "new", "--principal", "bo", "--role", "viewer"])
    assert shown.splitlines()[0] == "token for bo (shown once, keep it secret):"
    assert shown.splitlines()[3].strip().startswith("bo: {role: viewer, token_sha256: ")


def test_shell_completion_comes_from_the_same_parser(tmp_path):
    for shell, marker in (("bash", "complete "), ("zsh", "#compdef ontoos"), ("fish", "complete --command ontoos")):
        script = subprocess.run([serving.ontoos_executable(), "completion", shell], capture_output=True, text=True,
                                timeout=60, env=_env())
        assert script.returncode == 0 and marker in script.stdout, (shell, script.stdout[:300])

    def complete(line: str) -> list[str]:
        out = tmp_path / "completions"
        env = {**_env(), "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
               "_ARGCOMPLETE_STDOUT_FILENAME": str(out)}
        done = subprocess.run([serving.ontoos_executable()], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        return sorted(w.strip() for w in out.read_text().split("\x0b") if w.strip())

    assert complete("ontoos comp") == ["compile", "completion"]
    assert complete("ontoos explore --for") == ["--format"]
    assert [w for w in complete("ontoos completion ") if not w.startswith("-")] == ["bash", "fish", "zsh"]


def test_audit_filters_name_what_exists():
    """A filter that can match nothing is refused (with a did-you-mean) before any database is asked."""
    for flag, value, says, hint in (("--subtype", "unknwn_field", "is not a subtype of the error table",
                                     "did you mean 'UNKNOWN_FIELD'?"),
                                    ("--dataset", "workloadz", "is not a dataset of the contract",
                                     "did you mean 'workloads'?")):
        done = subprocess.run([serving.ontoos_executable(), "audit", flag, value, "--dsn", "host=/nonexistent"],
                              capture_output=True, text=True, timeout=60, env=_env())
        err = json.loads(done.stdout)["error"]
        assert done.returncode == 2 and says in err["message"] and err["hint"].startswith(hint), err


def test_queries_as_a_table_and_a_pending_run_says_it_is_pending(tmp_path):
    import yaml

    from tests.named_queries import HOSTS_BY_PROVIDER

    registry = tmp_path / "queries.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "queries": [{**HOSTS_BY_PROVIDER, "status": "pending"}]}))
    base = [serving.ontoos_executable(), "queries"]
    listed = subprocess.run([*base, "list", "--queries", str(registry), "--format", "table"], capture_output=True,
                            text=True, timeout=60, env=_env())
    header, rule, row = listed.stdout.splitlines()
    assert header.split() == ["id", "status", "domain", "title", "parameters"] and set(rule) <= {"-", " "}
    assert row.split()[:2] == ["hosts_by_provider", "pending"] and row.endswith("provider")
    shown = subprocess.run([*base, "show", "hosts_by_provider", "--queries", str(registry), "--format", "table"],
                           capture_output=True, text=True, timeout=60, env=_env())
    assert shown.stdout.splitlines()[:2] == ["hosts_by_provider  (pending)", "Hosts of a provider"]
    assert "parameters: provider: string" in shown.stdout and 'FROM "lake"."hosts"' in shown.stdout
    ran = subprocess.run([*base, "run", "hosts_by_provider", "--queries", str(registry), "--role", "analyst",
                          "--param", "provider=aws", "--dsn", "host=/nonexistent"], capture_output=True, text=True,
                         timeout=60, env=_env())
    err = json.loads(ran.stdout)["error"]
    assert ran.returncode == 2 and err["message"] == "'hosts_by_provider' is pending, not approved: it does not run yet"
    assert "ontoos queries approve hosts_by_provider" in err["hint"]


def test_a_refusal_an_answer_carries_reads_as_a_sentence_too(pg_dsn, tmp_path):
    """explore, describe --sample and queries run refuse through the answer they get back (the exploration
    ran far enough to be audited), not by raising: at a terminal that is the same sentence on stderr."""
    import yaml

    from tests.named_queries import HOSTS_BY_PROVIDER

    registry = tmp_path / "queries.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "queries": [HOSTS_BY_PROVIDER]}))
    env = ["--dsn", pg_dsn, "--role", "analyst"]
    for args, first in (
            (["explore", *env, "-q", "explore workloads fields namspace"],
             "error: 'namspace' is not a readable column of workloads"),
            (["describe", *env, "workloadz", "--sample", "2"], "error: 'workloadz'"),
            (["queries", "run", "hosts_by_provider", "--queries", str(registry), *env, "-p", "provider=mars"],
             "error: ")):
        code, shown, err = _at_terminal(args)
        assert code == 2 and shown == "", (args, shown)
        assert err.startswith(first) and "\nhint: " in err and '"ok"' not in err, (args, err)
        piped = subprocess.run([serving.ontoos_executable(), *args], capture_output=True, text=True, timeout=60,
                               env=_env())
        assert piped.returncode == 2 and json.loads(piped.stdout)["ok"] is False and piped.stderr == "", args


def test_demo_serves_the_embedded_demo_on_loopback_only(tmp_path):
    """--demo adds an admin reviewer and prints its token: refused on another contract or a public address,
    before anything listens."""
    from ontoos_explore.cli.common import default_contract

    other = tmp_path / "contract.yaml"  # the demo's, but for one budget: another contract
    text = default_contract().read_text(encoding="utf-8").replace("max_rows: 5000", "max_rows: 4000", 1)
    other.write_text(text, encoding="utf-8")
    for args, says in ((["--http", "0.0.0.0:18765", "--demo"], "loopback only"),
                       (["--http", "127.0.0.1:18766", "--demo", "--contract", str(other)], "embedded demo only")):
        done = subprocess.run([serving.ontoos_executable(), "serve", *args], capture_output=True, text=True,
                              timeout=60, env=_env(), stdin=subprocess.DEVNULL)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert says in json.loads(done.stdout)["error"]["message"] and "token" not in done.stderr.lower(), args
