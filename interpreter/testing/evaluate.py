"""Whether a planner's plans are the right plans, not only valid ones: ``dagplan eval TASKS --tools T --model M``.

A task file lists requests with what a right plan does::

    tasks:
      - id: weather-then-park
        request: "Check the weather in Rome, then find a park and present it"
        tools: [getWeather, findPark, presentSuggestion]       # the tools a right plan calls
        order: [[getWeather, findPark], [findPark, presentSuggestion]]   # A must come before B
        values: {getWeather: {city: Rome}}                     # argument values that matter

Every task is planned by the model (the same planner as ``dagplan plan``: the catalog's schema, repairs),
then scored as TaskBench scores tool graphs (arXiv 2311.18760): **node F1** over the set of tool names a
plan calls, **edge F1** over its direct before/after pairs of tools (through steps that are not tool
calls), both pooled over the tasks; **value accuracy** over the expected argument values (text found in
what was written, whatever its case: ``the airport`` has ``airport``; numbers as numbers); and the share
of plans that **run to the end** with every tool and model faked. Each miss is counted by kind: a wrong
tool, a missing step, a wrong order, a wrong value, no valid plan. Tokens, seconds and cost are per plan.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ...dsl.errors import DagplanError, RunError, Span, did_you_mean
from ...dsl.ir import Plan, Ref, Template, walk
from ...dsl.schedule import analysis_of
from ..core.calls import Fakes

KINDS = ("wrong_tool", "missing_step", "wrong_order", "wrong_value", "no_plan", "did_not_run")


@dataclass(frozen=True)
class Task:
    """One request and what a right plan for it does."""

    id: str
    request: str
    tools: frozenset[str]
    order: frozenset[tuple[str, str]] = frozenset()
    values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def read_tasks(path: str) -> list[Task]:
    """A task file (YAML or JSON), every problem an ``eval-tasks`` error at its line."""
    from ...dsl.load import read_document

    data, source = read_document(path, holds="tasks", example="write: tasks: [{id, request, tools, order, values}]")
    problems, out, seen = [], [], set()

    def fail(where: tuple, message: str, key: bool = False, hint: str | None = None) -> None:
        at = source.locate(Span(path, where, key=key))
        problems.append(RunError.make("eval-tasks", message, at, hint=hint).diagnostics[0])

    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        fail(("tasks",) if "tasks" in data else (), "`tasks` must be a list of tasks")
        raise RunError(problems)
    for index, task in enumerate(tasks):
        at = ("tasks", index)
        if not isinstance(task, dict):
            fail(at, f"tasks[{index}] must be a mapping with id, request, tools")
            continue
        known = ("id", "request", "tools", "order", "values")
        for key in sorted(set(task) - set(known)):
            fail((*at, key), f"unknown key {key!r} in tasks[{index}]", key=True,
                 hint=did_you_mean(str(key), known, f"known keys: {', '.join(known)}"))  # fmt: skip
        ident = task.get("id", f"task{index + 1}")
        request, tools = task.get("request"), task.get("tools")
        if not isinstance(ident, (str, int)) or str(ident) in seen:
            fail((*at, "id"), f"tasks[{index}].id must be a name used once")
        if not isinstance(request, str) or not request.strip():
            fail((*at, "request"), f"tasks[{index}].request must be the request, as text")
        if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
            fail((*at, "tools"), f"tasks[{index}].tools must list the tool names a right plan calls")
            continue
        order = task.get("order") or []
        pairs = []
        if not isinstance(order, list):
            fail((*at, "order"), f"tasks[{index}].order must be a list of [before, after] pairs")
            order = []
        for number, pair in enumerate(order):
            if not (isinstance(pair, list) and len(pair) == 2 and all(p in tools for p in pair)):
                fail((*at, "order", number), f"tasks[{index}].order[{number}] must be [A, B], two of its tools")
            else:
                pairs.append((pair[0], pair[1]))
        values = task.get("values") or {}
        if not isinstance(values, dict) or not all(k in tools and isinstance(v, dict) for k, v in values.items()):
            fail((*at, "values"), f"tasks[{index}].values must map each of its tools to {{argument: value}}")
            values = {}
        seen.add(str(ident))
        out.append(Task(str(ident), str(request), frozenset(tools), frozenset(pairs), values))
    if problems:
        raise RunError(problems)
    return out


# --- the graph of a plan ---------------------------------------------------------------------------


def tool_graph(plan: Plan) -> tuple[set[str], set[tuple[str, str]], dict[str, list[Mapping[str, Any]]]]:
    """The tools a plan calls, its direct before/after pairs of tools (through steps that are not tool
    calls), and the arguments each tool is called with (as written)."""
    nodes: set[str] = set()
    calls: dict[str, list[Mapping[str, Any]]] = {}
    steps = dict(walk(plan))
    for step in steps.values():
        if step.tool:
            nodes.add(step.tool)
            calls.setdefault(step.tool, []).append(dict(step.args))
    deps = analysis_of(plan).deps
    edges: set[tuple[str, str]] = set()

    def tools_before(step_id: str, seen: set[str]) -> set[str]:
        found: set[str] = set()
        for dep in deps.get(step_id, ()):
            if dep in seen:
                continue
            seen.add(dep)
            before = plan.by_id.get(dep)
            if before is not None and before.tool:
                found.add(before.tool)
            else:
                found |= tools_before(dep, seen)
        return found

    for step in plan.steps:
        if step.tool:
            edges |= {(before, step.tool) for before in tools_before(step.id, set()) if before != step.tool}
    return nodes, edges, calls


def _same_value(written: Any, expected: Any) -> bool:
    if isinstance(written, (Ref, Template)) or written is None:
        return False
    if isinstance(expected, bool) or isinstance(written, bool):
        return written == expected
    if isinstance(expected, (int, float)):
        try:
            return float(written) == float(expected)
        except (TypeError, ValueError):
            return False
    wanted = str(expected).strip().casefold()  # the value within what was written: "the airport" has "airport"
    return bool(wanted) and wanted in str(written).strip().casefold()


# --- grading --------------------------------------------------------------------------------------


@dataclass
class Graded:
    """One task's plan, scored."""

    task: str
    planned: bool
    nodes: tuple[int, int, int] = (0, 0, 0)  # true positives, false positives, false negatives
    edges: tuple[int, int, int] = (0, 0, 0)
    values: tuple[int, int] = (0, 0)  # right, expected
    ran: bool = False
    misses: dict[str, list[str]] = field(default_factory=dict)  # kind -> what
    tokens: int = 0
    seconds: float = 0.0
    cost: float = 0.0
    plan: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "planned": self.planned, "nodes": list(self.nodes), "edges": list(self.edges),
                "values": list(self.values), "ran": self.ran, "misses": self.misses, "tokens": self.tokens,
                "seconds": round(self.seconds, 3), "cost": self.cost, "plan": self.plan}  # fmt: skip


