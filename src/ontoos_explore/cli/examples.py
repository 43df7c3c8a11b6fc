"""CLI, examples: a few command lines per subcommand, shown at the end of its --help (clig.dev: lead with
examples). Each is parsed by tests/test_cli_help.py, so none can drift from the parser."""

from __future__ import annotations

import argparse

EXAMPLES: dict[str, tuple[str, ...]] = {
    "compile": ("ontoos compile -q \"explore workloads fields name, namespace where replicas > 2 limit 5\"",
                "ontoos compile --dataset workloads --fields name,namespace --filter \"kind = 'Deployment'\""),
    "explore": ("ontoos explore -q \"explore workloads fields name, namespace limit 5\"",
                "ontoos explore --dataset hosts --fields hostname,provider --limit 3 --format table",
                "ontoos explore -q \"explore images fields repository limit 2\" --max-age 3600"),
    "explain": ("ontoos explain -q \"explore workloads fields namespace, count() group by namespace\"",
                "ontoos explain --named hosts_by_provider -p provider=aws"),
    "grants": ("ontoos grants > grants.sql",
               "ontoos grants --apply --dsn postgresql://admin@db/lake"),
    "catalog": ("ontoos catalog", "ontoos catalog workloads --role viewer"),
    "describe": ("ontoos describe namespace", "ontoos describe workloads.kind --sample 5"),
    "check-sql": ("ontoos check-sql --read-set published query.sql",
                  "echo 'SELECT name FROM lake.k8s_workloads LIMIT 5' | ontoos check-sql --read-set published"),
    "serve": ("ontoos serve --stdio --role analyst",
              "ontoos serve --http 127.0.0.1:8765 --demo",
              "ontoos serve --http 0.0.0.0:8765 --config server.yaml --queries queries.yaml --workers 4"),
    "audit": ("ontoos audit --days 7 --format table", "ontoos audit --dataset workloads --subtype UNKNOWN_FIELD",
              "ontoos audit --principal alice --surface mcp --outcome refused"),
    "promote": ("ontoos promote d0ed6c298124210a --id workloads_by_namespace --title \"Workloads of a namespace\"",),
    "queries": ("ontoos queries list --domain ops --format table",
                "ontoos queries run hosts_by_provider -p provider=aws",
                "ontoos queries approve workloads_by_namespace",
                "ontoos queries retire workloads_by_namespace",
                "ontoos queries request \"which teams own the images built this week?\" --dataset images",
                "ontoos queries import reviewed.yaml"),
    "doctor": ("ontoos doctor", "ontoos doctor --dsn postgresql://reader@replica/lake"),
    "stats": ("ontoos stats freshness --format table",),
    "token": ("ontoos token new --principal alice --role analyst",
              "ontoos token new --principal rex --role admin --reviewer"),
    "completion": ("eval \"$(ontoos completion bash)\"", "ontoos completion fish > ~/.config/fish/completions/ontoos.fish"),
    "demo": ("ontoos demo", "ontoos demo --role viewer"),
}


class _Help(argparse.HelpFormatter):
    """The description wrapped as usual; the examples laid out as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return text if text.startswith("examples:\n") else super()._fill_text(text, width, indent)


def add_examples(sub: argparse._SubParsersAction) -> None:
    """Each subcommand's --help ends with its examples."""
    for name, parser in sub.choices.items():
        lines = EXAMPLES[name]
        parser.formatter_class = _Help
        parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in lines)
