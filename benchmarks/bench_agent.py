"""Plan-first against ReAct on the same model, tools and tasks (the seeds' claim, measured).

    python -m benchmarks.bench_agent [--model local] [--tasks 10] [--latency 0.3]

The tasks are the reference chains of benchmarks/planning (requests that state 2-5 things to do in order,
with their expected tool graphs). The tools are fakes with a fixed latency that answer an object of their
arguments. Five ways, each held to the catalog with the same constrained decoding, bare and with the same help:

- **ReAct**, written here: one tool call per model turn (``{"call": TOOL, "arguments": {...}}`` or
  ``{"answer": ...}``, the catalog's own argument schemas), the observation appended, up to 8 turns;
- **ReAct, guided**: the same, given the help the planner gets (:mod:`dagplan.interpreter.llm.guide`): the
  tools the guide offers shown, the request's clauses listed in order, turn i held to the tool the guide
  offers at position i, text and number arguments held to the values the clause gives (an argument that
  carries data, to the last observation), then an answer;
- **plan-first, bare**: dagplan's planner writes the plan once with no guide (``guide=()``), and dagplan runs
  it with its parallelism;
- **plan-first**: the same with the guide's defaults (what ``dagplan plan`` does);
- **plan-first, streamed**: the same, the plan streamed (steps that change nothing start as it is written).

Per way: model calls, prompt and completion tokens, wall time, time to the first tool call, and the graph
scores of what was actually called (`dagplan eval`'s rule: node and edge F1, values). Medians per task.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Mapping

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REACT_SYSTEM = (
    "You solve the user's task with the tools below, one tool call at a time. Each turn answer with ONE JSON "
    'object: {"call": "<tool name>", "arguments": {...}} to call a tool (you will see its result), or '
    '{"answer": "<text>"} once the task is done.\n\nTools:\n'
)


def chains(count: int) -> list[tuple[str, Any]]:
    """The reference tasks that state an order, (catalog, task), an even sample of ``count``."""
    import yaml

    from dagplan.interpreter.testing.evaluate import read_tasks

    files = yaml.safe_load((HERE / "planning" / "reference.yaml").read_text())["files"]
    every = [(name, task) for name, path in files.items() for task in read_tasks(str(HERE / "planning" / path))]
    found = [(name, task) for name, task in every
             if task.order and any(w in task.request for w in ("then", "after", "After", "once"))]  # fmt: skip
    return found[:: max(1, len(found) // count)][:count]


class FakeTools:
    """Tools that take ``latency`` seconds and answer an object of their arguments; they note every call."""

    def __init__(self, latency: float):
        self.latency, self.called, self.first = latency, [], None

    async def call(self, name: str, args: Mapping[str, Any]) -> dict:
        if self.first is None:
            self.first = time.perf_counter()
        self.called.append((name, dict(args)))
        await asyncio.sleep(self.latency)
        return {"ok": True, "tool": name, **{k: v for k, v in args.items() if isinstance(v, (str, int, float))}}


def react_schema(specs: Mapping[str, Any]) -> dict:
    from dagplan.interpreter.llm.constrained import _value_schema

    calls = []
    for name, spec in sorted(specs.items()):
        params = spec.parameters or {}
        properties = {k: _value_schema(v) for k, v in (params.get("properties") or {}).items()}
        arguments = {"type": "object", "properties": properties,
                     "required": [k for k in params.get("required") or () if k in properties],
                     "additionalProperties": False}  # fmt: skip
        calls.append({"type": "object", "properties": {"call": {"const": name}, "arguments": arguments},
                      "required": ["call", "arguments"], "additionalProperties": False})  # fmt: skip
    answer = {"type": "object", "properties": {"answer": {"type": "string", "pattern": '^[^"\\\\\\x00-\\x1f]*$'}},
              "required": ["answer"], "additionalProperties": False}  # fmt: skip
    return {"anyOf": [*calls, answer]}


async def react(task: Any, specs: Mapping[str, Any], model: str, latency: float, max_turns: int = 8,
                completion_kwargs: Mapping[str, Any] = {}) -> dict:  # fmt: skip
    from dagplan.interpreter.llm.planner import tool_catalog

    messages = [{"role": "system", "content": REACT_SYSTEM + tool_catalog(specs)},
                {"role": "user", "content": task.request}]  # fmt: skip
    schema = react_schema(specs)
    return await _react_loop(task, specs, model, latency, max_turns, completion_kwargs, messages,
                             lambda number, observation: schema)  # fmt: skip


async def _react_loop(task: Any, specs: Mapping[str, Any], model: str, latency: float, max_turns: int,
                      completion_kwargs: Mapping[str, Any], messages: list[dict],
                      schema_at: Any) -> dict:  # fmt: skip
    """The ReAct loop every ReAct way shares: a turn's answer held to ``schema_at(turn, last observation)``, a
    call made and its observation appended, until an answer, an answer that is no call, or ``max_turns``."""
    from dagplan.interpreter.llm.constrained import response_params
    from dagplan.interpreter.llm.conversation import complete

    tools = FakeTools(latency)
    started, calls, prompt, completion = time.perf_counter(), 0, 0, 0
    observation: str | None = None
    params: dict[str, Any] = {}  # a schema's response parameters, made once
    for number in range(max_turns):
        schema = schema_at(number, observation)
        key = json.dumps(schema, sort_keys=True)
        params.setdefault(key, response_params(schema, model))
        record = await complete(model, messages, params[key], completion_kwargs, "react")
        calls += 1
        prompt += record.get("usage", {}).get("prompt_tokens", 0)
        completion += record.get("usage", {}).get("completion_tokens", 0)
        text = record["message"].get("content") or ""
        try:
            turn = json.loads(text)
        except ValueError:
            break
        if not isinstance(turn, dict) or turn.get("call") not in specs:
            break
        found = await tools.call(turn["call"], turn.get("arguments") or {})
        messages += [{"role": "assistant", "content": text},
                     {"role": "user", "content": "Observation: " + json.dumps(found)}]  # fmt: skip
        # what a turn may copy from it: its fields as plain text (an enum of JSON text with its quotes escaped
        # made llama.cpp's grammar converter write a grammar it could not parse, then crash)
        observation = re.sub(r'["\\\x00-\x1f]', "", "; ".join(f"{k}: {v}" for k, v in found.items()))
    return _row(task, specs, tools, started, calls, prompt, completion)


def guided_turns(request: str, specs: Mapping[str, Any]) -> tuple[list[dict], str, dict]:
    """ReAct given the planner's help: per turn the schema of a call held to the tool the guide offers at that
    position (one a clause, as the planner's ``narrow`` holds it) with its text and number arguments held to
    the values the clause gives; the tools shown; and the request with its clauses listed, as the planner says
    it."""
    from dagplan.interpreter.llm.guide import clauses, positions, request_values

    order = positions(request, specs, per_clause=1)
    given = request_values(request, words=True)
    parts = clauses(request)
    own = [request_values(part, words=True) for part in parts] if len(order) == len(parts) else []
    turns = []
    for number, names in enumerate(order):
        values = (own[number] if number < len(own) else []) or given
        turns.append({name: values for name in names if name in specs})
    shown = {name: specs[name] for turn in turns for name in turn}
    said = request if len(parts) < 2 else request + "\n\nDo these in order:\n" + "\n".join(
        f"{number}. {clause}" for number, clause in enumerate(parts, 1))  # fmt: skip
    return turns, said, shown


def _held_call(name: str, spec: Any, values: list[str], observation: str | None) -> dict:
    """A call of ``name`` whose text arguments are the request's values (one that carries data: the last
    observation), whose number arguments are the request's numbers, as the planner holds a step's."""
    from dagplan.interpreter.llm.constrained import _fitting, _value_schema, carries, numbers_offered

    params = spec.parameters or {}
    properties = {}
    for arg, schema in (params.get("properties") or {}).items():
        own = _value_schema(schema)
        kind = own.get("type")
        if kind == "string" and "enum" not in own and "const" not in own:
            offered = [observation] if observation is not None and carries(arg, schema) else _fitting(arg, values)
            properties[arg] = {"enum": offered} if offered else own
        elif kind in ("number", "integer"):
            numbers = numbers_offered(kind, values)  # the planner's rule for a step's numbers
            properties[arg] = {"enum": numbers} if numbers else own
        else:
            properties[arg] = own
    required = [k for k in params.get("required") or () if k in properties]
    arguments = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "object", "properties": {"call": {"const": name}, "arguments": arguments},
            "required": ["call", "arguments"], "additionalProperties": False}  # fmt: skip


async def react_guided(task: Any, specs: Mapping[str, Any], model: str, latency: float, max_turns: int = 8,
                       completion_kwargs: Mapping[str, Any] = {}) -> dict:  # fmt: skip
    """ReAct with the guide's help (see the module doc): the same loop, each turn's schema the guide's."""
    from dagplan.interpreter.llm.planner import tool_catalog

    turns, said, shown = guided_turns(task.request, specs)
    answer = react_schema({})["anyOf"][-1]
    messages = [{"role": "system", "content": REACT_SYSTEM + tool_catalog(shown)}, {"role": "user", "content": said}]

    def schema_at(number: int, observation: str | None) -> dict:
        offered = turns[number] if number < len(turns) else {}
        return {"anyOf": [_held_call(n, specs[n], v, observation) for n, v in offered.items()] or [answer]}

    return await _react_loop(task, specs, model, latency, max_turns, completion_kwargs, messages, schema_at)


