"""What one run shares: options, tools, the journal, the replay, the budget, and the one event function.

A run is a root :class:`~.engine.Execution` and the child executions of its sub-plans;
they all share one :class:`RunScope`, so a sub-plan's model calls are charged to the
run's budget, its gates make the run wait, its events go to the same journal and
subscribers with their full ids, and its sync tools use the same worker threads.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Mapping

from ...dsl.ir import Plan, Step, can_act
from ...dsl.validate_tools import JSON_TYPES, argument_problem
from .attempts import GateTimeout, StepFailure, Waiting, no_answer_within
from .resume import Replay
from ..core.printed import routed
from ..core.redact import redact
from ..tools.catalog import Tool, WorkerThreads
from ..core.values import MISSING, json_value
from ..core.vocabulary import Answered, Cause, Channel, Event, EventType, StepStatus, Subscriber, answer_refused

LimitHook = Callable[[str, BaseException, int], "bool | Awaitable[bool]"]
AskGate = Callable[[Mapping[str, Any]], Any]


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
    ask_gate: AskGate | None = None  # answers approval gates interactively (else the run waits)
    default_max_items: int | None = None  # for_each cap when a step gives no max_items
    calls: Any = None  # a calls.Calls standing between the run and its tools and models (mocks, a cassette)
    backoff_scale: float = 1.0  # times each retry's backoff (0 in plan tests: retries do not wait)
    executor: str | None = None  # "ray": tool calls run as Ray tasks (a tool's own executor wins)
    ray: Mapping[str, Any] = field(default_factory=dict)  # ray.init() arguments: address, num_cpus, ...
    notifiers: Mapping[str, Any] = field(default_factory=dict)  # [notify.NAME]: who is told a gate waits
    given: frozenset[str] = frozenset()  # the options the caller gave (not the configuration's defaults)
    person_gates: bool = False  # every gate only a person may answer (a plan from a model: MCP, the planner)
    reuse: Any = None  # a reuse.Reuse: results of earlier runs by step fingerprint (`run --reuse RUN`)
    gate_acting: bool = False  # a streamed plan runs with a person's gate before what acts (ops/approval.py)
    redact: tuple[str, ...] | None = None  # the project's `redact` patterns (None: the configuration loaded)

    def recorded(self) -> dict[str, Any]:
        """What a durable run keeps of the options it was given, so that a resume runs the same way."""
        return {name: getattr(self, name) for name in RECORDED if name in self.given}

    def resumed(self, recorded: Mapping[str, Any] | None) -> "Options":
        """These options with what the run was started with, except where given again now."""
        kept = {k: v for k, v in (recorded or {}).items() if k in RECORDED and k not in self.given}
        return replace(self, **kept) if kept else self

    def limited_by(self, plan: Plan) -> "Options":
        """These options under the plan's own ``max_cost`` / ``max_tokens`` (the smaller limit applies)
        and its ``executor`` (where its tool calls run, when it says)."""
        cost, tokens = _smaller(self.max_cost, plan.max_cost), _smaller(self.max_tokens, plan.max_tokens)
        executor = plan.executor or self.executor  # the plan says where its tools run; else the run's default
        if (cost, tokens, executor) == (self.max_cost, self.max_tokens, self.executor):
            return self
        return replace(self, max_cost=cost, max_tokens=tokens, executor=executor)

    @classmethod
    def from_config(cls, config: Any, **given: Any) -> "Options":
        """The config's values, overridden by what the caller gave (None means "not given")."""
        given = {k: v for k, v in given.items() if v is not None}
        named = frozenset(given)
        return cls(
            given=named,
            max_concurrency=given.pop("max_concurrency", config.max_concurrency),
            model=given.pop("model", config.default_model),
            completion_kwargs={**config.llm, **given.pop("completion_kwargs", {})},
            step_max_iterations=config.step_max_iterations,
            max_cost=given.pop("max_cost", config.max_cost),
            max_tokens=given.pop("max_tokens", config.max_tokens),
            subscribers=list(given.pop("subscribers", ())),
            default_max_items=given.pop("default_max_items", config.max_items),
            executor=given.pop("executor", config.executor),
            ray=dict(config.ray),
            notifiers=dict(getattr(config, "notify", {}) or {}),
            redact=tuple(getattr(config, "redact", ()) or ()),
            **given,
        )


