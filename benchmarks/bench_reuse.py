"""Iterating on a plan: an edit of one prompt, re-run in full against `run --reuse RUN`.

    python -m benchmarks.bench_reuse [--latency 0.2] [--repeat 3]

The plan has 20 steps: 10 tool steps (each fetching one source, in parallel) and 10 LLM steps, a running
summary (each summarizes its source and the summary before it); the prompt of the eighth is edited, so it and
the two after it must run again. The model is faked with a fixed latency and token counts
(the engine's calls seam: what a stubbed provider costs, without a network), the tools answer at once; both
ways run durably through the same engine path as `dagplan run`. Per way: model calls, tokens and wall time;
the goal is that only the edited step (and its dependents: none here) runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SOURCES = 10
EDITED = 7  # the summary whose prompt is edited: it and the two after it run again


def plan_text(edited: bool = False) -> str:
    lines = ["steps:"]
    for n in range(SOURCES):
        lines += [f"  - id: fetch{n}", "    tool: fetch", f"    args: {{source: s{n}}}", f"    output: $state.doc{n}"]
    for n in range(SOURCES):
        before = f" after #summary{n - 1}" if n else ""
        verb = "Summarize briefly" if edited and n == EDITED else "Summarize"
        lines += [
            f"  - id: summary{n}",
            f'    llm: "{verb} #fetch{n}.head=400{before}"',
            f"    output: $state.summary{n}",
        ]
    return "\n".join(lines) + "\n"


class SlowModel:
    """Every model call takes ``latency`` seconds and counts its tokens as a provider would bill them."""

    offline = True

    def __init__(self, latency: float):
        self.latency, self.calls, self.prompt_tokens, self.completion_tokens = latency, 0, 0, 0

    def tool(self, unit_id: str, name: str, args: Any, real: Any) -> Any:
        return real()

    async def model(self, call: Any, real: Any) -> dict:
        self.calls += 1
        prompt = sum(len(str(m.get("content") or "")) for m in call.messages) // 4
        self.prompt_tokens += prompt
        self.completion_tokens += 40
        await asyncio.sleep(self.latency)
        return {"message": {"role": "assistant", "content": "a summary"}, "model": call.model, "cost": 0.0,
                "usage": {"prompt_tokens": prompt, "completion_tokens": 40}}  # fmt: skip

    def structured(self, model: str) -> bool:
        return False


async def one(state: str, text: str, latency: float, reuse: str | None) -> dict:
    import dagplan
    from dagplan.interpreter.engine.scope import Options
    from dagplan.interpreter.ops.driver import RunRequest, start
    from dagplan.interpreter.tools.catalog import registry

    @dagplan.tool(purity="pure")
    def fetch(source: str) -> str:
        return f"The text of {source}. " * 40

    model = SlowModel(latency)
    reused = dagplan.Project(state=state).reuse_of(reuse) if reuse else None  # the runs' results by fingerprint
    options = Options(calls=model, model="openai/gpt-4o-mini", reuse=reused)
    started = time.perf_counter()
    result = await start(RunRequest(dagplan.load(text=text, name="plan.yaml"), registry([fetch]), options,
                                    durable=True, state=state))  # fmt: skip
    return {"run": result.run_id, "calls": model.calls, "tokens": model.prompt_tokens + model.completion_tokens,
            "seconds": time.perf_counter() - started, "status": str(result.status)}  # fmt: skip


def measure(latency: float = 0.2, repeat: int = 3) -> dict[str, dict]:
    """The first run, then the edited plan re-run in full and with --reuse of the first (``repeat`` times)."""
    rows: dict[str, list[dict]] = {"full re-run": [], "--reuse": []}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as state:
            first = asyncio.run(one(state, plan_text(), latency, None))
            rows["full re-run"].append(asyncio.run(one(state, plan_text(edited=True), latency, None)))
            rows["--reuse"].append(asyncio.run(one(state, plan_text(edited=True), latency, first["run"])))
    return {way: {key: statistics.median(r[key] for r in found) for key in ("calls", "tokens", "seconds")}
            for way, found in rows.items()}  # fmt: skip


def table(found: dict[str, dict], latency: float) -> list[str]:
    out = [f"20 steps (10 tools, a chain of 10 LLM steps, a model answering in {latency:g} s), the 8th prompt edited; "
           "medians",
           "| way | model calls | tokens | wall s |", "| --- | --- | --- | --- |"]  # fmt: skip
    for way, row in found.items():
        out.append(f"| {way} | {row['calls']:.0f} | {row['tokens']:,.0f} | {row['seconds']:.2f} |")
    full, reused = found["full re-run"], found["--reuse"]
    calls, wall = reused["calls"] / full["calls"], reused["seconds"] / full["seconds"]
    out.append(f"--reuse: {calls:.0%} of the calls, {wall:.2f}x the wall time")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("\n".join(table(measure(args.latency, args.repeat), args.latency)))


if __name__ == "__main__":
    main()
