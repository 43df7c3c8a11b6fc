"""The sqlmap scan as a test: skipped unless ONTOOS_SECURITY_SCAN is set (it takes minutes).

    ONTOOS_SECURITY_SCAN=quick .venv/bin/pytest tests/security   # level 2, risk 1: about a minute
    ONTOOS_SECURITY_SCAN=1     .venv/bin/pytest tests/security   # level 5, risk 3: about 5 minutes

It runs `python -m tests.security.sqlmap_scan` in a subprocess (the scan installs sqlmap from
PyPI into a throwaway virtual environment, so it needs the package index) and writes its
summary and raw output under pytest's tmp_path, leaving tests/security/results/latest.json as
committed. Set ONTOOS_SECURITY_SCAN_VENV=DIR to reuse one sqlmap environment across runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODE = os.environ.get("ONTOOS_SECURITY_SCAN", "").strip().lower()

pytestmark = pytest.mark.skipif(MODE in ("", "0", "off", "false", "no"),
                                reason="the sqlmap scan runs only with ONTOOS_SECURITY_SCAN=1 (or =quick)")


def test_sqlmap_finds_the_control_and_nothing_in_the_rest_endpoint(tmp_path):
    results = tmp_path / "scan.json"
    cmd = [sys.executable, "-m", "tests.security.sqlmap_scan", "--results", str(results), "--raw", str(tmp_path / "raw")]
    if MODE == "quick":
        cmd.append("--quick")
    if venv := os.environ.get("ONTOOS_SECURITY_SCAN_VENV"):
        cmd += ["--sqlmap-venv", venv]
    r = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=30 * 60, stdin=subprocess.DEVNULL)
    assert results.exists(), f"the scan wrote no summary (exit {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    summary = json.loads(results.read_text(encoding="utf-8"))
    by_kind = {kind: [t for t in summary["targets"] if t["kind"] == kind] for kind in ("ontoos", "control")}
    assert by_kind["control"] and by_kind["ontoos"], summary["targets"]

    for t in by_kind["control"]:  # the scan works: it finds the injection it must find
        assert t["verdict"] == "injectable", (t["name"], t["verdict"], t["warnings"])
        assert any(p.split()[-1] == "name" for p in t["injectable"]), t
    for t in by_kind["ontoos"]:  # and it finds none in the real endpoint
        assert t["verdict"] == "not injectable", (t["name"], t["verdict"], t["injectable"], t["warnings"])
        assert t["parameters_tested"], t["name"]
        assert not t["leaks"], (t["name"], t["leak_examples"])
        assert "500" not in t["response_status"], (t["name"], t["leak_examples"])
        assert t["sqlmap_requests"] > 0 and t["server_requests"] > 0, t
    stderr = summary["server_stderr"]["ontoos"]
    assert not stderr["tracebacks"] and not stderr["unhandled_errors"], stderr
    assert summary["verdict"] == "pass" and r.returncode == 0, r.stdout[-4000:]
