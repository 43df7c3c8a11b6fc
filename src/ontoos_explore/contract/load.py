"""Contract stage, loading: a YAML file or text -> `Contract` (validated, cross-checked, indexed, hashed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError

from ..errors import ContractError
from ..names import fold
from .checks import _bind_names, _check_references
from .locate import _load_yaml, _Locator
from .models import Contract, Relation


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
    contract._where = where
    return contract


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
    c._parents.update({fold(d.name): tuple(c._relations[fold(r)] for r in d.exists_with)
                       for d in c.datasets.values() if d.exists_with})
    sets = {fold(k): v for k, v in c.read_sets.items()}
    for role in c.roles.values():
        c._scope[fold(role.name)] = frozenset(fold(ds) for s in role.read_sets for ds in sets[fold(s)])


def _content_hash(c: Contract) -> str:
    canonical = json.dumps(c.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
