"""Running composition steps: fan-out over lists, sub-plans, bounded loops, approval gates.

The engine hands a step here when it has ``for_each``, ``plan``, ``loop`` or ``gate``
(:func:`prepare` resolves what can be resolved before it starts, :func:`invoke` runs it).

Durability: every child is checkpointed like a step, with an id derived from its
parent's -- ``review[3]`` for a fan-out item, ``sub.fetch`` for a sub-plan's step,
``again[2].fetch`` for a loop iteration's step (all file-name safe) -- so a resumed
run replays completed children and runs only the rest.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..dsl.compose import is_refusal
from ..dsl.ir import Ref, Step, SubPlan
from .engine import Execution, StepFailure, StepState, Waiting
from .events import Event
from .values import MISSING, BadReference, Resolver, as_text, get_path
from .wal import COMPLETED, INTERRUPTED

PROGRESS = "plan_step_progress"
GATE_ANSWERED = "gate_answered"


# --- entry points (called by the engine) --------------------------------------------------------


def prepare(execution: Execution, step: Step) -> tuple:
    """Resolve the step's inputs; raises Dead (the step is skipped) like any step's arguments."""
    if step.for_each is not None:
        return ("compose", ("fan_out", execution.resolver.value(step.for_each.over)))
    if step.gate is not None:
        return ("compose", ("gate", execution.resolver.value(step.gate.question)))
    return ("compose", ("child", execution.resolver.value(step.args)))


async def invoke(execution: Execution, step: Step, call: tuple) -> Any:
    kind, value = call
    if kind == "fan_out":
        return await _fan_out(execution, step, value)
    if kind == "gate":
        return await _gate(execution, step, value)
    if step.loop is not None:
        return await _loop(execution, step, value, step.id)
    return await run_child(execution, step.plan, value, step.id)


# --- fan-out ------------------------------------------------------------------------------------


class _ItemResolver(Resolver):
    """Resolves ``†item`` / ``†index`` besides everything the run's resolver knows."""

    def __init__(self, base: Resolver, item: Any, index: int):
        super().__init__(base.inputs, base.state, base.placeholder_text)
        self.item, self.index = item, index

    def ref(self, ref: Ref) -> Any:
        if ref.root == "index":
            return self.index
        if ref.root != "item":
            return super().ref(ref)
        found = get_path(self.item, ref.path)
        if found is MISSING:
            raise BadReference(f"{ref} is not in item {self.index}")
        return found


async def _fan_out(execution: Execution, step: Step, items: Any) -> list:
    spec = step.for_each
    if not isinstance(items, (list, tuple)):
        raise StepFailure(f"for_each needs a list, but {spec.over} is {type(items).__name__}")
    cap = spec.max_items or execution.options.default_max_items
    if cap is not None and len(items) > cap:
        raise StepFailure(f"for_each got {len(items)} items, more than max_items ({cap}); nothing was run")
    recorded, interrupted = _recorded_children(execution)
    limit = asyncio.Semaphore(spec.max_concurrency or max(1, execution.options.max_concurrency))
    results: list[Any] = [None] * len(items)
    done = 0

    async def one(index: int, item: Any) -> None:
        nonlocal done
        child_id = f"{_full_id(execution, step.id)}[{index}]"
        found = recorded.get(child_id, MISSING)
        if found is MISSING and child_id in interrupted:
            found = _after_interruption(execution, step, child_id)
        if found is not MISSING:
            results[index] = found
        else:
            async with limit:
                results[index] = await _run_item(execution, step, index, item, child_id)
        done += 1
        _progress(execution, step, item=index + 1, done=done, total=len(items), replayed=found is not MISSING)

    await _gather_all([one(i, item) for i, item in enumerate(items)])
    return results


