"""Runs in PostgreSQL: the durable chain's per-step cost against the file journal, in one run.

    python benchmarks/bench_postgres.py [--steps 1000] [--repeat 3]

Starts a PostgreSQL server of its own (Debian's binaries, as tests/pg_server.py does; fsync on), talks
to it over its Unix socket, then runs the same 1,000-step chain of no-op async tools durably (every completion
committed before the next step starts) on the file journal, on PostgreSQL, and in memory (the
floor), and prints medians per step and the ratio of PostgreSQL to the file journal (goal 1.5x).
Fan-out (1,000 steps completing together) shows the group commit: completions share transactions.
Then the pool: 100 queued runs of a 20-step plan (a chain of no-op tools, every completion durable),
drained by 1, 2 and 4 ``dagplan worker`` processes: runs per second and the scaling efficiency
(throughput with N workers / (N x throughput with 1)). This machine has 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import dagplan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pool import throughput  # noqa: E402
from pg_server import start_postgres  # noqa: E402


async def noop(x: int = 0) -> int:
    return x + 1


def chain(steps: int) -> dagplan.Plan:
    body = [{"id": f"s{i}", "tool": "noop", "args": {"x": f"†state.v{i - 1}" if i else 0}, "output": f"†state.v{i}"}
            for i in range(steps)]  # fmt: skip
    return dagplan.load(text=json.dumps({"steps": body}))


def fan_out(steps: int) -> dagplan.Plan:
    return dagplan.load(text=json.dumps({"steps": [{"id": f"s{i}", "tool": "noop", "output": f"†state.v{i}"}
                                                    for i in range(steps)]}))  # fmt: skip


def per_step(plan: dagplan.Plan, steps: int, repeat: int, **kwargs) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = dagplan.run(plan, tools={"noop": noop}, **kwargs)
        times.append((time.perf_counter() - start) / steps)
        assert result.status == "completed"
    return statistics.median(times)


def langgraph_chain(url: str, steps: int) -> float | None:
    """Seconds per step of the same chain as a LangGraph graph checkpointed by its PostgresSaver (every
    super-step durable: durability="sync"), on the same server; None when langgraph is not installed."""
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.graph import END, START, StateGraph
        from typing_extensions import TypedDict
    except ImportError:
        return None

    class State(TypedDict):
        v: int

    graph = StateGraph(State)
    for i in range(steps):
        graph.add_node(f"s{i}", lambda state: {"v": state["v"] + 1})
        graph.add_edge(f"s{i - 1}" if i else START, f"s{i}")
    graph.add_edge(f"s{steps - 1}", END)
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        app = graph.compile(checkpointer=saver)
        start = time.perf_counter()
        config = {"configurable": {"thread_id": f"bench-{time.time()}"}, "recursion_limit": steps * 2 + 10}
        out = app.invoke({"v": 0}, config, durability="sync")
        took = time.perf_counter() - start
    assert out["v"] == steps
    return took / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    url, stop, socket_url = start_postgres()
    try:
        database = socket_url  # a local socket, as a worker beside its database would use
        folder = Path(tempfile.mkdtemp(prefix="dagplan-bench-"))
        for name, plan in (("chain", chain(args.steps)), ("fan-out", fan_out(args.steps))):
            floor = per_step(plan, args.steps, args.repeat)
            files = per_step(plan, args.steps, args.repeat, durable=True, state_dir=folder)
            pg = per_step(plan, args.steps, args.repeat, durable=True, state_dir=database)
            print(f"{name:8} {args.steps} steps, per step: in memory {floor * 1e6:7.1f} us, file journal "
                  f"{files * 1e6:7.1f} us, PostgreSQL {pg * 1e6:7.1f} us = {pg / files:.2f}x the file journal "
                  f"(durability alone: {(pg - floor) / (files - floor):.2f}x)")  # fmt: skip
        lg = langgraph_chain(database, args.steps)
        if lg is not None:
            print(f"LangGraph PostgresSaver, the same chain on the same server: {lg * 1e6:7.1f} us per step")
        one = None
        for workers in (1, 2, 4):  # the pool's own benchmark (bench_pool.py) says more: per-run work, predictions
            rate = throughput(database, folder, workers, 100, 1)
            one = one or rate
            print(f"pool: 100 runs x 20 steps, {workers} worker(s): {rate:5.1f} runs/s (start-up excluded), "
                  f"scaling efficiency {rate / (workers * one):.0%}")  # fmt: skip
    finally:
        stop()


if __name__ == "__main__":
    main()
