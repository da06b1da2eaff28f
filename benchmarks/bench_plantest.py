"""Plan tests: how fast `dagplan test` runs the bundled examples, and what a case costs over a plain run.

    python benchmarks/bench_plantest.py [--repeat 5]

1. ``dagplan test examples`` in a fresh process (median wall time): cases per second, and the
   start-up share: the same command selecting no case (``-k`` matching nothing: the process,
   the imports, loading every test file, its plan and its tools) over the whole.
2. In one process, per case: ``run_case`` (the engine with the mocks as its calls seam) against
   a plain in-memory ``dagplan.arun`` of the same plan whose tools are plain functions returning
   the same values; the ratio is the price of the mock lookup and the judging.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import dagplan
from dagplan.interpreter.core.config import load_config
from dagplan.interpreter.testing.plantest import load_suite, run_case

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def wall(args: list[str], repeat: int) -> float:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=ROOT, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_call(fn, n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - start) / n)
    return statistics.median(times)


def case_vs_plain(repeat: int) -> tuple[float, float]:
    """The weather example's sunny case, and the same plan run with plain tools giving the same values."""
    config = load_config(EXAMPLES)
    suite = load_suite(EXAMPLES / "weather.test.yaml", config)
    plan = suite.plan
    tools = {
        "getWeather": lambda city: {"city": "Rome", "sky": "sunny"},
        "findPark": lambda weather: "Villa Borghese",
        "presentSuggestion": lambda suggestion: "Today: Villa Borghese",
        "findMovie": lambda weather: "x",
    }
    async_tools = {name: _async(fn) for name, fn in tools.items()}
    loop = asyncio.new_event_loop()

    def case() -> None:  # as `dagplan test` runs it (coverage not asked for)
        assert loop.run_until_complete(run_case(suite, 0, config, coverage=False)).passed

    def plain() -> None:
        result = loop.run_until_complete(dagplan.arun(plan, tools=async_tools, inputs={"city": "Rome"}, config=config))
        assert result.result == "Today: Villa Borghese"

    for warm in (case, plain):
        warm()
    n = 200
    took = per_call(case, n, repeat), per_call(plain, n, repeat)
    loop.close()
    return took


def _async(fn):
    async def call(**kwargs):
        return fn(**kwargs)

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    report = dagplan.test([EXAMPLES], config=load_config(EXAMPLES))
    cases = len(report.results)
    assert report.failed == 0 and not report.errors
    whole = wall(["test", "examples"], args.repeat)
    startup = wall(["test", "examples", "-k", "no case has this name"], args.repeat)
    in_process = statistics.median(r.duration for r in report.results)
    print(f"dagplan test examples: {cases} cases in {whole * 1000:.0f} ms (fresh process, median): "
          f"{cases / whole:.0f} cases/s; start-up (no case run) {startup * 1000:.0f} ms = "
          f"{startup / whole:.0%} of it")  # fmt: skip
    print(f"cases alone: {sum(r.duration for r in report.results) * 1000:.1f} ms, median {in_process * 1e6:.0f} us "
          f"a case ({cases / sum(r.duration for r in report.results):.0f} cases/s in one process)")  # fmt: skip
    case, plain = case_vs_plain(args.repeat)
    print(f"weather case: {case * 1e6:.0f} us; plain in-memory run of the same plan: {plain * 1e6:.0f} us; "
          f"ratio {case / plain:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