async def _run_item(execution: Execution, step: Step, index: int, item: Any, child_id: str) -> Any:
    resolver = _ItemResolver(execution.resolver, item, index)
    if execution.journal is not None and _purity(execution, step) == "side_effect":
        execution.journal.append({"type": "plan_step_started", "step": child_id, "item": index})
        await execution.journal.commit()  # the intent is durable before the side effect starts
    try:
        value = await _with_retries(step, lambda: _call_item(execution, step, resolver, index))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the item's failure, handled by the failure policy
        if execution.plan.on_failure == "abort":
            raise StepFailure(f"item {index + 1} failed: {_message(exc)}") from exc
        _emit(execution, "plan_step_failed", child_id, error={"step": child_id, "type": type(exc).__name__,
                                                             "message": _message(exc)})
        execution.child_failures += 1  # the run reports had_errors
        return f"(FAILED: {type(exc).__name__}: {_message(exc)})"
    if execution.journal is not None:
        execution.journal.complete_step(child_id, value, item=index)
        await execution.journal.commit()  # durable before the next resume would need it
    return value


async def _call_item(execution: Execution, step: Step, resolver: Resolver, index: int) -> Any:
    if step.llm is not None:
        prompt = resolver.value(step.llm.prompt)
        system = resolver.value(step.llm.system) if step.llm.system else None
        from . import llm_step

        return await llm_step.invoke(execution, step, prompt, system)  # the memo key holds the prompt
    if step.plan is not None:
        return await run_child(execution, step.plan, resolver.value(step.args), f"{step.id}[{index}]")
    return await execution._invoke(step, ("tool", resolver.value(step.args)))


async def _with_retries(step: Step, attempt) -> Any:
    """The step's retry policy, per item (transient errors only, exponential backoff with jitter)."""
    from .engine import TRANSIENT

    tries = 0
    while True:
        tries += 1
        try:
            if step.timeout is None:
                return await attempt()
            async with asyncio.timeout(step.timeout):
                return await attempt()
        except TRANSIENT:
            if tries > step.retry.limit:
                raise
            delay = min(step.retry.max_backoff, step.retry.backoff * 2 ** (tries - 1))
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))


async def _gather_all(coros: list) -> None:
    """Run all; the first exception cancels the others (and is raised)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# --- sub-plans and loops --------------------------------------------------------------------------


async def run_child(execution: Execution, sub: SubPlan, inputs: Any, prefix: str) -> Any:
    """Run a sub-plan as part of this run; its steps are checkpointed as ``prefix.step``."""
    from .inputs import prepare_inputs

    if sub.plan is None:
        raise StepFailure(f"sub-plan {sub.path or 'inline'} was not loaded")
    if not isinstance(inputs, Mapping):
        raise StepFailure(f"a sub-plan's input must be an object, not {type(inputs).__name__}")
    try:
        values = prepare_inputs(sub.plan, inputs)
    except Exception as exc:  # noqa: BLE001 - a RunError listing every bad input
        raise StepFailure(f"sub-plan {sub.path or 'inline'}: {_message(exc)}") from exc
    full = _full_id(execution, prefix)
    journal = _ChildJournal(execution.journal, full) if execution.journal is not None else None
    options = replace(execution.options, subscribers=[_prefixed(s, full) for s in execution.options.subscribers])
    analysis = sub.analysis
    if analysis is None:
        from ..dsl.schedule import analyze

        analysis = analyze(sub.plan)
    child = Execution(sub.plan, analysis, execution.tools, values, execution.run_id, options, journal=journal,
                      replay=_child_replay(execution, full, sub.plan))
    result = await child.run()
    if result.status == "waiting":
        raise Waiting({**child.waiting[0]})
    if result.status != "completed":
        raise StepFailure(f"sub-plan {sub.path or 'inline'} {result.status}: {result.message or 'a step failed'}")
    return result.result


async def _loop(execution: Execution, step: Step, first: Any, prefix: str) -> Any:
    loop = step.loop
    current = first
    for i in range(loop.max_iterations):
        _progress(execution, step, iteration=i + 1, total=loop.max_iterations)
        result = await run_child(execution, loop.child, current, f"{prefix}[{i}]")
        if loop.until is not None and _holds(loop.until, result):
            return result
        current = result
    if loop.until is None:
        return current
    raise StepFailure(f"loop reached max_iterations ({loop.max_iterations}) before {_until_text(loop.until)} held")


def _holds(until: Any, result: Any) -> bool:
    refs = until.options if hasattr(until, "options") else (until,)
    return any(bool(v) for v in (get_path(result, r.path) for r in refs) if v is not MISSING)


def _until_text(until: Any) -> str:
    return str(until).replace("\u2020state", "\u2020result")


class _ChildJournal:
    """The run's journal as a child execution sees it: step ids prefixed, lifecycle events renamed."""

    def __init__(self, run: Any, prefix: str):
        self.run, self.prefix = run, prefix

    def full_id(self, step_id: str) -> str:
        return f"{self.prefix}.{step_id}"

    def append(self, event: dict) -> dict:
        event = dict(event)
        if event.get("step") is not None:
            event["step"] = self.full_id(event["step"])
        elif str(event.get("type", "")).startswith("plan_"):
            event["type"] = "child_" + event["type"]  # never the run's own lifecycle
            event["child"] = self.prefix
        return self.run.append(event)

    def complete_step(self, step_id: str, output: Any, **fields: Any) -> dict:
        return self.run.complete_step(self.full_id(step_id), output, **fields)

    def memo_for(self, step_id: str) -> Any:
        return self.run.memo_for(self.full_id(step_id))

    def progress(self) -> Any:
        return self.run.progress()

    def events(self, types: set[str] | None = None) -> Any:
        return self.run.events(types)

    async def commit(self) -> None:
        await self.run.commit()

    def commit_sync(self) -> None:
        self.run.commit_sync()


