"""The life of one unit of work, written once for steps and their children.

A unit is a step, a fan-out item (``review[3]``), a loop iteration's step (``poll[2].check``) or a
sub-plan's step (``sub.fetch``). Each goes through the same path: replayed when the journal has its
result (a short cut on entry), else started (a side effect's intent durable first), tried under the
attempt policy (:mod:`.attempts`), and settled once: completed, failed (routed to a ``catch:`` entry or
an error alternative, else the plan's failure policy), waiting for a person, or skipped, each with one
event through :meth:`RunScope.emit`. :class:`~.execution.Execution` schedules the ready set over the
plan's analysis and hands each ready unit to this path.
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy
from typing import Any, Awaitable, Callable, Mapping, Protocol

from ...dsl import condition
from ...dsl.ir import Catch, Output, Plan, Step
from ..core.context import Runner, StepContext
from ..core.printed import BUFFER as PRINTED, Printed
from ..core.trace import frames
from ..core.values import MISSING, PLAIN, NotJSON, Resolver, json_value, read_or_missing, set_path
from ..core.vocabulary import Cause, EventType, StepStatus
from ..tools.catalog import Branch
from . import attempts
from .attempts import StepFailure, Waiting
from .resume import Recorded
from .scope import RunScope, Unit
from .world import tainted_by


class UnitContext(StepContext, Protocol):
    """What the life of a unit needs of its :class:`~.execution.StepContext` (typed here, so that this module
    does not import the execution that builds it)."""

    unit: Unit
    labels: Mapping[str, Any]


class Units(Protocol):
    """What the life of a unit reads of the execution it belongs to (:class:`~.execution.Execution`)."""

    plan: Plan
    scope: RunScope
    resolver: Resolver
    state: dict

    def abort(self, reason: str = ..., skipped: str | None = None) -> None:
        """Stop starting work and end the run."""

    def settle_step(self, sid: str) -> list[str]:
        """Count a step settled; the steps that it made ready."""


class UnitLife:
    """How a unit starts, is tried, and settles: the part of an execution that is about one unit. An
    :class:`~.execution.Execution` has one (``execution.life``) and hands it each unit it starts."""

    def __init__(self, run: Units) -> None:
        self.run = run
        # what every unit reads, fixed for the execution's life (the state is one dict, written in place)
        self.plan, self.scope, self.resolver, self.state = run.plan, run.scope, run.resolver, run.state
        self._journal = run.scope.journal
        self.troubled = False  # a unit failed or a gate was answered: the gate to the world has something to ask

    async def run_step(self, unit: Unit, runner: Runner, ctx: UnitContext, prepared: Any) -> list[str]:
        """Run the step's attempts and settle it; returns the dependents it made ready."""
        started = time.perf_counter()
        if self.scope.sinks:
            await self._started(unit, runner.per_child, ctx)
        step = unit.step
        unit.attempts += 1
        if step.tool is not None:  # what the tool prints goes to its step (core/printed.py; inline: the hot path)
            printed: Printed | None = Printed()
            token = PRINTED.set(printed)
        else:
            printed = token = None
        try:
            if runner.per_child:  # a fan-out's items, a loop's iterations are the attempts
                value = await runner.run(ctx, step, prepared)
            else:  # the first attempt awaited here (the hot path), the retry loop only after a failure
                try:
                    value = await attempts.first(step, runner.run(ctx, step, prepared))
                except Waiting:
                    raise
                except BaseException as exc:  # noqa: BLE001 - judged by the policy (the run's own raised again)
                    value = await attempts.retry(
                        unit, lambda: runner.run(ctx, step, prepared), attempts.as_failure(exc)
                    )
        except asyncio.CancelledError:
            self._printed(unit, printed, token, keep=False)
            raise
        except BaseException as exc:  # noqa: BLE001 - settled below, after what the tool printed is kept
            self._printed(unit, printed, token)
            return self._attempt_failed(unit, exc, started)
        self._printed(unit, printed, token)
        unit.duration = time.perf_counter() - started
        self.complete(unit, value)
        return self.run.settle_step(step.id)

    def _printed(self, unit: Unit, printed: Any, token: Any, keep: bool = True) -> None:
        """The step's attempts are over: what its tool printed stops going to it, and is kept (core/printed.py)."""
        if token is None:
            return
        PRINTED.reset(token)
        if keep and (printed.size or printed.dropped):
            self.scope.printed(unit.id, printed)

    def _attempt_failed(self, unit: Unit, exc: BaseException, started: float) -> list[str]:
        """The attempts ended without a value: the run waits for a person, or the step failed (any tool
        error is the step's failure, not ours)."""
        unit.duration = time.perf_counter() - started
        if isinstance(exc, Waiting):
            return self._wait(unit, exc)
        self.fail(unit, attempts.as_failure(exc))
        return self.run.settle_step(unit.step.id)

    async def _attempts(self, unit: Unit, once: Callable[[], Awaitable[Any]]) -> Any:
        """The attempt policy for a child unit: the first attempt, then the retry loop after a failure."""
        try:
            return await attempts.first(unit.step, once())
        except Waiting:
            raise
        except BaseException as exc:  # noqa: BLE001 - judged by the policy (the run's own raised again)
            return await attempts.retry(unit, once, attempts.as_failure(exc))

    async def _started(self, unit: Unit, per_child: bool, ctx: UnitContext) -> None:
        """The started event; a side effect never starts before its intent is durable (a fan-out's or a
        loop's own start is not an attempt: each child commits its own)."""
        ctx.emit(EventType.STEP_STARTED, attempt=unit.attempts + 1, description=unit.step.label, **ctx.labels)
        if self._journal is not None and not per_child and self.scope.acts(unit.step):
            await self._journal.commit()

    async def settle_child(
        self, ctx: UnitContext, once: Callable[[], Awaitable[Any]], failure_value: bool, found: Any = None
    ) -> Any:
        """A child unit to its outcome: replayed, taken from an earlier run (``found``, by its fingerprint), or
        started and tried under the attempt policy."""
        unit = ctx.unit
        recorded = self.scope.replay.units.get(unit.id)
        if recorded is not None:
            return self._replayed_child(unit, recorded, failure_value)
        if found is not None:
            self._taken(unit, found)
            return unit.output
        started = time.perf_counter()
        if self.scope.sinks:
            await self._started(unit, False, ctx)
        try:
            unit.attempts += 1
            value = await self._attempts(unit, once)
            if isinstance(value, Branch):
                raise StepFailure(f"{unit.id}: a fan-out item or loop iteration cannot choose a branch")
            value = json_value(value)
        except asyncio.CancelledError:
            raise
        except Waiting as wait:
            self._waiting_unit(unit, wait)
            raise
        except BaseException as exc:  # noqa: BLE001 - the child's failure
            unit.duration = time.perf_counter() - started
            return self._child_failed(unit, attempts.as_failure(exc), failure_value)
        unit.duration = time.perf_counter() - started
        unit.status, unit.output = StepStatus.COMPLETED, value
        if self.scope.sinks:
            self._emit_completed(unit, unit.attempts, output=value)
            if self._journal is not None:  # written before the next resume would need it; durable if it acted
                await self._journal.commit(self.scope.acts(unit.step))
        return value

    def _replayed_handled(
        self, unit_id: str, error: Any, attempts: int, alternative: int, output: Any = MISSING
    ) -> None:
        """The event of a replayed failure the plan handled (a branch's error path or a catch)."""
        self._emit_failed(
            unit_id, 0.0, error, attempts, alternative, True, output=error if output is MISSING else output
        )

    def _emit_failed(
        self,
        unit_id: str,
        duration: float,
        error: Any,
        attempts: int,
        alternative: int,
        replayed: bool,
        output: Any = MISSING,
        trace: list | None = None,
    ) -> None:
        """The one spelling of a failure event: ``handled`` (and the value written) when ``output`` is given;
        ``traceback``: where the tool failed (the user's frames)."""
        handled = output is not MISSING
        self.scope.emit(
            EventType.STEP_FAILED, unit_id, duration, error=error, attempts=attempts, handled=handled,
            alternative=alternative, replayed=replayed, **({"output": output} if handled else {}),
            **({"traceback": trace} if trace else {}),
        )  # fmt: skip

    def _replayed_child(self, unit: Unit, recorded: Recorded, failure_value: bool) -> Any:
        if recorded.status is StepStatus.HANDLED and recorded.error is not None:
            entry = attempts.catch_entry(unit.step, None, recorded.error.get("type"))
            if entry is not None:
                self._replayed_handled(unit.id, recorded.error, recorded.attempts, entry.alternative)
                unit.status, unit.error = StepStatus.HANDLED, dict(recorded.error)
                return attempts.Caught(entry.alternative, dict(recorded.error))
        if recorded.status.has_output:
            self._emit_completed(unit, recorded.attempts, replayed=True)
            return recorded.output
        return self._child_failed(unit, None, failure_value, recorded.error)

    def _child_failed(
        self, unit: Unit, exc: Exception | None, failure_value: bool, error: Mapping[str, Any] | None = None
    ) -> Any:
        if error is not None:
            info = dict(error)
        else:
            assert exc is not None  # a fresh failure, or a recorded one: one of the two is given
            info = attempts.error_info(unit.id, unit.step, exc)
            unit.trace = frames(exc)
        stopping = _stopping(exc, info)
        entry = attempts.catch_entry(unit.step, exc, info["type"]) if failure_value and not stopping else None
        if entry is not None:  # a fan-out item's failure a `catch:` entry takes: handled, collected on its path
            info = _routed(info)
            unit.status, unit.error = StepStatus.HANDLED, info
            self._emit_failed(unit.id, unit.duration, info, unit.attempts, entry.alternative, exc is None, output=info,
                              trace=unit.trace)  # fmt: skip
            return attempts.Caught(entry.alternative, info)
        unit.status, unit.error = StepStatus.FAILED, info
        self.troubled = True  # world.py: what holds this failure (a fan-out's list) carries it
        self._emit_failed(unit.id, unit.duration, info, unit.attempts, 0, exc is None, trace=unit.trace)
        if stopping:
            self.scope.abort(info["message"], _stopped_at(unit.id, info))
        if not failure_value or self.plan.on_failure == "abort":
            cause = Cause.REFUSED if info.get("cause") == Cause.REFUSED else None  # a refusal stays one
            raise StepFailure(f"{unit.id} failed: {info['type']}: {info['message']}", cause)
        self.scope.child_failures += 1  # the run reports had_errors
        return attempts.failure_text(info)

    def complete(self, unit: Unit, value: Any, precomputed: bool = False) -> None:
        step = unit.step
        if step.gate is not None:
            self.troubled = True  # world.py: a gate answered (a refusal a `when:` reads completes it)
        routes: dict[str, list] = {}
        if type(value) in PLAIN:  # a number or a text: no routes, no branch, already JSON (the common case)
            alternative = 0
        else:
            if isinstance(value, attempts.Routed):  # a fan-out with catch: failed items collected on their paths
                routes = {str(alt): errors for alt, errors in value.routes.items()}
                self._write_routes(step.output, routes)
                value = value.value
            try:
                alternative, value = self._choose(step, value)
                value = json_value(value)
            except (StepFailure, NotJSON) as exc:
                self.fail(unit, exc)
                return
        self._write(step.output, alternative, value)
        unit.status, unit.output, unit.alternative = StepStatus.COMPLETED, value, alternative
        if precomputed:
            unit.attempts = 0
        if self.troubled and unit.tainted is None:  # else nothing failed: nothing to carry (the hot path)
            unit.tainted = tainted_by(self.run, step)
        if self.scope.sinks:
            self._emit_completed(
                unit, unit.attempts, output=value, alternative=alternative, replayed=False, precomputed=precomputed,
                **({"routes": routes} if routes else {}), **({"tainted": unit.tainted} if unit.tainted else {}),
            )  # fmt: skip

    def _emit_completed(self, unit: Unit, attempts: int, **data: Any) -> None:
        """The one spelling of a completion event, for steps and children alike: a replay re-announces a
        recorded result (no output, no duration, no usage: the journal has them), a fresh one carries all."""
        if unit.fingerprint is not None:
            data["fingerprint"] = unit.fingerprint
        if data.get("replayed"):
            self.scope.emit(EventType.STEP_COMPLETED, unit.id, 0.0, attempts=attempts, **data)
            return
        usage = {"usage": unit.usage} if unit.usage else {}
        self.scope.emit(EventType.STEP_COMPLETED, unit.id, unit.duration, attempts=attempts, **data, **usage)

    def reused(self, unit: Unit, found: Any) -> None:
        """A result taken from another run by the step's fingerprint (reuse.py): written, called nothing."""
        self._write(unit.step.output, found.recorded.alternative, found.recorded.output)
        self._taken(unit, found)

    def _taken(self, unit: Unit, found: Any) -> None:
        """A unit (a step, a fan-out item) completed with a result of another run: announced, called nothing."""
        recorded = found.recorded
        unit.attempts, unit.reused = 0, found.source
        unit.status, unit.output, unit.alternative = StepStatus.COMPLETED, recorded.output, recorded.alternative
        if self.scope.sinks:
            self._emit_completed(unit, 0, output=recorded.output, alternative=recorded.alternative, replayed=False,
                                 reused=found.source, reused_unit=found.unit)  # fmt: skip

    def _write_routes(self, output: Output | None, routes: Mapping[str, list]) -> None:
        for alt, errors in routes.items():
            self._write(output, int(alt), errors)

    def replay(self, unit: Unit, recorded: Recorded) -> None:
        """A result recorded by an earlier attempt of this run: restore it, call nothing."""
        unit.attempts, unit.replayed, unit.usage = recorded.attempts, True, recorded.usage
        unit.fingerprint = recorded.fingerprint
        if recorded.status is StepStatus.FAILED:
            error = dict(recorded.error or {})
            self._failed(unit, error, replayed=True, routable=not _stopping(None, error))
            return
        if unit.step.gate is not None:
            self.troubled = True  # world.py: a gate's answer, replayed
        self._write(unit.step.output, recorded.alternative, recorded.output)
        self._write_routes(unit.step.output, recorded.routes or {})
        unit.status, unit.output, unit.alternative = recorded.status, recorded.output, recorded.alternative
        unit.error = recorded.error
        unit.tainted = recorded.tainted
        if recorded.tainted:
            self.troubled = True
        elif self.troubled and recorded.status is StepStatus.COMPLETED:
            unit.tainted = tainted_by(self.run, unit.step)
        if recorded.status is StepStatus.HANDLED:
            self._replayed_handled(unit.id, unit.error, unit.attempts, unit.alternative, unit.output)
        else:
            adopted = {"adopted": True} if recorded.adopted else {}
            self._emit_completed(unit, unit.attempts, replayed=True, alternative=unit.alternative, **adopted)

    def fail(self, unit: Unit, exc: BaseException) -> None:
        info = attempts.error_info(unit.id, unit.step, exc)
        unit.trace = frames(exc)
        if _stopping(exc, info):  # a budget, an unanswerable replay: the whole run stops, cleanly, and no
            self._failed(unit, info, routable=False)  # branch or catch takes it (nothing after it means anything)
            self.scope.abort(info["message"], _stopped_at(unit.id, info))
            return
        self._failed(unit, info, route=attempts.catch_entry(unit.step, exc))
        if self.plan.on_failure == "abort" and unit.status is StepStatus.FAILED:
            self.run.abort()

    def _failed(
        self, unit: Unit, info: dict, replayed: bool = False, route: Catch | None = None, routable: bool = True
    ) -> None:
        """A failure, retries spent: to the ``catch`` entry that takes its type, else to the error
        alternative of an ``a || b`` output (handled either way; unless not ``routable``), else the plan's
        failure policy."""
        step = unit.step
        self.troubled = True  # world.py: from now on, a step that acts is asked what it would act on
        handler = route.alternative if route is not None else step.output.error_alternative if step.output else None
        handler = handler if routable else None
        if handler is not None:
            info = _routed(info)
        unit.error = info
        if handler is not None and step.output is not None:
            unit.alternative = handler
            self._write(step.output, handler, dict(info))
            unit.status, unit.output = StepStatus.HANDLED, dict(info)
        else:
            unit.status, unit.output = StepStatus.FAILED, attempts.failure_text(info)
            if self.plan.on_failure == "continue" and step.output is not None:
                self._write(step.output, 0, unit.output)
                for target in step.output.alternatives[0]:
                    self.resolver.failed[target.path] = unit.output
        handled = unit.status is StepStatus.HANDLED
        output = unit.output if handled else MISSING
        self._emit_failed(unit.id, unit.duration, info, unit.attempts, unit.alternative, replayed, output=output,
                          trace=None if replayed else unit.trace)  # fmt: skip

    def _wait(self, unit: Unit, wait: Waiting) -> list[str]:
        """An approval gate without an answer: the step stays unsettled and nothing new starts."""
        self._waiting_unit(unit, wait)
        return []

    def _waiting_unit(self, unit: Unit, wait: Waiting) -> None:
        unit.status = StepStatus.WAITING
        if not wait.registered:  # the gate itself: the run waits for this request
            wait.registered = True
            self.scope.waiting.append(wait.request)
        self.scope.emit(EventType.STEP_WAITING, unit.id, request=wait.request)

    def skip(self, unit: Unit, reason: str, cause: Cause) -> None:
        unit.status, unit.reason = StepStatus.SKIPPED, reason
        self.scope.emit(EventType.STEP_SKIPPED, unit.id, reason=reason, cause=cause)

    def _choose(self, step: Step, value: Any) -> tuple[int, Any]:
        if not isinstance(value, Branch):
            return 0, value
        if step.output is None:
            raise StepFailure(f"step {step.id} returned a Branch but has no output path")
        return _alternative_index(step.output, value.alternative, step.id), value.value

    def _write(self, output: Output | None, alternative: int, value: Any) -> None:
        if output is None:
            return
        for target in output.alternatives[alternative]:
            set_path(self.state, target.path, deepcopy(value) if isinstance(value, (dict, list)) else value)

    def guard_passes(self, unit: Unit) -> bool:
        """Whether a step's ``when:`` holds; when not, the step is settled here (skipped or failed)."""
        try:
            if self.holds(unit, self.resolver):
                return True
        except StepFailure as exc:
            self.fail(unit, exc)
        return False

    def holds(self, unit: Unit, resolver: Resolver) -> bool:
        """The unit's ``when:`` (a false one is recorded as a skip); StepFailure when undecidable."""
        guard = unit.step.guard
        assert guard is not None
        try:
            if condition.evaluate(guard.condition, lambda ref: read_or_missing(resolver, ref)):
                return True
        except condition.ConditionError as exc:
            raise StepFailure(f"its condition {guard.text!r} cannot be decided: {exc}") from None
        unread = self._unread(guard.condition, resolver)
        if unread:  # false only because what it reads was never written: a step failed or was skipped
            self.skip(unit, f"its condition could not be evaluated: {unread}", Cause.CONDITION)
        else:
            self.skip(unit, f"its condition is false: {guard.text}", Cause.CONDITION)
        return False

    def _unread(self, guard: Any, resolver: Resolver) -> str | None:
        """Why a condition read nothing: ``†state.x was never written (step fetch failed)``, when a step that
        writes what it reads failed or was skipped; None when everything it reads was written (or a branch
        not taken left it unwritten, as the plan means)."""
        from ...dsl.condition import condition_refs
        from ...dsl.schedule import analysis_of

        writers = analysis_of(self.plan).writers
        units = getattr(self, "units", {})
        for ref in condition_refs(guard):
            if ref.root != "state":
                continue
            failed = next((ref.path[:end] for end in range(len(ref.path), 0, -1) if ref.path[:end] in resolver.failed),
                          None)  # fmt: skip
            if failed is None and read_or_missing(resolver, ref) is not MISSING:
                continue
            key = ("state", *(failed or ref.path))
            while len(key) > 1 and key not in writers:
                key = key[:-1]
            for step, _ in writers.get(key, ()):
                found = units.get(step)
                if found is not None and found.status in (StepStatus.FAILED, StepStatus.SKIPPED):
                    if found.status is StepStatus.FAILED:
                        return f"{ref} holds no value: step {step} failed"
                    return f"{ref} was never written: step {step} was skipped"
        return None


