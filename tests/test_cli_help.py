"""The CLI's --help: every subcommand ends with examples, and every example is a command line the parser
takes (the same arguments, the same choices), so the examples cannot drift from the options."""

from __future__ import annotations

import shlex

import pytest

from ontoos_explore.cli.examples import EXAMPLES
from ontoos_explore.cli.parser import build_parser

PARSER = build_parser()
COMMANDS = sorted(PARSER._subparsers._group_actions[0].choices)


def test_every_subcommand_has_examples():
    assert sorted(EXAMPLES) == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_the_help_ends_with_the_examples(command, capsys):
    with pytest.raises(SystemExit) as done:
        PARSER.parse_args([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[command]))


def _argv(line: str) -> list[str]:
    """The ontoos command of an example (after `eval "$(...)"`, `echo ... |`, before `>`)."""
    if line.startswith('eval "$('):
        line = line[len('eval "$('):].rstrip(')"')
    words = shlex.split(line)
    if "|" in words:
        words = words[words.index("|") + 1:]
    if ">" in words:
        words = words[:words.index(">")]
    assert words[0] == "ontoos", line
    return words[1:]


@pytest.mark.parametrize("command, line", [(c, line) for c in COMMANDS for line in EXAMPLES[c]])
def test_each_example_is_a_command_line_the_parser_takes(command, line):
    args = PARSER.parse_args(_argv(line))
    assert args.command == command


@pytest.mark.parametrize("message", [
    "argument COMMAND: invalid choice: 'expore' (choose from 'compile', 'explore', 'explain')",  # Python <= 3.12.7
    "argument COMMAND: invalid choice: expore (choose from compile, explore, explain)",  # 3.12.8 and later
])
def test_a_mistyped_choice_gets_a_did_you_mean_in_either_wording_of_argparse(message):
    from ontoos_explore.cli.parser import _with_suggestion

    assert _with_suggestion(message) == "'expore' is not a command; did you mean 'explore'? (compile, explore, explain)"