def faked(specs: Mapping[str, Any], tools: FakeTools) -> tuple[dict, Any]:
    """The catalog as tools whose calls go to ``tools`` (with their purity), and the options that fake the
    run's tools, model steps and gates the same way for every way that runs a plan."""
    from dagplan.interpreter.engine.scope import Options
    from dagplan.interpreter.core.calls import Fakes
    from dagplan.interpreter.tools.catalog import Tool, registry

    class Timed(Fakes):
        def tool(self, unit_id: str, name: str, args: Mapping[str, Any], real: Any) -> Any:
            return tools.call(name, args)

    registered = registry(
        {n: Tool(n, lambda **_: None, s.description, s.parameters, s.purity) for n, s in specs.items()}
    )
    fakes = Timed()
    return registered, Options(calls=fakes, ask_gate=fakes.answer_gate, model="fake/model", backoff_scale=0.0)


async def plan_first(task: Any, specs: Mapping[str, Any], model: str, latency: float,
                     completion_kwargs: Mapping[str, Any] = {},
                     guide: tuple[str, ...] | None = None) -> dict:  # fmt: skip
    from dagplan.interpreter.llm.planner import GUIDES, PlanningFailed, aplan
    from dagplan.interpreter.ops.driver import RunRequest, start

    tools = FakeTools(latency)
    started = time.perf_counter()
    try:
        result = await aplan(task.request, tools=specs, model=model, repair=2, completion_kwargs=completion_kwargs,
                             guide=GUIDES if guide is None else guide)  # fmt: skip
    except PlanningFailed as failed:  # what the attempts cost still counts
        used = failed.usage
        return _row(task, specs, tools, started, used.get("calls", 0), used.get("prompt_tokens", 0),
                    used.get("completion_tokens", 0))  # fmt: skip
    registered, options = faked(specs, tools)
    await start(RunRequest(result.plan, registered, options, approve=lambda preview: True))
    return _row(task, specs, tools, started, result.calls, result.prompt_tokens, result.completion_tokens)