def _alternative_index(output: Output, chosen: Any, step_id: str) -> int:
    """The index of the alternative ``chosen`` names: an index (``1``, ``1.0``) or a path as written; anything
    else is the step's failure, never the run's crash."""
    if isinstance(chosen, float) and chosen.is_integer():
        chosen = int(chosen)
    if isinstance(chosen, bool) or not isinstance(chosen, (int, str)):
        raise StepFailure(f"step {step_id} chose alternative {chosen!r}: give an index or one of its output paths")
    if isinstance(chosen, int):
        if 0 <= chosen < len(output.own):
            return chosen
        raise StepFailure(
            f"step {step_id} chose alternative {chosen}, but its output names {len(output.own)} (0 to "
            f"{len(output.own) - 1}): write one path per outcome, `output: \u2020state.a || \u2020state.b`"
        )
    wanted = chosen.strip().lstrip("\u2020$")
    for index, alt in enumerate(output.own):
        if any(str(ref).lstrip("\u2020") == wanted for ref in alt):
            return index
    choices = ", ".join(str(o) for alt in output.own for o in alt)
    raise StepFailure(f"step {step_id} chose {chosen!r}, which is not one of its output paths ({choices})")


def _stopping(exc: BaseException | None, info: dict) -> bool:
    """Whether a failure stops the whole run (its error says so, or its record from an earlier attempt
    does); a fresh one is marked in its record, so that a replay of it is never routed either."""
    if attempts.stops_run(exc):
        info["stopped_run"] = True
    return bool(info.get("stopped_run"))


def _stopped_at(unit_id: str, info: Mapping[str, Any]) -> str:
    """Why the steps a stopping failure never started are skipped: where it stopped (its message, often
    long, is the run's, told once)."""
    return f"the run stopped at step {unit_id} ({info['type']})"


def _routed(info: dict) -> dict:
    """The error object a route of the plan receives (``catch:``, an ``a || b`` error branch): the failure as
    the plan sees it, without the engine's own note for a resume (``outcome``: the plan chose what follows)."""
    return {k: v for k, v in info.items() if k != "outcome"} if "outcome" in info else info
