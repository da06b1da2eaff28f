"""The agent loop: the plan as an evolving strategy (seed 004).

Each turn the model receives the input, the tool catalog, the current plan and
the live state, and answers with the seed's solution shape::

    {"calls": [{"_tool": ..., <args>, "_outputPath": ...}, ...], "output": <final output or null>}

(any plan dialect is accepted in place of ``calls``: a canonical ``steps`` plan too).
A new plan is validated (the state so far counts as written; errors go back to the
model, ``repair`` times per turn) before anything runs; then its first batch (the
first parallel group; ``batch="plan"`` runs it whole) goes to ``run_plan``, which
returns the new state, and the model sees the result in the next turn. A non-null ``output`` (validated against ``output_schema``)
ends the loop once its calls, if any, have run. Bounded by ``max_turns``; every turn
is handed to ``checkpoint`` and every model call goes through ``memo``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Literal, Mapping

from ..dsl.errors import DagplanError, Diagnostic, error
from ..dsl.ir import Plan, ToolSpec
from .llm import NOT_JSON, Budget, Memo, complete, memo_key, parse_json
from .planner import repair_text, tool_catalog

SYSTEM_PROMPT = """\
You are an agent working through a plan. Each turn you get the input, the tools, the current \
plan (what you decided before) and the live state (what has run so far). Answer with ONE JSON object:

{"calls": [{"_tool": "<tool>", "<arg>": "<value or $input.x / $state.x>", "_outputPath": "$state.<name>"}],
 "output": null}

