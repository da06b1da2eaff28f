"""The agent loop: the plan as an evolving strategy (seed 004).

Each turn the model receives the input, the tool catalog, the current plan and
the live state, and answers with the seed's solution shape::

    {"calls": [{"_tool": ..., <args>, "_outputPath": ...}, ...], "output": <final output or null>}

(any plan dialect is accepted in place of ``calls``: a canonical ``steps`` plan too).
A new plan is validated (the state so far counts as written; errors go back to the
model, ``repair`` times per turn) before anything runs; then its first batch (the
first parallel group; ``batch="plan"`` runs it whole) goes to ``run_plan``, which
returns the new state, and the model sees the result in the next turn. A non-null
``output`` (validated against ``output_schema``) ends the loop once its calls, if any,
have run. Bounded by ``max_turns``; every turn is handed to ``checkpoint`` and every
model call goes through ``memo``.

Durable mode (``run=``, or :func:`durable_agent_loop` which owns the run): every
model call goes through the run's memo (committed before the next one is paid
for) and every turn is appended to the run's log as an ``agent_turn`` event and
committed. Resuming the run replays its completed turns: their model calls come
from the memo and their state from the log (``run_plan`` is not called again), so
only the interrupted turn runs again (its completed model calls replayed too).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Literal, Mapping

from ...dsl.errors import DagplanError, Diagnostic, error
from ...dsl.ir import Plan, ToolSpec
from ..stores.journal import Journal, Registry, StepMemo, json_copy
from ..stores.registry import open_registry
from .conversation import NOT_JSON, Budget, Memo, complete, memo_key, parse_json, recall
from .planner import repair_text, tool_catalog
from ..core.values import thaw
from ..core.vocabulary import Event, EventType, RunStatus

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
    replayed: bool = False  # a completed turn of a resumed run: its state came from the log


@dataclass(frozen=True)
class AgentResult:
    output: Any
    state: Mapping[str, Any]
    turns: tuple[Turn, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    run_id: str | None = None  # the durable run, in durable mode


RunPlan = Callable[[Plan], Awaitable[Mapping[str, Any]]]


@dataclass
class _Loop:
    model: str
    tools: Mapping[str, ToolSpec]
    completion_kwargs: Mapping[str, Any]
    memo: Memo | None
    budget: Budget | None
    spent: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0})
    output_schema: Mapping[str, Any] | None = None
    structured_output: str = "auto"

    def params(self, live: Mapping[str, Any], inputs: bool) -> dict[str, Any]:
        """The answer held to the turn's shape for this catalog (:func:`.constrained.agent_schema`; for the
        local model, reads are the live state's paths), in the form the provider takes; else JSON mode."""
        from .constrained import agent_schema, response_params
        from .local import is_local

        small = dict(live) if is_local(self.model) else None
        schema = agent_schema(self.tools, self.output_schema, live=small, inputs=inputs)
        held = response_params(schema, self.model, self.structured_output, "turn")
        return held or {"response_format": {"type": "json_object"}}

    async def ask(self, messages: list[dict], turn: int, params: Mapping[str, Any] | None = None) -> str:
        key = memo_key("agent", f"turn-{turn}", self.model, messages)
        hit, record = recall(self.memo, key)
        if not hit:
            if self.budget:
                self.budget.check("agent")
            record = await complete(self.model, messages, params or {}, self.completion_kwargs, "agent")
            if self.memo:
                self.memo.memo_put(key, record)
                commit = getattr(self.memo, "commit", None)
                if commit is not None:  # durable before the next call is paid for
                    await commit()
        usage = record.get("usage", {})
        for name in ("prompt_tokens", "completion_tokens"):
            self.spent[name] += usage.get(name, 0)
        self.spent["cost"] += record.get("cost", 0.0)
        if self.budget and not hit:
            self.budget.charge(
                "agent", usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), record.get("cost", 0.0)
            )
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
    run: Journal | None = None,
) -> AgentResult:
    """Plan, run, re-plan from the live state until the model gives the final output.

    ``plan``: a current plan (text, any dialect) to start from. ``run_plan(plan)``
    executes a validated plan whose ``initial_state`` is the live state and returns
    the state after it (e.g. ``(await dagplan.arun(plan, tools=..., inputs=...)).state``).
    ``run``: a store run acquired by the caller (durable mode, see the module doc);
    ``memo`` defaults to its memo.
    """
    if run is not None and memo is None:
        memo = StepMemo(run, "agent")
    recorded = recorded_turns(run) if run is not None else {}
    loop = _Loop(model, tools, completion_kwargs, memo, budget, output_schema=output_schema)
    live, current, turns = dict(state or {}), plan, []
    for number in range(1, max_turns + 1):
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": _context(task_or_input, tools, current, live, output_schema)},
        ]
        params = loop.params(live, inputs=isinstance(task_or_input, Mapping))
        answer, solution, checked, diags = await _valid_turn(loop, messages, live, number, repair, output_schema,
                                                             params)  # fmt: skip
        final = solution.get("output") is not None
        ran = None if checked is None else (checked.plan if final or batch == "plan" else first_batch(checked))
        done = recorded.get(number)
        if done is not None:  # completed before the interruption: its tools ran, its state is in the log
            live = _replayed_state(done, answer, number)
        if ran is not None:
            ran = replace(ran, initial_state=thaw(ran.initial_state))
            if done is None:
                live = dict(await run_plan(ran))
            current = (
                json.dumps({"calls": solution.get("calls")}, ensure_ascii=False) if "calls" in solution else answer
            )
        output = solution.get("output")
        turn = Turn(number, answer, ran, output, dict(live), diags, replayed=done is not None)
        turns.append(turn)
        if run is not None and done is None:
            run.record(Event(EventType.AGENT_TURN, run.id, data=turn_data(turn, checked)))
            await run.commit()
        if checkpoint:
            checkpoint(turn)
        if output is not None:
            return AgentResult(output, live, tuple(turns), **loop.spent, run_id=run.id if run is not None else None)
    raise AgentError(
        error(
            "max-turns",
            f"no final output after {max_turns} turn(s)",
            hint="raise max_turns, or give the model a narrower task",
        )
    )


