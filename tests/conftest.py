"""Shared fixtures: the demo contract, loaded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from ontoos_explore import load_contract

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).resolve().parent / "cases"


@pytest.fixture(scope="session")
def demo():
    return load_contract(ROOT / "contracts" / "demo.yaml")
