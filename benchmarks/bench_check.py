"""Benchmark of the check path: `python benchmarks/bench_check.py [--steps 10000] [--files 1000] [--repeat 5]`.

Reports medians of several repeats:
* a generated N-step plan (YAML and JSON): load, schema, parse, validate, analyze, whole `check`,
  in microseconds per step (target: whole check < 0.5 s for 10,000 steps, i.e. 50 us/step), against
  the floor of reading the text at all, measured in the same run: `json.loads` for JSON, and for
  YAML the libyaml event stream through PyYAML's C parser (what our YAML loader consumes);
* 1,000 small files through `check`: files per second;
* `dagplan check` on one small file in a fresh process (wall, median) against `python -c pass`
  as the baseline, and their ratio (target < 0.3 s).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dagplan.dsl import check
from dagplan.dsl.load import load_text
from dagplan.dsl.parse import parse_document
from dagplan.dsl.schedule import analyze
from dagplan.dsl.validate import validate

ROOT = Path(__file__).resolve().parent.parent


def generate(n: int) -> dict:
    """A layered plan: every step reads one or two earlier outputs, some via templates and placeholders."""
    steps = []
    for i in range(n):
        args: dict = {"n": i, "label": f"step {i}"}
        if i >= 1:
            args["prev"] = f"†state.out{i - 1}"
        if i >= 10 and i % 3 == 0:
            args["note"] = f"compare with †state.out{i - 10}.value and #s{i - 5}.head=100"
        if i % 7 == 0:
            args["city"] = "†input.city"
        steps.append(
            {
                "id": f"s{i}",
                "description": f"Step number {i}",
                "tool": "work",
                "args": args,
                "output": f"†state.out{i}",
                "retry": {"limit": 2},
                "timeout": "30s",
            }
        )
    return {
        "dagplan": 1,
        "summary": "generated",
        "inputs": {"city": {"type": "string"}},
        "steps": steps,
        "result": f"†state.out{n - 1}",
    }


def to_yaml(plan: dict) -> str:
    """Block YAML by hand (flow mappings for args), so the benchmark does not depend on a YAML dumper."""
    lines = ["dagplan: 1", "summary: generated", "inputs:", "  city: {type: string}", "steps:"]
    for s in plan["steps"]:
        lines += [
            f"  - id: {s['id']}",
            f"    description: {s['description']}",
            f"    tool: {s['tool']}",
            "    args: " + json.dumps(s["args"], ensure_ascii=False),
            f"    output: {s['output']}",
            "    retry: {limit: 2}",
            "    timeout: 30s",
        ]
    lines.append(f"result: {plan['result']}")
    return "\n".join(lines) + "\n"


def median_time(fn, repeat: int, cpu: bool = False) -> float:
    """Median wall (or CPU) seconds; GC off as in `check` itself, collected between repeats."""
    clock = time.process_time if cpu else time.perf_counter
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = clock()
            fn()
            times.append(clock() - t0)
        finally:
            gc.enable()
    return statistics.median(times)


_FLOOR = {"json": "json.loads", "yaml": "events"}


def _read_only(kind: str, text: str) -> None:
    if kind == "json":
        json.loads(text)
        return
    from yaml import _yaml  # the C parser our loader reads events from

    parser = _yaml.CParser(text)
    while parser.get_event() is not None:
        pass


def schema_stage():
    try:
        from dagplan.dsl.schema import schema_errors
    except ImportError:
        return None
    return schema_errors


def bench_large(n: int, repeat: int) -> None:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (wall times on a busy machine inflate)")
    data = generate(n)
    texts = {"json": json.dumps(data, ensure_ascii=False), "yaml": to_yaml(data)}
    plan, diags = parse_document(data, "big")
    assert plan is not None and not diags, diags[:3]
    schema_errors = schema_stage()
    print(f"== {n}-step plan (median of {repeat}; us/step)")
    for kind, text in texts.items():
        floor = median_time(lambda: _read_only(kind, text), repeat)
        print(
            f"  {kind:4} {_FLOOR[kind]:9} {floor * 1e3:8.1f} ms  {floor / n * 1e6:6.1f} us/step"
            "  (baseline: reading the text at all)"
        )
        doc = load_text(text, f"big.{kind}")
        stages = {
            "load": lambda: load_text(text, f"big.{kind}"),
            "schema": (lambda: schema_errors(doc)) if schema_errors else None,
            "parse": lambda: parse_document(doc.data, "big"),
            "validate": lambda: validate(plan),
            "analyze": lambda: analyze(plan),
        }
        for name, fn in stages.items():
            if fn is None:
                print(f"  {kind:4} {name:9} n/a (stage missing)")
                continue
            t = median_time(fn, repeat)
            print(f"  {kind:4} {name:9} {t * 1e3:8.1f} ms  {t / n * 1e6:6.1f} us/step")
        if schema_errors:
            result = check(text=text, name=f"big.{kind}")
            assert result.ok, result.diagnostics[:3]
            t = median_time(lambda: check(text=text, name=f"big.{kind}"), repeat)
            cpu = median_time(lambda: check(text=text, name=f"big.{kind}"), repeat, cpu=True)
            verdict = "OK" if t < 0.5 else "OVER TARGET"
            print(
                f"  {kind:4} check     {t * 1e3:8.1f} ms  {t / n * 1e6:6.1f} us/step  (cpu {cpu * 1e3:.0f} ms; "
                f"{t / floor:.1f}x the baseline; target 500 ms: {verdict})"
            )


def bench_small_files(count: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(count):
            p = Path(tmp) / f"plan{i}.yaml"
            p.write_text(to_yaml(generate(5)).replace("generated", f"plan {i}"), encoding="utf-8")
            paths.append(p)
        t = median_time(lambda: [check(p) for p in paths], repeat)
    print(f"== {count} small files (5 steps each): {t:.2f} s, {count / t:,.0f} files/s, {t / count * 1e3:.2f} ms/file")


def bench_process(repeat: int) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    target = str(ROOT / "examples" / "weather.yaml")
    base = [sys.executable, "-c", "pass"]
    cmd = [sys.executable, "-m", "dagplan", "check", target]
    run = lambda argv: subprocess.run(argv, env=env, capture_output=True, check=False)  # noqa: E731
    run(cmd)  # warm the bytecode cache
    t_base = median_time(lambda: run(base), repeat)
    t_check = median_time(lambda: run(cmd), repeat)
    verdict = "OK" if t_check < 0.3 else "OVER TARGET"
    print(f"== one small file in a fresh process (median of {repeat})")
    print(f"  python -c pass        {t_base * 1e3:7.1f} ms (baseline)")
    print(f"  dagplan check         {t_check * 1e3:7.1f} ms  ratio {t_check / t_base:.1f}x  (target 300 ms: {verdict})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--files", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    bench_large(args.steps, args.repeat)
    bench_small_files(args.files, max(1, args.repeat // 2))
    bench_process(max(args.repeat, 10))


if __name__ == "__main__":
    main()
