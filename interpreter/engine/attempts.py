"""The attempt policy: how every unit of work is tried, retried, timed and failed.

A *unit* is anything the engine runs to an outcome: a plan step, a fan-out item, a loop
iteration, a sub-plan's step (a step of a child execution). Each is tried under the
same rules, written once here:

- a timeout per attempt (the step's ``timeout``);
- a retry when the error is transient (``TimeoutError``, ``ConnectionError``,
  :class:`TransientError`, an exception with ``retryable = True``, or a type the tool
  declares in ``retry_on``), up to ``retry.limit`` retries, backing off
  ``backoff * 2**(n-1)`` seconds (capped, with jitter);
- a step that acts (:func:`dsl.ir.can_act`) is tried once: it is retried only when its ``retry:``
  is written (the plan's author chose to), and never after its attempt timed out, since that attempt
  may still be acting (a tool in a thread cannot be stopped): its outcome is unknown, the error says
  so (``outcome: unknown``) and a resume asks a person, as after ``kill -9``;
- when the retries are spent, ``on_limit_exceeded(unit, error, attempts)`` may extend
  them by another ``limit``;
- the error object ``{step, type, message}`` and the failure value a dependent
  receives, ``(FAILED: <type>: <message>)``.

The first attempt is awaited by the engine directly (the hot path); :func:`retry` runs
only after a failure.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Protocol

from ...dsl.errors import DagplanError
from ...dsl.ir import Catch, Retry, Step
from ..core.trace import frames
from ..tools.catalog import TransientError
from ..core.vocabulary import Cause, EventType

TRANSIENT: tuple[type[BaseException], ...] = (TimeoutError, ConnectionError, TransientError)


class StepFailure(Exception):
    """A unit failed for a reason that is not a Python bug in dagplan (bad reference, a sub-plan failed...);
    ``cause`` says which when a program may need to know (a :class:`Cause`, recorded in the error)."""

    def __init__(self, message: str = "", cause: Cause | None = None):
        super().__init__(message)
        self.cause = cause


class ToolExit(Exception):
    """A tool called ``sys.exit()``: a failure of that step like any other, never the end of the run."""


class ToolRaised(Exception):
    """A tool raised a ``BaseException`` that is not an ``Exception`` (a ``CancelledError`` the run did not
    ask for, ``GeneratorExit``, a library's ``Timeout(BaseException)``): that step's failure like any other.
    It reads as the error the tool raised (:func:`error_info`, :func:`error_names`)."""

    def __init__(self, original: BaseException):
        super().__init__(str(original) or type(original).__name__)
        self.original = original


class GateTimeout(StepFailure):
    """A gate's ``timeout`` passed with no answer and its ``on_timeout`` is ``fail`` (``catch:`` may route it)."""


def no_answer_within(seconds: float) -> str:
    """The words of a gate nobody answered in time (its failure, or its refusal given in a person's place)."""
    from ...dsl.ir import format_duration

    return f"no answer within {format_duration(seconds)}"


class Waiting(Exception):
    """An approval gate has no answer yet: ``request`` says what it waits for (JSON)."""

    def __init__(self, request: Mapping[str, Any], registered: bool = False):
        super().__init__(request.get("question", ""))
        self.request = dict(request)
        self.registered = registered  # the run already counts this request among those it waits for


@dataclass(frozen=True)
class Caught:
    """A fan-out item's failure taken by a ``catch:`` entry: its error object goes to ``alternative``."""

    alternative: int
    error: Mapping[str, Any]


@dataclass(frozen=True)
class Routed:
    """A fan-out's outcome when it has ``catch:``: the successful results, and each entry's errors."""

    value: Any
    routes: Mapping[int, list]


class Attempted(Protocol):
    """What the policy needs of the unit it tries."""

    id: str
    step: Step
    attempts: int

    def emit(self, type_: EventType, **data: Any) -> None: ...

    def retry_on(self) -> tuple[type[BaseException], ...]: ...

    def acts(self) -> bool:
        """Whether the unit's step can act on the world (the one rule, :func:`dsl.ir.can_act`)."""

    def pause(self, seconds: float) -> Awaitable[None]:
        """Wait ``seconds`` before the next attempt (plan tests do not wait)."""

    async def extend(self, error: BaseException, attempts: int) -> bool: ...


# --- one attempt ------------------------------------------------------------------------------


def first(step: Step, attempt: Awaitable[Any]) -> Awaitable[Any]:
    """One attempt's awaitable, under the step's timeout when it has one."""
    if step.timeout is None:
        return attempt
    return _timed(step.timeout, attempt)


async def _timed(seconds: float, attempt: Awaitable[Any]) -> Any:
    try:
        async with asyncio.timeout(seconds) as limit:
            return await attempt
    except TimeoutError as exc:
        if limit.expired():  # the step's own timeout, not a TimeoutError the tool raised
            exc.timed_out = True  # type: ignore[attr-defined]
        raise


def _unknown(error: Exception) -> Exception:
    """An acting unit's last failure: when the call itself failed (not a verdict of dagplan's own, made before
    any call), nobody knows whether it acted: the error says so, and a resume asks a person (resume.py)."""
    if not isinstance(error, (StepFailure, Waiting, DagplanError)):
        error.outcome_unknown = True  # type: ignore[attr-defined]
    return error


def timed_out(exc: BaseException) -> bool:
    """Whether an attempt ended because the step's ``timeout`` passed (the attempt may still be running)."""
    return bool(getattr(exc, "timed_out", False))


def the_runs(exc: BaseException) -> bool:
    """Whether what an attempt raised is the run's business, not the unit's: Ctrl-C, or a cancellation the
    run asked for (Ctrl-C, a timeout, an abort: the task is being cancelled). A ``CancelledError`` nobody
    asked for (a tool's own, or one from a task it awaited that was cancelled elsewhere) is the unit's."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    if not isinstance(exc, asyncio.CancelledError):
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop running: nothing could have asked for it but the caller
        return True
    return task is None or task.cancelling() > 0


def as_failure(exc: BaseException) -> Exception:
    """What a unit's attempt raised, as an ordinary exception (``sys.exit()`` in a tool is a failure, and so
    is any other ``BaseException`` the tool raised); the run's own (:func:`the_runs`) is raised again."""
    if isinstance(exc, Exception):
        return exc
    if the_runs(exc):
        raise exc
    if isinstance(exc, SystemExit):
        return ToolExit(f"the tool called sys.exit({exc.code!r})")
    return ToolRaised(exc)


