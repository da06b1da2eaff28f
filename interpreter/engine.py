"""The eager executor: runs a valid plan with as much concurrency as its graph allows.

A ready-set scheduler (graphlib's protocol, by hand for speed): every step
waits on a counter of unsettled dependencies; when it reaches zero the step's
arguments are resolved and it either starts, or is skipped (a branch not taken,
a failed dependency under ``skip_dependents``). Settling a step releases its
dependents. With a journal (the durable store), every completion is committed
before any dependent starts; completions that land together share one fsync.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Awaitable, Callable

from ..dsl.errors import DagplanError
from ..dsl.ir import NOT_GIVEN, Output, Plan, Ref, Step
from ..dsl.schedule import Analysis
from . import events as ev
from .events import Event, Subscriber
from .tools import Branch, Tool, TransientError
from .values import MISSING, BadReference, Dead, Resolver, as_text, set_path, thaw, view_text

TRANSIENT = (TimeoutError, ConnectionError, TransientError)
HEAD = 200
_SETTLED = object()  # _start's answer for a step settled without running


class StepFailure(Exception):
    """A step failed for a reason that is not a Python bug in dagplan (bad reference, budget...)."""


class Waiting(Exception):
    """An approval gate has no answer yet: ``request`` says what it waits for (JSON)."""

    def __init__(self, request: dict):
        super().__init__(request.get("question", ""))
        self.request = request


@dataclass
class StepState:
    """Mutable bookkeeping of one step during a run."""

    status: str = "pending"  # pending | running | completed | handled | failed | skipped
    output: Any = MISSING
    attempts: int = 0
    duration: float = 0.0
    error: dict | None = None
    reason: str | None = None
    replayed: bool = False
    alternative: int = 0
    usage: dict | None = None


@dataclass(frozen=True)
class StepReport:
    id: str
    call: str  # the tool name, or "llm"
    status: str
    attempts: int
    duration: float
    output: Any
    error: Mapping[str, Any] | None = None
    reason: str | None = None
    replayed: bool = False

    @property
    def head(self) -> str:
        if self.output is MISSING or self.output is None:
            return ""
        return view_text(as_text(self.output), "head", HEAD)

    def to_json(self) -> dict[str, Any]:
        out = {
            "status": self.status,
            "call": self.call,
            "output": None if self.output is MISSING else self.output,
            "attempts": self.attempts,
            "duration": round(self.duration, 6),
        }
        if self.error:
            out["error"] = dict(self.error)
        if self.reason:
            out["reason"] = self.reason
        if self.replayed:
            out["replayed"] = True
        return out


@dataclass(frozen=True)
class RunResult:
    run_id: str
    status: str  # completed | failed | aborted | interrupted
    had_errors: bool
    result: Any
    steps: Mapping[str, StepReport] = field(repr=False)
    order: tuple[str, ...] = field(repr=False)
    state: Mapping[str, Any] = field(repr=False)
    usage: Mapping[str, Any] = field(default_factory=dict, repr=False)
    message: str = ""  # why the run stopped early (abort, budget)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "message": self.message,
            "had_errors": self.had_errors,
            "result": self.result,
            "steps": {sid: self.steps[sid].to_json() for sid in self.order},
            "usage": dict(self.usage),
        }


LimitHook = Callable[[str, BaseException, int], "bool | Awaitable[bool]"]


@dataclass
class Options:
    """How to run: concurrency, hooks, LLM defaults. Everything has a sensible default."""

    max_concurrency: int = 16
    on_limit_exceeded: LimitHook | None = None
    subscribers: list[Subscriber] = field(default_factory=list)
    model: str | None = None
    completion_kwargs: Mapping[str, Any] = field(default_factory=dict)
    step_max_iterations: int = 5
    max_cost: float | None = None
    max_tokens: int | None = None
    ask_gate: Callable[[Any], Any] | None = None  # answers approval gates interactively (else the run waits)
    default_max_items: int | None = None  # for_each cap when a step gives no max_items
    resume_policy: Mapping[str, str] | None = None  # Config.resume: interrupted children of composition steps
    on_interrupted: Callable[[str, str], str] | None = None  # ("ask"): (child id, purity) -> retry | adopt | fail

    @classmethod
    def from_config(cls, config: Any, **given: Any) -> "Options":
        """The config's values, overridden by what the caller gave (None means "not given")."""
        given = {k: v for k, v in given.items() if v is not None}
        return cls(
            max_concurrency=given.pop("max_concurrency", config.max_concurrency),
            model=given.pop("model", config.default_model),
            completion_kwargs={**config.llm, **given.pop("completion_kwargs", {})},
            step_max_iterations=config.step_max_iterations,
            max_cost=given.pop("max_cost", config.max_cost),
            max_tokens=given.pop("max_tokens", config.max_tokens),
            subscribers=list(given.pop("subscribers", ())),
            **given,
        )


