"""Planning with a real small model: share of plans that pass `check`, constrained to the task's catalog
against unconstrained, after 0, 1 and 2 repairs; tool and argument names right; tokens and seconds a plan.

    python benchmarks/bench_planning.py [--model local] [--tasks 50] [--repair 2] [--modes auto,json_object]

Tasks: benchmarks/planning/tasks.json, 30 over a catalog of 40 everyday tools (planning/everyday_catalog.json:
bookings, messages, payments, search...) and 20 over the examples' tools (examples/tools.py). The model is
asked through dagplan's own planner (`dagplan.aplan`), once held to the catalog's plan schema
(`structured_output = "auto"`: a llama.cpp grammar for the local model) and once with JSON mode only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def catalogs() -> dict[str, dict]:
    import dagplan
    from dagplan.dsl.ir import ToolSpec

    def read(name: str) -> dict:
        found = json.loads((HERE / "planning" / f"{name}_catalog.json").read_text())
        return {n: ToolSpec(n, e["description"], e["parameters"], e.get("purity")) for n, e in found.items()}

    return {
        "everyday": read("everyday"),
        "examples": dagplan.load_tool_specs([ROOT / "examples" / "tools.py"]),
        "media": read("media"),  # catalogs of other kinds (issue 53): data passes from tool to tool
        "pipeline": read("pipeline"),
    }


async def one(task: str, tools: dict, model: str, repair: int, mode: str) -> dict:
    from dagplan.interpreter.llm.planner import PlanningFailed, aplan

    started = time.perf_counter()
    try:
        result = await aplan(task, tools=tools, model=model, repair=repair, structured_output=mode)
        attempts, ok, tokens = result.attempts, True, result.prompt_tokens + result.completion_tokens
    except PlanningFailed as failed:
        attempts, ok, tokens = failed.attempts, False, 0
    names_right = _names_right(attempts[0].text, tools)
    return {"ok": ok, "repairs": len(attempts) - 1, "names_right": names_right, "tokens": tokens,
            "seconds": time.perf_counter() - started}  # fmt: skip


def _names_right(text: str, tools: dict) -> bool:
    """The first answer calls only tools of the catalog, with only their argument names."""
    try:
        steps = json.loads(text).get("steps", [])
    except (ValueError, AttributeError):
        return False
    for step in steps:
        if isinstance(step, dict) and "tool" in step:
            spec = tools.get(step["tool"])
            if spec is None or not set(step.get("args") or {}) <= set((spec.parameters or {}).get("properties", {})):
                return False
    return True


HELDOUT = {"everyday": "heldout.tasks.yaml"}  # written after the guide was tuned, never used to tune it
# the catalogs of other kinds: every task written after the guide was last changed (both halves held out)
OTHER_KINDS = {"media": ("media.tasks.yaml", "media.heldout.tasks.yaml"),
               "pipeline": ("pipeline.tasks.yaml", "pipeline.heldout.tasks.yaml")}  # fmt: skip


def shape(task: Any) -> str:
    """single (one tool), chain (each tool after the one before), or graph (branches that meet)."""
    if len(task.tools) == 1:
        return "single"
    before = [a for a, _ in task.order]
    after = [b for _, b in task.order]
    return "chain" if len(set(before)) == len(before) and len(set(after)) == len(after) else "graph"


def per_catalog(model: str, repair: int, guide: tuple[str, ...], catalogs_: list[str], heldout: bool = False
                ) -> list[dict]:  # fmt: skip
    """Every task of each catalog planned and scored, one row a catalog and one a shape (single, chain, graph)."""
    import yaml

    from dagplan.interpreter.testing.evaluate import Report, aevaluate, read_tasks

    files = yaml.safe_load((HERE / "planning" / "reference.yaml").read_text())["files"]
    tools = catalogs()
    rows = []
    for name in catalogs_:
        if name in OTHER_KINDS:  # --heldout: the half in everyday words only
            paths = OTHER_KINDS[name][1:] if heldout else OTHER_KINDS[name]
        else:
            paths = ((HELDOUT if heldout else files)[name],)
        mine = [task for path in paths for task in read_tasks(str(HERE / "planning" / path))]

        def said(g: Any) -> None:
            print(f"  {name} {g.task}: {g.misses or 'right'}", file=sys.stderr, flush=True)

        report = asyncio.run(aevaluate(mine, tools[name], model, repair=repair, guide=guide, on_graded=said))
        by_id = {task.id: task for task in mine}
        rows.append({"catalog": name, "shape": "all", **Report(model, report.graded).to_json()})
        for kind in ("single", "chain", "graph"):
            graded = [g for g in report.graded if shape(by_id[g.task]) == kind]
            if graded:
                one = f"{sum(_tool_steps(g.plan) == 1 for g in graded) / len(graded):.0%}" if kind == "single" else ""
                rows.append({"catalog": name, "shape": kind, "one_step": one, **Report(model, graded).to_json()})
    return rows


def _tool_steps(plan: str) -> int:
    """How many tool calls a graded plan makes (a solver's model step is not one)."""
    import yaml

    try:
        steps = (yaml.safe_load(plan) or {}).get("steps") or []
    except yaml.YAMLError:
        return 0
    return sum(1 for step in steps if isinstance(step, dict) and "tool" in step)


def recall(k_values: tuple[int, ...] = (1, 3, 5)) -> list[str]:
    """The guide's retrieval alone, per catalog (no model is asked): recall@k (of the tools each task calls, the
    share among the k its request ranks first, guide.rank), and the node F1 of the tools the guide offers first
    at each step position (guide.positions, one a clause: what `narrow` leaves the model), on the reference
    tasks and on the held-out ones apart."""
    import yaml

    from dagplan.interpreter.llm.guide import positions, rank
    from dagplan.interpreter.testing.evaluate import read_tasks

    files = yaml.safe_load((HERE / "planning" / "reference.yaml").read_text())["files"]
    tools = catalogs()

    def read(paths: tuple) -> list:
        return [task for path in paths if path for task in read_tasks(str(HERE / "planning" / path))]

    def offered_f1(tasks: list, catalog: dict) -> str:
        tp = fp = fn = 0
        for task in tasks:
            got = {names[0] for names in positions(task.request, catalog, per_clause=1) if names}
            tp, fp, fn = tp + len(got & task.tools), fp + len(got - task.tools), fn + len(task.tools - got)
        return f"{200 * tp / (2 * tp + fp + fn):.1f}" if tasks else "-"

    lines = ["| catalog | tasks | " + " | ".join(f"recall@{k}" for k in k_values)
             + " | offered first, node F1: reference | held-out |",
             "| --- | --- | " + " | ".join("---" for _ in k_values) + " | --- | --- |"]  # fmt: skip
    for name in ("everyday", "examples", "media", "pipeline"):
        reference = read(OTHER_KINDS[name][:1] if name in OTHER_KINDS else (files[name],))
        held = read(OTHER_KINDS[name][1:] if name in OTHER_KINDS else (HELDOUT.get(name),))
        mine = reference + held
        cells = []
        for k in k_values:
            found = wanted = 0
            for task in mine:
                ranked = set(rank(task.request, tools[name], k * max(1, len(task.tools))))
                found += len(set(task.tools) & ranked)
                wanted += len(task.tools)
            cells.append(f"{100 * found / wanted:.1f}")
        first = f"{offered_f1(reference, tools[name])} | {offered_f1(held, tools[name])}"
        lines.append(f"| {name} | {len(mine)} | " + " | ".join(cells) + f" | {first} |")
    return lines


def graph_scores(model: str, count: int, repair: int, mode: str = "auto", guide: tuple[str, ...] = (),
                 heldout: bool = False) -> dict:  # fmt: skip
    """The reference tasks (planning/reference.yaml), an even sample of ``count`` across both catalogs (or
    the held-out tasks), planned by ``model`` and scored as `dagplan eval` scores them (node and edge F1,
    values, runs to the end)."""
    import yaml

    from dagplan.interpreter.testing.evaluate import Report, aevaluate, read_tasks

    files = HELDOUT if heldout else yaml.safe_load((HERE / "planning" / "reference.yaml").read_text())["files"]
    tools = catalogs()
    every = [(name, task) for name, path in files.items() for task in read_tasks(str(HERE / "planning" / path))]
    every = every[:: max(1, len(every) // count)][:count]
    graded = []
    for name in files:
        mine = [task for catalog, task in every if catalog == name]
        if mine:

            def said(g: Any) -> None:
                print(f"  {g.task}: {g.misses or 'right'}", file=sys.stderr, flush=True)

            report = asyncio.run(aevaluate(mine, tools[name], model, repair=repair, structured_output=mode,
                                           guide=guide, on_graded=said))  # fmt: skip
            graded += report.graded
    return {**Report(model, graded).to_json(), "guide": "+".join(guide) or "none", "heldout": heldout}


def print_graph_scores(found: dict) -> None:
    per = found["per_plan"]
    misses = ", ".join(f"{k} {v}" for k, v in found["misses"].items() if v) or "none"
    label = f"{found['model']}, guide: {found.get('guide', 'none')}" + (", held-out" if found.get("heldout") else "")
    print(f"| {label} | {found['tasks']} | {found['node_f1']:.1f} | {found['edge_f1']:.1f} | "
          f"{found['value_accuracy']:.1f}% | {found['ran_to_end']:.1f}% | {per['tokens']:.0f} | {per['seconds']:.1f} | "
          f"{misses} |")  # fmt: skip


GRAPH_HEADER = ("| model | tasks | node F1 | edge F1 | values | ran to the end | tokens/plan | s/plan | misses |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")  # fmt: skip


def print_bfcl(categories: list[str], model: str, limit: int, repair: int, held_out: bool, to: str) -> None:
    """BFCL's categories as a table (benchmarks/bfcl.py says what each column measures)."""
    import bfcl

    print(
        f"BFCL {bfcl.VERSION} (bfcl-eval), model {model}, up to {repair} repairs, {limit or 'all'} requests a category"
    )
    print("| category | requests | one step | right function | argument values | AST (BFCL) | no call (irrelevance) "
          "| s/plan |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    found = []
    for category in categories:
        result = bfcl.run(category, model, limit, repair, held_out)
        found.append(result)

        def cell(key: str) -> str:
            return "" if result[key] is None else f"{result[key]:.1f}%"

        print(f"| {category} | {result['requests']} | {cell('one_step')} | {cell('function')} | {cell('values')} | "
              f"{cell('ast')} | {cell('right')} | {result['seconds']} |", flush=True)  # fmt: skip
    if to:
        Path(to).write_text(json.dumps(found, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="local")
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--repair", type=int, default=2)
    parser.add_argument("--modes", default="auto,json_object", help="auto (held to the catalog), json_object, or both")
    parser.add_argument("--graph", action="store_true", help="the graph scores on the reference tasks instead")
    parser.add_argument("--ideas", default="none,order,order+values",
                        help="comma-separated guides to compare: none, order, values, narrow, solve, e.g. "
                             "order+values+narrow")  # fmt: skip
    parser.add_argument("--heldout", action="store_true", help="the held-out tasks (planning/heldout.tasks.yaml)")
    parser.add_argument("--per-catalog", default="",
                        help="comma-separated catalogs (everyday, examples, media, pipeline): a row a catalog and a "
                        "shape, with --ideas' first guide")  # fmt: skip
    parser.add_argument("--recall", action="store_true", help="recall@k of the guide's tool retrieval, per catalog")
    parser.add_argument(
        "--bfcl",
        default="",
        help="comma-separated BFCL categories (simple, multiple, parallel, "
        "parallel_multiple, irrelevance): planned and scored by BFCL's checker (benchmarks/bfcl.py)",
    )
    parser.add_argument("--bfcl-limit", type=int, default=50, help="requests a category, spread over it (0: all)")
    parser.add_argument("--bfcl-held-out", action="store_true", help="allow the live_* categories (the held-out set)")
    parser.add_argument("--bfcl-json", default="", help="write every row to this file")
    args = parser.parse_args()
    if args.bfcl:
        print_bfcl(args.bfcl.split(","), args.model, args.bfcl_limit, args.repair, args.bfcl_held_out, args.bfcl_json)
        return
    if args.recall:
        print("\n".join(recall()))
        return
    if args.per_catalog:
        guide = tuple(part for part in args.ideas.split(",")[0].split("+") if part != "none")
        print(f"model {args.model}, guide {'+'.join(guide) or 'none'}, up to {args.repair} repairs")
        print("| catalog | shape | tasks | node F1 | edge F1 | values | one step | ran to the end | s/plan |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for row in per_catalog(args.model, args.repair, guide, args.per_catalog.split(","), args.heldout):
            scores = f"{row['node_f1']:.1f} | {row['edge_f1']:.1f} | {row['value_accuracy']:.1f}%"
            print(f"| {row['catalog']} | {row['shape']} | {row['tasks']} | {scores} | {row.get('one_step', '')} | "
                  f"{row['ran_to_end']:.1f}% | {row['per_plan']['seconds']:.1f} |", flush=True)  # fmt: skip
        return
    if args.graph:
        print(GRAPH_HEADER)
        for idea in args.ideas.split(","):
            guide = tuple(part for part in idea.split("+") if part != "none")
            print_graph_scores(graph_scores(args.model, args.tasks, args.repair, guide=guide, heldout=args.heldout))
        return
    tasks = json.loads((HERE / "planning" / "tasks.json").read_text())
    every = [(task, "everyday") for task in tasks["everyday"]] + [(task, "examples") for task in tasks["examples"]]
    every = every[:: max(1, len(every) // args.tasks)][: args.tasks]
    tools = catalogs()
    print(f"{len(every)} tasks, model {args.model}, up to {args.repair} repairs")
    print("| mode | pass, no repair | within 1 | within 2 | names right (1st answer) | tokens/plan | s/plan |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mode in args.modes.split(","):
        rows = []
        for i, (task, name) in enumerate(every, 1):
            rows.append(asyncio.run(one(task, tools[name], args.model, args.repair, mode)))
            print(f"  {mode} {i}/{len(every)} {rows[-1]}", file=sys.stderr, flush=True)
        n = len(rows)

        def within(k: int) -> str:
            return f"{sum(r['ok'] and r['repairs'] <= k for r in rows) / n:.0%}"

        tokens = statistics.median([r["tokens"] for r in rows if r["ok"]] or [0])
        seconds = statistics.median([r["seconds"] for r in rows])
        label = "constrained to the catalog" if mode == "auto" else "JSON mode only"
        print(f"| {label} | {within(0)} | {within(1)} | {within(2)} | "
              f"{sum(r['names_right'] for r in rows) / n:.0%} | {tokens:.0f} | {seconds:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
