"""Contract, loaded at start: YAML -> `Contract` (validated, hashed, indexed).

The contract says what exists and who may read what (the README's "The
contract" shows every key). Loading validates the shape with pydantic and then the cross
references (relations, read sets, always-filters, enums); any error is a
`ContractError` naming the place in the file (`path:line: where: what`).

Lookups are case-insensitive through tables built once per contract, so
binding never scans the contract.

    >>> c = load_contract("contracts/demo.yaml")   # doctest: +SKIP
    >>> c.dataset("Workloads").name
    'workloads'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from .errors import ContractError
from .names import fold, is_identifier
from .types import ColumnType, LiteralTypeError, convert, python_kind

Cardinality = Literal["one_to_one", "many_to_one", "one_to_many", "many_to_many"]
FilterOp = Literal["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]
FANNING = frozenset({"one_to_many", "many_to_many"})


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Column(_Model):
    type: ColumnType
    description: str = ""
    secret: bool = False  # never readable, filterable, sortable
    hidden: bool = False  # usable by always_filter (and joins) only
    values: tuple[str, ...] | None = None  # enum values
    name: str = Field(default="", exclude=True)  # set from the mapping key

    @model_validator(mode="after")
    def _enum_values(self) -> "Column":
        if self.type == "enum" and not self.values:
            raise ValueError("an enum column needs a non-empty 'values' list")
        if self.type != "enum" and self.values is not None:
            raise ValueError(f"'values' is only for enum columns, not {self.type}")
        return self

    @property
    def readable(self) -> bool:
        return not (self.secret or self.hidden)


class FilterRule(_Model):
    column: str
    op: FilterOp
    value: Any = None


class Dataset(_Model):
    relation: str  # physical table or view, schema-qualified
    description: str = ""
    heavy: bool = False
    max_rows: int | None = Field(default=None, ge=1)
    always_filter: tuple[FilterRule, ...] = ()
    columns: dict[str, Column]
    name: str = Field(default="", exclude=True)

    @field_validator("relation")
    @classmethod
    def _qualified(cls, v: str) -> str:
        parts = v.split(".")
        if len(parts) != 2 or not all(is_identifier(p) for p in parts):
            raise ValueError(f"'{v}' must be schema.table, two identifiers")
        return v

    @field_validator("columns")
    @classmethod
    def _some_columns(cls, v: dict[str, Column]) -> dict[str, Column]:
        if not v:
            raise ValueError("a dataset needs at least one column")
        return v

    @property
    def schema_name(self) -> str:
        return self.relation.split(".")[0]

    @property
    def table_name(self) -> str:
        return self.relation.split(".")[1]

    def column(self, name: str) -> Column | None:
        return self.__pydantic_private__["_by_fold"].get(fold(name))

    def readable_columns(self) -> list[Column]:
        return [c for c in self.columns.values() if c.readable]

    _by_fold: dict[str, Column] = PrivateAttr(default_factory=dict)


class Relation(_Model):
    from_: str = Field(alias="from")
    to: str
    join: dict[str, str]  # from-column: to-column
    cardinality: Cardinality
    note: str | None = None
    description: str = ""
    name: str = Field(default="", exclude=True)

    @field_validator("join")
    @classmethod
    def _some_pairs(cls, v: dict[str, str]) -> dict[str, str]:
        if not v:
            raise ValueError("a relation needs at least one from-column: to-column pair")
        return v

    @property
    def fans_out(self) -> bool:
        return self.cardinality in FANNING


class Role(_Model):
    read_sets: tuple[str, ...]
    max_rows: int = Field(default=1000, ge=1)
    timeout_ms: int = Field(default=5000, ge=1)
    max_relations: int = Field(default=2, ge=0)
    max_fields: int = Field(default=30, ge=1)
    max_predicates: int = Field(default=50, ge=0)
    max_in_list: int = Field(default=200, ge=1)
    max_literal_length: int = Field(default=1000, ge=1)
    max_cost: float | None = Field(default=None, gt=0)
    clamp_limit: bool = True  # false: a limit above the budget is refused, not clamped
    name: str = Field(default="", exclude=True)


class Contract(_Model):
    version: Literal[1]
    datasets: dict[str, Dataset]
    relations: dict[str, Relation] = {}
    read_sets: dict[str, tuple[str, ...]]
    roles: dict[str, Role]

    # Lookups read `__pydantic_private__` directly: going through BaseModel.__getattr__
    # for a private attribute costs ~1 us, and a compile makes ~40 of them.
    _hash: str = PrivateAttr(default="")
    _datasets: dict[str, Dataset] = PrivateAttr(default_factory=dict)
    _relations: dict[str, Relation] = PrivateAttr(default_factory=dict)
    _roles: dict[str, Role] = PrivateAttr(default_factory=dict)
    _from: dict[str, tuple[Relation, ...]] = PrivateAttr(default_factory=dict)
    _to: dict[str, tuple[Relation, ...]] = PrivateAttr(default_factory=dict)
    _scope: dict[str, frozenset[str]] = PrivateAttr(default_factory=dict)
    _derived: dict = PrivateAttr(default_factory=dict)

    @property
    def derived(self) -> dict:
        """A cache for what later stages derive from this contract (keyed by them)."""
        return self.__pydantic_private__["_derived"]

    @property
    def hash(self) -> str:
        """Content hash: the same contract, however formatted, hashes the same."""
        return self.__pydantic_private__["_hash"]

    def dataset(self, name: str) -> Dataset | None:
        return self.__pydantic_private__["_datasets"].get(fold(name))

    def relation(self, name: str) -> Relation | None:
        return self.__pydantic_private__["_relations"].get(fold(name))

    def role(self, name: str) -> Role | None:
        return self.__pydantic_private__["_roles"].get(fold(name))

    def relations_from(self, dataset: str) -> tuple[Relation, ...]:
        return self.__pydantic_private__["_from"].get(fold(dataset), ())

    def relations_to(self, dataset: str) -> tuple[Relation, ...]:
        return self.__pydantic_private__["_to"].get(fold(dataset), ())

    def scope(self, role: Role) -> frozenset[str]:
        """Folded names of the datasets `role` may read."""
        return self.__pydantic_private__["_scope"][fold(role.name)]

    def readable_datasets(self, role: Role) -> list[Dataset]:
        scope = self.scope(role)
        return [d for d in self.datasets.values() if fold(d.name) in scope]


# ---------------------------------------------------------------- loading


def load_contract(path: str | Path) -> Contract:
    """Read, validate and index the contract at `path`; raise ContractError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ContractError(f"cannot read contract {p}: {e.strerror or e}", hint="check --contract or ONTOOS_CONTRACT")
    except UnicodeDecodeError:
        raise ContractError(f"{p}: the contract is not UTF-8 text")
    return parse_contract(text, source=str(p))