async def _valid_turn(
    loop: _Loop,
    messages: list[dict],
    live: dict,
    number: int,
    repair: int,
    output_schema: Mapping[str, Any] | None,
    params: Mapping[str, Any] | None = None,
):
    """One answer that parses, validates against the live state and the output schema (with repairs)."""
    asked: list[Diagnostic] = []
    for _ in range(repair + 1):
        answer = await loop.ask(messages, number, params)
        solution, checked, problems = _judge(answer, live, loop.tools, output_schema, number)
        if not problems:
            return answer, solution, checked, tuple(asked)
        asked += problems
        messages = messages + [
            {"role": "assistant", "content": answer},
            {
                "role": "user",
                "content": "That answer is not valid:\n\n"
                + repair_text(tuple(problems))
                + "\n\nAnswer again with the complete JSON object.",
            },
        ]
    first = sorted(problems, key=Diagnostic.sort_key)[0] if problems else None
    why = f": the last one: {first.code}: {first.message}" if first is not None else ""
    raise AgentError(  # the headline says why (a durable run keeps only the headline as its reason)
        (error("planning-failed", f"turn {number}: no valid answer after {repair + 1} attempt(s){why}"), *problems)
    )


def _judge(answer: str, live: dict, tools: Mapping[str, ToolSpec], output_schema, number: int):
    """(solution, CheckResult of its plan or None, problems)."""
    solution = parse_json(answer)
    if solution is NOT_JSON or not isinstance(solution, (dict, list)):
        return (
            {},
            None,
            [error("json-syntax", "the answer is not a JSON object", hint='{"calls": [...], "output": ...}')],
        )
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
    from ...dsl import CheckResult, check_document
    from ...dsl.load import load_text

    name = f"agent-turn-{number}"
    try:
        document = load_text(answer, name)
    except DagplanError as exc:
        return CheckResult(name, None, None, exc.diagnostics, None)
    data = {k: v for k, v in document.data.items() if k != "x-output"}
    data["initial_state"] = {**live, **(data.get("initial_state") or {})}
    return check_document(replace(document, data=data), tools)


def _output_problems(output: Any, schema: Mapping[str, Any] | None) -> list[Diagnostic]:
    if output is None or schema is None:
        return []
    import jsonschema

    found = sorted(jsonschema.Draft202012Validator(dict(schema)).iter_errors(output), key=lambda e: list(e.path))
    return [error("output-schema", f"output{''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}") for e in found]


def _context(
    task_or_input: Any,
    tools: Mapping[str, ToolSpec],
    current: str | None,
    live: dict,
    output_schema: Mapping[str, Any] | None,
) -> str:
    task = task_or_input if isinstance(task_or_input, str) else json.dumps(dict(task_or_input), ensure_ascii=False)
    parts = [
        f"Input: {task}",
        "",
        "Tools:",
        tool_catalog(tools),
        "",
        f"Current plan: {current if current else 'none yet'}",
        "",
        f"State: {json.dumps(live, ensure_ascii=False, default=str)}",
    ]
    if output_schema is not None:
        parts += ["", f"Output schema: {json.dumps(dict(output_schema), ensure_ascii=False)}"]
    return "\n".join(parts)


# --- durable mode ---------------------------------------------------------------------------


def recorded_turns(run: Journal) -> dict[int, Mapping[str, Any]]:
    """The turns a run completed before, by number (the last record of a number wins)."""
    return {int(e.data["turn"]): e.data for e in run.events({EventType.AGENT_TURN})}


def turn_data(turn: Turn, checked: Any) -> dict:
    """What the log keeps of a turn: enough to replay it without its tools, and to audit it."""
    return {
        "turn": turn.number,
        "answer": turn.answer,
        "plan": _plan_data(checked, turn.plan),
        "state": thaw(turn.state),
        "output": turn.output,
        "diagnostics": [{"code": d.code, "message": d.message} for d in turn.diagnostics],
    }


