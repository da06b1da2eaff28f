"""The Berkeley Function Calling Leaderboard's requests, planned by dagplan and scored by BFCL's own AST checker.

    python benchmarks/bench_planning.py --bfcl simple [--bfcl-limit 50] [--model local]

The data and the checker come from the PyPI package ``bfcl-eval`` (Apache-2.0), installed apart from dagplan's
environment, without its dependencies (it pins numpy and pulls in sentence-transformers, vllm, cloud SDKs):

    pip install --no-deps --target .bfcl bfcl-eval==2026.3.23      # then BFCL_EVAL_PATH=.bfcl

Each request is planned as a user runs ``dagplan plan REQUEST --tools CATALOG``: its functions are the catalog
(BFCL's ``dict``/``float``/``tuple``/``any`` types as JSON Schema's), the plan's tool steps are the calls, in
order, each with its literal arguments (an argument read from another step cannot be scored and counts as
wrong). Scored per request:

- ``one_step``: the plan has exactly as many tool steps as the answer has calls (one, for ``simple`` and
  ``multiple``);
- ``function``: the plan calls exactly the functions of the answer (as a set);
- ``values``: the share of the answer's arguments whose value BFCL accepts, each judged by its own checker
  (``simple_function_checker`` on that one argument: its type rules and string normalisation), an optional one
  left out when the answer allows it;
- ``ast``: BFCL's ``ast_checker`` on the whole answer, as the leaderboard scores the category. Where this
  differs from BFCL's run: the model is asked through dagplan's planner (a plan, not a function-call message),
  and the model name given to the checker is ``dagplan`` (no dot-to-underscore renaming of function names).
- ``irrelevance``: right when the plan calls no tool (a planning failure counts as no call).

The ``live_*`` categories are the held-out set: refused unless ``--bfcl-held-out`` (once per change that claims
a gain, reported apart).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

CATEGORIES = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
}
HELD_OUT = {f"live_{name}": f"live_{name}" for name in ("simple", "multiple", "parallel", "parallel_multiple",
                                                         "irrelevance")}  # fmt: skip
VERSION = "BFCL_v4"


def data_dir() -> Path:
    """Where ``bfcl_eval`` lies: ``$BFCL_EVAL_PATH`` (a ``--target`` folder), else an installed package."""
    given = os.environ.get("BFCL_EVAL_PATH")
    if given:
        sys.path.insert(0, given)
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bfcl-eval is not installed: pip install --no-deps --target .bfcl bfcl-eval==2026.3.23, "
                         "then BFCL_EVAL_PATH=.bfcl")  # fmt: skip
    return Path(list(spec.submodule_search_locations)[0])


def checker() -> Any:
    """BFCL's AST checker, imported without the model registry it consults only to rename dotted names."""
    data_dir()

    class Config:
        underscore_to_dot = False

    class Registry(dict):
        def __missing__(self, key: str) -> Config:
            return Config()

    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = Registry()  # type: ignore[attr-defined]
    sys.modules.setdefault("bfcl_eval.constants.model_config", stub)
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval import ast_checker as module

    return module, Language.PYTHON


def read(category: str, held_out: bool = False) -> list[tuple[dict, Any]]:
    """The requests of a category with their possible answers (None for irrelevance: no call is right)."""
    if category in HELD_OUT and not held_out:
        raise SystemExit(f"{category} is BFCL's held-out set: run it once per change that claims a gain, with "
                         "--bfcl-held-out, and report it apart")  # fmt: skip
    name = {**CATEGORIES, **HELD_OUT}.get(category)
    if name is None:
        raise SystemExit(f"unknown BFCL category {category!r}: one of {', '.join(CATEGORIES)}")
    root = data_dir() / "data"
    entries = [json.loads(line) for line in (root / f"{VERSION}_{name}.json").read_text().splitlines() if line]
    answers_file = root / "possible_answer" / f"{VERSION}_{name}.json"
    answers = {}
    if answers_file.exists():
        for line in answers_file.read_text().splitlines():
            if line:
                found = json.loads(line)
                answers[found["id"]] = found["ground_truth"]
    return [(entry, answers.get(entry["id"])) for entry in entries]


def json_schema(schema: Any) -> Any:
    """A BFCL parameter schema as JSON Schema (its ``dict``, ``float``, ``tuple``, ``any``): the rule a catalog
    given to ``--tools`` is read by (dagplan.interpreter.tools.described)."""
    from dagplan.interpreter.tools.described import json_schema as converted

    return converted(schema)


