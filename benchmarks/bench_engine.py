"""Per-step overhead of the interpreter, against a hand-written asyncio floor and LangGraph.

    python benchmarks/bench_engine.py [--repeat 7]

Shapes: a chain of 1,000 no-op steps and a fan-out of 1,000 independent no-op
steps, with async tools (that return at once, and that await once: ``awaits``) and with
sync tools; a `for_each` step over 1,000 items; and 100 steps sleeping 50 ms each (parallel
efficiency = 50 ms / wall time). Each is run through the public API (`dagplan.arun` on a
loaded plan: what users call) and through the engine alone (`Execution`). Figures are medians of the repeats;
ratios are against the floor measured in the same run. LangGraph is measured
when installed (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Annotated, Callable, TypedDict

import json

import dagplan
from dagplan.interpreter.engine.execution import Execution
from dagplan.interpreter.engine.scope import Options, RunScope
from dagplan.interpreter.tools.catalog import registry, tool


@tool
async def anoop(x: int = 0) -> int:
    return x


@tool
def snoop(x: int = 0) -> int:
    return x


@tool
async def ayield(x: int = 0) -> int:
    """An async tool that awaits (once: what a tool calling a service does, without the service's time)."""
    if x >= 0:
        await asyncio.sleep(0)
    return x


@tool
async def nap(x: int = 0) -> int:
    await asyncio.sleep(0.05)
    return x


def chain_doc(n: int, name: str) -> dict:
    steps = [{"id": "s0", "tool": name, "output": "†state.s0"}]
    steps += [
        {"id": f"s{i}", "tool": name, "args": {"x": f"†state.s{i - 1}"}, "output": f"†state.s{i}"} for i in range(1, n)
    ]
    return {"steps": steps}


def fan_doc(n: int, name: str) -> dict:
    return {"steps": [{"id": f"s{i}", "tool": name, "output": f"†state.s{i}"} for i in range(n)]}


def items_doc(n: int, name: str) -> dict:
    return {
        "initial_state": {"xs": list(range(n))},
        "steps": [
            {
                "id": "each",
                "tool": name,
                "for_each": "†state.xs",
                "max_items": n,
                "args": {"x": "†item"},
                "output": "†state.out",
            }
        ],
    }


def deps_of(doc: dict) -> dict[str, list[str]]:
    if "initial_state" in doc:  # a fan-out over items: independent nodes
        return {f"s{i}": [] for i in doc["initial_state"]["xs"]}
    return {s["id"]: ([f"s{int(s['id'][1:]) - 1}"] if "args" in s else []) for s in doc["steps"]}


# --- the three executors ---------------------------------------------------------------------


TOOLS = [anoop, ayield, snoop, nap]


def ours(doc: dict, max_concurrency: int, api: bool = True) -> Callable[[], float]:
    """dagplan on the plan: through ``dagplan.arun`` (api) or the engine alone."""
    plan = dagplan.load(text=json.dumps(doc), tools=TOOLS)
    tools = registry(TOOLS)

    async def timed() -> float:
        start = time.perf_counter()
        if api:
            result = await dagplan.arun(plan, tools=TOOLS, max_concurrency=max_concurrency)
        else:
            scope = RunScope("bench", tools, Options(max_concurrency=max_concurrency))
            result = await Execution(plan, {}, scope).run()
            scope.close()
        assert result.status == "completed" and not result.had_errors
        return time.perf_counter() - start

    def once() -> float:
        return asyncio.run(timed())

    return once


def floor_callbacks(doc: dict, fn) -> Callable[[], float]:
    """The least a DAG executor must do (the floor the ratios use): a node's task is started by the
    completion of its last dependency (a done-callback), and nothing is created before it is ready."""
    deps = deps_of(doc)
    dependents: dict[str, list[str]] = {sid: [] for sid in deps}
    for sid, parents in deps.items():
        for parent in parents:
            dependents[parent].append(sid)
    is_async = asyncio.iscoroutinefunction(fn)

    async def main() -> float:
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        waiting = {sid: len(parents) for sid, parents in deps.items()}
        values: dict[str, object] = {}
        left = [len(deps)]

        def begin(sid: str) -> None:
            x = values[deps[sid][0]] if deps[sid] else 0
            task = loop.create_task(fn(x) if is_async else asyncio.to_thread(fn, x))
            task.add_done_callback(lambda t, sid=sid: finished(sid, t))

        def finished(sid: str, task: asyncio.Task) -> None:
            values[sid] = task.result()
            left[0] -= 1
            for dep in dependents[sid]:
                waiting[dep] -= 1
                if not waiting[dep]:
                    begin(dep)
            if not left[0]:
                done.set_result(None)

        for sid, count in waiting.items():
            if not count:
                begin(sid)
        await done
        return time.perf_counter() - start

    def once() -> float:
        return asyncio.run(main())

    return once


def floor(doc: dict, fn) -> Callable[[], float]:
    """The earlier floor, kept beside the other for comparison: a task per node created up front, each
    awaiting its parents' futures (more work than an executor must do, so ratios against it read lower)."""
    deps = deps_of(doc)
    is_async = asyncio.iscoroutinefunction(fn)

    async def main() -> float:
        start = time.perf_counter()
        futures: dict[str, asyncio.Future] = {}

        async def node(sid: str):
            values = [await futures[d] for d in deps[sid]]
            x = values[0] if values else 0
            return await fn(x) if is_async else await asyncio.to_thread(fn, x)

        for sid in deps:  # ids are in topological order
            futures[sid] = asyncio.ensure_future(node(sid))
        await asyncio.gather(*futures.values())
        return time.perf_counter() - start

    def once() -> float:
        return asyncio.run(main())

    return once


def langgraph(doc: dict, fn) -> Callable[[], float] | None:
    try:
        from langgraph.graph import END, START, StateGraph
    except ImportError:
        return None
    deps = deps_of(doc)
    is_async = asyncio.iscoroutinefunction(fn)
    graph = StateGraph(State)
    for sid, parents in deps.items():

        def make(sid=sid, parents=parents):
            if is_async:

                async def run(state):
                    x = state["values"].get(parents[0], 0) if parents else 0
                    return {"values": {sid: await fn(x)}}
            else:

                def run(state):
                    x = state["values"].get(parents[0], 0) if parents else 0
                    return {"values": {sid: fn(x)}}

            return run

        graph.add_node(sid, make())
        for p in parents or [START]:
            graph.add_edge(p, sid)
    for sid in deps:
        if not any(sid in ps for ps in deps.values()):
            graph.add_edge(sid, END)
    app = graph.compile()

    async def timed() -> float:
        start = time.perf_counter()
        await app.ainvoke({"values": {}}, {"recursion_limit": 10**6})
        return time.perf_counter() - start

    def once() -> float:
        return asyncio.run(timed())

    return once


def merge(a: dict, b: dict) -> dict:
    return {**a, **b}


class State(TypedDict):
    """LangGraph's state for the benchmark DAG: every node adds its value under its id."""

    values: Annotated[dict, merge]


def median(fn: Callable[[], float], repeat: int) -> float:
    fn()  # warm-up
    return statistics.median(fn() for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    n = args.steps
    print(f"per-step overhead, median of {args.repeat} runs, {n} no-op steps (us/step; ratio vs floor = the "
          "done-callback floor; 'tasks' = the earlier floor, a task per node awaiting its parents)")  # fmt: skip
    print(f"{'shape':<18}{'floor':>8}{'tasks':>8}{'api':>8}{'ratio':>8}{'engine':>8}{'ratio':>8}{'langgraph':>11}"
          f"{'ratio':>8}")  # fmt: skip
    for kind, name, fn in (
        ("async", "anoop", anoop.__wrapped__ if hasattr(anoop, "__wrapped__") else anoop),
        ("awaits", "ayield", ayield.__wrapped__ if hasattr(ayield, "__wrapped__") else ayield),
        ("sync", "snoop", snoop),
    ):
        for shape, make, size in (
            ("chain", chain_doc, n),
            ("fan-out", fan_doc, n),
            ("fan-out 100", fan_doc, 100),
            ("for_each", items_doc, n),
        ):
            doc = make(size, name)
            repeat = args.repeat * n // size  # a small shape is repeated more, to the same total time
            base = median(floor_callbacks(doc, fn), repeat) / size * 1e6
            tasks = median(floor(doc, fn), repeat) / size * 1e6
            api = median(ours(doc, max_concurrency=size), repeat) / size * 1e6
            engine = median(ours(doc, max_concurrency=size, api=False), repeat) / size * 1e6
            lg = langgraph(doc, fn) if shape != "for_each" else None
            lg_us = median(lg, max(1, repeat // 2)) / size * 1e6 if lg else None
            lg_txt = f"{lg_us:>11.1f}{lg_us / base:>7.1f}x" if lg_us else f"{'n/a':>11}{'':>8}"
            print(
                f"{kind + ' ' + shape:<18}{base:>8.1f}{tasks:>8.1f}{api:>8.1f}{api / base:>7.2f}x{engine:>8.1f}"
                f"{engine / base:>7.2f}x{lg_txt}"
            )
    doc = fan_doc(100, "nap")
    print("\nparallelism, 100 steps sleeping 50 ms (efficiency = 50 ms / wall; median of repeats):")
    for label, runner in (
        ("floor", floor_callbacks(doc, nap)),
        ("tasks", floor(doc, nap)),
        ("dagplan", ours(doc, max_concurrency=100)),
        ("langgraph", langgraph(doc, nap)),
    ):
        if runner is None:
            print(f"  {label:<10} n/a (pip install -e '.[bench]')")
            continue
        wall = median(runner, args.repeat)
        print(
            f"  {label:<10} wall {wall * 1000:6.1f} ms  efficiency {0.05 / wall:6.1%}"
            f"  parallelism {5 / wall:5.1f} of 100"
        )


if __name__ == "__main__":
    main()
