"""Contract stage, the models: the validated shapes (datasets, columns, relations, roles) and their lookups.

Lookups are case-insensitive through tables built once per contract (by
`load.py`), so binding never scans the contract.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ..names import fold, is_identifier
from ..types import ColumnType

Cardinality = Literal["one_to_one", "many_to_one", "one_to_many", "many_to_many"]
FilterOp = Literal["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]
FANNING = frozenset({"one_to_many", "many_to_many"})
TO_ONE = frozenset({"many_to_one", "one_to_one"})  # what `exists_with` may follow: joining never repeats a row


def _schema_table(v: str) -> str:
    parts = v.split(".")
    if len(parts) != 2 or not all(is_identifier(p) for p in parts):
        raise ValueError(f"'{v}' must be schema.table, two identifiers")
    return v


QualifiedName = Annotated[str, AfterValidator(_schema_table)]  # a table or view: schema.table


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class _InTable:
    """The schema and table of a model's `schema.table` field (`_qualified`: the field's name)."""

    _qualified: ClassVar[str]

    @property
    def schema_name(self) -> str:
        return getattr(self, self._qualified).split(".")[0]

    @property
    def table_name(self) -> str:
        return getattr(self, self._qualified).split(".")[1]


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


class Dataset(_InTable, _Model):
    _qualified: ClassVar[str] = "relation"
    relation: QualifiedName  # physical table or view
    description: str = ""
    heavy: bool = False
    max_rows: int | None = Field(default=None, ge=1)
    always_filter: tuple[FilterRule, ...] = ()
    # to-one relations from this dataset to its parents: a row exists only while its parent row does
    # (joined on the relation's columns, passing the parent's always-filters and its own parents)
    exists_with: tuple[str, ...] = ()
    # the publish log's `source` values whose batches feed this dataset (none: its freshness is unknown)
    sources: tuple[str, ...] = ()
    freshness_threshold_s: int | None = Field(default=None, ge=1)  # else the contract's evidence threshold
    # readable columns whose values tell its rows apart: appended to every ORDER BY, so the order is total
    # and a truncated answer can be paged (no key: its answers carry no cursor)
    key: tuple[str, ...] = ()
    columns: dict[str, Column]
    name: str = Field(default="", exclude=True)

    @field_validator("columns")
    @classmethod
    def _some_columns(cls, v: dict[str, Column]) -> dict[str, Column]:
        if not v:
            raise ValueError("a dataset needs at least one column")
        return v

    @field_validator("sources")
    @classmethod
    def _plain_sources(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        # the publish log is read with these as string literals: nothing a server could read otherwise
        # (a backslash, where standard_conforming_strings is off) or cannot store (a control character)
        for source in v:
            if not source or "\\" in source or any(ord(ch) < 32 for ch in source):
                raise ValueError(f"source {source!r} must be non-empty, without a backslash or a control character")
        return v


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
    explore: bool = True  # false: the role asks through named queries only (ontoos_explore is not its tool)
    max_pages: int = Field(default=10, ge=1)  # pages of one question a cursor reaches (its first included)
    name: str = Field(default="", exclude=True)


class Evidence(_InTable, _Model):
    """Where the lake records what it published: one row per published batch, with the columns
    `source, batch_id, collected_at, published_at, as_of` (a source's current batch: its latest
    `published_at`); and how old data may be and still be fresh."""

    _qualified: ClassVar[str] = "publish_log"

    publish_log: QualifiedName
    threshold_s: int = Field(default=129_600, ge=1)



PUBLISH_LOG_COLUMNS = ("source", "batch_id", "collected_at", "published_at", "as_of")


class Contract(_Model):
    version: Literal[1]
    datasets: dict[str, Dataset]
    relations: dict[str, Relation] = {}
    read_sets: dict[str, tuple[str, ...]]
    roles: dict[str, Role]
    # the cost ceiling of an exploration reading a heavy dataset when its role sets no max_cost
    heavy_max_cost: float = Field(default=1_000_000.0, gt=0, allow_inf_nan=False)
    evidence: Evidence | None = None  # none: answers say their freshness is unknown

    # Lookups read `__pydantic_private__` directly: going through BaseModel.__getattr__
    # for a private attribute costs ~1 us, and a compile makes ~40 of them.
    _hash: str = PrivateAttr(default="")
    _datasets: dict[str, Dataset] = PrivateAttr(default_factory=dict)
    _relations: dict[str, Relation] = PrivateAttr(default_factory=dict)
    _roles: dict[str, Role] = PrivateAttr(default_factory=dict)
    _from: dict[str, tuple[Relation, ...]] = PrivateAttr(default_factory=dict)
    _to: dict[str, tuple[Relation, ...]] = PrivateAttr(default_factory=dict)
    _parents: dict[str, tuple[Relation, ...]] = PrivateAttr(default_factory=dict)
    _scope: dict[str, frozenset[str]] = PrivateAttr(default_factory=dict)
    _derived: dict = PrivateAttr(default_factory=dict)
    _where: Any = PrivateAttr(default=None)  # the locator of the text it was loaded from (file:line of a place)

    def where(self, place: tuple[str, ...]) -> str:
        """`file:line` of a place in the contract's text (e.g. ("datasets", "workloads")); "" when unknown."""
        where = self.__pydantic_private__["_where"]
        return where.line(place) if where is not None else ""

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

    def parents_of(self, dataset: str) -> tuple[Relation, ...]:
        """The relations a dataset's `exists_with` names, in its order: each to-one, to a parent whose
        always-filters (and parents) decide whether the dataset's rows exist."""
        return self.__pydantic_private__["_parents"].get(fold(dataset), ())

    def scope(self, role: Role) -> frozenset[str]:
        """Folded names of the datasets `role` may read."""
        return self.__pydantic_private__["_scope"][fold(role.name)]

    def readable_datasets(self, role: Role) -> list[Dataset]:
        scope = self.scope(role)
        return [d for d in self.datasets.values() if fold(d.name) in scope]
