"""The benchmarks stay runnable: each module imports (one pointed at a module moved by a refactor before),
and a point of the report's scale curves runs (the figures themselves are never asserted here)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_every_benchmark_module_imports(name, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    importlib.import_module(f"benchmarks.{name}")


@pytest.mark.parametrize("shape", ["check", "json.loads", "run memory", "fan-out"])
def test_a_point_of_the_report_s_scale_curves_runs(shape):
    out = subprocess.run([sys.executable, "-m", "benchmarks.report", "--point", shape, "1000"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    point = json.loads(out.stdout.strip().splitlines()[-1])
    assert point["us"] > 0 and point["bytes"] > 0


def test_the_report_s_start_up_rows_time_the_editable_and_the_installed_package():
    """The start-up rows run: `dagplan check` from this checkout and from a copy installed as
    `pip install .` installs it (what a pre-commit hook gets), each of which must check the plan."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.report", "--repeat", "1",
                          "--skip", "engine,durability,postgres,check,scale"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| `dagplan check`")]
    assert [("editable install" in r, "installed (`pip install .`" in r) for r in rows] == [
        (True, False),
        (False, True),
    ]
    assert "the editable finder's share of every start" in out.stderr
