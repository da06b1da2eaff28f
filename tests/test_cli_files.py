"""File arguments, stdin, fmt's modes and SARIF: the CLI's conventions for files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def dagplan(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          input=stdin, timeout=120)  # fmt: skip


PLAN = "steps:\n  - {id: a, tool: t, args: {x: $input.city}, output: \u2020state.a}\nresult: \u2020state.a\n"


def test_file_names_come_first_and_dash_reads_stdin(tmp_path):
    (tmp_path / "[draft]-triage.yaml").write_text(PLAN)
    assert dagplan("check", "[draft]-triage.yaml", cwd=tmp_path).returncode == 0
    piped = dagplan("check", "-", cwd=tmp_path, stdin=PLAN)
    assert piped.returncode == 0, piped.stdout + piped.stderr
    assert dagplan("fmt", "-", cwd=tmp_path, stdin=PLAN).stdout.startswith("dagplan: 1\n")


@pytest.mark.parametrize("command", ["check", "fmt"])
def test_a_selection_without_plan_files_exits_2_with_one_message(tmp_path, command):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    for selection in ("empty", "*.yaml"):
        proc = dagplan(command, selection, cwd=tmp_path)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_fmt_keeps_the_ascii_spelling_and_passes_its_own_check(tmp_path):
    (tmp_path / "p.yaml").write_text(PLAN)
    formatted = dagplan("fmt", "p.yaml", cwd=tmp_path).stdout
    assert "$input.city" in formatted  # the author's spelling stays
    (tmp_path / "p.yaml").write_text(formatted)
    assert dagplan("fmt", "--check", "p.yaml", cwd=tmp_path).returncode == 0
    converted = dagplan("fmt", "--diff", "--dagger", "p.yaml", cwd=tmp_path).stdout
    assert (
        "-  - {id: a, tool: t, args: {x: $input.city}" in converted
        and "+  - {id: a, tool: t, args: {x: \u2020input.city}" in converted
    )


def test_fmt_check_shows_a_diff_and_exits_1_and_write_rewrites_several_files(tmp_path):
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("steps: [{tool: t, id: x}]\n")
    proc = dagplan("fmt", "--check", "a.yaml", "b.yaml", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout.count("--- ") == 2 and "would reformat a.yaml" in proc.stderr
    assert dagplan("fmt", "-w", ".", cwd=tmp_path).returncode == 0
    assert dagplan("fmt", "--check", ".", cwd=tmp_path).returncode == 0


def test_check_speaks_sarif(tmp_path):
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: t, args: {x: \u2020state.nope}}\n")
    proc = dagplan("check", "p.yaml", "--format", "sarif", cwd=tmp_path)
    log = json.loads(proc.stdout)
    assert proc.returncode == 1 and log["version"] == "2.1.0"
    (run,) = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["unwritten-state"]
    (result,) = run["results"]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert result["ruleId"] == "unwritten-state" and result["level"] == "error"
    assert (region["startLine"], region["startColumn"]) == (2, 32)
