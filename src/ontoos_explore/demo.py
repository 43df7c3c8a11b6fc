"""Demo: example explorations compiled against a contract, and a few refusals.

`ontoos demo` runs this: each question, the SQL it compiles to with its `$n`
parameters, the fingerprint and notes, then what refusals look like. The
examples are data (`data/demo_examples.yaml`, written for the demo contract).
Executing the SQL on the embedded PostgreSQL comes with the executor.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import yaml

from .compiler import json_value
from .contract import Contract
from .errors import ExploreError
from .pipeline import compile_exploration


def load_examples() -> dict[str, list[dict[str, Any]]]:
    text = resources.files(__package__).joinpath("data/demo_examples.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _show(source: Any) -> str:
    return source if isinstance(source, str) else json.dumps(source)


def run_demo(contract: Contract, role: str, out=print) -> int:
    """Print the examples; 0 when every example compiles and every refusal is refused."""
    examples = load_examples()
    failures = 0
    out(f"ontoos demo: contract {contract.hash}, role {role}\n")
    for ex in examples["examples"]:
        out(f"## {ex['title']}\n  {_show(ex['source'])}\n")
        try:
            q = compile_exploration(ex["source"], contract, role)
        except ExploreError as e:
            failures += 1
            out("  refused " + json.dumps(e.to_error()) + "\n")
            continue
        out(f"  sql     {q.sql}")
        out(f"  params  {json.dumps([json_value(p) for p in q.params])}")
        out(f"  finger  {q.fingerprint}")
        for note in q.notes:
            out(f"  note    {note}")
        out("")
    for ex in examples["refusals"]:
        out(f"## Refused: {ex['title']}\n  {_show(ex['source'])}\n")
        try:
            compile_exploration(ex["source"], contract, role)
        except ExploreError as e:
            out("  " + json.dumps(e.to_error()) + "\n")
        else:
            failures += 1
            out("  accepted, but the demo expects a refusal\n")
    return 0 if failures == 0 else 1
