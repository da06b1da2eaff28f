"""What a user has and does, for the tests of every stage: an example project in a folder, and the CLI run in it
as a user runs it (``python -m dagplan``, the cost map offline, no terminal)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_dagplan(cwd: Path, *args: str, env: dict | None = None, stdin: str | None = None,
                timeout: float = 120, state: str | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    """``dagplan ARGS`` in ``cwd``; ``state``: its runs under ``cwd/state`` (``$DAGPLAN_STATE_DIR``). A traceback
    of dagplan's own is never what a user should see; a tool's, which ``runs show --trace`` shows, may be."""
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    if state is not None:
        full["DAGPLAN_STATE_DIR"] = str(Path(cwd) / state)
    proc = subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout, input=stdin,
                          stdin=subprocess.DEVNULL if stdin is None else None)  # fmt: skip
    assert "dagplan/" not in proc.stderr or "Traceback" not in proc.stderr, proc.stderr
    return proc


def run_dagplan_s(cwd: Path, *args: str, **given) -> subprocess.CompletedProcess:
    """:func:`run_dagplan` with the runs kept under ``cwd/s``, and no traceback at all in what it prints (the
    hostile inputs' tests: whatever the input, an error is said, never raised)."""
    proc = run_dagplan(cwd, *args, state="s", **given)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc


def with_example_tools(folder: Path) -> Path:
    """``folder`` with the examples' tools (``examples/tools.py``) in it."""
    shutil.copy(ROOT / "examples" / "tools.py", folder / "tools.py")
    return folder


def with_weather(folder: Path) -> Path:
    """``folder`` with the weather example and its tools."""
    for name in ("weather.yaml", "tools.py"):
        shutil.copy(ROOT / "examples" / name, folder / name)
    return folder