class Execution:
    """One run of one plan. ``await execution.run()`` -> :class:`RunResult`."""

    def __init__(
        self,
        plan: Plan,
        analysis: Analysis,
        tools: Mapping[str, Tool],
        inputs: Mapping[str, Any],
        run_id: str,
        options: Options | None = None,
        journal: Any = None,
        replay: Mapping[str, StepState] | None = None,
    ):
        self.plan, self.analysis, self.tools = plan, analysis, tools
        self.inputs, self.run_id = inputs, run_id
        self.options = options or Options()
        self.journal = journal
        self.state: dict = thaw(plan.initial_state)
        self.steps = {sid: StepState() for sid in analysis.order}
        self.replay = dict(replay or {})
        self.resolver = Resolver(inputs, self.state, self._placeholder_text)
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0, "llm_calls": 0}
        for recorded in self.replay.values():
            for key in ("prompt_tokens", "completion_tokens", "cost"):
                self.usage[key] += (recorded.usage or {}).get(key, 0)
        self._waiting = {sid: len(analysis.deps[sid]) for sid in analysis.order}
        self._settled = 0
        self._tasks: set[asyncio.Task] = set()
        self._aborted = False
        self.child_failures = 0  # failed fan-out items: their slots hold the failure text
        self.abort_reason = ""
        limit = max(1, self.options.max_concurrency)
        self._limit = asyncio.Semaphore(limit) if limit < len(self.steps) else None
        self._pool: ThreadPoolExecutor | None = None
        self._budget: Any = None  # llm.Budget, created with the first LLM step
        self._sinks = bool(self.options.subscribers) or journal is not None
        self.waiting: list[dict] = []  # approval gates the run stopped at (see interpreter.compose)

    # --- the run ------------------------------------------------------------------------

    async def run(self) -> RunResult:
        self._finished = asyncio.get_running_loop().create_future()
        self._emit(ev.PLAN_STARTED, steps=len(self.steps), resumed=bool(self.replay))
        try:
            await self._commit()
            self._release([sid for sid in self.analysis.order if self._waiting[sid] == 0])
            if self._settled < len(self.steps):
                await self._finished
            return await self._finish()
        except BaseException:  # Ctrl-C, cancellation, or an error of the store: state is kept
            await self._interrupt()
            raise
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)

    async def _finish(self) -> RunResult:
        if self.waiting:
            return await self._stop_waiting()
        result = self._result()
        failed = self.child_failures > 0 or any(s.status == "failed" for s in self.steps.values())
        status = "aborted" if self._aborted else ("failed" if failed and self.plan.on_failure == "abort" else "completed")
        self._emit(ev.PLAN_COMPLETED, status=status, had_errors=failed, message=self.abort_reason, usage=self.usage,
                   result=result)
        await self._commit()
        return RunResult(self.run_id, status, failed, result, self._reports(), self.analysis.order, self.state,
                         self.usage, self.abort_reason)

    async def _interrupt(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._emit(ev.PLAN_INTERRUPTED)
        if self.journal is not None:
            self.journal.commit_sync()

    # --- scheduling ---------------------------------------------------------------------

    def _release(self, ready: list[str], inline: bool = False) -> tuple[Step, tuple] | None:
        """Start or settle each ready step (settling may free more, so loop instead of recursing).

        With ``inline``, one step to run is handed back to the calling task instead of a
        new task: a chain then runs in one task, with no task created per step.
        """
        if not ready:
            return None
        queue, mine = deque(ready), None
        while queue:
            sid = queue.popleft()
            todo = self._start(sid)
            if todo is _SETTLED:
                queue.extend(self._settle(sid))
            elif todo is not None:
                if inline and mine is None:
                    mine = todo
                else:
                    self._spawn(*todo)
        return mine

    def _spawn(self, step: Step, call: tuple) -> None:
        self._tasks.add(asyncio.ensure_future(self._execute(step, call)))

    def _settle(self, sid: str) -> list[str]:
        self._settled += 1
        if self._settled == len(self.steps) and not self._finished.done():
            self._finished.set_result(None)
        now_ready = []
        for dep in self.analysis.dependents.get(sid, ()):
            self._waiting[dep] -= 1
            if self._waiting[dep] == 0:
                now_ready.append(dep)
        return now_ready

    def _start(self, sid: str) -> tuple[Step, tuple] | object | None:
        """What to do with a ready step: ``(step, call)`` to run it, ``_SETTLED`` when it was
        settled without running (skipped, replayed, failed early), None to leave it pending."""
        step = self.plan.by_id[sid]
        if self.waiting:
            return None  # waiting for a person: start nothing new, leave it pending (not settled)
        blocked = self.abort_reason if self._aborted else self._blocked_by(step)
        if blocked:
            self._skip(sid, blocked)
        elif sid in self.replay:
            self._replay(step, self.replay[sid])
        elif step.precomputed is not NOT_GIVEN:
            self._complete_precomputed(step)
        else:
            try:
                return step, self._prepare(step)
            except Dead as dead:
                self._skip(sid, f"{dead.ref} was never written (branch not taken)")
            except (BadReference, StepFailure) as exc:
                self._fail(step, exc)
        return _SETTLED

    def _complete_precomputed(self, step: Step) -> None:
        try:
            alternative, value = self._choose(step, thaw(step.precomputed))
        except StepFailure as exc:
            self._fail(step, exc)
            return
        self._complete(step, value, precomputed=True, alternative=alternative)

    def _blocked_by(self, step: Step) -> str | None:
        for dep in self.analysis.deps[step.id]:
            status = self.steps[dep].status
            if status == "skipped" and dep in step.deps:
                return f"it depends on {dep}, which was skipped"
            if status == "failed" and self.plan.on_failure == "skip_dependents":
                return f"it depends on {dep}, which failed"
        return None

    def _prepare(self, step: Step) -> tuple:
        """Resolve what the step needs now that its dependencies are settled.

        Raises Dead when it reads a path nobody wrote or a skipped step's placeholder.
        """
        if step.for_each is not None or step.llm is None and step.tool is None:
            from . import compose  # fan-out, sub-plans, loops, gates

            return compose.prepare(self, step)
        if step.llm is not None:
            prompt = self.resolver.value(step.llm.prompt)
            system = self.resolver.value(step.llm.system) if step.llm.system else None
            return ("llm", prompt, system)
        return ("tool", self.resolver.value(step.args))

    # --- executing a step ---------------------------------------------------------------

    async def _execute(self, step: Step, call: tuple) -> None:
        """A step task: its chain of steps, then its bookkeeping (no done-callback: the hot path)."""
        try:
            await self._run_chain(step, call)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # disk full, a bug: the run ends loudly instead of hanging
            if not self._finished.done():
                self._finished.set_exception(exc)
        finally:
            self._tasks.discard(asyncio.current_task())
            if self.waiting and not self._tasks and not self._finished.done():
                self._finished.set_result(None)  # nothing left running: stop in the waiting state

    async def _run_chain(self, step: Step, call: tuple) -> None:
        """Run a step, then, in the same task, one of the steps it made ready (and so on)."""
        todo: tuple[Step, tuple] | None = (step, call)
        while todo is not None:
            step, call = todo
            state = self.steps[step.id]
            state.status = "running"
            try:
                if self._limit is None:
                    ready = await self._run_step(step, call)
                else:
                    async with self._limit:
                        ready = await self._run_step(step, call)
                if self.journal is not None:
                    await self.journal.commit()  # durable before any dependent starts
                todo = self._release(ready, inline=True)
            except asyncio.CancelledError:
                if not self._aborted:
                    state.status = "interrupted"
                    raise
                state.status, state.reason = "skipped", self.abort_reason
                self._release(self._settle(step.id))
                return

    async def _run_step(self, step: Step, call: tuple) -> list[str]:
        """Run the step's attempts and settle it; returns the dependents it made ready."""
        state = self.steps[step.id]
        started = time.perf_counter()
        if self._has_sinks():
            self._emit(ev.STEP_STARTED, step.id, description=step.label)
        if self.journal is not None and _needs_intent(step, self.tools):
            await self.journal.commit()  # a side effect never starts before its intent is durable
        try:
            state.attempts += 1
            try:
                result = await self._attempt(step, call)
            except Exception as exc:  # retried if transient, else the step's failure
                result = await self._retry(step, call, exc)
            alternative, value = self._choose(step, result)
        except asyncio.CancelledError:
            raise
        except Waiting as wait:
            state.duration = time.perf_counter() - started
            return self._wait(step, wait)
        except Exception as exc:  # noqa: BLE001 - any tool error is the step's failure, not ours
            state.duration = time.perf_counter() - started
            return self._settle_failure(step, exc)
        state.duration = time.perf_counter() - started
        self._complete(step, value, alternative=alternative)
        return self._settle(step.id)

    def _attempt(self, step: Step, call: tuple) -> Awaitable[Any]:
        if step.timeout is None or call[0] == "compose":  # a fan-out times each item, not the whole
            return self._invoke(step, call)
        return self._timed(step, call)

    async def _timed(self, step: Step, call: tuple) -> Any:
        async with asyncio.timeout(step.timeout):
            return await self._invoke(step, call)

    async def _retry(self, step: Step, call: tuple, error: Exception) -> Any:
        """After a failed attempt: back off and try again while the error is transient and budget remains."""
        state = self.steps[step.id]
        budget = step.retry.limit
        while True:
            if not self._transient(step, error):
                raise error
            if state.attempts > budget and not await self._extend(step, error, state.attempts):
                raise error
            if state.attempts > budget:
                budget += step.retry.limit
            delay = _backoff(step, state.attempts)
            self._emit(ev.STEP_RETRYING, step.id, attempt=state.attempts, delay=round(delay, 3),
                       error=_error_info(step, error))
            await asyncio.sleep(delay)
            state.attempts += 1
            try:
                return await self._attempt(step, call)
            except Exception as exc:  # noqa: BLE001 - judged at the top of the loop
                error = exc

    def _invoke(self, step: Step, call: tuple) -> Awaitable[Any]:
        """The awaitable of one attempt (no coroutine of its own: this is the hot path)."""
        if call[0] == "llm":
            from . import llm_step  # litellm stays unimported until a plan actually has an LLM step

            return llm_step.invoke(self, step, call[1], call[2])
        if call[0] == "compose":
            from . import compose

            return compose.invoke(self, step, call[1])
        tool = self.tools.get(step.tool or "")
        if tool is None:
            raise StepFailure(f"tool {step.tool!r} is not available to this run")
        args = call[1]
        if tool.is_async:
            return tool.fn(**args)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=max(1, self.options.max_concurrency), thread_name_prefix="dagplan-tool")
        return asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(tool.fn, **args))


    def _transient(self, step: Step, exc: BaseException) -> bool:
        if isinstance(exc, DagplanError):
            return bool(getattr(exc, "transient", False))
        tool = self.tools.get(step.tool or "")
        extra = tool.retry_on if tool else ()
        return isinstance(exc, TRANSIENT + tuple(extra)) or bool(getattr(exc, "retryable", False))

    async def _extend(self, step: Step, exc: BaseException, attempts: int) -> bool:
        hook = self.options.on_limit_exceeded
        if hook is None or step.retry.limit == 0:
            return False
        answer = hook(step.id, exc, attempts)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return bool(answer)

    # --- settling -----------------------------------------------------------------------

    def _settle_failure(self, step: Step, exc: BaseException) -> list[str]:
        self._fail(step, exc)
        if getattr(exc, "code", None) == "budget-exceeded":
            self._abort(exc.headline.message)  # a budget stops the whole run, cleanly
        elif self.plan.on_failure == "abort" and self.steps[step.id].status == "failed":
            self._abort()
        return self._settle(step.id)

    def _complete(self, step: Step, value: Any, precomputed: bool = False, alternative: int = 0) -> bool:
        state = self.steps[step.id]
        self._write(step.output, alternative, value)
        state.status, state.output, state.alternative = "completed", value, alternative
        if precomputed:
            state.attempts = 0
        if self.journal is not None:
            self.journal.complete_step(
                step.id, value, attempts=state.attempts, duration=state.duration, replayed=False,
                alternative=alternative, precomputed=precomputed, usage=state.usage,
            )
        if self.options.subscribers:
            self._emit_only(ev.STEP_COMPLETED, step.id, state.duration, attempts=state.attempts, replayed=False,
                       precomputed=precomputed, alternative=alternative, head=view_text(as_text(value), "head", 80))
        return True

    def _replay(self, step: Step, recorded: StepState) -> bool:
        """A result recorded by an earlier attempt of this run: restore it, call nothing."""
        state = self.steps[step.id]
        self._write(step.output, recorded.alternative, recorded.output)
        state.status, state.output, state.alternative = recorded.status, recorded.output, recorded.alternative
        state.attempts, state.replayed, state.error = recorded.attempts, True, recorded.error
        if recorded.status == "failed":
            self._emit(ev.STEP_FAILED, step.id, 0.0, error=recorded.error, attempts=state.attempts, replayed=True)
        else:
            self._emit(ev.STEP_COMPLETED, step.id, 0.0, attempts=state.attempts, replayed=True,
                       alternative=state.alternative)
        return True

    def _fail(self, step: Step, exc: BaseException) -> bool:
        state = self.steps[step.id]
        info = _error_info(step, exc)
        state.error = info
        if step.output is not None and step.output.branching:
            # the error object takes the last alternative: the plan handles the failure itself
            self._write(step.output, len(step.output.alternatives) - 1, dict(info))
            state.status, state.output = "handled", dict(info)
            state.alternative = len(step.output.alternatives) - 1
        else:
            state.status = "failed"
            state.output = f"(FAILED: {info['type']}: {info['message']})"
            if self.plan.on_failure == "continue":
                self._write(step.output, 0, state.output)
                for target in step.output.alternatives[0] if step.output else ():
                    self.resolver.failed[target.path] = state.output
        if self.journal is not None:
            self.journal.append({"type": ev.STEP_FAILED, "run_id": self.run_id, "step": step.id, "error": info,
                                 "attempts": state.attempts, "handled": state.status == "handled",
                                 "alternative": state.alternative})
        if self._has_sinks():
            self._emit_only(ev.STEP_FAILED, step.id, state.duration, error=info, attempts=state.attempts,
                            handled=state.status == "handled")
        return True

    def _wait(self, step: Step, wait: "Waiting") -> list[str]:
        """An approval gate without an answer: the step stays unsettled and nothing new starts."""
        self.steps[step.id].status = "waiting"
        self.waiting.append(wait.request)
        if self.journal is not None:  # pending again on resume (a skipped step is re-evaluated)
            self.journal.append({"type": ev.STEP_SKIPPED, "run_id": self.run_id, "step": step.id,
                                 "reason": "waiting for an answer"})
        return []

    async def _stop_waiting(self) -> RunResult:
        self._emit("plan_waiting", waiting=self.waiting)
        await self._commit()
        message = "waiting for an answer at " + ", ".join(w["step"] for w in self.waiting)
        return RunResult(self.run_id, "waiting", False, None, self._reports(), self.analysis.order, self.state,
                         self.usage, message)

    def _skip(self, sid: str, reason: str) -> bool:
        state = self.steps[sid]
        state.status, state.reason = "skipped", reason
        self._emit(ev.STEP_SKIPPED, sid, reason=reason)
        return True

    def _abort(self, reason: str = "the run was aborted") -> None:
        self._aborted = True
        self.abort_reason = reason
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()

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

    # --- reading --------------------------------------------------------------------------


    def _placeholder_text(self, sid: str) -> str:
        state = self.steps.get(sid)
        if state is None or state.status == "skipped" or state.output is MISSING:
            raise Dead(Ref("state", (f"#{sid}",)))
        return as_text(state.output)

    def _result(self) -> Any:
        if self.plan.result is not None:
            try:
                return self.resolver.value(self.plan.result)
            except (Dead, BadReference):
                return None
        last = self.steps[self.analysis.order[-1]] if self.analysis.order else None
        return None if last is None or last.output is MISSING else last.output

    def _reports(self) -> dict[str, StepReport]:
        out = {}
        for sid in self.analysis.order:
            step, st = self.plan.by_id[sid], self.steps[sid]
            status = "skipped" if st.status in ("pending", "interrupted") and self._aborted else st.status
            out[sid] = StepReport(sid, step.tool or step.kind, status, st.attempts, st.duration, st.output, st.error,
                                  st.reason, st.replayed)
        return out

    # --- events ---------------------------------------------------------------------------

    def _has_sinks(self) -> bool:
        return self._sinks

    def _emit(self, type_: str, step: str | None = None, duration: float | None = None, **data: Any) -> None:
        """Journal the event (if durable) and hand it to subscribers."""
        if self.journal is not None:
            self.journal.append({"type": type_, "run_id": self.run_id, "step": step, "duration": duration, **data})
        self._emit_only(type_, step, duration, **data)

    def _emit_only(self, type_: str, step: str | None = None, duration: float | None = None, **data: Any) -> None:
        if not self.options.subscribers:
            return
        event = Event(type_, self.run_id, step, time.time(), duration, data)
        for subscriber in self.options.subscribers:
            try:
                subscriber(event)
            except Exception:  # noqa: BLE001 - a broken progress view must not break the run
                pass

    async def _commit(self) -> None:
        if self.journal is not None:
            await self.journal.commit()