def parse_contract(text: str, source: str = "<contract>") -> Contract:
    data, marks = _load_yaml(text, source)
    where = _Locator(source, marks)
    if not isinstance(data, dict):
        raise ContractError(f"{source}:1: the contract must be a mapping with datasets, read_sets and roles")
    try:
        contract = Contract.model_validate(data)
    except ValidationError as e:
        raise ContractError(where.pydantic(e)) from None
    _bind_names(contract, where)
    _check_references(contract, where)
    _index(contract)
    contract._hash = _content_hash(contract)
    return contract


class _Locator:
    """Turns a path inside the YAML document into `source:line: a.b.c`."""

    def __init__(self, source: str, marks: dict[tuple, int]) -> None:
        self.source = source
        self.marks = marks

    def at(self, path: tuple, message: str) -> str:
        line = None
        for n in range(len(path), -1, -1):
            line = self.marks.get(tuple(path[:n]))
            if line is not None:
                break
        dotted = ".".join(str(p) for p in path)
        return f"{self.source}:{line or 1}: {dotted}: {message}" if dotted else f"{self.source}:{line or 1}: {message}"

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


def _check_names(kind: str, names: Iterable[str], path: tuple, where: _Locator) -> None:
    seen: dict[str, str] = {}
    for name in names:
        if not is_identifier(name):
            raise ContractError(
                where.at(path + (name,), f"'{name}' is not a valid {kind} name"),
                hint="names match [A-Za-z_][A-Za-z0-9_]* and are at most 63 characters",
            )
        other = seen.setdefault(fold(name), name)
        if other != name:
            raise ContractError(
                where.at(path + (name,), f"{kind} '{name}' differs from '{other}' only by case"),
                hint="names are matched case-insensitively",
            )