def _prefixed(subscriber: Any, prefix: str) -> Any:
    def relay(event: Event) -> None:
        if event.step is not None:
            subscriber(replace(event, step=f"{prefix}.{event.step}"))
        elif event.type == PROGRESS:
            subscriber(event)

    return relay


def _child_replay(execution: Execution, prefix: str, plan: Any) -> dict[str, StepState]:
    if execution.journal is None:
        return {}
    steps = execution.journal.progress().steps
    replay = {}
    for child in plan.steps:
        full = f"{prefix}.{child.id}"
        found = steps.get(full)
        if found is not None and found.status == COMPLETED:
            replay[child.id] = StepState(status="completed", output=found.output, attempts=found.attempts,
                                         alternative=int(found.fields.get("alternative", 0) or 0))
        elif found is not None and found.status == INTERRUPTED and _purity(execution, child) == "side_effect":
            action = _interrupted_action(execution, child, full)
            if action == "adopt":
                execution.journal.complete_step(full, None, adopted=True)
                replay[child.id] = StepState(status="completed", output=None, attempts=found.attempts)
            elif action == "fail":
                replay[child.id] = StepState(
                    status="failed", output=f"(FAILED: Interrupted: step {full} was interrupted and not run again)",
                    error={"step": full, "type": "Interrupted", "message": "interrupted; not run again"})
    return replay


def _recorded_children(execution: Execution) -> tuple[dict[str, Any], set[str]]:
    """Children already in the log (a resumed run): completed ones (id -> output), interrupted ids."""
    if execution.journal is None:
        return {}, set()
    steps = execution.journal.progress().steps
    done = {sid: s.output for sid, s in steps.items() if "[" in sid and s.status == COMPLETED}
    return done, {sid for sid, s in steps.items() if "[" in sid and s.status == INTERRUPTED}


def _purity(execution: Execution, step: Step) -> str | None:
    tool = execution.tools.get(step.tool or "")
    return step.purity or (tool.purity if tool is not None else None)


def _interrupted_action(execution: Execution, step: Step, child_id: str) -> str:
    """What to do with a child whose side effect may have happened before a crash (seed 000):
    the resume policy for its purity; ``ask`` asks the resume's ``on_interrupted`` (no one to
    ask: ``fail`` -- never repeated silently)."""
    purity = _purity(execution, step) or "undeclared"
    action = (execution.options.resume_policy or {}).get(purity, "retry")
    if action == "ask":
        ask = execution.options.on_interrupted
        action = ask(child_id, purity) if ask is not None else "fail"
    return action