async def streamed(task: Any, specs: Mapping[str, Any], model: str, latency: float,
                   completion_kwargs: Mapping[str, Any] = {}) -> dict:  # fmt: skip
    """Plan-first with the plan streamed (interpreter/ops/streamed.py): a step that changes nothing starts as
    soon as its text is complete and checked; the rest once the plan is whole."""
    from dagplan.interpreter.llm.planner import PlanningFailed
    from dagplan.interpreter.ops.streamed import StreamRequest, plan_and_run

    tools = FakeTools(latency)
    registered, options = faked(specs, tools)
    written: list[float] = []
    started = time.perf_counter()

    def said(event: Mapping[str, Any]) -> None:
        if event.get("type") == "answer_complete" and not written:
            written.append(time.perf_counter())

    try:
        result = await plan_and_run(StreamRequest(task.request, registered, options, model, {"repair": 2},
                                                  completion_kwargs, approve=lambda preview: True, durable=False,
                                                  on_event=said))  # fmt: skip
    except PlanningFailed as failed:
        used = failed.usage
        return _row(task, specs, tools, started, used.get("calls", 0), used.get("prompt_tokens", 0),
                    used.get("completion_tokens", 0))  # fmt: skip
    row = _row(task, specs, tools, started, result.calls, result.prompt_tokens, result.completion_tokens)
    # the first tool call started before the model finished writing the plan
    row["before_written"] = bool(written and tools.first is not None and tools.first < written[0])
    return row


