"""The kill harness of side effects, shared by the suite (a bounded number of seeds) and
``benchmarks/bench_side_effects.py`` (100 seeds a store).

A plan ``prepare -> post -> notify``: ``post`` is a side effect that appends one line per real call to a file
outside the state (with its idempotency key), ``notify`` appends one line per real call to another. One
``kill -9`` at a seeded point, then a non-interactive resume with a seeded policy; the lines are counted:

- ``before-intent``: in ``prepare``, before ``post`` was ever started;
- ``before-call``: ``post`` started (its intent is committed) and dies before calling the world;
- ``after-call``: the world was called (a line), the process dies before the result is journaled;
- ``after``: ``post``'s result was journaled; the process dies in ``notify``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

POINTS = ("before-intent", "before-call", "after-call", "after")
POLICIES = ("default", "adopt", "retry")

TOOLS = """\
import os, signal
import dagplan

HERE = os.path.dirname(os.path.abspath(__file__))


def _die_once(point):
    mark = os.path.join(HERE, "killed")
    if os.environ.get("KILL_AT") == point and not os.path.exists(mark):
        open(mark, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)


@dagplan.tool(purity="pure")  # reads: runs again after a kill
def prepare() -> str:
    _die_once("before-intent")
    return "draft"


@dagplan.tool(purity="side_effect")
def post(text: str, idempotency_key: str) -> str:
    _die_once("before-call")
    with open(os.path.join(HERE, "posted.log"), "a") as f:
        f.write(f"{text} {idempotency_key}\\n")
        f.flush()
        os.fsync(f.fileno())
    _die_once("after-call")
    return "posted"


@dagplan.tool(purity="idempotent")  # declared safe to repeat: runs again after a kill (undeclared, it would ask)
def notify(what: object) -> str:
    _die_once("after")
    with open(os.path.join(HERE, "notified.log"), "a") as f:
        f.write(str(what) + "\\n")
    return "notified"
"""

PLAN = """\
steps:
  - {id: prepare, tool: prepare, output: †state.draft}
  - {id: post, tool: post, args: {text: †state.draft}, output: †state.posted}
  - {id: notify, tool: notify, args: {what: †state.posted}, output: †state.done}
result: †state.done
"""


def seeded(seed: int) -> tuple[str, str]:
    """The kill point and the resume policy of one seed (each point in turn, the policy drawn)."""
    import random

    return POINTS[seed % len(POINTS)], random.Random(seed).choice(POLICIES)


@dataclass(frozen=True)
class Outcome:
    point: str
    policy: str
    resume_exit: int
    posted: list[str]  # the lines of the side effect, each "text key"
    notified: int
    status: str

    def problems(self) -> list[str]:
        """What breaks the promise in this outcome (empty: it held)."""
        out = []
        called_before_kill = self.point in ("after-call", "after")
        unsettled = self.point in ("before-call", "after-call")
        if unsettled and self.policy == "default":
            if self.resume_exit != 3 or self.status != "needs_decision":
                out.append(f"expected needs_decision (exit 3), got {self.status} (exit {self.resume_exit})")
            if self.notified:
                out.append("a downstream step ran although the side effect's outcome is unknown")
            if len(self.posted) != int(called_before_kill):
                out.append(f"{len(self.posted)} calls, expected {int(called_before_kill)}")
            return out
        if self.resume_exit != 0 or self.status != "completed":
            out.append(f"expected completed (exit 0), got {self.status} (exit {self.resume_exit})")
        expected = 2 if (self.point == "after-call" and self.policy == "retry") else 1
        if self.point == "before-call" and self.policy == "adopt":
            expected = 0  # the operator said it happened: it is never called
        if len(self.posted) != expected:
            out.append(f"{len(self.posted)} calls of the side effect, expected {expected}")
        if len({line.split()[1] for line in self.posted}) > 1:
            out.append(f"a retried call carried another idempotency key: {self.posted}")
        if self.notified != 1:
            out.append(f"the downstream step ran {self.notified} times")
        return out


def _dagplan(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


def trial(workdir: Path, state: str, point: str, policy: str) -> Outcome:
    """One seeded kill and resume in ``workdir`` (fresh), runs kept at ``state`` (a directory or a URL)."""
    import json

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tools.py").write_text(TOOLS)
    (workdir / "plan.yaml").write_text(PLAN)
    env = {**os.environ, "DAGPLAN_STATE": state, "KILL_AT": point, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("DAGPLAN_STATE_DIR", None)
    first = _dagplan(["run", "plan.yaml", "--tools", "tools.py", "--no-input"], workdir, env)
    assert first.returncode == -9, f"the run was not killed at {point}: {first.returncode}\n{first.stderr[-2000:]}"
    run_id = first.stderr.split("run ", 1)[1].split()[0]
    flags = {"default": [], "retry": ["--on-interrupted", "retry"],
             "adopt": ["--on-interrupted", "adopt", "--output", '"posted"']}[policy]  # fmt: skip
    resumed = _dagplan(["resume", run_id, "--no-input", *flags], workdir, env)
    shown = json.loads(_dagplan(["runs", "show", run_id, "--format", "json"], workdir, env).stdout or "{}")
    posted = (workdir / "posted.log").read_text().splitlines() if (workdir / "posted.log").exists() else []
    notified = (workdir / "notified.log").read_text().splitlines() if (workdir / "notified.log").exists() else []
    return Outcome(point, policy, resumed.returncode, posted, len(notified), str(shown.get("status")))


def trial_workers(workdir: Path, url: str, point: str, policy: str) -> Outcome:
    """The same trial under workers: a submitted run, a ``dagplan worker`` killed at ``point`` (the tool kills
    the worker's own process), then another worker finishing the run with ``policy`` (``default``: none, so
    the run is left in needs_decision for an operator)."""
    import json

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tools.py").write_text(TOOLS)
    (workdir / "plan.yaml").write_text(PLAN)
    env = {**os.environ, "DAGPLAN_STATE": url, "KILL_AT": point, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("DAGPLAN_STATE_DIR", None)
    submitted = _dagplan(["submit", "plan.yaml", "--tools", "tools.py"], workdir, env)
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    killed = _dagplan(["worker", "--drain"], workdir, env)
    assert killed.returncode == -9, (
        f"the worker was not killed at {point}: {killed.returncode}\n{killed.stderr[-2000:]}"
    )
    flags = [] if policy == "default" else ["--on-interrupted", policy]
    second = _dagplan(["worker", "--drain", *flags], workdir, env)
    assert second.returncode in (0, 1), second.stderr
    shown = json.loads(_dagplan(["runs", "show", run_id, "--format", "json"], workdir, env).stdout or "{}")
    status = str(shown.get("status"))
    posted = (workdir / "posted.log").read_text().splitlines() if (workdir / "posted.log").exists() else []
    notified = (workdir / "notified.log").read_text().splitlines() if (workdir / "notified.log").exists() else []
    return Outcome(point, policy, {"completed": 0, "needs_decision": 3}.get(status, 1), posted, len(notified), status)
