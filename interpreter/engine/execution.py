"""The engine: runs a valid plan with as much concurrency as its graph allows.

A ready-set scheduler (graphlib's protocol, by hand for speed): every step waits on a
counter of unsettled dependencies; when it reaches zero the step's runner resolves what
it needs (:mod:`.runners`) and it either starts, or is skipped (a branch not taken, a
failed dependency under ``skip_dependents``). Settling a step releases its dependents.

:class:`Execution` is that scheduler; the life of each unit of work -- a step, a fan-out
item, a loop iteration, a sub-plan's step (a step of a child :class:`Execution` sharing the
run's :class:`~.scope.RunScope`) -- is :class:`~.lifecycle.UnitLife`, written once: replayed
when the journal has its result, else started, tried under the attempt policy and settled
with one event that feeds the journal and the subscribers. With a journal, every
completion is committed before any dependent starts; completions that land together
share one commit.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Coroutine, Mapping
from typing import Any, Awaitable, Callable

from ...dsl import no_gc_pauses
from ...dsl.condition import guard_reads_item
from ...dsl.ir import NOT_GIVEN, Plan, Ref, Step, SubPlan
from ...dsl.schedule import analysis_of
from .attempts import StepFailure, Waiting
from .lifecycle import UnitLife
from .reuse import definition_of, fingerprint, model_identity, reusable, reusable_item
from .world import held_back
from .results import RunResult, StepReport
from .runners import runner_for
from .scope import Options, RunScope, Unit
from ..core.values import (
    MISSING,
    provenance,
    BadReference,
    Dead,
    Lenient,
    Resolver,
    as_text,
    get_path,
    thaw,
)
from ..core.vocabulary import Cause, EventType, RunStatus, StepStatus, trigger_blocks

_SETTLED: tuple = ("settled",)  # _start's answer for a step settled without running (compared by identity)
_RUNNING = StepStatus.RUNNING
ABORT_GRACE = 10.0  # seconds an aborted run waits for its cancelled steps before it ends anyway
_PROGRESS = EventType.STEP_PROGRESS
EAGER_DEPTH = 16  # steps run in place inside one another at most (each releasing the next): a stack's worth


class Execution:
    """One run of one plan (or of a sub-plan inside a run). ``await execution.run()`` -> :class:`RunResult`."""

    def __init__(self, plan: Plan, inputs: Mapping[str, Any], scope: RunScope, prefix: str = ""):
        self.plan, self.scope, self.prefix = plan, scope, prefix
        self.analysis = analysis_of(plan)
        self.root = not prefix
        self.state: dict = thaw(plan.initial_state)
        with no_gc_pauses():  # a unit per step at once (100,000 steps: 17 us a step with collections, 0.8 without)
            self.units = {sid: Unit(scope, prefix + sid, plan.by_id[sid]) for sid in self.analysis.order}
        self.resolver = Resolver(inputs, self.state, self._placeholder_text)
        self._waiting = {sid: len(self.analysis.deps[sid]) for sid in self.analysis.order}
        self._settled = 0
        self._tasks: set[asyncio.Task] = set()
        self._aborted = False
        self._aborting: asyncio.Task | None = None
        self.abort_reason = ""
        self.skip_reason = ""  # what the steps an abort never started say (the abort's reason by default)
        limit = max(1, scope.options.max_concurrency)
        self._limit = asyncio.Semaphore(limit) if limit < len(self.units) else None
        self._journal = scope.journal
        self._eager_depth = 0  # steps being run in place, one inside another (_spawn)
        self.life = UnitLife(self)  # how each unit starts, is tried and settles (lifecycle.py)

    # --- the run ------------------------------------------------------------------------

    async def run(self) -> RunResult:
        if self.root:  # the project's secrets, for every redaction of this run (its tasks and threads inherit)
            from ..core.redact import project_patterns

            with project_patterns(self.scope.options.redact):
                return await self._run()
        return await self._run()

    async def _run(self) -> RunResult:
        self._loop = asyncio.get_running_loop()
        self._finished = self._loop.create_future()
        self.scope.executions.append(self)
        if self.root:
            await self.scope.warm_up(self.plan)
            self.scope.emit(EventType.PLAN_STARTED, steps=len(self.units), resumed=bool(self.scope.replay.units))
        try:
            await self.scope.commit()
            self._release([sid for sid in self.analysis.order if self._waiting[sid] == 0])
            if self._settled < len(self.units):
                if self.root and self.plan.timeout is not None:
                    try:
                        async with asyncio.timeout(self.plan.timeout):
                            await asyncio.shield(self._finished)
                    except TimeoutError:
                        if not self._finished.done():
                            return await self._timed_out()
                await self._finished
            return await self._finish()
        except BaseException:  # Ctrl-C, cancellation, or an error of the journal: state is kept
            await self._interrupt()
            raise
        finally:
            self.scope.executions.remove(self)

    async def _finish(self) -> RunResult:
        if self.scope.waiting:
            if self.root:
                self.scope.emit(EventType.PLAN_WAITING, waiting=list(self.scope.waiting))
                await self.scope.commit()
            message = "waiting for an answer at " + ", ".join(w["step"] for w in self.scope.waiting)
            return self._ended(RunStatus.WAITING, False, None, message, tuple(self.scope.waiting))
        result = self._result()
        failed = any(u.status is StepStatus.FAILED or u.held is not None for u in self.units.values())
        if self.root:
            failed = failed or self.scope.child_failures > 0
        status = (
            RunStatus.ABORTED
            if self._aborted
            else (RunStatus.FAILED if failed and self.plan.on_failure == "abort" else RunStatus.COMPLETED)
        )
        if self.root:
            self.scope.emit(
                EventType.PLAN_COMPLETED,
                status=status,
                had_errors=failed,
                message=self.abort_reason,
                usage=dict(self.scope.usage),
                result=result,
            )
            await self.scope.commit()
        return self._ended(status, failed, result, self.abort_reason)

    async def _timed_out(self) -> RunResult:
        """The plan's timeout passed: cancel what runs (those steps are interrupted, as by a kill) and
        stop durably as timed_out; `resume` continues the run."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        assert self.plan.timeout is not None
        message = f"the plan's timeout ({self.plan.timeout:g}s) passed; resume the run to go on"
        self.scope.emit(EventType.PLAN_TIMED_OUT, timeout=self.plan.timeout)
        await self.scope.commit()
        return self._ended(RunStatus.TIMED_OUT, True, None, message)

    def _ended(self, status: RunStatus, failed: bool, result: Any, message: str, waiting: tuple = ()) -> RunResult:
        return RunResult(
            self.scope.run_id, status, failed, result, self._reports(), self.analysis.order, self.state,
            self.scope.usage, message, waiting,
        )  # fmt: skip

    async def _interrupt(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.root:
            self.scope.emit(EventType.PLAN_INTERRUPTED)
            if self._journal is not None:
                self._journal.commit_sync()

    # --- scheduling ---------------------------------------------------------------------

    def _release(self, ready: list[str], inline: bool = False) -> tuple | None:
        """Start or settle each ready step (settling may free more, so loop instead of recursing).

        With ``inline``, one step to run is handed back to the calling task instead of a
        new task: a chain then runs in one task, with no task created per step.
        """
        if not ready:
            return None
        if inline and len(ready) == 1:  # a chain's next step (the common case): no queue
            todo = self._start(ready[0])
            if todo is not _SETTLED:
                return todo
            ready = self.settle_step(ready[0])
        queue, mine = deque(ready), None
        while queue:
            sid = queue.popleft()
            todo = self._start(sid)
            if todo is _SETTLED:
                queue.extend(self.settle_step(sid))
            elif todo is not None:
                if inline and mine is None:
                    mine = todo
                else:
                    self._spawn(todo)
        return mine

    def _spawn(self, todo: tuple) -> None:
        """Start a ready step's task; or, when the step may run in place (:meth:`~.scope.RunScope.in_place`:
        its tool answers without waiting, no timeout needs a task of its own), run it here, now, in a copy
        of the context (what it sets stays its own), and give it a task only if it waits after all (a
        journal commit, the concurrency limit, a retry's backoff): a fan-out of such steps creates none."""
        slot: list = [None]  # the step's task, once it has one (_execute leaves the set through it)
        coro = self._execute(todo, slot)
        if self._eager_depth < EAGER_DEPTH and self.scope.in_place(todo[0].step):
            context = contextvars.copy_context()
            self._eager_depth += 1
            try:
                waiting_on = context.run(coro.send, None)
            except (StopIteration, asyncio.CancelledError):  # done (a task would have ended as well)
                return
            finally:
                self._eager_depth -= 1
            task = self._loop.create_task(_Resumed(coro, waiting_on), context=context)
        else:
            task = self._loop.create_task(coro)
        slot[0] = task
        self._tasks.add(task)

    def settle_step(self, sid: str) -> list[str]:
        self._settled += 1
        if self._settled == len(self.units) and not self._finished.done():
            self._finished.set_result(None)
        now_ready = []
        for dep in self.analysis.dependents.get(sid, ()):
            self._waiting[dep] -= 1
            if self._waiting[dep] == 0:
                now_ready.append(dep)
        return now_ready

    def _start(self, sid: str) -> tuple | None:
        """What to do with a ready step: ``(unit, runner, context, prepared)`` to run it, ``_SETTLED``
        when it was settled without running (skipped, replayed, failed early), None to leave it pending."""
        unit = self.units[sid]
        step = unit.step
        if self.scope.waiting and not self._asks_or_reads(step):
            return None  # waiting for a person: start nothing that acts or costs, leave it pending (not settled)
        blocked = (self.skip_reason, Cause.ABORTED) if self._aborted else self._blocked_by(step)
        recorded = self.scope.replay.units.get(unit.id) if self.scope.replay.units else None
        if blocked:
            self.life.skip(unit, *blocked)
        elif recorded is not None:
            self.life.replay(unit, recorded)
        elif step.precomputed is not NOT_GIVEN:
            self.life.complete(unit, thaw(step.precomputed), precomputed=True)
        elif step.guard is not None and not self._guard_per_item(step) and not self.life.guard_passes(unit):
            pass  # settled by _guard_passes: skipped (a false condition) or failed (an undecidable one)
        else:
            runner = runner_for(step)
            ctx = StepContext(self, unit, self.resolver if step.trigger == "all_succeeded" else Lenient(self.resolver))
            try:
                prepared = runner.prepare(ctx, step)
                if self.scope.fingerprinting and reusable(step):
                    unit.fingerprint = self._fingerprint(step, prepared)
                    found = self.scope.reuse.get(unit.fingerprint) if self.scope.reuse is not None else None
                    if found is not None:
                        self.life.reused(unit, found)
                        return _SETTLED
                return unit, runner, ctx, prepared
            except Dead as dead:
                self.life.skip(unit, f"{dead.ref} was never written (branch not taken)", Cause.UNWRITTEN)
            except (BadReference, StepFailure) as exc:
                self.life.fail(unit, exc)
        return _SETTLED

    def _asks_or_reads(self, step: Step) -> bool:
        """What may still start while the run waits for a person: another gate (every gate of a run waits at
        once, each fan-out item's too), or a step that neither acts nor calls a model (it only reads, and a
        resume replays it); what acts or costs waits for the answers."""
        return step.gate is not None or (step.llm is None and not self.scope.acts(step))

    def item_found(self, unit: Unit, reads: Callable[[], Any]) -> Any:
        """A fan-out item's fingerprint, kept on its unit (reuse.py), and the result of an earlier run it
        matches (None: the item runs). What the item reads is its arguments or prompt as resolved (``reads``);
        a failure there is the attempt's to say."""
        step = unit.step
        if not (self.scope.fingerprinting and reusable_item(step)):
            return None
        try:
            prepared = reads()
        except Exception:  # noqa: BLE001 - the attempt resolves it again and fails with it
            return None
        unit.fingerprint = self._fingerprint(step, prepared, item=True)
        return self.scope.reuse.get(unit.fingerprint) if self.scope.reuse is not None else None

    def _fingerprint(self, step: Step, prepared: Any, item: bool = False) -> str:
        """The step's fingerprint (reuse.py): its definition, what it read, its upstream, its tool or model.
        A fan-out item's upstream is the steps the plan orders it after (``depends_on``): what it reads of the
        others is in ``prepared`` (its item among it), so an item of a list that grew is the same item."""
        deps = step.deps if item else self.analysis.deps[step.id]
        upstream = [self.units[dep].fingerprint or dep for dep in deps]
        defined = definition_of(self.plan, step)
        if step.tool:
            tool = self.scope.tools.get(step.tool)
            return fingerprint(defined, prepared, upstream, tool.identity if tool is not None else step.tool)
        assert step.llm is not None  # reusable(): a tool or a model step
        options = self.scope.options
        # the tools the model may call make its answer too: their code is part of what it did
        called = [self.scope.tools[name].identity if name in self.scope.tools else name for name in step.llm.tools]
        return fingerprint(defined, prepared, upstream, " ".join(called) or None,
                           model_identity(step.llm.model or options.model, options.completion_kwargs))  # fmt: skip

    def _guard_per_item(self, step: Step) -> bool:
        """A fan-out's condition that reads †item or †index is decided per item (by the fan-out)."""
        return step.for_each is not None and step.guard is not None and guard_reads_item(step.guard)

    def _blocked_by(self, step: Step) -> tuple[str, Cause] | None:
        """Why a ready step is skipped instead of run (None: it runs): the one gate to the world first
        (world.py: a step that acts, after a refusal or on a failure), then its trigger rule. The default
        rule passes a failure value on to a step that only reads (on_failure: continue); written out,
        ``all_succeeded`` means every dependency succeeded."""
        if self.life.troubled:  # else nothing failed and no gate was answered: nothing to hold back (the hot path)
            held = held_back(self, step)
            if held is not None:
                self.units[step.id].held = held[1]  # the run ends with errors (_finish), a sub-plan fails
                return held
        deps = self.analysis.deps[step.id]
        if step.trigger != "all_succeeded":
            why = trigger_blocks(step.trigger, [(d, self.units[d].status) for d in deps])
            return (why, Cause.BLOCKED) if why else None
        for dep in deps:
            status = self.units[dep].status
            if status is StepStatus.SKIPPED and (dep in step.deps or step.trigger_given):
                return f"it depends on {dep}, which was skipped", Cause.BLOCKED
            if status is StepStatus.FAILED and (self.plan.on_failure == "skip_dependents" or step.trigger_given):
                return f"it depends on {dep}, which failed", Cause.BLOCKED
        return None

    # --- executing a step ---------------------------------------------------------------

    async def _execute(self, todo: tuple | None, slot: list) -> None:
        """A step task: run a step, then, in the same task, one of the steps it made ready (and so on);
        then its bookkeeping (one coroutine a task, no done-callback: the hot path). Run in place (no task
        in ``slot`` yet, :meth:`_spawn`), it goes on in place only with steps that may."""
        try:
            while todo is not None:
                unit = todo[0]
                unit.status = _RUNNING
                try:
                    if self._limit is None:
                        ready = await self.life.run_step(*todo)
                    else:
                        async with self._limit:
                            ready = await self.life.run_step(*todo)
                    if self._journal is not None:  # written before any dependent starts; durable if it acted
                        await self._journal.commit(self.scope.acts(unit.step))
                    todo = self._release(ready, inline=True)
                    if todo is not None and slot[0] is None and not self.scope.in_place(todo[0].step):
                        self._spawn(todo)  # in place so far: a step that may not be gets a task of its own
                        return
                except asyncio.CancelledError:
                    if not self._aborted:
                        unit.status = StepStatus.INTERRUPTED
                        raise
                    unit.status, unit.reason = StepStatus.SKIPPED, self.skip_reason
                    self._release(self.settle_step(unit.step.id))
                    return
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # disk full, a bug: the run ends loudly instead of hanging
            if not self._finished.done():
                self._finished.set_exception(exc)
        finally:
            if slot[0] is not None:
                self._tasks.discard(slot[0])
            if self.scope.waiting and not self._tasks and not self._finished.done():
                self._finished.set_result(None)  # nothing left running: stop in the waiting state

    # --- children (fan-out items, loop iterations) ----------------------------------------

    async def run_plan(self, sub: SubPlan, inputs: Any, unit_id: str) -> Any:
        """A sub-plan as part of this run: a child execution whose step ids are ``<unit_id>.<step>``."""
        from .inputs import prepare_inputs

        name = sub.path or "inline"
        if sub.plan is None:
            raise StepFailure(f"sub-plan {name} was not loaded")
        if not isinstance(inputs, Mapping):
            raise StepFailure(f"a sub-plan's input must be an object, not {type(inputs).__name__}")
        try:
            values = prepare_inputs(sub.plan, inputs)
        except Exception as exc:  # noqa: BLE001 - a RunError listing every bad input
            raise StepFailure(f"sub-plan {name}: {_message(exc)}") from exc
        child = Execution(sub.plan, values, self.scope, f"{unit_id}.")
        result = await child.run()
        if result.status is RunStatus.WAITING:
            raise Waiting(result.waiting[0], registered=True)
        if result.status is not RunStatus.COMPLETED:
            raise StepFailure(f"sub-plan {name} {result.status}: {result.message or 'a step failed'}")
        inside = child.failed_inside()
        if inside is not None:  # a sub-plan is as failed (or refused) as what happened inside it (world.py)
            what, cause = inside
            raise StepFailure(f"sub-plan {name}: {what}", cause)
        return result.result

    def failed_inside(self) -> tuple[str, Cause | None] | None:
        """What makes this (child) execution's result a failure: a gate a person refused (the cause
        ``refused``), else a step that failed or a result carrying a failure; None when nothing did."""
        found: tuple[str, Cause | None] | None = None
        for unit in self.units.values():
            if unit.held is Cause.REFUSED:
                return f"a person refused before {unit.id}, which acts on the world", Cause.REFUSED
            if unit.status is StepStatus.FAILED:
                if unit.step.gate is not None or (unit.error or {}).get("cause") == Cause.REFUSED:
                    return f"a person refused {unit.id}", Cause.REFUSED
                if found is None:
                    error = unit.error or {}
                    found = f"{unit.id} failed: {error.get('type')}: {error.get('message')}", None
            elif unit.tainted and found is None:
                found = f"{unit.id} carries the failure of {unit.tainted}", None
            elif unit.held is not None and found is None:
                found = f"{unit.id} was held back: {unit.reason}", None
        return found

    # --- settling -----------------------------------------------------------------------

    def abort(self, reason: str = "the run was aborted", skipped: str | None = None) -> None:
        """Stop starting work, cancel every step task, and end the run once they are gone (at most
        :data:`ABORT_GRACE` seconds later): a task cancelled before it ever ran settles nothing itself."""
        if self._aborted:
            return
        self._aborted = True
        self.abort_reason, self.skip_reason = reason, skipped or reason
        current = asyncio.current_task()
        cancelled = [task for task in self._tasks if task is not current]
        for task in cancelled:
            task.cancel()
        self._aborting = self._loop.create_task(self._end_after(cancelled))

    async def _end_after(self, cancelled: list[asyncio.Task]) -> None:
        if cancelled:
            await asyncio.wait(cancelled, timeout=ABORT_GRACE)
        others = [task for task in self._tasks if task is not self._aborting]
        if others:  # the step that aborted ends its own chain: it starts nothing more
            await asyncio.wait(others, timeout=ABORT_GRACE)
        if not self._finished.done():
            self._finished.set_result(None)  # what never settled is reported skipped (aborted)

    # --- reading --------------------------------------------------------------------------

    def _placeholder_text(self, sid: str) -> str:
        unit = self.units.get(sid)
        if unit is None or unit.status is StepStatus.SKIPPED or unit.output is MISSING:
            raise Dead(Ref("state", (f"#{sid}",)))
        return as_text(unit.output)

    def _result(self) -> Any:
        if self.plan.result is not None:
            try:
                return self.resolver.value(self.plan.result)
            except (Dead, BadReference):
                return None
        last = self.units[self.analysis.order[-1]] if self.analysis.order else None
        return None if last is None or last.output is MISSING else last.output

    def _reports(self) -> "Reports":
        return Reports(self.units, self._aborted)


class Reports(Mapping[str, StepReport]):
    """Each step's :class:`StepReport`, built when first read (a run's result is often not read whole)."""

    __slots__ = ("_units", "_aborted", "_built")

    def __init__(self, units: Mapping[str, Unit], aborted: bool):
        self._units, self._aborted = units, aborted
        self._built: dict[str, StepReport] = {}

    def __getitem__(self, sid: str) -> StepReport:
        found = self._built.get(sid)
        if found is None:
            u = self._units[sid]
            status = u.status
            if self._aborted and status in (StepStatus.PENDING, StepStatus.INTERRUPTED):
                status = StepStatus.SKIPPED
            found = self._built[sid] = StepReport(
                sid,
                u.step.tool or u.step.kind,
                status,
                u.attempts,
                u.duration,
                u.output,
                u.error,
                u.reason,
                u.replayed,
                u.usage,
                u.reused,
                u.trace,
                u.taken,
            )
        return found

    def __iter__(self):
        return iter(self._units)

    def __len__(self) -> int:
        return len(self._units)

    def __repr__(self) -> str:
        return f"Reports({dict(self)!r})"


class StepContext:
    """The :class:`~.context.StepContext` of one unit: the runner's whole view of the run."""

    __slots__ = ("execution", "unit", "resolver", "unit_id", "options", "labels")

    def __init__(self, execution: Execution, unit: Unit, resolver: Resolver, labels: Mapping[str, Any] | None = None):
        self.execution, self.unit, self.resolver = execution, unit, resolver
        self.unit_id, self.options = unit.id, execution.scope.options
        self.labels = labels or {}

    def resolve(self, value: Any) -> Any:
        return self.resolver.value(value)

    def provenance(self, template: Any) -> tuple[str, list[dict]]:
        return provenance(self.resolver, template, self._writer)

    def _writer(self, ref: Ref) -> str | None:
        """The step that wrote what ``ref`` reads (the longest path written; among alternatives, the one
        taken); None for the plan's initial state."""
        execution = self.execution
        writers = analysis_of(execution.plan).writers
        key = ("state", *ref.path)
        while len(key) > 1:
            found = writers.get(key)
            if found:
                for step, alternative in found:
                    unit = execution.units.get(step)
                    if unit is not None and unit.status.has_output and unit.alternative == alternative:
                        return execution.prefix + step
                return execution.prefix + found[0][0]
            key = key[:-1]
        return None

    def call_tool(self, name: str, args: Mapping[str, Any]) -> Awaitable[Any]:
        return self.execution.scope.call_tool(name, args, self.unit_id)

    def tool_specs(self) -> Mapping[str, Any]:
        return {name: t.spec for name, t in self.execution.scope.tools.items()}

    def emit(self, type_: EventType, **data: Any) -> None:
        scope = self.execution.scope
        if scope.sinks:  # (nobody listens: a call fewer on every tool call)
            scope.emit(type_, self.unit_id, **data)

    def memo(self) -> Any:
        return self.execution.scope.memo(self.unit_id)

    def budget(self) -> Any:
        return self.execution.scope.budget()

    def account(self, usage: Mapping[str, Any]) -> None:
        self.unit.usage = dict(usage)
        self.execution.scope.spend(usage)

    @property
    def plan(self) -> Plan:
        return self.execution.plan

    async def answer(self, request: Mapping[str, Any]) -> Any:
        return await self.execution.scope.answer(self.unit_id, request)

    def child(
        self, suffix: str, *, item: Any = MISSING, index: int | None = None, name: str | None = None
    ) -> "StepContext":
        unit = Unit(self.execution.scope, self.unit_id + suffix, self.unit.step)
        if item is MISSING:
            return StepContext(self.execution, unit, self.resolver, {"iteration": index})
        resolver = _ItemResolver(self.resolver, item, index or 0)
        return StepContext(self.execution, unit, resolver, {"item": index, "name": name})

    def failed(self) -> bool:
        return self.unit.status is StepStatus.FAILED

    def carries_failure_of(self, unit_id: str) -> None:
        self.unit.tainted = unit_id

    def reused_from(self) -> str | None:
        return self.unit.reused

    def took_items(self, count: int, source: str) -> None:
        self.unit.taken = (count, source)

    async def settle(
        self, once: Callable[[], Awaitable[Any]], *, failure_value: bool, reads: Callable[[], Any] | None = None
    ) -> Any:
        found = self.execution.item_found(self.unit, reads) if reads is not None else None
        return await self.execution.life.settle_child(self, once, failure_value, found)

    def holds(self) -> bool:
        """Whether this unit's ``when:`` holds (a false one is recorded as skipped; an undecidable
        one fails the unit)."""
        return self.execution.life.holds(self.unit, self.resolver)

    async def run_plan(self, sub: SubPlan, inputs: Any) -> Any:
        return await self.execution.run_plan(sub, inputs, self.unit_id)

    def progress(self, **data: Any) -> None:
        scope = self.execution.scope
        if scope.subscribers:
            scope.emit(_PROGRESS, self.unit_id, **data)


class _ItemResolver(Resolver):
    """Resolves ``†item`` / ``†index`` besides everything the run's resolver knows."""

    def __init__(self, base: Resolver, item: Any, index: int):
        super().__init__(base.inputs, base.state, base.placeholder_text)
        self.failed = base.failed
        self.item, self.index = item, index

    def ref(self, ref: Ref) -> Any:
        if ref.root == "index":
            return self.index
        if ref.root != "item":
            return super().ref(ref)
        found = get_path(self.item, ref.path)
        if found is MISSING:
            raise BadReference(f"{ref} is not in item {self.index}")
        return thaw(found) if isinstance(found, (dict, list)) else found


def _message(exc: BaseException) -> str:
    headline = getattr(exc, "headline", None)
    if headline is not None:
        return headline.message
    return str(exc) or type(exc).__name__


__all__ = ["Execution", "Options", "RunResult", "StepReport", "RunScope"]


class _Resumed(Coroutine):
    """A step's coroutine that was run in place until it waited on a future, continued by a task: the task's
    first step is handed that future to wait on; every later value, and any exception (a cancellation,
    even one before the task's first step), goes on to the coroutine."""

    __slots__ = ("coro", "waiting_on")

    def __init__(self, coro: Any, waiting_on: Any):
        self.coro, self.waiting_on = coro, waiting_on

    def send(self, value: Any) -> Any:
        if self.waiting_on is not None:
            waiting_on, self.waiting_on = self.waiting_on, None
            return waiting_on
        return self.coro.send(value)

    def throw(self, *exc: Any) -> Any:  # type: ignore[override]
        self.waiting_on = None
        return self.coro.throw(*exc)

    def close(self) -> None:
        self.coro.close()

    def __await__(self) -> Any:
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        return self.send(None)
