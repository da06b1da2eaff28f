"""Steps started while the model is still writing the plan (LLMCompiler's task fetching), only when safe.

The planner hands :meth:`EarlyStarts.offer` each prefix of the plan that passed ``check`` (the steps whose
text is complete, checked against the catalog and the steps before them). A step of it starts at once when
nothing it could do needs the whole plan or a person (:func:`dsl.ir.starts_early`, the rule ``preview``
shows too): it calls a tool that is ``pure`` or ``idempotent``, it is no fan-out, has no ``when:``, is no
gate or model step, and every step it depends on started early too (it never reads what a side effect
wrote).

Everything else -- a side effect, a gate, a model step, and whatever depends on them -- waits for the whole
plan to pass ``check`` (and a lazy plan for its approval), and runs in the run proper. Each early step runs
in a small run of its own (itself and the early steps it depends on, those taken back by fingerprint), and
its result is kept by fingerprint (:mod:`.reuse`): the run proper, and a repaired plan, take it from there
instead of calling again. With ``record``, each result is also made durable in the run's journal first, so a
run killed mid-stream keeps what completed (``resume`` takes it back the same way).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any, Awaitable, Callable, Mapping

from ...dsl.ir import Plan, Step, starts_early
from ...dsl.schedule import analysis_of
from ..core.vocabulary import EARLY, EventType, StepStatus
from .execution import Execution
from .reuse import Reuse, recorded_of
from .scope import Options, RunScope


class EarlyStarts:
    """Starts the safe steps of a plan still being written; :meth:`settle` waits for those started."""

    def __init__(
        self,
        run_id: str,
        tools: Mapping[str, Any],
        options: Options,
        reuse: Reuse,
        inputs: Mapping[str, Any] | None = None,
        record: Callable[[str, str, Mapping[str, Any]], None] | None = None,
        commit: Callable[[], Awaitable[None]] | None = None,
        on_event: Callable[[Any], None] | None = None,
    ):
        self.run_id, self.tools, self.reuse, self.inputs = run_id, tools, reuse, dict(inputs or {})
        self.options = replace(options, reuse=reuse, subscribers=[self._completed], person_gates=True)
        self.record, self.commit, self.on_event = record, commit, on_event
        self.tasks: dict[str, asyncio.Task] = {}  # step id -> its early run (this attempt's plan)
        self.started: list[str] = []  # every step started early, in order
        self._attempt = 0
        self._all: list[asyncio.Task] = []  # every early run of every attempt (settle waits for them all)

    # --- what the planner calls -----------------------------------------------------------

    def offer(self, plan: Plan, complete: int, attempt: int = 1) -> None:
        """A prefix of the plan that passed check; its first ``complete`` steps' text is complete."""
        if attempt != self._attempt:  # a repair is another plan: its steps are judged afresh (results are kept)
            self._attempt, self.tasks = attempt, {}
        analysis = analysis_of(plan)
        for step in plan.steps[:complete]:
            if step.id in self.tasks or not self.safe(step, analysis.deps[step.id]):
                continue
            self.started.append(step.id)
            self.tasks[step.id] = task = asyncio.get_running_loop().create_task(self._run(plan, step))
            self._all.append(task)
            if self.on_event is not None:
                self.on_event({"type": "started_early", "step": step.id, "tool": step.tool, "attempt": attempt})

    def safe(self, step: Step, deps: Any) -> bool:
        """Whether a step may start before the plan is whole (see the module doc)."""
        return starts_early(step, self.tools) and all(dep in self.tasks for dep in deps)

    async def settle(self) -> None:
        """Wait for every early run (a result still coming is taken, never asked for twice)."""
        running = [task for task in self._all if not task.done()]
        if running:
            await asyncio.gather(*running, return_exceptions=True)

    async def cancel(self) -> None:
        for task in self._all:
            task.cancel()
        await asyncio.gather(*self._all, return_exceptions=True)

    # --- one early step --------------------------------------------------------------------

    async def _run(self, plan: Plan, step: Step) -> bool:
        """Run ``step`` with the early steps it depends on (taken back by fingerprint); True if it completed."""
        deps = analysis_of(plan).deps[step.id]
        waited = await asyncio.gather(*(self.tasks[d] for d in deps if d in self.tasks), return_exceptions=True)
        if not all(ok is True for ok in waited):
            return False  # an upstream step failed or was replaced: the run proper decides
        sub = _closure(plan, step)
        if sub is None or not all(starts_early(s, self.tools) for s in sub.steps):
            return False  # (never: offer() starts only safe steps on safe steps; checked again all the same)
        from .inputs import prepare_inputs

        try:
            values = prepare_inputs(sub, self.inputs)
        except Exception:  # noqa: BLE001 - inputs the whole plan will check and report
            return False
        scope = RunScope(self.run_id, self.tools, self.options)
        try:
            result = await Execution(sub, values, scope).run()
        finally:
            scope.close()
        if self.commit is not None:
            await self.commit()  # durable before the run proper (or a resume) takes it
        report = result.steps.get(step.id)
        return report is not None and report.status is StepStatus.COMPLETED

    def _completed(self, event: Any) -> None:
        """An early run's completion: kept by fingerprint (and made durable first when recorded)."""
        if self.on_event is not None and event.type in (EventType.STEP_COMPLETED, EventType.STEP_FAILED):
            self.on_event({"type": "early_" + ("done" if event.type is EventType.STEP_COMPLETED else "failed"),
                           "step": event.step, "reused": event.data.get("reused")})  # fmt: skip
        if event.type is not EventType.STEP_COMPLETED or event.data.get("reused"):
            return
        fp = event.data.get("fingerprint")
        if not fp:
            return
        value = {"output": event.data.get("output"), "alternative": event.data.get("alternative", 0),
                 "attempts": event.data.get("attempts", 1), "unit": event.step}  # fmt: skip
        if self.record is not None:
            self.record(fp, event.step or "", value)
        self.reuse.add(fp, EARLY, event.step or "", recorded_of(value))


def _closure(plan: Plan, step: Step) -> Plan | None:
    """The plan of ``step`` and every step it depends on (transitively), checked as a plan of its own."""
    from ...dsl import check

    deps = analysis_of(plan).deps
    wanted, todo = {step.id}, [step.id]
    while todo:
        for dep in deps[todo.pop()]:
            if dep not in wanted:
                wanted.add(dep)
                todo.append(dep)
    document = plan.document if isinstance(plan.document, Mapping) else None
    if document is None:
        return None
    steps = [s for s in document.get("steps") or () if isinstance(s, Mapping) and s.get("id") in wanted]
    sub = {k: document[k] for k in ("inputs", "initial_state") if k in document}
    checked = check(text=json.dumps({**sub, "steps": steps}, default=_plain), name=f"{plan.source}#early")
    return checked.plan if checked.ok else None


def _plain(value: Any) -> Any:
    return dict(value) if hasattr(value, "keys") else list(value)
