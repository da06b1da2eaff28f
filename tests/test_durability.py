"""The kill harness (issue 4): real ``dagplan run`` processes killed at seeded points, then resumed.

A 20-step plan (three parallel chains, an output over 32 KB, a join, a side
effect) runs with tools that append to a side-effect journal. Each case kills
the run with SIGKILL (or SIGINT) at a seeded moment, resumes it with
``dagplan resume``, and asserts: the outputs equal an uninterrupted run's; every
step whose completion was recorded before the kill ran exactly once; the spilled
output is byte-identical.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from dagplan.interpreter.stores.store import RunStore
from dagplan.interpreter.core.vocabulary import EventType, StepStatus


HERE = Path(__file__).parent
TOOLS = str(HERE / "durability_tools.py")
KILLS = 50
INTERRUPTS = 20


def plan20() -> dict:
    steps = [{"id": "root", "description": "Start", "tool": "work", "args": {"name": "root"}, "output": "†state.root"}]
    for branch in (1, 2, 3):
        prev = "root"
        for i in range(1, 6):
            sid = f"b{branch}_{i}"
            steps.append(
                {
                    "id": sid,
                    "tool": "work",
                    "args": {"name": sid, "inputs": {"prev": f"†state.{prev}"}},
                    "output": f"†state.{sid}",
                }
            )
            prev = sid
    steps.append({"id": "big", "tool": "big", "args": {"name": "big", "seed": "†state.root"}, "output": "†state.big"})
    steps.append(
        {
            "id": "join",
            "tool": "work",
            "output": "†state.join",
            "args": {
                "name": "join",
                "inputs": {"a": "†state.b1_5", "b": "†state.b2_5", "c": "†state.b3_5", "big": "†state.big"},
            },
        }
    )
    steps.append(
        {
            "id": "publish",
            "tool": "publish",
            "purity": "side_effect",
            "output": "†state.published",
            "args": {"name": "publish", "inputs": {"j": "†state.join"}},
        }
    )
    steps.append(
        {
            "id": "final",
            "tool": "work",
            "args": {"name": "final", "inputs": {"p": "†state.published"}},
            "output": "†state.final",
        }
    )
    return {"dagplan": 1, "summary": "Kill harness plan", "steps": steps, "result": "†state.final"}


STEP_IDS = [s["id"] for s in plan20()["steps"]]


class Case:
    """One working directory: the plan, a state dir, a journal."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.plan = folder / "plan.json"
        self.plan.write_text(json.dumps(plan20(), ensure_ascii=False), encoding="utf-8")
        self.state = folder / "state"
        self.journal = folder / "journal.txt"
        self.journal.touch()
        self.env = {
            **os.environ,
            "DAGPLAN_TEST_JOURNAL": str(self.journal),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "DAGPLAN_STATE_DIR": str(self.state),
        }

    def command(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "dagplan",
            *args,
            "--tools",
            TOOLS,
            "--state-dir",
            str(self.state),
            "--format",
            "json",
        ]

    def start(self) -> subprocess.Popen:
        return subprocess.Popen(
            self.command("run", str(self.plan)),
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def resume(self, run_id: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command("resume", run_id, "--yes"),
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def runs(self) -> Counter:
        return Counter(self.journal.read_text(encoding="utf-8").split())

    def outputs(self, run_id: str) -> dict:
        run = RunStore(self.state).open(run_id)
        return {sid: run.step_output(sid) for sid in STEP_IDS}

    def spill(self, run_id: str) -> bytes:
        return (self.state / "runs" / run_id / "step_results" / "big.txt").read_bytes()


def wait_for_run_id(proc: subprocess.Popen) -> str:
    """``dagplan run`` prints its run id first, on stderr when stdout carries JSON."""
    line = proc.stderr.readline()
    assert line.startswith("run "), line
    return line.split()[1]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    case = Case(tmp_path_factory.mktemp("baseline"))
    proc = case.start()
    run_id = wait_for_run_id(proc)
    t0 = time.perf_counter()
    out, err = proc.communicate(timeout=120)
    took = time.perf_counter() - t0
    assert proc.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    assert case.runs() == Counter(STEP_IDS)
    spill = case.spill(run_id)
    assert len(spill) > 32 * 1024
    return {"outputs": case.outputs(run_id), "spill": spill, "took": took}


def kill_and_resume(tmp_path: Path, baseline: dict, seed: int, sig: signal.Signals) -> None:
    case = Case(tmp_path)
    proc = case.start()
    run_id = wait_for_run_id(proc)
    time.sleep(random.Random(seed).uniform(0, baseline["took"] * 1.2))
    proc.send_signal(sig)
    proc.communicate(timeout=60)

    run = RunStore(case.state).open(run_id)
    progress = run.progress()
    done_before = set(progress.by_status(StepStatus.COMPLETED))
    if sig == signal.SIGINT and progress.status != "completed":
        assert proc.returncode == 130
        assert progress.status == "interrupted"
        assert list(run.events({"plan_run_interrupted"})), "Ctrl-C must record plan_run_interrupted"
    if progress.status != "completed":
        resumed = case.resume(run_id)
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["status"] == "completed"

    assert case.outputs(run_id) == baseline["outputs"]
    assert case.spill(run_id) == baseline["spill"]
    runs = case.runs()
    assert set(runs) == set(STEP_IDS)
    for step_id in done_before:
        assert runs[step_id] == 1, f"{step_id} completed before the kill but ran {runs[step_id]} times"
    replayed = [
        e.step for e in RunStore(case.state).open(run_id).events({EventType.STEP_COMPLETED}) if e.data.get("replayed")
    ]
    assert not set(replayed) - done_before


@pytest.mark.parametrize("seed", range(KILLS))
def test_sigkill_then_resume(tmp_path, baseline, seed):
    kill_and_resume(tmp_path, baseline, seed, signal.SIGKILL)


@pytest.mark.parametrize("seed", range(INTERRUPTS))
def test_sigint_then_resume(tmp_path, baseline, seed):
    kill_and_resume(tmp_path, baseline, 1000 + seed, signal.SIGINT)


def test_torn_last_line_then_resume(tmp_path, baseline):
    case = Case(tmp_path)
    proc = case.start()
    run_id = wait_for_run_id(proc)
    proc.communicate(timeout=120)
    log = case.state / "runs" / run_id / "wal.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"plan_step_completed"' in line and b'"final"' in line)
    log.write_bytes(b"".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2])  # crash mid-write of `final`
    resumed = case.resume(run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert case.outputs(run_id) == baseline["outputs"]
    assert case.runs()["final"] == 2 and case.runs()["publish"] == 1
