"""`dagplan run` and `dagplan preview` as a user runs them: real processes, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TOOLS = str(EXAMPLES / "tools.py")

# inputs for every bundled example that needs no model
RUNNABLE = {
    "weather.yaml": ["city=Rome"],
    "payment.yaml": ["amount=50"],
    "translate.yaml": ["text=Bonjour le monde"],
    "pet_hotel.yaml": ["destination=Berlin"],
    "oauth.json": [],
    "profile.json": [],
}


def dagplan(*args: str, state_dir: Path, stdin: str | None = None, check: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(state_dir), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run(
        [sys.executable, "-m", "dagplan", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        input=stdin,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_preview_json_is_stable_and_complete(tmp_path):
    proc = dagplan("preview", "examples/weather.yaml", "--format", "json", state_dir=tmp_path, check=True)
    data = json.loads(proc.stdout)
    assert data["order"] == ["weather", "movie", "park", "present"]
    assert data["parallel_groups"] == [["weather"], ["movie", "park"], ["present"]]
    assert data["branch_points"] == [{"step": "weather", "alternatives": ["†state.sunny", "†state.notSunny"]}]
    step = data["steps"][0]
    assert step["args"] == {"city": "†input.city"} and step["call"] == "getWeather"
    again = dagplan("preview", "examples/weather.yaml", "--format", "json", state_dir=tmp_path, check=True)
    assert again.stdout == proc.stdout  # deterministic
    dry = dagplan("run", "examples/weather.yaml", "--dry-run", "--format", "json", state_dir=tmp_path, check=True)
    assert json.loads(dry.stdout) == data
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_preview_text_shows_the_plan(tmp_path):
    out = dagplan("preview", "examples/refund.yaml", state_dir=tmp_path, check=True).stdout
    assert "Parallel groups:" in out and "[history]" in out and "#refund.head=400" in out
    assert "Branch points:" in out and "nothing was executed" in out
    assert "dagplan run examples/refund.yaml" in out


@pytest.mark.parametrize("name", sorted(RUNNABLE))
def test_every_example_runs(tmp_path, name):
    inputs = [arg for pair in RUNNABLE[name] for arg in ("--input", pair)]
    proc = dagplan("run", f"examples/{name}", "--tools", TOOLS, *inputs, "--format", "json", state_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "completed" and not data["had_errors"]
    assert data["result"] not in (None, "")
    assert proc.stderr.startswith(f"run {data['run_id']}")  # the run id comes first, on stderr


def test_run_json_shape_and_error_branch(tmp_path):
    proc = dagplan(
        "run",
        "examples/payment.yaml",
        "--tools",
        TOOLS,
        "--input",
        "amount=250",
        "--format",
        "json",
        state_dir=tmp_path,
    )
    data = json.loads(proc.stdout)
    assert proc.returncode == 0
    assert set(data) >= {"run_id", "status", "had_errors", "result", "steps"}
    assert data["steps"]["pay"]["status"] == "handled"
    assert data["steps"]["confirm"]["status"] == "skipped"
    assert data["result"] == {"status": "Failed", "reason": "Your card was declined."}
    for step in data["steps"].values():
        assert set(step) >= {"status", "output", "attempts"}


def test_a_failed_run_exits_1_and_reports(tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text("steps:\n  - {id: pay, tool: processPayment, args: {amount: 500}, retry: {limit: 0}}\n")
    proc = dagplan("run", str(plan), "--tools", TOOLS, "--ephemeral", state_dir=tmp_path)
    assert proc.returncode == 1 and "FAILED" in proc.stderr


def test_preflight_runs_nothing_when_an_llm_step_has_no_model(tmp_path):
    proc = dagplan(
        "run",
        "examples/refund.yaml",
        "--tools",
        TOOLS,
        "--input",
        "customerId=c1",
        "--input",
        "amount=5000",
        "--ephemeral",
        state_dir=tmp_path,
    )
    # preflight: the LLM step has no model, so nothing runs (the refund is not issued), a usage error
    assert proc.returncode == 2 and "no-model" in proc.stderr
    assert "issueRefund" not in proc.stderr  # the side effect before the LLM step never started


def test_bad_inputs_are_reported_without_traceback(tmp_path):
    proc = dagplan("run", "examples/payment.yaml", "--tools", TOOLS, "--input", "amount=lots", state_dir=tmp_path)
    assert proc.returncode == 2  # inputs are the caller's to fix: a usage error
    assert "bad-input" in proc.stderr and "Traceback" not in proc.stderr
    proc = dagplan("run", "examples/payment.yaml", "--tools", TOOLS, state_dir=tmp_path)
    assert "missing-input" in proc.stderr and "--input amount=" in proc.stderr


def test_unknown_tool_is_rejected_before_running(tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text("steps:\n  - {id: a, tool: getWether, args: {city: x}}\n")
    proc = dagplan("run", str(plan), "--tools", TOOLS, state_dir=tmp_path)
    assert proc.returncode == 1
    assert "unknown-tool" in proc.stderr and "getWeather" in proc.stderr


def test_events_jsonl(tmp_path):
    proc = dagplan(
        "run",
        "examples/weather.yaml",
        "--tools",
        TOOLS,
        "--input",
        "city=Oslo",
        "--events",
        "jsonl",
        state_dir=tmp_path,
        check=True,
    )
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    types = [e["type"] for e in lines]
    assert types[0] == "plan_started" and types[-1] == "plan_completed"
    assert {"plan_step_skipped", "plan_step_completed"} <= set(types)
    assert all("run_id" in e and "ts" in e for e in lines)


LAZY = "mode: lazy\nsteps:\n  - {id: a, description: Say hello, tool: presentSuggestion, args: {suggestion: tea}}\n"


def test_lazy_plan_without_approval_does_not_run(tmp_path):
    plan = tmp_path / "lazy.yaml"
    plan.write_text(LAZY)
    proc = dagplan("run", str(plan), "--tools", TOOLS, state_dir=tmp_path)
    assert proc.returncode == 1
    assert "approve it with --yes" in proc.stderr and "not-approved" in proc.stderr
    yes = dagplan("run", str(plan), "--tools", TOOLS, "--yes", "--format", "json", state_dir=tmp_path, check=True)
    assert json.loads(yes.stdout)["result"] == "Today I suggest tea."


@pytest.mark.parametrize("answer, code", [("y", 0), ("n", 1)])
def test_lazy_plan_approval_prompt_on_a_terminal(tmp_path, answer, code):
    plan = tmp_path / "lazy.yaml"
    plan.write_text(LAZY)
    out, status = run_in_pty(["run", str(plan), "--tools", TOOLS], tmp_path, answer)
    assert "Run this plan?" in out
    assert status == code
    assert ("Today I suggest tea." in out) == (answer == "y")


def run_in_pty(args: list[str], state_dir: Path, answer: str) -> tuple[str, int]:
    """Run dagplan with a pseudo-terminal as stdin/stdout/stderr; answer its approval prompt."""
    from terminal import run_on_terminal

    env = {**os.environ, "DAGPLAN_STATE_DIR": str(state_dir), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TERM": "dumb"}
    out, code, _ = run_on_terminal(
        [sys.executable, "-m", "dagplan", *args], cwd=ROOT, env=env, prompt=b"Run this plan?", answer=answer.encode()
    )
    return out, code


def test_missing_files_are_usage_errors(tmp_path):
    assert dagplan("run", "nothere.yaml", state_dir=tmp_path).returncode == 2
    proc = dagplan("run", "examples/weather.yaml", "--tools", "nothere.py", state_dir=tmp_path)
    assert proc.returncode == 2 and "tools-import" in proc.stderr
    assert dagplan("preview", "nothere.yaml", state_dir=tmp_path).returncode == 2