def _after_interruption(execution: Execution, step: Step, child_id: str) -> Any:
    """An interrupted item: MISSING (run it again), None (adopted) or its failure text."""
    action = _interrupted_action(execution, step, child_id)
    if action == "retry":
        return MISSING
    if action == "adopt":
        if execution.journal is not None:
            execution.journal.complete_step(child_id, None, adopted=True)
        return None
    return f"(FAILED: Interrupted: item {child_id} was interrupted and not run again)"


def _full_id(execution: Execution, step_id: str) -> str:
    full = getattr(execution.journal, "full_id", None)
    return full(step_id) if full is not None else step_id


# --- approval gates -------------------------------------------------------------------------------


async def _gate(execution: Execution, step: Step, question: str) -> Any:
    gate = step.gate
    full = _full_id(execution, step.id)
    request = {"step": full, "question": question, "choices": list(gate.choices) if gate.choices else None,
               "schema": dict(gate.schema) if gate.schema else None}
    found, answer = _recorded_answer(execution, full)
    if not found:
        ask = execution.options.ask_gate
        if ask is None:
            raise Waiting(request)
        answer = ask(request)
        if asyncio.iscoroutine(answer):
            answer = await answer
        if execution.journal is not None:  # a resumed run must not ask again
            _root(execution.journal).append({"type": GATE_ANSWERED, "step": full, "value": answer})
    return check_answer(request, answer)


def check_answer(request: Mapping[str, Any], answer: Any) -> Any:
    """The answer as the step's output; a refusal or an answer outside the choices/schema fails."""
    problem = answer_problem(request, answer)
    if problem:
        raise StepFailure(problem)
    if is_refusal(answer):
        raise StepFailure(f"refused by a person ({answer})")
    return answer


def answer_problem(request: Mapping[str, Any], answer: Any) -> str | None:
    """Why ``answer`` is not acceptable for the gate (not one of its choices, or off its schema)."""
    choices = request.get("choices")
    if choices and answer not in choices:
        return f"{answer!r} is not one of {', '.join(map(str, choices))}"
    if request.get("schema"):
        from jsonschema import Draft202012Validator

        errors = [e.message for e in Draft202012Validator(request["schema"]).iter_errors(answer)]
        if errors:
            return f"the answer does not match the gate's schema: {errors[0]}"
    return None


def waiting_requests(run: Any) -> list[dict]:
    """What a waiting run waits for: the gates of its last ``plan_waiting`` event."""
    found: list[dict] = []
    for event in run.events({"plan_waiting", "plan_resumed"}):
        found = list(event.get("waiting") or []) if event["type"] == "plan_waiting" else []
    return found


def record_answer(run: Any, step_id: str, answer: Any) -> None:
    """Durably record a gate's answer (the run must be acquired); resume then uses it."""
    run.append({"type": GATE_ANSWERED, "step": step_id, "value": answer})
    run.commit_sync()


def _root(journal: Any) -> Any:
    while isinstance(journal, _ChildJournal):
        journal = journal.run
    return journal


def _recorded_answer(execution: Execution, step_id: str) -> tuple[bool, Any]:
    journal = execution.journal
    if journal is None:
        return False, None
    found, value = False, None
    for event in journal.events({GATE_ANSWERED}):
        if event.get("step") == step_id:
            found, value = True, event.get("value")
    return found, value


# --- events ---------------------------------------------------------------------------------------


def _progress(execution: Execution, step: Step, **data: Any) -> None:
    """``item 7/12`` / ``iteration 3/10``: to subscribers only (completions are what the log keeps)."""
    execution._emit_only(PROGRESS, _full_id(execution, step.id), **data)


def _emit(execution: Execution, type_: str, step_id: str, **data: Any) -> None:
    execution._emit_only(type_, step_id, **data)


def _message(exc: BaseException) -> str:
    headline = getattr(exc, "headline", None)
    if headline is not None:
        return headline.message
    return str(exc) or type(exc).__name__


__all__ = ["prepare", "invoke", "run_child", "check_answer", "PROGRESS", "GATE_ANSWERED", "as_text"]