def grade(plan: Plan, task: Task, catalog: Iterable[str]) -> Graded:
    """A valid plan against what the task expects (the catalog's tools only count)."""
    nodes, edges, calls = tool_graph(plan)
    return grade_graph(nodes, edges, calls, task, catalog)


def grade_calls(called: list[tuple[str, Mapping[str, Any]]], task: Task, catalog: Iterable[str]) -> Graded:
    """The tool calls an agent made, in order, against what the task expects: its graph is the tools it
    called and each call after the call before it (how a ReAct agent orders its work)."""
    nodes = {name for name, _ in called}
    edges = {(a, b) for (a, _), (b, _) in zip(called, called[1:]) if a != b}
    calls: dict[str, list[Mapping[str, Any]]] = {}
    for name, args in called:
        calls.setdefault(name, []).append(args)
    return grade_graph(nodes, edges, calls, task, catalog)


def grade_graph(nodes: set[str], edges: set[tuple[str, str]], calls: Mapping[str, list[Mapping[str, Any]]],
                task: Task, catalog: Iterable[str]) -> Graded:  # fmt: skip
    """The one scoring rule: a graph of tool calls against what the task expects (catalog tools only)."""
    known = set(catalog)
    nodes = nodes & known
    edges = {e for e in edges if e[0] in known and e[1] in known}
    misses: dict[str, list[str]] = {}
    wrong = sorted(nodes - task.tools)
    missing = sorted(task.tools - nodes)
    if wrong:
        misses["wrong_tool"] = wrong
    if missing:
        misses["missing_step"] = missing
    bad_order = sorted(f"{a} before {b}" for a, b in task.order - edges if a in nodes and b in nodes)
    if bad_order:
        misses["wrong_order"] = bad_order
    right = total = 0
    for tool, expected in task.values.items():
        for argument, value in expected.items():
            total += 1
            if any(_same_value(args.get(argument), value) for args in calls.get(tool, ())):
                right += 1
            elif tool in nodes:  # what the plan wrote there, beside what the task wants
                wrote = [repr(args[argument]) if argument in args else "nothing" for args in calls.get(tool, ())]
                misses.setdefault("wrong_value", []).append(
                    f"{tool}.{argument} = {' / '.join(wrote) or 'nothing'} (want {value!r})"
                )
    return Graded(
        task.id,
        True,
        (len(nodes & task.tools), len(nodes - task.tools), len(task.tools - nodes)),
        (len(edges & task.order), len(edges - task.order), len(task.order - edges)),
        (right, total),
        misses=misses,
    )


# --- the faked run --------------------------------------------------------------------------------