def _row(task: Any, specs: Mapping[str, Any], tools: FakeTools, started: float, calls: int, prompt: int,
         completion: int) -> dict:  # fmt: skip
    from dagplan.interpreter.testing.evaluate import grade_calls

    graded = grade_calls(tools.called, task, specs)
    return {"task": task.id, "calls": calls, "prompt": prompt, "completion": completion,
            "seconds": time.perf_counter() - started,
            "first_tool": (tools.first - started) if tools.first is not None else None,
            "nodes": graded.nodes, "edges": graded.edges, "values": graded.values}  # fmt: skip


def table(rows: Mapping[str, list[dict]]) -> list[str]:
    from dagplan.interpreter.testing.evaluate import Report

    out = ["| way | model calls | prompt tokens | completion tokens | wall s | first tool call s | node F1 | edge F1 "
           "| values |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for way, found in rows.items():

        def median(key: str) -> float:
            values = [r[key] for r in found if r[key] is not None]
            return statistics.median(values) if values else float("nan")

        node = Report._f1(r["nodes"] for r in found)
        edge = Report._f1(r["edges"] for r in found)
        right, total = sum(r["values"][0] for r in found), sum(r["values"][1] for r in found)
        out.append(f"| {way} | {median('calls'):.0f} | {median('prompt'):.0f} | {median('completion'):.0f} | "
                   f"{median('seconds'):.1f} | {median('first_tool'):.1f} | {node:.1f} | {edge:.1f} | "
                   f"{100 * right / total if total else 100:.1f}% |")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="local")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument(
        "--no-kept-prompts",
        action="store_true",
        help="the local model keeps no evaluated prompt between calls (local.kept_prompts off)",
    )
    args = parser.parse_args()
    _KEPT_ON[0] = not args.no_kept_prompts
    rows = compare(args.tasks, args.model, args.latency)
    print(f"{len(rows['ReAct'])} tasks that state an order, model {args.model}, tools answering in {args.latency:g} s; "
          f"kept prompts {'on' if _KEPT_ON[0] else 'off'}; medians per task")  # fmt: skip
    print("\n".join(summary(rows)))


async def plan_first_bare(task: Any, specs: Mapping[str, Any], model: str, latency: float,
                          completion_kwargs: Mapping[str, Any] = {}) -> dict:  # fmt: skip
    """Plan-first with no guide: the catalog's schema only, as ReAct bare has it."""
    return await plan_first(task, specs, model, latency, completion_kwargs, guide=())


WAYS = (("ReAct", react), ("ReAct, guided", react_guided), ("plan-first, bare", plan_first_bare),
        ("plan-first", plan_first), ("plan-first, streamed", streamed))  # fmt: skip


def compare(count: int, model: str = "local", latency: float = 0.3) -> dict[str, list[dict]]:
    """Each way on the same ``count`` tasks (one after the other per task: the same model state)."""
    from benchmarks.bench_planning import catalogs

    tools = catalogs()
    rows: dict[str, list[dict]] = {way: [] for way, _ in WAYS}
    for catalog, task in chains(count):
        for way, run in WAYS:
            cold(way)
            rows[way].append(asyncio.run(run(task, tools[catalog], model, latency)))
            print(f"  {way} {task.id}: {rows[way][-1]}", file=sys.stderr, flush=True)
    return rows


_KEPT: dict[str, Any] = {}  # per way, the prompts the local model keeps evaluated (local.kept_prompts)
_KEPT_ON = [True]  # --no-kept-prompts: none is kept


def cold(way: str | None = None) -> None:
    """Each way starts with the local model's context empty and its own kept prompts (those of its earlier
    tasks, as a process that runs that way would have): llama.cpp keeps evaluated prompts, and a way that
    followed another on the same task would skip evaluating the prompt they share (measured: 2 s of 7 a plan)."""
    from dagplan.interpreter.llm.local import _MODELS, kept_prompts

    for model in _MODELS.values():
        model.reset()
        if not _KEPT_ON[0]:
            model.set_cache(None)
        else:
            model.set_cache(_KEPT.setdefault(way, kept_prompts()) if way is not None else kept_prompts())


def summary(rows: Mapping[str, list[dict]]) -> list[str]:
    """The table, and how often the streamed way's first tool call started before the plan was written."""
    early = [r.get("before_written") for r in rows.get("plan-first, streamed", ())]
    return [*table(rows), "", f"streamed: the first tool call started before the model finished the plan in "
            f"{sum(map(bool, early))} of {len(early)} tasks"]  # fmt: skip


if __name__ == "__main__":
    main()