- "calls" is the next plan: follow the current plan, extend it, or replace it when the state shows \
it no longer fits (a failure, a new constraint). Only calls that still need to run.
- Pass data by reference: "$input.<name>" for the input, "$state.<name>" for the state; a call that may \
fail can write "_outputPath": "$state.ok || $state.error".
- When the task is done, put the final answer in "output" (matching the output schema) and give no \
calls that are still needed; otherwise "output" is null.
"""


class AgentError(DagplanError):
    """The loop could not finish: turns exhausted (``max-turns``), or no valid plan (``planning-failed``)."""


@dataclass(frozen=True)
class Turn:
    number: int
    answer: str  # the model's answer, verbatim (the last one when repaired)
    plan: Plan | None  # what ran this turn (None: no calls)
    output: Any  # the final output when this turn ended the loop, else None
    state: Mapping[str, Any]  # the live state after this turn
    diagnostics: tuple[Diagnostic, ...] = ()  # what repairs were asked for this turn


@dataclass(frozen=True)
class AgentResult:
    output: Any
    state: Mapping[str, Any]
    turns: tuple[Turn, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0


RunPlan = Callable[[Plan], Awaitable[Mapping[str, Any]]]


@dataclass
class _Loop:
    model: str
    tools: Mapping[str, ToolSpec]
    completion_kwargs: Mapping[str, Any]
    memo: Memo | None
    budget: Budget | None
    spent: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0})

    async def ask(self, messages: list[dict], turn: int) -> str:
        key = memo_key("agent", f"turn-{turn}", self.model, messages)
        hit, record = self.memo.memo_get(key) if self.memo else (False, None)
        if not hit:
            if self.budget:
                self.budget.check("agent")
            record = await complete(self.model, messages, {"response_format": {"type": "json_object"}},
                                    self.completion_kwargs, "agent")
            if self.memo:
                self.memo.memo_put(key, record)
        usage = record.get("usage", {})
        for name in ("prompt_tokens", "completion_tokens"):
            self.spent[name] += usage.get(name, 0)
        self.spent["cost"] += record.get("cost", 0.0)
        if self.budget and not hit:
            self.budget.charge("agent", usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                               record.get("cost", 0.0))
        return record["message"].get("content") or ""


async def agent_loop(
    task_or_input: str | Mapping[str, Any],
    *,
    tools: Mapping[str, ToolSpec],
    model: str,
    run_plan: RunPlan,
    output_schema: Mapping[str, Any] | None = None,
    max_turns: int = 5,
    plan: str | None = None,
    state: Mapping[str, Any] | None = None,
    repair: int = 2,
    completion_kwargs: Mapping[str, Any] = {},
    memo: Memo | None = None,
    budget: Budget | None = None,
    checkpoint: Callable[[Turn], Any] | None = None,
    batch: Literal["group", "plan"] = "group",
) -> AgentResult:
    """Plan, run, re-plan from the live state until the model gives the final output.

    ``plan``: a current plan (text, any dialect) to start from. ``run_plan(plan)``
    executes a validated plan whose ``initial_state`` is the live state and returns
    the state after it (e.g. ``(await dagplan.arun(plan, tools=..., inputs=...)).state``).
    """
    loop = _Loop(model, tools, completion_kwargs, memo, budget)
    live, current, turns = dict(state or {}), plan, []
    for number in range(1, max_turns + 1):
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": _context(task_or_input, tools, current, live, output_schema)}]
        answer, solution, checked, diags = await _valid_turn(loop, messages, live, number, repair, output_schema)
        final = solution.get("output") is not None
        ran = None if checked is None else (checked.plan if final or batch == "plan" else first_batch(checked))
        if ran is not None:
            ran = replace(ran, initial_state=_thaw(ran.initial_state))
            live = dict(await run_plan(ran))
            current = json.dumps({"calls": solution.get("calls")}, ensure_ascii=False) if "calls" in solution else answer
        output = solution.get("output")
        turn = Turn(number, answer, ran, output, dict(live), diags)
        turns.append(turn)
        if checkpoint:
            checkpoint(turn)
        if output is not None:
            return AgentResult(output, live, tuple(turns), **loop.spent)
    raise AgentError(error("max-turns", f"no final output after {max_turns} turn(s)",
                           hint="raise max_turns, or give the model a narrower task"))


async def _valid_turn(loop: _Loop, messages: list[dict], live: dict, number: int, repair: int,
                      output_schema: Mapping[str, Any] | None):
    """One answer that parses, validates against the live state and the output schema (with repairs)."""
    asked: list[Diagnostic] = []
    for _ in range(repair + 1):
        answer = await loop.ask(messages, number)
        solution, checked, problems = _judge(answer, live, loop.tools, output_schema, number)
        if not problems:
            return answer, solution, checked, tuple(asked)
        asked += problems
        messages = messages + [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "That answer is not valid:\n\n" + repair_text(tuple(problems))
             + "\n\nAnswer again with the complete JSON object."},
        ]
    raise AgentError((error("planning-failed", f"turn {number}: no valid answer after {repair + 1} attempt(s)"),
                      *problems))


def _judge(answer: str, live: dict, tools: Mapping[str, ToolSpec], output_schema, number: int):
    """(solution, CheckResult of its plan or None, problems)."""
    solution = parse_json(answer)
    if solution is NOT_JSON or not isinstance(solution, (dict, list)):
        return {}, None, [error("json-syntax", "the answer is not a JSON object", hint='{"calls": [...], "output": ...}')]
    if isinstance(solution, list):
        solution = {"calls": solution, "output": None}
    problems = _output_problems(solution.get("output"), output_schema)
    if not _has_calls(solution):
        return solution, None, problems
    checked = _check_with_state(answer, live, tools, number)
    problems += [d for d in checked.diagnostics if d.severity == "error"]
    return solution, checked if not problems else None, problems


def first_batch(checked: Any) -> Plan:
    """The plan cut to its first parallel group: what runs before the model looks again."""
    group = set(checked.analysis.groups[0])
    steps = tuple(s for s in checked.plan.steps if s.id in group)
    return replace(checked.plan, steps=steps, result=None, declared_groups=None)


def _has_calls(solution: dict) -> bool:
    return bool(solution.get("calls") or solution.get("steps"))


def _check_with_state(answer: str, live: dict, tools: Mapping[str, ToolSpec], number: int):
    """Check the answer as a plan whose ``initial_state`` is the live state (earlier turns wrote it)."""
    from ..dsl import CheckResult, check_document
    from ..dsl.load import load_text

    name = f"agent-turn-{number}"
    try:
        document = load_text(answer, name)
    except DagplanError as exc:
        return CheckResult(name, None, None, exc.diagnostics, None)
    data = {k: v for k, v in document.data.items() if k != "x-output"}
    data["initial_state"] = {**live, **(data.get("initial_state") or {})}
    return check_document(replace(document, data=data), tools)


def _thaw(value: Any) -> Any:
    """Read-only mappings and tuples from the parser -> plain dicts and lists (the engine deep-copies state)."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value


def _output_problems(output: Any, schema: Mapping[str, Any] | None) -> list[Diagnostic]:
    if output is None or schema is None:
        return []
    import jsonschema

    found = sorted(jsonschema.Draft202012Validator(dict(schema)).iter_errors(output), key=lambda e: list(e.path))
    return [error("output-schema", f"output{''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}")
            for e in found]


def _context(task_or_input: Any, tools: Mapping[str, ToolSpec], current: str | None, live: dict,
             output_schema: Mapping[str, Any] | None) -> str:
    task = task_or_input if isinstance(task_or_input, str) else json.dumps(dict(task_or_input), ensure_ascii=False)
    parts = [f"Input: {task}", "", "Tools:", tool_catalog(tools), "",
             f"Current plan: {current if current else 'none yet'}", "",
             f"State: {json.dumps(live, ensure_ascii=False, default=str)}"]
    if output_schema is not None:
        parts += ["", f"Output schema: {json.dumps(dict(output_schema), ensure_ascii=False)}"]
    return "\n".join(parts)
