"""One vocabulary for runs: the statuses of steps and runs, the types of events, the event value.

Every status and event type is a member of an enum defined here, and nowhere else is
one spelled as a string. The enums are ``StrEnum``: a member *is* the text the journal
stores and JSON shows (``StepStatus.COMPLETED == "completed"``), so the mapping to what
is stored is this file.

Events are frozen values handed, through one function of the engine, to the run's
journal and to every subscriber. What each type carries in ``data``:

=====================  ==============================================================
``plan_started``       ``steps`` (count), ``resumed``
``plan_resumed``       ``from`` (the ``--from`` step or null), ``replayed`` (ids)
``plan_waiting``       ``waiting``: the gate requests the run stopped at
``plan_completed``     ``status`` (a :class:`RunStatus`), ``had_errors``, ``message``,
                       ``usage``, ``result``
``plan_run_interrupted`` (Ctrl-C, a signal, an error of the journal)
``plan_aborted``       ``reason`` (a discarded run)
``plan_timed_out``     ``timeout`` (seconds): the plan's timeout passed; running steps were cancelled
``plan_steps_cleared`` ``from``, ``steps``: results forgotten by ``resume --from``
``plan_step_started``  ``attempt``, ``description``, ``item`` / ``iteration`` for children
``plan_step_retrying`` ``attempt`` (the one that failed), ``delay``, ``error``
``plan_step_completed`` ``output``, ``attempts``, ``alternative``, ``replayed``,
                       ``precomputed``, ``adopted``, ``usage``
``plan_step_failed``   ``error`` ``{step, type, message}`` (and ``cause``, a :class:`Cause`, when
                       the engine knows it), ``attempts``, ``handled``,
                       ``alternative``, ``replayed``
``plan_step_skipped``  ``reason`` (text for people), ``cause`` (a :class:`Cause`, for programs)
``plan_step_waiting``  ``request``: the gate's question, choices, schema
``plan_step_progress`` ``done``/``total``/``item``/``name`` (fan-out), ``iteration``/``total`` (loops);
                       for subscribers only, never journaled
``model_called``       ``model`` (asked), ``response_model``, ``prompt_tokens``, ``completion_tokens``,
                       ``cost``, ``duration``: one model call of an LLM step (for subscribers: traces,
                       viewers; the journal keeps the call in the step's ``memo``)
``tool_called``        ``name``, ``args``: an attempt of a tool step (or item) calls its tool; the
                       outcome is the unit's next ``retrying``/``completed``/``failed`` event
``gate_answered``      ``value``, ``channel`` (a :class:`Channel`), ``who`` (the OS user, the viewer's
                       token id, the MCP client's name), ``timed_out``
``memo``               ``key``, ``value``, ``call``: a completed model or tool call inside a step
                       (``call``: the request: ``kind``, ``model``/``name``, ``request``/``args``,
                       ``duration``)
``agent_turn``         an agent loop's turn (see :mod:`.agent`)
=====================  ==============================================================

``step`` is the full id of what the event is about: ``fetch``, a fan-out item
``review[3]``, a sub-plan's step ``sub.fetch``, a loop iteration ``poll[2]``.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence


class StepStatus(enum.StrEnum):
    """Where a step (or a child: an item, an iteration, a sub-plan's step) stands."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    HANDLED = "handled"  # failed, and the plan took the error object (a branch or a catch)
    FAILED = "failed"
    SKIPPED = "skipped"
    WAITING = "waiting"  # an approval gate waits for a person
    INTERRUPTED = "interrupted"  # started, never settled, and nobody is running it

    @property
    def settled(self) -> bool:
        return self in _SETTLED

    @property
    def has_output(self) -> bool:
        """Whether the step left a value its readers see (the output, or the handled error object)."""
        return self is StepStatus.COMPLETED or self is StepStatus.HANDLED


_SETTLED = frozenset({StepStatus.COMPLETED, StepStatus.HANDLED, StepStatus.FAILED, StepStatus.SKIPPED})


class Cause(enum.StrEnum):
    """Why the engine skipped a unit or failed it by itself: typed, so that coverage, tests and tools
    read this and never the English of a message."""

    CONDITION = "condition"  # skipped: its ``when:`` was false
    BLOCKED = "blocked"  # skipped: a dependency failed or was skipped
    UNWRITTEN = "unwritten"  # skipped: it reads what a branch not taken would have written
    ABORTED = "aborted"  # skipped: the run was stopping
    INPUT_FAILED = "input-failed"  # skipped: it acts on the world, and a step it depends on failed
    REFUSED = "refused"  # skipped: it acts on the world, and a person refused a gate before it
    MAX_ITERATIONS = "max_iterations"  # failed: a loop reached its bound before its condition held


class Channel(enum.StrEnum):
    """How a gate's answer came: recorded with it (and who gave it), and checked against who may answer."""

    TERMINAL = "terminal"  # the prompt of `dagplan run` / `resume`
    ANSWER = "answer"  # `dagplan answer RUN STEP VALUE` (the API's answer())
    VIEWER = "viewer"  # the viewer's approve / reject buttons
    FLAG = "--answer"  # `--answer STEP=VALUE` on the command line, or a plan test's mock
    NOTIFIER = "notifier"  # a notifier's reply
    TIMEOUT = "timeout"  # nobody answered in time: the gate's on_timeout
    API = "api"  # an ask_gate callable of the API that names no channel
    MCP = "mcp"  # a client of `dagplan mcp`: a model holds it
    AGENT = "agent"  # the agent loop: a model holds it

    @property
    def held_by_a_model(self) -> bool:
        return self in (Channel.MCP, Channel.AGENT)


def answer_refused(request: Mapping[str, Any], channel: "Channel | str") -> str | None:
    """Why ``channel`` may not answer the gate of ``request`` (a person's gate and a model's channel), or
    None: the one place this rule is written (a recorded answer, an in-process one)."""
    if request.get("answered_by") == "person" and Channel(channel).held_by_a_model:
        return (f"only a person may answer gate {request.get('step')!r}, and {Channel(channel).value} is a "
                "channel a model holds")  # fmt: skip
    return None


@dataclass(frozen=True)
class Answered:
    """An answer with how it came: what an ``ask_gate`` callable may return instead of the bare value."""

    value: Any
    channel: Channel = Channel.API
    who: str | None = None


def os_user() -> str | None:
    """Who runs this process, as the OS says (recorded with the answers given here)."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (a container's uid without an entry): unsaid
        return None


PERSON_HINT = "a person answers it: dagplan answer RUN STEP VALUE (in the project's folder), or the viewer"


class RunStatus(enum.StrEnum):
    """Where a run stands, as ``dagplan runs`` shows it and :class:`RunResult` reports it."""

    QUEUED = "queued"  # in a run database, for the next worker to claim (submitted, or its gate answered)
    RUNNING = "running"
    WAITING = "waiting"  # stopped durably at approval gates
    NEEDS_DECISION = "needs_decision"  # stopped durably: an interrupted side effect nobody could settle
    INTERRUPTED = "interrupted"  # stopped without finishing (killed, Ctrl-C): resumable
    TIMED_OUT = "timed_out"  # the plan's `timeout` passed: running steps were cancelled; resumable
    COMPLETED = "completed"
    FAILED = "failed"  # finished, and the failure policy `abort` failed it
    ABORTED = "aborted"  # stopped early: abort policy, a budget, or discarded
    CANCELLED = "cancelled"  # stopped by an operator (dagplan cancel); its record is kept
    DISCARDED = "discarded"  # its record is unreadable (or gone)

    @property
    def finished(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.ABORTED, RunStatus.CANCELLED)


EARLY = "early"  # where a result comes from when its step started while the plan was being written (`reused`)


class EventType(enum.StrEnum):
    """What an :class:`Event` says happened (``plan_started``, ``step_completed``, ``gate_waiting``...): the journal's,
    the viewer's and every subscriber's one vocabulary."""

    PLAN_STARTED = "plan_started"
    PLAN_RESUMED = "plan_resumed"
    PLAN_WAITING = "plan_waiting"
    PLAN_NEEDS_DECISION = "plan_needs_decision"
    PLAN_COMPLETED = "plan_completed"
    PLAN_INTERRUPTED = "plan_run_interrupted"
    PLAN_ABORTED = "plan_aborted"
    PLAN_CANCELLED = "plan_cancelled"
    PLAN_TIMED_OUT = "plan_timed_out"
    STEPS_CLEARED = "plan_steps_cleared"
    STEP_STARTED = "plan_step_started"
    STEP_RETRYING = "plan_step_retrying"
    STEP_COMPLETED = "plan_step_completed"
    STEP_FAILED = "plan_step_failed"
    STEP_SKIPPED = "plan_step_skipped"
    STEP_WAITING = "plan_step_waiting"
    STEP_PROGRESS = "plan_step_progress"
    TOOL_CALLED = "tool_called"
    MODEL_CALLED = "model_called"
    GATE_ANSWERED = "gate_answered"
    MEMO = "memo"
    AGENT_TURN = "agent_turn"
    PLAN_WRITTEN = "plan_written"  # a streamed run's plan, once the model finished it and it passed check
    PROMPT_RESOLVED = "plan_step_prompt"  # an LLM step's prompt as resolved, and where each part came from
    STEP_PRINTED = "plan_step_printed"  # what a tool printed while it ran (kept, never written to the terminal)

    @property
    def journaled(self) -> bool:
        """Whether the journal keeps it (progress lines and model calls are for subscribers only)."""
        return self is not EventType.STEP_PROGRESS and self is not EventType.MODEL_CALLED

    @property
    def lifecycle(self) -> bool:
        """An event about the run as a whole (the last one says where the run stands)."""
        return self in _LIFECYCLE


_LIFECYCLE = frozenset(
    {
        EventType.PLAN_STARTED,
        EventType.PLAN_RESUMED,
        EventType.PLAN_WAITING,
        EventType.PLAN_NEEDS_DECISION,
        EventType.PLAN_COMPLETED,
        EventType.PLAN_INTERRUPTED,
        EventType.PLAN_ABORTED,
        EventType.PLAN_CANCELLED,
        EventType.PLAN_TIMED_OUT,
        EventType.STEPS_CLEARED,
    }
)

EMPTY: Mapping[str, Any] = MappingProxyType({})
_FIXED = frozenset({"type", "run_id", "step", "ts", "duration", "seq", "crc"})


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened in a run; ``data`` holds what its type carries (see the module doc)."""

    type: EventType
    run_id: str
    step: str | None = None
    ts: float = field(default_factory=time.time)
    duration: float | None = None
    data: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    seq: int | None = None  # its position in the journal, once journaled

    def to_json(self) -> dict[str, Any]:
        """The event as one flat JSON object (what ``--events jsonl`` prints and the journal stores)."""
        out: dict[str, Any] = {"type": str(self.type), "run_id": self.run_id}
        if self.seq is not None:
            out["seq"] = self.seq
        out["ts"] = round(self.ts, 6)
        if self.step is not None:
            out["step"] = self.step
        if self.duration is not None:
            out["duration"] = round(self.duration, 6)
        out.update(self.data)
        return out

    @classmethod
    def from_json(cls, record: Mapping[str, Any], run_id: str = "") -> "Event":
        """An event read back from a journal (unknown types are kept as their text)."""
        raw = record.get("type", "")
        try:
            type_: Any = EventType(raw)
        except ValueError:
            type_ = raw
        data = {k: v for k, v in record.items() if k not in _FIXED}
        return cls(
            type_,
            record.get("run_id") or run_id,
            record.get("step"),
            record.get("ts") or 0.0,
            record.get("duration"),
            MappingProxyType(data),
            record.get("seq"),
        )


Subscriber = Callable[[Event], None]


def event_types(names: Any) -> frozenset[EventType]:
    """Event types from their names (``--filter``); an unknown name raises ValueError listing the known."""
    found = set()
    for name in names:
        try:
            found.add(EventType(name))
        except ValueError:
            known = ", ".join(t.value for t in EventType)
            raise ValueError(f"unknown event type {name!r}; known: {known}") from None
    return frozenset(found)


# where a run stands after each lifecycle event that stops it (the one table: progress, traces, the viewer)
STOPPED: Mapping[EventType, RunStatus] = MappingProxyType(
    {
        EventType.PLAN_WAITING: RunStatus.WAITING,
        EventType.PLAN_NEEDS_DECISION: RunStatus.NEEDS_DECISION,
        EventType.PLAN_INTERRUPTED: RunStatus.INTERRUPTED,
        EventType.PLAN_ABORTED: RunStatus.ABORTED,
        EventType.PLAN_CANCELLED: RunStatus.CANCELLED,
        EventType.PLAN_TIMED_OUT: RunStatus.TIMED_OUT,
    }
)

# where a step stands after each event that changes its status (the one table: progress, plan tests, the
# live view, the viewer, traces); a failure is HANDLED when a catch or an output alternative took it
_STEP_AFTER: Mapping[EventType, StepStatus] = MappingProxyType(
    {
        EventType.STEP_STARTED: StepStatus.RUNNING,
        EventType.STEP_RETRYING: StepStatus.RUNNING,
        EventType.STEP_COMPLETED: StepStatus.COMPLETED,
        EventType.STEP_FAILED: StepStatus.FAILED,
        EventType.STEP_SKIPPED: StepStatus.SKIPPED,
        EventType.STEP_WAITING: StepStatus.WAITING,
    }
)


def trigger_blocks(trigger: str, deps: Sequence[tuple[str, StepStatus]]) -> str | None:
    """A step's trigger rule (other than the default ``all_succeeded``, which the scheduler reads from reads
    and skips) over its dependencies' outcomes: why the step is skipped, or None when it runs."""
    if trigger == "none_failed":
        failed = [d for d, status in deps if status is StepStatus.FAILED]
        return f"its trigger is none_failed, and {failed[0]} failed" if failed else None
    if trigger == "one_succeeded" and deps and not any(status is StepStatus.COMPLETED for _, status in deps):
        return f"its trigger is one_succeeded, and none of {', '.join(d for d, _ in deps)} completed"
    return None  # all_done: once they all settled, whatever they did


def step_status_after(type_: Any, data: Mapping[str, Any]) -> StepStatus | None:
    """The status an event of ``type_`` (with its ``data``) leaves its step in; None for any other event."""
    status = _STEP_AFTER.get(type_)
    if status is StepStatus.FAILED and data.get("handled"):
        return StepStatus.HANDLED
    return status
