"""ontoos-explore: a guarded exploration language over a governed lakehouse.

    from ontoos_explore import load_contract, compile_exploration, ExploreError
    contract = load_contract("contracts/demo.yaml")
    try:
        q = compile_exploration("explore workloads fields name limit 5", contract, "analyst")
        print(q.sql, q.params, q.fingerprint, q.notes)
    except ExploreError as e:
        print(e.to_envelope())
"""

from .compiler import CompiledQuery
from .contract import Contract, load_contract
from .errors import ExploreError
from .ir import Exploration
from .pipeline import compile_exploration

__all__ = ["CompiledQuery", "Contract", "Exploration", "ExploreError", "compile_exploration", "load_contract"]
__version__ = "0.1.0"
