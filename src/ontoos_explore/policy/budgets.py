"""Policy stage, budgets: refuse an exploration larger than the role allows.

These rules look only at the IR's size, before any name is resolved, so an
oversized request costs nothing further. Each refusal is QUERY_BUDGET_EXCEEDED
with the allowed maximum in its hint. One function per budget; `BUDGET_RULES`
is the order they run in.
"""

from __future__ import annotations

from ..contract import Role
from ..errors import BudgetError, Codes
from ..ir import LEAF_PREDICATES, Between, Compare, Exploration, InList, Like, walk_predicates


def limit_fields(e: Exploration, role: Role) -> None:
    if len(e.fields) > role.max_fields:
        raise BudgetError(
            Codes.TOO_MANY_FIELDS,
            f"{len(e.fields)} fields asked for",
            hint=f"at most {role.max_fields} fields are allowed for role {role.name}; split the exploration",
        )


def limit_relations(e: Exploration, role: Role) -> None:
    if len(e.relations) > role.max_relations:
        raise BudgetError(
            Codes.TOO_MANY_RELATIONS,
            f"{len(e.relations)} relations followed",
            hint=f"at most {role.max_relations} relations may be followed by role {role.name}",
            position=e.relations[role.max_relations].pos,
        )


def limit_predicates(e: Exploration, role: Role) -> None:
    count = sum(1 for p in walk_predicates(e.where) if isinstance(p, LEAF_PREDICATES))
    if count > role.max_predicates:
        raise BudgetError(
            Codes.TOO_MANY_PREDICATES,
            f"the filter has {count} predicates",
            hint=f"at most {role.max_predicates} predicates are allowed for role {role.name}; "
            "an 'in' list counts as one",
        )


def limit_in_lists(e: Exploration, role: Role) -> None:
    for p in walk_predicates(e.where):
        if isinstance(p, InList) and len(p.values) > role.max_in_list:
            raise BudgetError(
                Codes.IN_LIST_TOO_LONG,
                f"an 'in' list on '{p.ref.column}' has {len(p.values)} values",
                hint=f"at most {role.max_in_list} values per 'in' list are allowed for role {role.name}",
                position=p.ref.pos,
            )


def limit_literal_length(e: Exploration, role: Role) -> None:
    for p in walk_predicates(e.where):
        if isinstance(p, Compare):
            lits = (p.value,)
        elif isinstance(p, InList):
            lits = p.values
        elif isinstance(p, Between):
            lits = (p.low, p.high)
        elif isinstance(p, Like):
            lits = (p.pattern,)
        else:
            continue
        for lit in lits:
            if lit.kind == "string" and len(lit.value) > role.max_literal_length:
                raise BudgetError(
                    Codes.LITERAL_TOO_LONG,
                    f"a literal compared with '{p.ref.column}' is {len(lit.value)} characters long",
                    hint=f"literals of at most {role.max_literal_length} characters are allowed for role {role.name}",
                    position=lit.pos,
                )


BUDGET_RULES = (limit_fields, limit_relations, limit_predicates, limit_in_lists, limit_literal_length)