def catalog(functions: list[dict]) -> dict[str, Any]:
    from dagplan.dsl.ir import ToolSpec

    return {f["name"]: ToolSpec(f["name"], f.get("description", ""), json_schema(f.get("parameters") or {}), None)
            for f in functions}  # fmt: skip


def calls_of(plan: Any) -> list[dict[str, dict[str, Any]]]:
    """The plan's tool calls in its order, each ``{name: {argument: value}}``; a value read from elsewhere (a
    reference, a template) is kept as its text, which no answer holds."""
    from dagplan.dsl.schedule import analysis_of
    from dagplan.interpreter.engine.preview import symbolic

    analysis = analysis_of(plan)
    out = []
    for sid in analysis.order:
        step = plan.by_id[sid]
        if step.tool:
            out.append({step.tool: dict(symbolic(step.args) or {})})
    return out


def score(entry: dict, answer: Any, calls: list[dict], category: str, judge: Any) -> dict[str, Any]:
    module, language = judge
    if answer is None:  # irrelevance: none of the functions fits the request
        return {"right": not calls, "steps": len(calls)}
    expected = [name for call in answer for name in call]
    got = [name for call in calls for name in call]
    values, total = 0, 0
    for call in answer:
        for name, arguments in call.items():
            description = next((f for f in entry["function"] if f["name"] == name), None)
            mine = next((c[name] for c in calls if name in c), None)
            for argument, possible in arguments.items():
                total += 1
                values += _value_right(module, language, description, name, argument, possible, mine)
    try:
        ast = module.ast_checker(entry["function"], calls, answer, language, CATEGORIES.get(category, category),
                                 "dagplan")["valid"]  # fmt: skip
    except Exception:  # noqa: BLE001 - a shape the checker cannot read is a wrong answer
        ast = False
    return {"one_step": len(calls) == len(answer), "function": sorted(set(got)) == sorted(set(expected)),
            "values": values / total if total else 1.0, "ast": bool(ast), "steps": len(calls)}  # fmt: skip


def _value_right(module: Any, language: Any, description: Any, name: str, argument: str, possible: list,
                 mine: Any) -> bool:  # fmt: skip
    """BFCL's verdict on one argument: its checker on a function of that argument alone."""
    if mine is None or description is None:
        return False
    if argument not in mine:
        return "" in possible  # an optional argument left out, where the answer allows it
    properties = (description.get("parameters") or {}).get("properties") or {}
    if argument not in properties:
        return False
    alone = {"name": name, "description": "", "parameters": {"type": "dict", "properties":
             {argument: properties[argument]}, "required": [argument]}}  # fmt: skip
    try:
        verdict = module.simple_function_checker(alone, {name: {argument: mine[argument]}},
                                                 {name: {argument: possible}}, language, "dagplan")  # fmt: skip
    except Exception:  # noqa: BLE001
        return False
    return bool(verdict["valid"])


async def plan_one(entry: dict, model: str, repair: int) -> tuple[list[dict], float, str]:
    from dagplan.interpreter.llm.planner import PlanningFailed, aplan

    request = " ".join(m["content"] for turn in entry["question"] for m in turn if m.get("role") == "user")
    started = time.perf_counter()
    try:
        result = await aplan(request, tools=catalog(entry["function"]), model=model, repair=repair)
        return calls_of(result.plan), time.perf_counter() - started, ""
    except PlanningFailed as failed:
        return [], time.perf_counter() - started, failed.attempts[-1].text[:200] if failed.attempts else ""


def run(category: str, model: str, limit: int, repair: int = 2, held_out: bool = False) -> dict[str, Any]:
    """Plan and score ``limit`` requests of ``category`` (evenly spread over it); the summary, and each row."""
    entries = read(category, held_out)
    if limit and limit < len(entries):
        step = len(entries) / limit
        entries = [entries[int(i * step)] for i in range(limit)]
    judge = checker()
    rows = []
    for entry, answer in entries:
        calls, seconds, failed = asyncio.run(plan_one(entry, model, repair))
        rows.append({"id": entry["id"], "calls": calls, "seconds": seconds, "failed": failed,
                     **score(entry, answer, calls, category, judge)})  # fmt: skip
    return {"category": category, "model": model, "requests": len(rows), **summary(rows), "rows": rows}


def summary(rows: list[dict]) -> dict[str, Any]:
    def share(key: str) -> float | None:
        found = [r[key] for r in rows if key in r]
        return round(100 * sum(map(float, found)) / len(found), 1) if found else None

    return {"one_step": share("one_step"), "function": share("function"), "values": share("values"),
            "ast": share("ast"), "right": share("right"),
            "seconds": round(statistics.median(r["seconds"] for r in rows), 2) if rows else None}  # fmt: skip
