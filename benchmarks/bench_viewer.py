"""The run viewer: page render times with many runs and a large run, and the latency of live updates.

    python benchmarks/bench_viewer.py [--runs 1000] [--steps 1000] [--repeat 15]

With ``dagplan serve`` started here on its own state directory (a separate process, real HTTP):

- the runs page with 1,000 runs in the state directory (median of ``--repeat`` GETs);
- the run page of a 1,000-step run (its graph, panels and event log);
- live updates: a page's event stream is open; this process records an event in a run's journal and
  commits it; the time until the message arrives on the stream (median, and the worst).

Targets (issue 14): each page under 300 ms, updates within 100 ms of the commit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

import dagplan
from dagplan.interpreter.stores.registry import open_registry
from dagplan.interpreter.core.vocabulary import Event, EventType


def make_runs(state: Path, count: int) -> None:
    registry = open_registry(state)
    for i in range(count):
        run = registry.create(plan_doc={"steps": [{"id": "a", "tool": "t"}]}, plan_name=f"plan{i % 7}.yaml", inputs={})
        run.acquire()
        run.record(Event(EventType.PLAN_STARTED, run.id, data={"steps": 1}))
        run.record(Event(EventType.STEP_COMPLETED, run.id, "a", duration=0.01, data={"output": i, "attempts": 1}))
        run.record(Event(EventType.PLAN_COMPLETED, run.id, data={"status": "completed", "had_errors": False}))
        run.release()


def big_run(state: Path, steps: int) -> str:
    lines = ["steps:"]
    for i in range(steps):
        lines.append(
            f"  - {{id: s{i}, tool: inc, args: {{x: {'†state.v' + str(i - 1) if i else 0}}}, output: †state.v{i}}}"
        )
    plan = dagplan.load(text="\n".join(lines) + "\n", name="chain.yaml")
    result = dagplan.run(plan, tools={"inc": lambda x: x + 1}, durable=True, state_dir=state)
    return result.run_id


def timed_get(client: httpx.Client, url: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.text[:300]
    return statistics.median(times)


def update_latency(base: str, state: Path, repeat: int) -> list[float]:
    registry = open_registry(state)
    run = registry.create(plan_doc={"steps": [{"id": "a", "tool": "t"}]}, plan_name="live.yaml", inputs={})
    run.acquire()
    run.record(Event(EventType.PLAN_STARTED, run.id, data={"steps": 1}))
    run.commit_sync()
    arrived: dict[int, float] = {}
    ready = threading.Event()

    def listen() -> None:
        try:
            follow()
        except httpx.HTTPError:
            return  # the server stopped at the end of the benchmark

    def follow() -> None:
        with httpx.stream("GET", f"{base}/runs/{run.id}/stream", params={"cursor": "null"}, timeout=60) as stream:
            ready.set()
            for line in stream.iter_lines():
                found = re.search(r'\\"i\\": (\d+)', line)  # inside the log line, a JSON string
                if found:
                    arrived[int(found.group(1))] = time.perf_counter()
                    if len(arrived) == repeat:
                        return

    threading.Thread(target=listen, daemon=True).start()
    ready.wait(10)
    time.sleep(0.3)
    latencies = []
    for i in range(repeat):
        run.record(Event(EventType.GATE_ANSWERED, run.id, "a", data={"i": i}))
        asyncio.run(run.commit())
        committed = time.perf_counter()
        deadline = committed + 5
        while i not in arrived and time.perf_counter() < deadline:
            time.sleep(0.001)
        latencies.append(arrived.get(i, float("inf")) - committed)
        time.sleep(0.05)
    run.release()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dagplan-viewer-"))
    many, large = folder / "many", folder / "large"
    start = time.perf_counter()
    make_runs(many, args.runs)
    run_id = big_run(large, args.steps)
    print(f"set-up: {args.runs} runs and a {args.steps}-step run in {time.perf_counter() - start:.1f} s")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    servers = []
    try:
        bases = []
        for state in (many, large):
            command = [sys.executable, "-m", "dagplan", "serve", "--port", "0", "--state-dir", str(state)]
            proc = subprocess.Popen(command, cwd=folder, env=env, stderr=subprocess.PIPE, text=True)
            servers.append(proc)
            bases.append(re.search(r"(http://\S+?)/", proc.stderr.readline()).group(1))
        with httpx.Client(timeout=60) as client:
            client.get(bases[0] + "/")  # warm: imports, templates
            client.get(f"{bases[1]}/runs/{run_id}")
            runs_page = timed_get(client, bases[0] + "/", args.repeat)
            run_page = timed_get(client, f"{bases[1]}/runs/{run_id}", args.repeat)
        print(
            f"runs page, {args.runs} runs:        {runs_page * 1000:7.1f} ms (median of {args.repeat}; target 300 ms)"
        )
        print(f"run page, {args.steps}-step run:   {run_page * 1000:7.1f} ms "
              f"(median of {args.repeat}; target 300 ms)")  # fmt: skip
        latencies = update_latency(bases[0], many, 20)
        print("latencies (ms):", " ".join(f"{x * 1000:.1f}" for x in latencies))
        print(f"live update, commit -> message on the page's stream: "
              f"median {statistics.median(latencies) * 1000:.1f} ms, "
              f"worst {max(latencies) * 1000:.1f} ms over {len(latencies)} (target 100 ms)")  # fmt: skip
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