# --- retrying ---------------------------------------------------------------------------------


async def retry(unit: Attempted, once: Callable[[], Awaitable[Any]], error: Exception) -> Any:
    """After a failed attempt: back off and try again while the rules allow; raise the last error.

    The rule is chosen for each error (:func:`retry_rule`); each rule counts its own retries."""
    used: dict[int, int] = {}
    allowed: dict[int, int] = {}
    acting = unit.acts()
    while True:
        if acting and timed_out(error):
            raise _unknown(error)
        rule = retry_rule(unit.step, error, unit.retry_on(), acting)
        if rule is None:
            raise _unknown(error) if acting else error
        key = id(rule)
        used[key] = used.get(key, 0) + 1
        if used[key] > allowed.setdefault(key, rule.limit):
            if rule.limit == 0 or not await unit.extend(error, unit.attempts):
                raise _unknown(error) if acting else error
            allowed[key] += rule.limit
        delay = backoff(rule, used[key])
        trace = frames(error)
        unit.emit(
            EventType.STEP_RETRYING,
            attempt=unit.attempts,
            delay=round(delay, 3),
            error=error_info(unit.id, unit.step, error),
            **({"traceback": trace} if trace else {}),
        )
        await unit.pause(delay)
        unit.attempts += 1
        try:
            return await first(unit.step, once())
        except BaseException as exc:  # judged at the top of the loop (the run's own is raised again)
            error = as_failure(exc)


