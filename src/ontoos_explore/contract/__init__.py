"""Contract, loaded at start: YAML -> `Contract` (validated, hashed, indexed).

The contract says what exists and who may read what (the README's "The
contract" shows every key). Loading validates the shape with pydantic and then the cross
references (relations, read sets, always-filters, `exists_with` chains, enums); any error is a
`ContractError` naming the place in the file (`path:line: where: what`).

Lookups are case-insensitive through tables built once per contract, so
binding never scans the contract. The models and lookups are in `models.py`;
YAML with file:line locations in `locate.py`; the cross-checks in `checks.py`;
`load_contract` / `parse_contract` (index, content hash) in `load.py`.

    >>> c = load_contract("contracts/demo.yaml")   # doctest: +SKIP
    >>> c.dataset("Workloads").name
    'workloads'
"""

from __future__ import annotations

from .load import load_contract, parse_contract
from .models import (FANNING, PUBLISH_LOG_COLUMNS, TO_ONE, Cardinality, Column, Contract, Dataset, Evidence, FilterOp,
                     FilterRule, Relation, Role)

__all__ = [
    "FANNING", "PUBLISH_LOG_COLUMNS", "TO_ONE", "Cardinality", "Column", "Contract", "Dataset", "Evidence", "FilterOp",
    "FilterRule", "Relation", "Role",
    "load_contract", "parse_contract",
]