async def runs_to_end(plan: Plan, specs: Mapping[str, Any]) -> bool:
    """Whether ``plan`` completes without errors with every tool and model faked (inputs: their defaults, or
    a word)."""
    from ..engine.scope import Options
    from ..ops.driver import RunRequest, start
    from ..tools.catalog import Tool, registry

    async def never(**_: Any) -> Any:  # the fakes answer first: a real tool is never called
        raise AssertionError("a faked run called a real tool")

    tools = {name: Tool(name, never, spec.description, spec.parameters, spec.purity) for name, spec in specs.items()}
    fakes = Fakes()
    options = Options(calls=fakes, ask_gate=fakes.answer_gate, model="fake/model", backoff_scale=0.0)
    inputs = {name: schema.get("default", "x") if isinstance(schema, Mapping) else "x"
              for name, schema in (plan.inputs or {}).items()}  # fmt: skip
    try:
        result = await start(RunRequest(plan, registry(tools), options, inputs=inputs, approve=lambda preview: True))
    except (DagplanError, AssertionError):
        return False
    return str(result.status) == "completed" and not result.had_errors


# --- the whole evaluation -------------------------------------------------------------------------


@dataclass
class Report:
    """Every task graded, and the pooled scores."""

    model: str
    graded: list[Graded]

    @staticmethod
    def _f1(counts: Iterable[tuple[int, int, int]]) -> float:
        tp = fp = fn = 0
        for a, b, c in counts:
            tp, fp, fn = tp + a, fp + b, fn + c
        return 100.0 * 2 * tp / (2 * tp + fp + fn) if tp else 0.0

    @property
    def node_f1(self) -> float:
        return self._f1(g.nodes for g in self.graded)

    @property
    def edge_f1(self) -> float:
        return self._f1(g.edges for g in self.graded)

    @property
    def value_accuracy(self) -> float:
        right = sum(g.values[0] for g in self.graded)
        total = sum(g.values[1] for g in self.graded)
        return 100.0 * right / total if total else 100.0

    @property
    def ran(self) -> float:
        return 100.0 * sum(g.ran for g in self.graded) / len(self.graded) if self.graded else 0.0

    def misses(self) -> dict[str, int]:
        return {kind: sum(len(g.misses.get(kind, ())) for g in self.graded) for kind in KINDS}

    def per_plan(self) -> dict[str, float]:
        def median(values: list[float]) -> float:
            return statistics.median(values) if values else 0.0

        return {"tokens": median([g.tokens for g in self.graded]), "seconds": median([g.seconds for g in self.graded]),
                "cost": median([g.cost for g in self.graded])}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "tasks": len(self.graded), "node_f1": round(self.node_f1, 1),
                "edge_f1": round(self.edge_f1, 1), "value_accuracy": round(self.value_accuracy, 1),
                "ran_to_end": round(self.ran, 1), "misses": self.misses(), "per_plan": self.per_plan(),
                "graded": [g.to_json() for g in self.graded]}  # fmt: skip


async def aevaluate(
    tasks: list[Task],
    specs: Mapping[str, Any],
    model: str,
    *,
    repair: int = 2,
    completion_kwargs: Mapping[str, Any] = {},
    structured_output: str = "auto",
    on_graded: Callable[[Graded], None] | None = None,
    guide: tuple[str, ...] | None = None,
) -> Report:
    """Plan every task with ``model`` over ``specs``, and grade each plan."""
    from ..llm.planner import PlanningFailed, aplan

    from ..llm.planner import GUIDES

    chosen = tuple(guide) if guide is not None else GUIDES
    graded = []
    for task in tasks:
        started = time.perf_counter()
        try:
            result = await aplan(task.request, tools=specs, model=model, repair=repair, guide=chosen,
                                 completion_kwargs=completion_kwargs, structured_output=structured_output)  # fmt: skip
        except PlanningFailed as failed:
            one = Graded(task.id, False, (0, 0, len(task.tools)), (0, 0, len(task.order)),
                         (0, sum(len(v) for v in task.values.values())),
                         misses={"no_plan": [failed.headline.message[:200]]})  # fmt: skip
            one.seconds = time.perf_counter() - started
            used = failed.usage
            one.tokens, one.cost = (
                used.get("prompt_tokens", 0) + used.get("completion_tokens", 0),
                used.get("cost", 0.0),
            )
        else:
            one = grade(result.plan, task, specs)
            one.seconds = time.perf_counter() - started
            one.tokens, one.cost = result.prompt_tokens + result.completion_tokens, result.cost
            one.plan = result.document_yaml
            one.ran = await runs_to_end(result.plan, specs)
            if not one.ran:
                one.misses["did_not_run"] = ["the plan did not run to its end with the tools faked"]
        graded.append(one)
        if on_graded is not None:
            on_graded(one)
        await asyncio.sleep(0)
    return Report(model, graded)
