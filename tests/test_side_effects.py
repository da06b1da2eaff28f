"""A side effect happens once, or the run stops and says so: abort ends, --from refuses to repeat a side
effect, a retried side effect carries the same idempotency key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dagplan

TOOLS = """\
import asyncio, os, time
import dagplan

LOG = os.environ["SIDE_LOG"]


@dagplan.tool(purity="pure")  # reads: run again after a kill, retried
async def fail_now() -> str:
    raise ValueError("boom")


@dagplan.tool(purity="pure")  # reads: run again after a kill, retried
async def fail_later(delay: float) -> str:
    await asyncio.sleep(delay)
    raise ValueError("boom")


@dagplan.tool(purity="pure")  # reads: run again after a kill, retried
async def slow(n: int) -> int:
    await asyncio.sleep(0.3)
    return n


@dagplan.tool(purity="pure")  # reads: run again after a kill, retried
def slow_sync(n: int) -> int:
    time.sleep(0.3)
    return n


@dagplan.tool  # declares nothing: it acts, so a plan test must mock it
async def slow_plain(n: int) -> int:
    await asyncio.sleep(0.3)
    return n


@dagplan.tool(purity="side_effect")
def post(text: str, idempotency_key: str) -> str:
    with open(LOG, "a") as f:
        f.write(f"{text} {idempotency_key}\\n")
    return "posted " + text
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def dagplan_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "state"), "SIDE_LOG": str(tmp_path / "side.log"),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.parametrize(
    "failing",
    ["{id: a, tool: fail_now}", "{id: a, tool: fail_later, args: {delay: 0.05}}",
     "{id: a, tool: fail_later, args: {delay: 0.5}}"],
    ids=["before-siblings-start", "while-siblings-run", "after-siblings-finish"],
)  # fmt: skip
@pytest.mark.parametrize("sibling", ["slow", "slow_sync"])
def test_abort_ends_the_run_whenever_the_failure_comes(tmp_path, failing, sibling):
    write(tmp_path, "tools.py", TOOLS)
    siblings = "\n".join(f"  - {{id: s{i}, tool: {sibling}, args: {{n: {i}}}}}" for i in range(4))
    write(tmp_path, "plan.yaml", f"on_failure: abort\nsteps:\n  - {failing}\n{siblings}\n")
    proc = dagplan_cli(tmp_path, "run", "plan.yaml", "--tools", "tools.py", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] in ("failed", "aborted")
    assert report["steps"]["a"]["status"] == "failed"


def test_dagplan_test_with_two_unmocked_parallel_steps_ends(tmp_path):
    write(tmp_path, "tools.py", TOOLS)
    write(
        tmp_path,
        "p.yaml",
        "steps:\n  - {id: b, tool: slow_plain, args: {n: 1}}\n  - {id: c, tool: slow_plain, args: {n: 2}}\n",
    )
    write(tmp_path, "p.test.yaml", "plan: p.yaml\ntools: [tools.py]\ncases:\n  - name: none mocked\n")
    proc = dagplan_cli(tmp_path, "test", "p.test.yaml")
    assert proc.returncode == 1 and "unmocked call" in proc.stdout, proc.stdout + proc.stderr


def test_a_replay_that_misses_in_two_parallel_steps_ends(tmp_path):
    write(tmp_path, "tools.py", TOOLS)
    write(tmp_path, "p.yaml", "steps:\n  - {id: b, tool: slow, args: {n: 1}}\n  - {id: c, tool: slow, args: {n: 2}}\n")
    assert dagplan_cli(tmp_path, "run", "p.yaml", "--tools", "tools.py", "--record", "c.json").returncode == 0
    cassette = json.loads((tmp_path / "c.json").read_text())
    for call in cassette["calls"]:
        call["args"] = {"n": 99}
    (tmp_path / "c.json").write_text(json.dumps(cassette))
    proc = dagplan_cli(tmp_path, "run", "p.yaml", "--tools", "tools.py", "--replay", "c.json")
    assert proc.returncode == 1 and "no recording" in proc.stderr + proc.stdout, proc.stderr


