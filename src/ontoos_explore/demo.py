"""Demo: example explorations run on the demo lakehouse, then a few refusals.

`ontoos demo` runs this against the embedded PostgreSQL: a reviewed named
query of the demo registry (`named`), then each question, its rows (the first
few), the notes, then what refusals look like. The examples are data
(`data/demo_examples.yaml`, written for the demo contract).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

import yaml

from .service import Explorer

SHOWN_ROWS = 8


def load_examples() -> dict[str, list[dict[str, Any]]]:
    text = resources.files(__package__).joinpath("data/demo_examples.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _show(source: Any) -> str:
    return source if isinstance(source, str) else json.dumps(source)


async def run_demo(explorer: Explorer, role: str, render: Callable[[dict], str], out=print, registry=None) -> int:
    """Run the examples (and the named ones, with a `governance.registry.Registry`); 0 when every
    example answers and every refusal is refused."""
    examples = load_examples()
    failures = 0
    out(f"ontoos demo: contract {explorer.contract.hash}, role {role}\n")
    asked = [(ex["title"], _show(ex["source"]), lambda ex=ex: explorer.explore(ex["source"], role))
             for ex in examples["examples"]]
    if registry is not None:
        runnable = {q.id for q in registry.visible(role)}
        asked[:0] = [(ex["title"], f"{ex['query']} {json.dumps(ex['params'])}",
                      lambda ex=ex: registry.run(explorer, role, ex["query"], ex["params"]))
                     for ex in examples.get("named", ()) if ex["query"] in runnable]
    for title, shown_source, ask in asked:
        out(f"## {title}\n   {shown_source}\n")
        answer = await ask()
        if not answer.ok:
            failures += 1
            out("   refused: " + json.dumps(answer.envelope["error"]) + "\n")
            continue
        env = answer.envelope
        shown = {**env, "data": {**env["data"], "rows": env["data"]["rows"][:SHOWN_ROWS]}}
        out("   " + render(shown).replace("\n", "\n   "))
        if len(env["data"]["rows"]) > SHOWN_ROWS:
            out(f"   (first {SHOWN_ROWS} of {len(env['data']['rows'])} rows shown)")
        out("   sql: " + answer.compiled.sql.strip().replace("\n", "\n        ") + "\n")
    for ex in examples["refusals"]:
        out(f"## Refused: {ex['title']}\n   {_show(ex['source'])}\n")
        answer = await explorer.explore(ex["source"], role)
        if answer.ok:
            failures += 1
            out("   answered, but the demo expects a refusal\n")
        else:
            out("   " + json.dumps(answer.envelope["error"]) + "\n")
    return 0 if failures == 0 else 1