def _plan_data(checked: Any, ran: Plan | None) -> dict | None:
    """The canonical document of what ran this turn (its batch), without the live state."""
    if ran is None or checked is None or checked.document is None:
        return None
    data = dict(checked.document.data)
    data.pop("initial_state", None)
    ids = {s.id for s in ran.steps}
    steps = [s for s in data.get("steps") or [] if isinstance(s, Mapping) and s.get("id") in ids]
    if len(steps) != len(data.get("steps") or []):  # a cut batch: the plan's result is not its
        data.pop("result", None)
        data.pop("parallel_groups", None)
    return thaw({**data, "steps": steps})


def _replayed_state(done: Mapping[str, Any], answer: str, number: int) -> dict:
    if done.get("answer") != answer:
        raise AgentError(
            error(
                "agent-replay-mismatch",
                f"turn {number}: the model's answer differs from the one the run recorded",
                hint="resume with the task, tools, model and starting plan the run began with, or start a new run",
            )
        )
    return dict(done.get("state") or {})


async def durable_agent_loop(
    task_or_input: str | Mapping[str, Any] | None = None,
    *,
    tools: Mapping[str, ToolSpec],
    run_plan: RunPlan,
    model: str | None = None,
    run_id: str | None = None,
    state_dir: str | os.PathLike | None = None,
    store: Registry | None = None,
    output_schema: Mapping[str, Any] | None = None,
    plan: str | None = None,
    state: Mapping[str, Any] | None = None,
    on_run_created: Callable[[str], Any] | None = None,
    **options: Any,
) -> AgentResult:
    """:func:`agent_loop` in a durable run of the store (``state_dir``, default ``$DAGPLAN_STATE_DIR``).

    Without ``run_id`` a new run is created (``on_run_created(run_id)`` is called
    once it exists); with one, that run is resumed: what shapes the prompts (task,
    model, output schema, starting plan and state) is taken from the run when not
    given, and must match it when given. ``options`` go to :func:`agent_loop`
    (``max_turns``, ``repair``, ``completion_kwargs``, ``budget``, ``checkpoint``, ``batch``).
    """
    store = store or open_registry(state_dir)
    given = {"task": task_or_input, "model": model, "output_schema": output_schema, "plan": plan, "state": state}
    if run_id is None:
        run, args = _new_agent_run(store, given)
    else:
        run = store.open(run_id)
        args = _resumed_args(run, given)
    run.acquire()
    try:
        if on_run_created:
            on_run_created(run.id)
        run.record(Event(EventType.PLAN_RESUMED if run_id else EventType.PLAN_STARTED, run.id))
        try:
            result = await agent_loop(
                args["task"],
                tools=tools,
                model=args["model"],
                run_plan=run_plan,
                output_schema=args["output_schema"],
                plan=args["plan"],
                state=args["state"],
                run=run,
                **options,
            )
        except AgentError as exc:
            run.record(
                Event(
                    EventType.PLAN_COMPLETED,
                    run.id,
                    data={"status": RunStatus.FAILED, "error": {"code": exc.code, "message": str(exc)}},
                )
            )
            raise
        run.record(
            Event(EventType.PLAN_COMPLETED, run.id, data={"status": RunStatus.COMPLETED, "output": result.output})
        )
        return result
    finally:
        run.release()  # commits what was appended


def _new_agent_run(store: Registry, given: dict) -> tuple[Journal, dict]:
    if given["task"] is None or not given["model"]:
        raise AgentError(error("agent-args", "a new agent run needs a task and a model"))
    args = {k: _jsonable(v) for k, v in given.items()}  # the first run prompts with what a resume reads back
    run = store.create(
        plan_doc={"steps": []},
        plan_name="agent",
        inputs={"task": args["task"]},
        meta={"kind": "agent", **{k: v for k, v in args.items() if k != "task"}},
    )
    return run, args


def _resumed_args(run: Journal, given: dict) -> dict:
    """The run's recorded arguments; a given one must equal the recorded one (else the memo would miss)."""
    from ...dsl.errors import RunError

    if run.meta.get("kind") != "agent":
        raise RunError.make(
            "not-an-agent-run", f"run {run.id} is not an agent run", hint=f"resume it with: dagplan resume {run.id}"
        )
    recorded = {**{k: run.meta.get(k) for k in given if k != "task"}, "task": run.inputs.get("task")}
    for name, value in given.items():
        if value is not None and _jsonable(value) != recorded[name]:
            raise RunError.make(
                "agent-run-mismatch",
                f"run {run.id} was started with another {name}",
                hint="leave it out to use the run's own, or start a new run",
            )
    return recorded


def _jsonable(value: Any) -> Any:
    """The value as the log reads it back (JSON round trip), so a resume compares like with like."""
    return None if value is None else json_copy(thaw(value))