def _bind_names(c: Contract, where: _Locator) -> None:
    """Give every named part its own name (the mapping key) and check the names."""
    _check_names("dataset", c.datasets, ("datasets",), where)
    _check_names("relation", c.relations, ("relations",), where)
    _check_names("read set", c.read_sets, ("read_sets",), where)
    _check_names("role", c.roles, ("roles",), where)
    for dname, d in c.datasets.items():
        object.__setattr__(d, "name", dname)
        _check_names("column", d.columns, ("datasets", dname, "columns"), where)
        for cname, col in d.columns.items():
            object.__setattr__(col, "name", cname)
        d._by_fold.update({fold(k): v for k, v in d.columns.items()})
    for rname, r in c.relations.items():
        object.__setattr__(r, "name", rname)
    for name, role in c.roles.items():
        object.__setattr__(role, "name", name)


def _check_references(c: Contract, where: _Locator) -> None:
    datasets = {fold(k): v for k, v in c.datasets.items()}

    def dataset_at(name: str, path: tuple) -> Dataset:
        d = datasets.get(fold(name)) if isinstance(name, str) else None
        if d is None:
            raise ContractError(
                where.at(path, f"'{name}' is not a dataset of this contract"),
                hint=f"datasets: {', '.join(sorted(c.datasets))}",
            )
        return d

    for rname, r in c.relations.items():
        src = dataset_at(r.from_, ("relations", rname, "from"))
        dst = dataset_at(r.to, ("relations", rname, "to"))
        for a, b in r.join.items():
            for ds, col, side in ((src, a, "from"), (dst, b, "to")):
                if ds.column(col) is None:
                    raise ContractError(
                        where.at(("relations", rname, "join", a), f"'{col}' is not a column of dataset '{ds.name}' ({side} side)"),
                        hint=f"columns of {ds.name}: {', '.join(ds.columns)}",
                    )
            ta, tb = src.column(a).type, dst.column(b).type
            if ta != tb and not {ta, tb} <= {"text", "enum"} and not {ta, tb} <= {"integer", "numeric"}:
                raise ContractError(
                    where.at(("relations", rname, "join", a), f"joins {ta} column '{a}' to {tb} column '{b}'"),
                )

    for sname, members in c.read_sets.items():
        for i, m in enumerate(members):
            dataset_at(m, ("read_sets", sname, i))

    read_sets = {fold(k) for k in c.read_sets}
    for rname, role in c.roles.items():
        for i, s in enumerate(role.read_sets):
            if fold(s) not in read_sets:
                raise ContractError(
                    where.at(("roles", rname, "read_sets", i), f"'{s}' is not a read set of this contract"),
                    hint=f"read sets: {', '.join(sorted(c.read_sets))}",
                )

    for dname, d in c.datasets.items():
        for i, rule in enumerate(d.always_filter):
            path = ("datasets", dname, "always_filter", i)
            col = d.column(rule.column)
            if col is None:
                raise ContractError(
                    where.at(path + ("column",), f"'{rule.column}' is not a column of dataset '{dname}'"),
                    hint=f"columns of {dname}: {', '.join(d.columns)}",
                )
            _check_filter_value(rule, col, path, where)


def _check_filter_value(rule: FilterRule, col: Column, path: tuple, where: _Locator) -> None:
    if rule.op in ("is null", "is not null"):
        if rule.value is not None:
            raise ContractError(where.at(path + ("value",), f"'{rule.op}' takes no value"))
        return
    values = rule.value if rule.op in ("in", "not in") else [rule.value]
    if not isinstance(values, list) or not values:
        raise ContractError(where.at(path + ("value",), f"'{rule.op}' needs a non-empty list of values"))
    for v in values:
        try:
            kind, lit = python_kind(v)
            convert(kind, lit, col.type, col.values)
        except (ValueError, LiteralTypeError) as e:
            raise ContractError(where.at(path + ("value",), f"{v!r} does not fit {col.type} column '{col.name}': {e}"))


def _index(c: Contract) -> None:
    c._datasets.update({fold(k): v for k, v in c.datasets.items()})
    c._relations.update({fold(k): v for k, v in c.relations.items()})
    c._roles.update({fold(k): v for k, v in c.roles.items()})
    by_from: dict[str, list[Relation]] = {}
    by_to: dict[str, list[Relation]] = {}
    for r in c.relations.values():
        by_from.setdefault(fold(r.from_), []).append(r)
        by_to.setdefault(fold(r.to), []).append(r)
    c._from.update({k: tuple(v) for k, v in by_from.items()})
    c._to.update({k: tuple(v) for k, v in by_to.items()})
    sets = {fold(k): v for k, v in c.read_sets.items()}
    for role in c.roles.values():
        c._scope[fold(role.name)] = frozenset(fold(ds) for s in role.read_sets for ds in sets[fold(s)])


def _content_hash(c: Contract) -> str:
    canonical = json.dumps(c.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
