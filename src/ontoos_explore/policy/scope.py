"""Policy stage, name resolution: what the role can see, and nothing else.

`Binding` holds the state of one binding (the contract, the role, the
sources joined so far) and resolves names against it. Every refusal is built
from what the caller may read only: a secret or hidden column and a column
that does not exist produce the same error, byte for byte; so do a dataset
outside the read sets and one that does not exist. The true reason goes on
`ExploreError.reason` for the audit.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..contract import Contract, Dataset, Relation, Role
from ..errors import BindError, Codes
from ..grammar.render import replace, to_json_form
from ..ir import Exploration, Lit, Name, Ref
from ..names import did_you_mean, fold
from ..types import LiteralTypeError, convert
from .bound import Col, Join, Param, Source
from .plans import may_read


class Binding:
    """Mutable state of binding one exploration; the rules in rules.py fill it."""

    def __init__(self, exploration: Exploration, contract: Contract, role: Role) -> None:
        self.e = exploration
        self.contract = contract
        self.role = role
        self.scope = contract.scope(role)
        self.root: Source | None = None
        self.joins: list[Join] = []
        self.datasets: dict[str, Dataset] = {}  # source alias -> dataset
        self.by_relation: dict[str, Source] = {}  # folded relation name -> source
        self.reads: set[tuple[str, str]] = set()
        self.notes: list[str] = []
        # the contract's joins to parents (exists_with): never in by_relation, so nothing resolves to them
        self.implied: list[Join] = []
        self.implied_datasets: dict[str, Dataset] = {}  # implied source alias -> dataset
        # filled by the rules
        self.fields: tuple = ()
        self.where = None
        self.always: tuple = ()
        self.group_by: tuple = ()
        self.order_by: tuple = ()
        self.limit: int = 0
        self.row_cap: int = 0
        self.aggregated = False

    # ------------------------------------------------------------ helpers

    def retry(self, target: Any, new: Any) -> dict[str, Any]:
        """The exploration with one part corrected, in JSON form (for retry_with)."""
        return to_json_form(replace(self.e, target, new))

    def in_scope(self, dataset_name: str) -> bool:
        return fold(dataset_name) in self.scope

    def sources(self) -> list[Source]:
        return [self.root, *(j.source for j in self.joins)] if self.root else []

    def followable(self) -> list[Relation]:
        """Relations the exploration could follow next: from a dataset it reaches, to one in scope."""
        reached = {fold(s.dataset) for s in self.sources()}
        return [
            r
            for ds in reached
            for r in self.contract.relations_from(ds)
            if self.in_scope(r.to) and fold(r.name) not in self.by_relation
        ]

    # ------------------------------------------------------------ datasets

    def resolve_dataset(self, name: Name) -> Dataset:
        ds = self.contract.dataset(name.value)
        if ds is not None and self.in_scope(ds.name):
            return ds
        readable = [d.name for d in self.contract.readable_datasets(self.role)]
        hint, single = did_you_mean(name.value, readable, "readable datasets")
        raise BindError(
            Codes.UNKNOWN_DATASET,
            f"'{name.value}' is not a readable dataset",
            hint=hint,
            position=name.pos,
            retry_with=self.retry(name, Name(value=single)) if single else None,
            reason="UNKNOWN_DATASET" if ds is None else "OUT_OF_SCOPE",
        )

    def add_parent(self, ds: Dataset, relation: str) -> Source:
        """A source of the contract's own (`p0, p1, ...`): a parent an `exists_with` relation joins.
        Kept out of `datasets` and `by_relation`: no name resolves to it and no budget counts it."""
        alias = f"p{len(self.implied_datasets)}"
        src = Source(alias=alias, schema=ds.schema_name, table=ds.table_name, dataset=ds.name, relation=relation)
        self.implied_datasets[alias] = ds
        return src

    def dataset_of(self, src: Source) -> Dataset:
        """The dataset behind a source, the caller's or an implied one."""
        ds = self.datasets.get(src.alias)
        return ds if ds is not None else self.implied_datasets[src.alias]

    def add_source(self, ds: Dataset, relation: str | None) -> Source:
        alias = f"t{len(self.datasets)}"
        src = Source(alias=alias, schema=ds.schema_name, table=ds.table_name, dataset=ds.name, relation=relation)
        self.datasets[alias] = ds
        if relation is not None:
            self.by_relation[fold(relation)] = src
        return src

    # ------------------------------------------------------------ relations

    def resolve_relation(self, name: Name) -> tuple[Relation, Source]:
        """A relation to follow next, and the source it starts from."""
        rel = self.contract.relation(name.value)
        if rel is None or not (self.in_scope(rel.from_) and self.in_scope(rel.to)):
            self._unknown_relation(name.value, name.pos, "UNKNOWN_RELATION" if rel is None else "OUT_OF_SCOPE")
        if fold(rel.name) in self.by_relation:
            raise BindError(
                Codes.DUPLICATE_RELATION,
                f"relation '{rel.name}' is followed twice",
                hint="follow each relation once; its columns are all reachable as relation.column",
                position=name.pos,
            )
        start = self.start_of(rel)
        if start is None:
            raise BindError(
                Codes.UNKNOWN_RELATION,
                f"relation '{rel.name}' starts at {rel.from_}, which this exploration does not reach",
                hint=f"explore {rel.from_}, or follow a relation to {rel.from_} before '{rel.name}'",
                position=name.pos,
            )
        return rel, start

    def start_of(self, rel: Relation) -> Source | None:
        """The root if the relation starts there, else the latest joined source of that dataset."""
        if self.root is not None and fold(self.root.dataset) == fold(rel.from_):
            return self.root
        for j in reversed(self.joins):
            if fold(j.source.dataset) == fold(rel.from_):
                return j.source
        return None

    def _unknown_relation(self, written: str, pos, reason: str):
        candidates = [r.name for r in self.followable()]
        reached = ", ".join(s.dataset for s in self.sources())
        hint, single = did_you_mean(written, candidates, f"relations that can be followed from {reached}")
        retry = None
        if single:
            retry = to_json_form(self._rename_relation(written, single))
        raise BindError(
            Codes.UNKNOWN_RELATION,
            f"'{written}' is not a relation that can be followed from {reached}",
            hint=hint,
            position=pos,
            retry_with=retry,
            reason=reason,
        )

    def _rename_relation(self, old: str, new: str) -> Exploration:
        """The exploration with relation `old` renamed everywhere it is written."""
        e = self.e
        for n in e.relations:
            if fold(n.value) == fold(old):
                e = replace(e, n, Name(value=new))
        for ref in _refs(e):
            if ref.relation is not None and fold(ref.relation) == fold(old):
                e = replace(e, ref, Ref(relation=new, column=ref.column))
        return e

    # ------------------------------------------------------------ columns

    def resolve_column(self, ref: Ref, also: str = "") -> Col:
        """`column` (of the root) or `relation.column` -> a readable Col."""
        src = self._source_of(ref)
        ds = self.datasets[src.alias]
        col = ds.column(ref.column)
        if not may_read(col):
            readable = [c.name for c in ds.readable_columns()]
            hint, single = did_you_mean(ref.column, readable, f"readable columns of {ds.name}")
            written = f"{ref.relation}.{ref.column}" if ref.relation else ref.column
            where = f"{ds.name} (via {src.relation})" if src.relation else ds.name
            reason = "UNKNOWN_FIELD" if col is None else "SECRET_COLUMN_DENIED" if col.secret else "HIDDEN_COLUMN_DENIED"
            raise BindError(
                Codes.UNKNOWN_FIELD,
                f"'{written}' is not a readable column of {where}",
                hint=hint + also,
                position=ref.pos,
                retry_with=self.retry(ref, Ref(relation=ref.relation, column=single)) if single else None,
                reason=reason,
                detail={"dataset": ds.name, "column": col.name} if col is not None else None,
            )
        self.reads.add((ds.name, col.name))
        return Col(src, col.name, col.type)

    def _source_of(self, ref: Ref) -> Source:
        if ref.relation is None:
            return self.root
        src = self.by_relation.get(fold(ref.relation))
        if src is not None:
            return src
        if fold(ref.relation) == fold(self.root.dataset):
            return self.root
        rel = self.contract.relation(ref.relation)
        if rel is not None and rel in self.followable() and self.start_of(rel) is not None:
            written = f"{ref.relation}.{ref.column}"
            added = self.e.model_copy(update={"relations": (*self.e.relations, Name(value=rel.name))})
            within = len(added.relations) <= self.role.max_relations
            raise BindError(
                Codes.RELATION_NOT_FOLLOWED,
                f"'{written}' names relation '{rel.name}', which this exploration does not follow",
                hint=f"follow it first: via {rel.name}" + (
                    "" if within else f" (role {self.role.name} may follow at most {self.role.max_relations}; "
                    "drop another relation)"),
                position=ref.pos,
                retry_with=to_json_form(added) if within else None,
            )
        followed = [s.relation for s in self.sources() if s.relation]
        candidates = followed + [r.name for r in self.followable()]
        hint, _ = did_you_mean(ref.relation, candidates, "relations followed or followable")
        raise BindError(
            Codes.UNKNOWN_RELATION,
            f"'{ref.relation}' is not a relation followed by this exploration",
            hint=hint + "; follow a relation with via, then write relation.column",
            position=ref.pos,
            reason="UNKNOWN_RELATION" if rel is None else "OUT_OF_SCOPE",
        )

    # ------------------------------------------------------------ literals

    def param(self, lit: Lit, col: Col) -> Param:
        ds = self.datasets[col.source.alias]
        try:
            value = convert(lit.kind, lit.value, col.type, ds.column(col.name).values)
        except LiteralTypeError as e:
            raise BindError(
                Codes.TYPE_MISMATCH,
                f"{col.ref}: {e.message}",
                hint=e.hint,
                position=lit.pos,
                retry_with=self.retry(lit, Lit(kind=e.fix[0], value=e.fix[1])) if e.fix else None,
            ) from None
        return Param(value, col.type)


def _refs(e: Exploration) -> list[Ref]:
    """Every Ref object in an exploration."""
    out: list[Ref] = []
    stack: list[Any] = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Ref):
            out.append(node)
        elif isinstance(node, tuple):
            stack.extend(node)
        elif isinstance(node, BaseModel):
            stack.extend(getattr(node, f) for f in type(node).model_fields)
    return out