def retry_rule(
    step: Step, error: BaseException, retry_on: tuple[type[BaseException], ...] = (), acting: bool = False
) -> Retry | None:
    """The retry rule that applies to ``error``, or None (not retried). A step that acts is retried only
    by a ``retry:`` its plan wrote.

    The single form (``retry: {limit: 3}``) retries transient errors. In the per-type form
    (``retry: [{errors: [RateLimitError], limit: 6}, {errors: ["*"], limit: 2}]``) the first
    rule naming one of the error's types (its class, a base class, or the error it wraps)
    applies whatever the type; ``"*"`` stands for any transient error."""
    if acting and not step.retry_given:
        return None
    if not step.retry_rules:
        return step.retry if is_transient(error, retry_on) else None
    if isinstance(error, (StepFailure, Waiting)):
        return None  # dagplan's own verdicts (a bad reference, a gate) never change by retrying
    names = error_names(error)
    for rule in step.retry_rules:
        if "*" in rule.errors and is_transient(error, retry_on):
            return rule
        if any(name in names for name in rule.errors):
            return rule
    return None


def catch_entry(step: Step, error: BaseException | None, recorded_type: str | None = None) -> Catch | None:
    """The ``catch:`` entry a failure (retries spent) is routed to, or None (the failure policy)."""
    if not step.catch:
        return None
    names = error_names(error) if error is not None else (recorded_type,) if recorded_type else ()
    for entry in step.catch:
        if "*" in entry.errors or any(name in names for name in entry.errors):
            return entry
    return None


def is_transient(exc: BaseException, retry_on: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether trying again may help (the one classification of transient errors)."""
    if isinstance(exc, DagplanError):
        return bool(getattr(exc, "transient", False))
    if isinstance(exc, (StepFailure, Waiting, ToolExit)):
        return False
    return isinstance(exc, TRANSIENT + retry_on) or bool(getattr(exc, "retryable", False))


def stops_run(exc: BaseException | None) -> bool:
    """Whether a unit's failure stops the whole run, cleanly (a budget reached, a call a test or a
    cassette cannot answer): the error class says so with ``stops_run = True``."""
    return bool(getattr(exc, "stops_run", False))


def backoff(rule: Retry, attempt: int) -> float:
    """Seconds to wait before retrying after ``attempt`` attempts: doubling, capped, with jitter."""
    base = min(rule.max_backoff, rule.backoff * 2 ** (attempt - 1))
    return base * random.uniform(0.5, 1.0)


# --- how a failure reads ------------------------------------------------------------------------


def error_info(unit_id: str, step: Step, exc: BaseException) -> dict[str, Any]:
    """The error object ``{step, type, message}``: what a branch or a catch receives, what the log keeps."""
    if isinstance(exc, TimeoutError) and not str(exc):
        message = f"timed out after {step.timeout:g}s" if step.timeout else "timed out"
    elif isinstance(exc, DagplanError):
        message = exc.headline.message
    else:
        message = str(exc) or type(exc).__name__
    shown = exc.original if isinstance(exc, ToolRaised) else exc
    info = {"step": unit_id, "type": type(shown).__name__, "message": message}
    cause = getattr(exc, "cause", None)
    if isinstance(cause, Cause):
        info["cause"] = str(cause)
    if getattr(exc, "outcome_unknown", False):
        info["outcome"] = "unknown"  # an acting call that failed, or may still be running: a resume asks
        if timed_out(exc):
            info["message"] += "; it may or may not have acted, and was not tried again"
    return info


def failure_text(error: Mapping[str, Any]) -> str:
    """The failure value dependents of a failed unit receive."""
    return f"(FAILED: {error['type']}: {error['message']})"


def error_names(exc: BaseException) -> tuple[str, ...]:
    """The names an error answers to: its class and bases, and those of the error it wraps."""
    names: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names += [c.__name__ for c in type(current).__mro__ if c not in (object, BaseException, Exception)]
        current = current.__cause__ or getattr(current, "original", None)
    return tuple(dict.fromkeys(names))