def _needs_intent(step: Step, tools: Mapping[str, Tool]) -> bool:
    tool = tools.get(step.tool or "")
    purity = step.purity or (tool.purity if tool else None)
    return purity == "side_effect"


def _backoff(step: Step, attempt: int) -> float:
    base = min(step.retry.max_backoff, step.retry.backoff * 2 ** (attempt - 1))
    return base * random.uniform(0.5, 1.0)


def _error_info(step: Step, exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, TimeoutError) and not str(exc):
        message = f"timed out after {step.timeout:g}s" if step.timeout else "timed out"
    elif isinstance(exc, DagplanError):
        message = exc.headline.message
    else:
        message = str(exc) or type(exc).__name__
    return {"step": step.id, "type": type(exc).__name__, "message": message}


def _alternative_index(output: Output, chosen: int | str, step_id: str) -> int:
    if isinstance(chosen, int):
        if 0 <= chosen < len(output.alternatives):
            return chosen
        raise StepFailure(f"step {step_id} chose alternative {chosen}, but its output has {len(output.alternatives)}")
    wanted = chosen.strip().lstrip("\u2020$")
    for index, alt in enumerate(output.alternatives):
        if any(str(ref).lstrip("\u2020") == wanted for ref in alt):
            return index
    choices = ", ".join(str(o) for alt in output.alternatives for o in alt)
    raise StepFailure(f"step {step_id} chose {chosen!r}, which is not one of its output paths ({choices})")




__all__ = ["Execution", "Options", "RunResult", "StepReport", "StepState"]
