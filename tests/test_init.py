"""`dagplan init`: a newcomer's project that checks, tests and runs at once, as the README says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def dagplan(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGPLAN_STATE")}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, stdin=subprocess.DEVNULL)  # fmt: skip


def test_a_new_project_checks_tests_and_runs_at_once(tmp_path):
    made = dagplan(tmp_path, "init", "shop")
    assert made.returncode == 0, made.stderr
    root = tmp_path / "shop"
    assert "Next:\n  cd shop\n  dagplan check plan.yaml" in made.stdout
    (root / ".git").mkdir()  # the project's root, as a `git init` would make it
    checked = dagplan(root, "check", "plan.yaml")
    assert checked.returncode == 0 and "warning" not in checked.stdout, checked.stdout  # no warning to start with
    assert "not checked" not in checked.stdout  # its dagplan.toml names its tools
    tested = dagplan(root, "test")
    assert tested.returncode == 0 and "2 passed" in tested.stdout, tested.stdout + tested.stderr
    refused = dagplan(root, "run", "plan.yaml", "-i", "order_id=A17", "--answer", "approve=reject")
    assert refused.returncode == 1 and not (root / "outbox.txt").exists()  # a person said no: nothing sent
    sent = dagplan(root, "run", "plan.yaml", "-i", "order_id=A17", "--answer", "approve=approve")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert (root / "outbox.txt").read_text() == "to ada@example.org: Your order A17 is shipped.\n"
    hook = dagplan(root, "check", "--plans-only", ".")  # what its pre-commit configuration runs
    assert hook.returncode == 0 and "2 files checked: 2 valid" in hook.stdout + hook.stderr, hook.stderr


def test_init_never_overwrites(tmp_path):
    (tmp_path / "plan.yaml").write_text("mine\n")
    again = dagplan(tmp_path, "init")
    assert again.returncode == 2 and "plan.yaml already in .: nothing written" in again.stderr, again.stderr
    assert (tmp_path / "plan.yaml").read_text() == "mine\n" and not (tmp_path / "tools.py").exists()