PLAN = """\
steps:
  - {id: draft, tool: slow, args: {n: 1}, output: †state.n}
  - {id: comment, tool: post, args: {text: hello}, deps: [draft], output: †state.posted}
  - {id: after, tool: slow, args: {n: 2}, deps: [comment]}
"""


def _lines(tmp_path: Path) -> list[str]:
    log = tmp_path / "side.log"
    return log.read_text().splitlines() if log.exists() else []


def test_resume_from_refuses_to_repeat_a_side_effect_without_the_flag(tmp_path):
    write(tmp_path, "tools.py", TOOLS)
    write(tmp_path, "plan.yaml", PLAN)
    first = dagplan_cli(tmp_path, "run", "plan.yaml", "--tools", "tools.py")
    assert first.returncode == 0, first.stderr
    (run,) = dagplan.runs(tmp_path / "state")
    assert len(_lines(tmp_path)) == 1
    shown = dagplan_cli(tmp_path, "resume", run.id, "--from", "draft", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "draft\n" in shown.stdout and "comment  side effect: it already ran" in shown.stdout, shown.stdout
    assert len(_lines(tmp_path)) == 1  # a preview runs nothing
    refused = dagplan_cli(tmp_path, "resume", run.id, "--from", "draft")
    assert refused.returncode == 2, refused.stderr
    assert "error rerun-side-effects" in refused.stderr and "comment" in refused.stderr
    assert f"dagplan resume {run.id} --from draft --rerun-side-effects" in refused.stderr
    assert len(_lines(tmp_path)) == 1  # nothing ran
    after = dagplan_cli(tmp_path, "resume", run.id, "--from", "after")  # after the side effect: allowed
    assert after.returncode == 0, after.stderr
    assert len(_lines(tmp_path)) == 1
    again = dagplan_cli(tmp_path, "resume", run.id, "--from", "draft", "--rerun-side-effects")
    assert again.returncode == 0, again.stderr
    lines = _lines(tmp_path)
    assert len(lines) == 2 and lines[0] == lines[1]  # the same idempotency key: the API can deduplicate it


def test_the_idempotency_key_is_stable_per_run_and_unit_and_not_in_the_plan_schema(tmp_path, monkeypatch):
    monkeypatch.setenv("SIDE_LOG", str(tmp_path / "side.log"))
    write(tmp_path, "tools.py", TOOLS)
    tools = dagplan.load_tools([str(tmp_path / "tools.py")])
    assert "idempotency_key" not in tools["post"].spec.parameters["properties"]
    plan = "steps:\n  - {id: a, tool: post, args: {text: x}}\n  - {id: b, tool: post, args: {text: y}}\n"
    write(tmp_path, "p.yaml", plan)
    for _ in range(2):
        dagplan.run(str(tmp_path / "p.yaml"), tools=tools, state_dir=tmp_path / "state")
    keys = [line.split()[1] for line in _lines(tmp_path)]
    assert len(set(keys)) == 4  # two runs x two steps: all different
    from dagplan.interpreter.tools.catalog import idempotency_key

    assert idempotency_key("r1", "a") == idempotency_key("r1", "a") != idempotency_key("r1", "b")


CONCURRENCY = """\
import threading, time
import dagplan

state = {"now": 0, "most": 0}
lock = threading.Lock()


@dagplan.tool
def busy(n: int) -> int:
    with lock:
        state["now"] += 1
        state["most"] = max(state["most"], state["now"])
    time.sleep(0.05)
    with lock:
        state["now"] -= 1
    return n
"""


def test_resume_keeps_the_execution_options_the_run_was_started_with(tmp_path):
    write(tmp_path, "busy.py", CONCURRENCY)
    steps = "\n".join(f"  - {{id: s{i}, tool: busy, args: {{n: {i}}}, deps: [ok]}}" for i in range(6))
    write(tmp_path, "p.yaml", f"steps:\n  - id: ok\n    gate: {{question: go?}}\n{steps}\n")
    started = dagplan_cli(tmp_path, "run", "p.yaml", "--tools", "busy.py", "--max-concurrency", "1")
    assert started.returncode == 3, started.stderr
    (run,) = dagplan.runs(tmp_path / "state")
    assert dagplan_cli(tmp_path, "answer", run.id, "ok", "approve").returncode == 0
    tools = dagplan.load_tools([str(tmp_path / "busy.py")])
    result = dagplan.resume(run.id, tools=tools, state_dir=tmp_path / "state")
    assert str(result.status) == "completed"
    import importlib

    busy = importlib.import_module(tools["busy"].fn.__module__)
    assert busy.state["most"] == 1  # --max-concurrency 1, as the run was started


LONG = """\
import time
import dagplan


@dagplan.tool
def nap(n: int) -> int:
    time.sleep(30)
    return n
"""


def test_cancel_stops_a_running_run_and_keeps_its_record_discard_refuses_it(tmp_path):
    write(tmp_path, "nap.py", LONG)
    write(
        tmp_path,
        "p.yaml",
        "steps:\n  - {id: a, tool: nap, args: {n: 1}}\n  - {id: b, tool: nap, args: {n: 2}, deps: [a]}\n",
    )
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "state"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    running = subprocess.Popen([sys.executable, "-m", "dagplan", "run", "p.yaml", "--tools", "nap.py"], cwd=tmp_path,
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        import time

        deadline = time.monotonic() + 60  # a bound on waiting for the child to start, not a timing assertion
        while not [r for r in dagplan.runs(tmp_path / "state") if str(r.status) == "running"]:
            assert time.monotonic() < deadline and running.poll() is None, (
                running.stderr.read() if running.stderr else ""
            )
            time.sleep(0.1)
        (run,) = dagplan.runs(tmp_path / "state")
        refused = dagplan_cli(tmp_path, "discard", run.id)
        assert refused.returncode == 2 and "error run-running" in refused.stderr, refused.stderr
        assert f"dagplan cancel {run.id}" in refused.stderr
        cancelled = dagplan_cli(tmp_path, "cancel", run.id)
        assert cancelled.returncode == 0, cancelled.stderr
        assert running.wait(timeout=30) != 0
    finally:
        running.kill()
    (info,) = dagplan.runs(tmp_path / "state")
    assert str(info.status) == "cancelled"  # the record is kept
    assert dagplan_cli(tmp_path, "resume", run.id).returncode == 1  # a cancelled run is not resumed
    assert dagplan_cli(tmp_path, "cancel", run.id).returncode == 1  # nothing left to cancel
    assert dagplan_cli(tmp_path, "discard", run.id).returncode == 0


@pytest.mark.parametrize("seed", range(12))
def test_kill_9_at_a_seeded_point_then_resume_with_a_seeded_policy_file_journal(tmp_path, seed):
    from side_effect_harness import seeded, trial

    outcome = trial(tmp_path / "w", str(tmp_path / "state"), *seeded(seed))
    assert not outcome.problems(), outcome


@pytest.mark.parametrize("seed", range(8))
def test_kill_9_at_a_seeded_point_then_resume_with_a_seeded_policy_postgresql(tmp_path, postgres, seed):
    from side_effect_harness import seeded, trial

    outcome = trial(tmp_path / "w", postgres, *seeded(1000 + seed))
    assert not outcome.problems(), outcome


@pytest.mark.parametrize("seed", range(6))
def test_kill_9_of_a_worker_at_a_seeded_point_then_another_worker_with_a_seeded_policy(tmp_path, postgres, seed):
    from side_effect_harness import seeded, trial_workers

    outcome = trial_workers(tmp_path / "w", postgres, *seeded(2000 + seed))
    assert not outcome.problems(), outcome
