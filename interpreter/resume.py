"""Resuming a durable run: replay what completed, decide about what was interrupted, run the rest.

The plan comes from the run's artifact, never re-derived. Completed steps (and
handled failures) replay their recorded results at no cost; pending and failed
steps run; an interrupted step follows the resume policy for its purity
(``retry``, ``adopt`` as if it had completed with no output, or ``ask``).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping

from ..dsl.errors import RunError
from ..dsl.ir import Plan
from ..dsl.schedule import analyze
from .engine import Execution, Options, StepState
from .store import COMPLETED, FAILED, RunStore, prepare_resume, resume_plan

AskInterrupted = Callable[[str, str], str]  # (step id, purity) -> "retry" | "adopt" | "fail"


async def aresume(
    run_id: str,
    *,
    tools: Iterable[Any] | Mapping[str, Any] | None = None,
    from_step: str | None = None,
    state_dir: Any = None,
    approve: Callable | None = None,
    on_interrupted: AskInterrupted | None = None,
    subscribers: Iterable[Callable] = (),
    on_limit_exceeded: Callable | None = None,
    on_run_created: Callable[[str], None] | None = None,
    config: Any = None,
    max_concurrency: int | None = None,
    model: str | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
):
    from ..api import load
    from .config import load_config
    from .tools import registry

    cfg = config or load_config()
    registered = registry(tools)
    store = RunStore(state_dir or cfg.state_dir)
    run = store.open(run_id)
    if run.meta.get("kind") == "agent":
        raise RunError.make("agent-run", f"run {run.id} is an agent loop, not a plan run",
                            hint=f"resume it with dagplan.durable_agent_loop(run_id={run.id!r}, tools=..., run_plan=...)")
    plan = load(text=json.dumps(run.plan_doc), name=run.plan_name or run.id, tools=registered, config=cfg)
    analysis = analyze(plan)
    run = prepare_resume(store, run.id, from_step, list(analysis.order))
    run.acquire()
    try:
        if on_run_created:
            on_run_created(run.id)
        if from_step is not None:
            run.clear_from(from_step, list(analysis.order))
        decision = resume_plan(run.progress(), _with_purities(plan, registered), cfg.resume)
        if decision.policy == "discard":
            raise RunError.make("resume-discarded", f"the resume policy is `discard`: run {run.id} was not resumed",
                                hint=f"dagplan discard {run.id}, then start a new run")
        actions = {sid: _composite_action(plan, sid, action) for sid, action in decision.actions.items()}
        replay = _replay(run, actions, on_interrupted, _with_purities(plan, registered))
        run.append({"type": "plan_resumed", "run_id": run.id, "from": from_step, "replayed": sorted(replay)})
        options = Options.from_config(
            cfg, max_concurrency=max_concurrency, on_limit_exceeded=on_limit_exceeded, subscribers=subscribers,
            model=model, completion_kwargs=completion_kwargs, ask_gate=ask_gate, default_max_items=cfg.max_items,
            resume_policy=cfg.resume, on_interrupted=on_interrupted,
        )
        return await Execution(plan, analysis, registered, run.inputs, run.id, options, journal=run, replay=replay).run()
    finally:
        run.release()


def _composite_action(plan: Plan, step_id: str, action: str) -> str:
    """An interrupted fan-out, sub-plan, loop or gate runs again: its completed children replay and
    each interrupted child follows the policy for its own purity (interpreter.compose)."""
    step = plan.by_id.get(step_id)
    if action in ("adopt", "ask") and step is not None and (step.for_each is not None or step.kind in ("plan", "loop", "gate")):
        return "retry"
    return action


def _with_purities(plan: Plan, tools: Mapping[str, Any]) -> Any:
    """The plan as the resume analyzer sees it: each step's purity, falling back to its tool's."""
    steps = []
    for step in plan.steps:
        tool = tools.get(step.tool or "")
        steps.append(SimpleNamespace(id=step.id, purity=step.purity or (tool.purity if tool else None)))
    return SimpleNamespace(steps=steps)


def _replay(run: Any, actions: Mapping[str, str], ask: AskInterrupted | None, plan: Any) -> dict[str, StepState]:
    progress = run.progress()
    purity = {s.id: s.purity for s in plan.steps}
    replay: dict[str, StepState] = {}
    for step_id, action in actions.items():
        recorded = progress.steps.get(step_id)
        if action == "ask":
            action = ask(step_id, purity[step_id] or "undeclared") if ask else "fail"
        if action == "replay" and recorded is not None and recorded.status == COMPLETED:
            replay[step_id] = _recorded(recorded, "completed", recorded.output)
        elif recorded is not None and recorded.status == FAILED and recorded.handled:
            replay[step_id] = _recorded(recorded, "handled", dict(recorded.error or {}))
        elif action == "adopt":
            run.complete_step(step_id, None, attempts=recorded.attempts if recorded else 0, adopted=True)
            replay[step_id] = StepState(status="completed", output=None, attempts=recorded.attempts if recorded else 0)
        elif action == "fail":
            replay[step_id] = StepState(status="failed", output=f"(FAILED: Interrupted: step {step_id} was interrupted and not run again)",
                                        error={"step": step_id, "type": "Interrupted", "message": "interrupted; not run again"})
    return replay


def _recorded(recorded: Any, status: str, output: Any) -> StepState:
    alternative = int(recorded.fields.get("alternative", 0) or 0)
    return StepState(status=status, output=output, attempts=recorded.attempts, alternative=alternative,
                     error=recorded.error, usage=recorded.fields.get("usage"))
