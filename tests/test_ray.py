"""Tools on Ray (issue 15): a local Ray, no mock; results, errors, retries, catch and timeouts as locally."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

TOOLS = textwrap.dedent('''
    import os, time
    import dagplan

    @dagplan.tool(executor="ray", resources={"num_cpus": 1}, purity="pure")
    def square(x: int) -> dict:
        return {"x": x, "sq": x * x, "pid": os.getpid()}

    @dagplan.tool(executor="ray")
    def flaky(path: str) -> str:
        with open(path, "a") as f:
            f.write("x")
        if len(open(path).read()) == 1:
            raise TimeoutError("first call times out")
        return "ok"

    @dagplan.tool(executor="ray", purity="pure")
    async def broken(x: int) -> int:
        raise ValueError(f"bad {x}")

    @dagplan.tool(executor="ray", purity="pure")  # reads: a timeout is an ordinary failure
    def sleepy(s: float) -> str:
        time.sleep(s)
        return "woke"

    @dagplan.tool
    def where() -> bool:
        """Whether this call runs in one of Ray's worker processes."""
        try:
            import ray
            return ray._private.worker.global_worker.mode == ray.WORKER_MODE
        except Exception:
            return False
''')

PLAN = """
inputs:
  xs: {type: array}
  path: {type: string}
steps:
  - id: each
    for_each: †input.xs
    max_items: 20
    tool: square
    args: {x: †item}
    output: †state.squares
  - id: retried
    tool: flaky
    args: {path: †input.path}
    retry: {limit: 2, backoff: 0}
    output: †state.flaky
  - id: caught
    tool: broken
    args: {x: 3}
    catch: [{errors: [ValueError], output: †state.bad}]
    output: †state.never
  - id: slow
    tool: sleepy
    args: {s: 60}
    timeout: 2s
    retry: {limit: 0}
    output: †state.slow
  - id: here
    tool: where
    output: †state.here
result: †state.squares
"""


def test_tool_calls_run_as_ray_tasks_and_behave_as_local_ones(tmp_path):
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "plan.yaml").write_text(PLAN)
    (tmp_path / "in.json").write_text(json.dumps({"xs": list(range(1, 9)), "path": str(tmp_path / "count.txt")}))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-m", "dagplan", "run", "plan.yaml", "--tools", "tools.py", "--input-file",
                           "in.json", "--format", "json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    result = json.loads(proc.stdout)
    steps = result["steps"]
    assert [s["sq"] for s in result["result"]] == [x * x for x in range(1, 9)]
    assert os.getpid() not in {s["pid"] for s in result["result"]}
    assert steps["here"]["output"] is False  # a tool without executor runs locally
    assert steps["retried"]["status"] == "completed" and steps["retried"]["attempts"] == 2  # TimeoutError: transient
    assert steps["caught"]["status"] == "handled" and steps["caught"]["error"]["type"] == "ValueError"
    assert steps["slow"]["error"] == {"step": "slow", "type": "TimeoutError", "message": "timed out after 2s"}
    events = subprocess.run([sys.executable, "-m", "dagplan", "events", result["run_id"], "--format", "json"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    calls = [e for e in json.loads(events.stdout) if e["type"] == "tool_called"]
    assert len(calls) == 8 + 2 + 1 + 1 + 1  # the journal records Ray's calls as it records local ones

    (tmp_path / "dagplan.toml").write_text("[ray]\nnum_cpus = 2\n")
    (tmp_path / "plan.yaml").write_text("executor: ray\n" + PLAN)  # the plan says where its tools run
    again = subprocess.run([sys.executable, "-m", "dagplan", "run", "plan.yaml", "--tools", "tools.py", "--input-file",
                            "in.json", "--format", "json", "--ephemeral"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert json.loads(again.stdout)["steps"]["here"]["output"] is True  # executor: ray for the plan: on Ray too
    (tmp_path / "plan.yaml").write_text(PLAN)
    third = subprocess.run([sys.executable, "-m", "dagplan", "run", "plan.yaml", "--tools", "tools.py", "--input-file",
                            "in.json", "--format", "json", "--ephemeral", "--executor", "ray"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert json.loads(third.stdout)["steps"]["here"]["output"] is True  # --executor ray for the run
