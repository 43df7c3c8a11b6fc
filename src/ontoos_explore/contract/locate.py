"""Contract stage, locating: YAML text -> data + the line of every key and item; a path -> `file:line: a.b.c`."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import ContractError


class _Locator:
    """Turns a path inside the YAML document into `source:line: a.b.c`."""

    def __init__(self, source: str, marks: dict[tuple, int]) -> None:
        self.source = source
        self.marks = marks

    def line(self, path: tuple) -> str:
        """`source:line` of `path`, or of the nearest key above it."""
        for n in range(len(path), -1, -1):
            line = self.marks.get(tuple(path[:n]))
            if line is not None:
                return f"{self.source}:{line}"
        return f"{self.source}:1"

    def at(self, path: tuple, message: str) -> str:
        dotted = ".".join(str(p) for p in path)
        return f"{self.line(path)}: {dotted}: {message}" if dotted else f"{self.line(path)}: {message}"

    def pydantic(self, err: ValidationError) -> str:
        lines = []
        for item in err.errors(include_url=False)[:5]:
            loc = tuple("from" if x == "from_" else x for x in item["loc"])
            msg = item["msg"].removeprefix("Value error, ")
            if item["type"] == "extra_forbidden":
                msg = f"unknown key '{loc[-1]}'"
            elif item["type"] == "missing":
                msg = f"'{loc[-1]}' is required"
            lines.append(self.at(loc, msg))
        more = err.error_count() - len(lines)
        return "\n".join(lines) + (f"\n(and {more} more)" if more > 0 else "")


def _load_yaml(text: str, source: str) -> tuple[Any, dict[tuple, int]]:
    """Parse YAML safely, recording the line of every mapping key and item."""
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        # "while scanning a quoted scalar" points where the trouble starts; the
        # problem mark may be the end of the file
        mark = getattr(e, "context_mark", None) or getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        what = " ".join(x for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x) or str(e)
        raise ContractError(f"{source}:{line}: not valid YAML: {what}") from None
    if node is None:
        raise ContractError(f"{source}:1: the contract is empty")
    marks: dict[tuple, int] = {}
    constructor = yaml.SafeLoader("")

    def build(n: yaml.Node, path: tuple) -> Any:
        marks.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for k, v in n.value:
                if not isinstance(k, yaml.ScalarNode):
                    raise ContractError(f"{source}:{k.start_mark.line + 1}: a mapping key must be a name")
                # the key as written: YAML 1.1 would read a column named `no` or `on` as a boolean
                key = k.value
                if key in out:
                    where = ".".join(str(p) for p in path + (key,))
                    raise ContractError(f"{source}:{k.start_mark.line + 1}: {where}: duplicate key '{key}'")
                marks[path + (key,)] = k.start_mark.line + 1
                out[key] = build(v, path + (key,))
            return out
        if isinstance(n, yaml.SequenceNode):
            return [build(v, path + (i,)) for i, v in enumerate(n.value)]
        return constructor.construct_object(n, deep=True)

    return build(node, ()), marks
