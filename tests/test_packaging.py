"""The package as users install it: a wheel with every subpackage and data file, and a light import."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def test_wheel_holds_one_package_with_every_stage(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    top = {n.split("/")[0] for n in names if not n.startswith("dagplan-")}
    assert top == {"dagplan"}  # no generic top-level `dsl` or `interpreter` in site-packages
    for required in (
        "dagplan/__init__.py",
        "dagplan/py.typed",
        "dagplan/cli/__init__.py",
        "dagplan/dsl/expr.lark",
        "dagplan/dsl/validate.py",
        "dagplan/interpreter/engine/execution.py",
        "dagplan/interpreter/stores/store.py",
        "dagplan/schemas/plan.schema.json",
    ):
        assert required in names, required
    local = {p.relative_to(ROOT).as_posix() for d in ("dsl", "interpreter") for p in (ROOT / d).rglob("*.py")}
    packaged = {n.replace("dagplan/", "", 1) for n in names if n.startswith(("dagplan/dsl/", "dagplan/interpreter/"))}
    assert local <= packaged, local - packaged


def test_import_dagplan_is_light():
    code = (
        "import sys, dagplan, dagplan.dsl; print(sorted(m for m in ('litellm', 'rich', 'jinja2') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


# --- tooling: lint, format and types, run by the one test command CI runs --------------------


def _tool(name: str) -> list[str]:
    return [sys.executable, "-m", name]


def test_ruff_lint_and_format_are_clean():
    lint = subprocess.run([*_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert lint.returncode == 0, lint.stdout[-4000:]
    fmt = subprocess.run(
        [*_tool("ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert fmt.returncode == 0, fmt.stdout[-4000:]


def test_mypy_on_the_built_package(wheel, tmp_path):
    """Type-check what users install: a type checker does not see through the editable install's hook."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    proc = subprocess.run(
        [
            *_tool("mypy"),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "-p",
            "dagplan",
        ],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