def bad_arguments(tool: Tool, args: Mapping[str, Any]) -> None:
    """``bad-argument`` (a StepFailure) when a value does not fit the tool's parameter types:
    ``dsl/validate_tools.argument_problem``, the rule ``check`` applies where it knows the type (asked only of
    an argument whose type is not among the tool's sets, worked out once: the hot path is a lookup each)."""
    types = tool.parameter_types
    if not types:
        return
    for name, value in args.items():
        wanted = types.get(name)
        if wanted is not None and JSON_TYPES.get(type(value)) not in wanted:
            problem = argument_problem(tool.parameters, name, value)
            if problem is not None:
                raise StepFailure(f"bad-argument: {problem} (tool {tool.name})")


# what an event tells a person, never a value the run reads back: an error, a gate's request, a message
_TOLD = frozenset(("error", "request", "waiting", "message", "reason"))


# execution options a run records and a resume keeps (never hooks, keys or completion arguments: secrets)
RECORDED = ("max_concurrency", "model", "max_cost", "max_tokens", "executor", "person_gates", "gate_acting")


def _smaller(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


class Unit:
    """One unit of work and its bookkeeping: a plan step, a fan-out item, a loop iteration."""

    __slots__ = (
        "scope",
        "id",
        "step",
        "status",
        "output",
        "attempts",
        "duration",
        "error",
        "reason",
        "replayed",
        "alternative",
        "usage",
        "fingerprint",
        "reused",
        "taken",
        "trace",
        "tainted",
        "held",
    )

    def __init__(self, scope: "RunScope", unit_id: str, step: Step):
        self.scope, self.id, self.step = scope, unit_id, step
        self.status = StepStatus.PENDING
        self.output: Any = MISSING
        self.attempts = 0
        self.duration = 0.0
        self.error: Mapping[str, Any] | None = None
        self.reason: str | None = None
        self.replayed = False
        self.alternative = 0
        self.usage: Mapping[str, Any] | None = None
        self.fingerprint: str | None = None  # what determined its result (reuse.py), when the run keeps them
        self.reused: str | None = None  # the run its result was taken from (`--reuse`)
        self.taken: tuple[int, str] | None = None  # a fan-out's items taken from another run: (how many, from)
        self.trace: list | None = None  # where its tool failed: the user's frames (core/trace.py)
        self.tainted: str | None = None  # the failed unit whose failure its value carries (world.py), if any
        self.held: Cause | None = None  # why the gate to the world held it back (refused, input-failed), if it did

    # the attempt policy's view (attempts.Attempted)

    def emit(self, type_: EventType, **data: Any) -> None:
        self.scope.emit(type_, self.id, **data)

    def retry_on(self) -> tuple[type[BaseException], ...]:
        tool = self.scope.tools.get(self.step.tool or "")
        return tool.retry_on if tool is not None else ()

    def acts(self) -> bool:
        return self.scope.acts(self.step)

    def pause(self, seconds: float) -> Awaitable[None]:
        return asyncio.sleep(seconds * self.scope.options.backoff_scale)

    async def extend(self, error: BaseException, attempts: int) -> bool:
        hook = self.scope.options.on_limit_exceeded
        if hook is None:
            return False
        answer = hook(self.id, error, attempts)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return bool(answer)


class RunScope:
    """The run-wide part of an execution (see the module doc)."""

    def __init__(
        self,
        run_id: str,
        tools: Mapping[str, Tool],
        options: Options | None = None,
        journal: Any = None,
        replay: Replay | None = None,
    ):
        self.run_id, self.tools = run_id, tools
        self.options = options or Options()
        self.journal = journal
        self.replay = replay or Replay()
        self.subscribers = self.options.subscribers
        self.sinks = bool(self.subscribers) or journal is not None
        self.reuse = self.options.reuse
        self.fingerprinting = journal is not None or self.reuse is not None  # a durable run keeps fingerprints
        routed()  # what tools print is kept with their steps (core/printed.py)
        self._in_place: dict[str, bool] = {}  # by tool name: its part of the in-place rule
        self._acts: dict[int, bool] = {}  # by step: whether it can act on the world (world.py)
        self.usage: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0, "llm_calls": 0}
        for recorded in self.replay.units.values():
            for key in ("prompt_tokens", "completion_tokens", "cost"):
                self.usage[key] += (recorded.usage or {}).get(key, 0)
        self.waiting: list[dict] = []  # the gate requests the run stopped at
        self.child_failures = 0  # failed children (items, sub-plans' steps): the run reports had_errors
        self.executions: list[Any] = []  # the root and the running sub-plans (for a run-wide abort)
        self._budget: Any = None
        self._threads: WorkerThreads | None = None
        self._notices: set[asyncio.Future] = set()  # gates' notices being sent

    # --- the one way an event leaves the engine ---

    def emit(self, type_: EventType, step: str | None = None, duration: float | None = None, **data: Any) -> None:
        """Journal the event (when the run is durable and the type is journaled) and hand it to subscribers."""
        if not self.sinks:
            return
        if type_ is EventType.TOOL_CALLED:  # a record of the call, not a value the run needs: no secrets in it
            data["args"] = redact(data.get("args"))
        for told in _TOLD.intersection(data):  # what people read of a failure or a gate, masked once, here
            data[told] = redact(data[told])
        event = Event(type_, self.run_id, step, time.time(), duration, data)
        if self.journal is not None and type_.journaled:
            self.journal.record(event)
        for subscriber in self.subscribers:
            try:
                subscriber(event)
            except Exception:  # noqa: BLE001 - a broken progress view must not break the run
                pass

    async def commit(self) -> None:
        if self.journal is not None:
            await self.journal.commit()

    async def warm_up(self, plan: Plan) -> None:
        """Load, before the run's clock starts, what its steps would load on their first call (litellm,
        about 3 s; Ray's start): a step's duration is its own work, not an import. Never raises: a step
        that needs what failed to load says so itself."""
        if getattr(self.options.calls, "offline", False):
            return
        from ..llm.local import is_local

        models = {s.llm.model or self.options.model for s in plan.llm_steps if s.llm is not None}
        executor = plan.executor or self.options.executor
        tools = [self.tools[name] for name in plan.tool_names if name in self.tools]
        on_ray = any((tool.executor or executor) == "ray" for tool in tools)
        try:
            if any(model and not is_local(model) for model in models):
                from ..llm import conversation

                await asyncio.to_thread(conversation.litellm_module)
            if on_ray:
                from .ray_exec import ray_module

                await asyncio.to_thread(ray_module, self.options.ray)
        except Exception:  # noqa: BLE001 - e.g. ray not installed: the step's own error tells
            pass

    # --- what runners use ---

    def in_place(self, step: Step) -> bool:
        """The one rule for a step run without a task of its own (engine/execution.py ``_spawn``): a local
        tool whose call answers without waiting (:attr:`~..tools.catalog.Tool.never_waits`), with no timeout
        (``asyncio.timeout`` cancels the task it was entered in), called for real (no fakes, no Ray), once
        (not a fan-out's items). The tool's part is kept per tool name: a chain of one tool asks it once."""
        name = step.tool
        if name is None or step.timeout is not None or step.for_each is not None:
            return False
        found = self._in_place.get(name)
        if found is None:
            tool = self.tools.get(name)
            found = self._in_place[name] = (
                tool is not None and self.options.calls is None
                and (tool.executor or self.options.executor) != "ray" and tool.never_waits
            )  # fmt: skip
        return found

    def call_tool(self, name: str, args: Mapping[str, Any], unit_id: str = "") -> Awaitable[Any]:
        tool = self.tools.get(name)
        calls = self.options.calls
        if calls is not None:
            real = None if tool is None else lambda: self._call(tool, self._keyed(tool, args, unit_id), unit_id)
            return calls.tool(unit_id, name, args, real)
        if tool is None:
            raise StepFailure(f"tool {name!r} is not available to this run")
        return self._call(tool, self._keyed(tool, args, unit_id), unit_id)

    def _keyed(self, tool: Tool, args: Mapping[str, Any], unit_id: str) -> Mapping[str, Any]:
        """The arguments, with the unit's idempotency key when the tool declares ``idempotency_key``."""
        if not tool.takes_idempotency_key:
            return args
        from ..tools.catalog import IDEMPOTENCY_KEY, idempotency_key

        return {**args, IDEMPOTENCY_KEY: idempotency_key(self.run_id, unit_id)}

    def _call(self, tool: Tool, args: Mapping[str, Any], unit_id: str = "") -> Awaitable[Any]:
        """The real call (a mock, a fake or a cassette answers in its place before this): a value that does
        not fit the tool's parameter types fails the step first (``check``'s rule, had it known the value)."""
        if args:
            bad_arguments(tool, args)
        if (tool.executor or self.options.executor) == "ray":
            from .ray_exec import call_on_ray

            return call_on_ray(tool, args, self.options.ray)
        if tool.is_async:
            return tool.fn(**args)
        if self._threads is None:
            self._threads = WorkerThreads(self.options.max_concurrency)
        return self._threads.run(tool.fn, args)  # in the caller's context: what it prints goes where the step's does

    def printed(self, unit_id: str, buffer: Any) -> None:
        """What a tool printed while its unit ran (core/printed.py ``Printed``), kept with the unit, redacted."""
        if self.sinks:
            self.emit(EventType.STEP_PRINTED, unit_id, text=redact(buffer.text()))

    def acts(self, step: Step) -> bool:
        """Whether running ``step`` can act on the world (the one purity rule, :func:`dsl.ir.can_act`),
        asked once a step."""
        found = self._acts.get(id(step))
        if found is None:
            found = self._acts[id(step)] = can_act(step, self.tools)
        return found

    def memo(self, unit_id: str) -> Any:
        if self.journal is None:
            return None
        from ..stores.journal import StepMemo

        return StepMemo(self.journal, unit_id)

    def budget(self) -> Any:
        """The run's budget, created with its first model step, seeded with what replayed steps spent."""
        if self._budget is None:
            from ..llm.conversation import Budget

            usage, options = self.usage, self.options
            self._budget = Budget(
                options.max_cost,
                options.max_tokens,
                prompt_tokens=usage["prompt_tokens"],
                completion_tokens=usage["completion_tokens"],
                cost=usage["cost"],
            )
        return self._budget

    def spend(self, usage: Mapping[str, Any]) -> None:
        self.usage["prompt_tokens"] += usage.get("prompt_tokens", 0)
        self.usage["completion_tokens"] += usage.get("completion_tokens", 0)
        self.usage["cost"] += usage.get("cost", 0.0)
        self.usage["llm_calls"] += usage.get("calls", 0)

    async def answer(self, unit_id: str, request: Mapping[str, Any]) -> Any:
        """A gate's answer: the recorded one, else one asked now (and recorded), else the run waits."""
        found, value = self.replay.answer(unit_id)
        if found:
            return value
        if isinstance(request, dict) and request.get("timeout") is not None and self._past_deadline(unit_id, request):
            return self._timed_out(unit_id, request)
        ask = self.options.ask_gate
        if ask is None:
            if request.get("notify") and unit_id not in self.replay.waited:  # told once: when it first waits
                self._notify(unit_id, request)
            raise Waiting(request)
        value = ask(request)
        if asyncio.iscoroutine(value):
            value = await value
        answered = value if isinstance(value, Answered) else Answered(value)
        if answer_refused(request, answered.channel):  # a model's channel at a person's gate: a person answers
            raise Waiting(request)
        value = json_value(answered.value)
        self.emit(EventType.GATE_ANSWERED, unit_id, value=value, channel=answered.channel.value,
                  who=answered.who)  # fmt: skip  # a resumed run must not ask again
        return value

    def _past_deadline(self, unit_id: str, request: dict) -> bool:
        """A gate's deadline, counted from when it first waited (kept in its request across resumes)."""
        from ..core.clock import now

        earlier = self.replay.waited.get(unit_id) or {}
        moment = now()
        request["deadline"] = earlier.get("deadline") or round(moment + request["timeout"], 3)
        return moment >= request["deadline"]

    def _timed_out(self, unit_id: str, request: dict) -> Any:
        """Nobody answered in time: ``on_timeout`` fails the gate (GateTimeout), or answers in a person's place
        (recorded like an answer, marked ``timed_out``: a resumed run does not decide again)."""
        request["timed_out"] = True
        if request.get("on_timeout", "fail") == "fail":
            raise GateTimeout(no_answer_within(request["timeout"]))
        value = request["on_timeout"]
        self.emit(EventType.GATE_ANSWERED, unit_id, value=value, timed_out=True, channel=Channel.TIMEOUT.value)
        return value

    def abort(self, reason: str, skipped: str | None = None) -> None:
        """Stop the whole run (a budget was reached): every execution stops starting work; ``skipped`` is
        the reason given to the steps it never started (``reason`` by default)."""
        for execution in list(self.executions):
            execution.abort(reason, skipped)

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown()

    def _notify(self, unit_id: str, request: Mapping[str, Any]) -> None:
        """The gate's notices, sent in a task of their own: the run goes on (to its waiting state)."""
        from ..observe.notify import message, send

        body = message(self.run_id, {**request, "step": unit_id})
        self._notices.add(asyncio.ensure_future(send(self.options.notifiers, request["notify"], body)))

    async def settle_notices(self) -> None:
        """At the end of the run: wait a bounded time for notices still on their way (never raises)."""
        if not self._notices:
            return
        from ..observe.notify import SETTLE

        await asyncio.wait(self._notices, timeout=SETTLE)

    async def close_sources(self) -> None:
        """End what the run's tools called through (an MCP server's session, opened on its first call)."""
        sources = {id(tool.source): tool.source for tool in self.tools.values() if tool.source is not None}
        for source in sources.values():
            try:
                await source.aclose()
            except Exception:  # noqa: BLE001 - a session that fails to close must not fail the finished run
                pass
