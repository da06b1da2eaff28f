"""Tools on Ray: the overhead of a call as a Ray task, and a fan-out of sleeping tools against the ideal.

    python benchmarks/bench_ray.py [--calls 50] [--fan-out 100] [--sleep 0.5] [--cpus 25]

On a local Ray (``ray.init(num_cpus=--cpus)``: logical CPUs, the tasks only sleep):
- a chain of ``--calls`` no-op tool calls, each waiting for the previous: per-call time on Ray and
  locally (a sync tool in a worker thread), median of 3, and the overhead per call;
- a fan-out of ``--fan-out`` calls sleeping ``--sleep`` s each: wall time against the ideal
  (ceil(fan-out / cpus) x sleep), the second run (the first starts Ray's worker processes).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import dagplan


def chain(n: int) -> dagplan.Plan:
    steps = [{"id": f"s{i}", "tool": "inc", "args": {"x": f"†state.v{i - 1}" if i else 0}, "output": f"†state.v{i}"}
             for i in range(n)]  # fmt: skip
    return dagplan.load(text=json.dumps({"steps": steps}))


def fan_out(n: int, seconds: float) -> dagplan.Plan:
    steps = [{"id": "all", "for_each": "†input.xs", "max_items": n, "tool": "nap", "args": {"s": seconds},
              "output": "†state.naps"}]  # fmt: skip
    return dagplan.load(text=json.dumps({"inputs": {"xs": {"type": "array"}}, "steps": steps}))


def inc(x: int) -> int:
    return x + 1


def nap(s: float) -> str:
    time.sleep(s)
    return "ok"


def _copy(fn):
    import types

    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__)


def timed(plan: dagplan.Plan, tools: dict, **kwargs) -> float:
    start = time.perf_counter()
    result = dagplan.run(plan, tools=tools, max_concurrency=1000, **kwargs)
    assert result.status == "completed" and not result.had_errors, result
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--fan-out", type=int, default=100)
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--cpus", type=int, default=25)
    args = parser.parse_args()
    from dagplan.interpreter.engine.ray_exec import ray_module

    started = time.perf_counter()
    ray_module({"num_cpus": args.cpus})
    print(f"ray.init (local, {args.cpus} logical CPUs): {time.perf_counter() - started:.1f} s")
    local = {
        "inc": dagplan.tool(_copy(inc)),
        "nap": dagplan.tool(_copy(nap)),
    }  # a tool is an attribute of its function:
    on_ray = {
        "inc": dagplan.tool(executor="ray")(_copy(inc)),
        "nap": dagplan.tool(executor="ray")(_copy(nap)),
    }  # copies
    plan = chain(args.calls)
    timed(plan, on_ray)  # warm: Ray's first workers
    there = statistics.median(timed(plan, on_ray) / args.calls for _ in range(3))
    here = statistics.median(timed(plan, local) / args.calls for _ in range(3))
    print(f"a call, chained: on Ray {there * 1000:.2f} ms, local {here * 1000:.3f} ms: "
          f"{(there - here) * 1000:.2f} ms of overhead per call")  # fmt: skip
    wide = fan_out(args.fan_out, args.sleep)
    inputs = {"xs": list(range(args.fan_out))}
    first = timed(wide, on_ray, inputs=inputs)
    second = timed(wide, on_ray, inputs=inputs)
    ideal = math.ceil(args.fan_out / args.cpus) * args.sleep
    print(f"fan-out of {args.fan_out} x {args.sleep} s on Ray: {second:.2f} s (first run, starting workers: "
          f"{first:.2f} s); ideal {ideal:.2f} s: {ideal / second:.0%} of it")  # fmt: skip


if __name__ == "__main__":
    main()
