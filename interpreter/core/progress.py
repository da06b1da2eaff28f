"""Folding a run's events into its progress: where each step and the run stand.

Every journal (files, memory, a database) keeps the same events and folds them with
:func:`fold` into the same state, so ``dagplan runs``, ``resume`` and the viewer agree
whatever the journal. The folded state is a plain JSON object (a snapshot can store it):

    {"lifecycle": <last lifecycle event type>, "final": <plan_completed fields>,
     "started": <ts>, "steps": {id: {"status", "attempts", ...}}, "memo": {key: {...}}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ...dsl import no_gc_pauses
from .vocabulary import STOPPED, EventType, RunStatus, StepStatus, step_status_after

# --- folding --------------------------------------------------------------------------------


def empty_state() -> dict:
    return {"lifecycle": None, "final": None, "started": None, "steps": {}, "memo": {}}


def _step(state: dict, step_id: str) -> dict:
    return state["steps"].setdefault(step_id, {"status": StepStatus.PENDING, "attempts": 0})


def _on_started(state: dict, e: dict) -> None:
    s = _step(state, e["step"])
    s["status"] = StepStatus.RUNNING
    s["attempts"] = max(s["attempts"], int(e.get("attempt") or 1))
    for key in ("item", "iteration"):
        if key in e:
            s[key] = e[key]


def _on_retrying(state: dict, e: dict) -> None:
    s = _step(state, e["step"])
    s["status"] = StepStatus.RUNNING
    s["attempts"] = max(s["attempts"], int(e.get("attempt") or s["attempts"]))
    s["error"] = e.get("error")


_NOT_KEPT = frozenset({"type", "seq", "ts", "run_id", "step", "crc"})


def _on_completed(state: dict, e: dict) -> None:
    s = _step(state, e["step"])
    if e.get("replayed") and "output" not in e and "spill" not in e:
        s["status"] = StepStatus.COMPLETED  # a replay re-announces the recorded result; keep it
        return
    kept = {k: v for k, v in e.items() if k not in _NOT_KEPT}
    state["steps"][e["step"]] = {**kept, "status": StepStatus.COMPLETED, "attempts": e.get("attempts", s["attempts"])}


def _on_failed(state: dict, e: dict) -> None:
    s = _step(state, e["step"])
    s.update(
        status=step_status_after(EventType.STEP_FAILED, e),
        error=e.get("error"),
        attempts=e.get("attempts", s["attempts"]),
        alternative=e.get("alternative", 0),
    )
    if "output" in e:
        s["output"] = e["output"]
    if e.get("traceback"):
        s["traceback"] = e["traceback"]  # where the tool failed (a replay of the failure does not say again)


def _on_skipped(state: dict, e: dict) -> None:
    _step(state, e["step"]).update(status=StepStatus.SKIPPED, reason=e.get("reason"))


def _on_waiting(state: dict, e: dict) -> None:
    _step(state, e["step"]).update(status=StepStatus.WAITING, request=e.get("request"))


def _on_memo(state: dict, e: dict) -> None:
    state["memo"][e["key"]] = {k: e[k] for k in ("value", "spill", "spill_crc", "step") if k in e}


def _on_plan_written(state: dict, e: dict) -> None:
    state["plan"] = e.get("plan")


def _on_answer(state: dict, e: dict) -> None:
    state.setdefault("answers", {})[e["step"]] = e.get("value")


def _on_cleared(state: dict, e: dict) -> None:
    cleared = set(e["steps"])
    for step_id in cleared:
        state["steps"].pop(step_id, None)
        state.get("answers", {}).pop(step_id, None)
    state["memo"] = {k: m for k, m in state["memo"].items() if m.get("step") not in cleared}
    _on_lifecycle(state, e)


def _on_lifecycle(state: dict, e: dict) -> None:
    state["lifecycle"] = e["type"]
    if e["type"] == EventType.PLAN_STARTED and state["started"] is None:
        state["started"] = e.get("ts")
    if e["type"] == EventType.PLAN_COMPLETED:
        state["final"] = {k: v for k, v in e.items() if k not in ("type", "seq", "run_id", "crc")}
    elif e["type"] in (EventType.PLAN_RESUMED, EventType.STEPS_CLEARED):
        state["final"] = None
    if e["type"] == EventType.PLAN_WAITING:
        state["waiting"] = list(e.get("waiting") or [])
    elif e["type"] in (EventType.PLAN_RESUMED, EventType.PLAN_STARTED):
        state["waiting"] = []


FOLD: dict[str, Callable[[dict, dict], None]] = {
    EventType.STEP_STARTED: _on_started,
    EventType.STEP_RETRYING: _on_retrying,
    EventType.STEP_COMPLETED: _on_completed,
    EventType.STEP_FAILED: _on_failed,
    EventType.STEP_SKIPPED: _on_skipped,
    EventType.STEP_WAITING: _on_waiting,
    EventType.MEMO: _on_memo,
    EventType.PLAN_WRITTEN: _on_plan_written,
    EventType.GATE_ANSWERED: _on_answer,
    EventType.STEPS_CLEARED: _on_cleared,
    **{t: _on_lifecycle for t in EventType if t.lifecycle and t is not EventType.STEPS_CLEARED},
}
_NEEDS_STEP = frozenset(
    {
        EventType.STEP_STARTED,
        EventType.STEP_RETRYING,
        EventType.STEP_COMPLETED,
        EventType.STEP_FAILED,
        EventType.STEP_SKIPPED,
        EventType.STEP_WAITING,
        EventType.GATE_ANSWERED,
    }
)


def fold(state: dict, event: Mapping[str, Any]) -> None:
    """Apply one journaled event (its JSON form) to the folded state; unknown types leave only a trace."""
    type_ = event.get("type", "")
    apply = FOLD.get(type_)
    if apply is not None and (type_ not in _NEEDS_STEP or event.get("step") is not None):
        apply(state, event)  # type: ignore[arg-type]


# --- reading the folded state -----------------------------------------------------------------


def run_status(state: Mapping[str, Any], live: bool) -> RunStatus:
    """The run's status from its last lifecycle event, and whether a process is running it now."""
    last = state["lifecycle"]
    if last in (EventType.PLAN_ABORTED, EventType.PLAN_CANCELLED):
        return STOPPED[last]
    if last == EventType.PLAN_COMPLETED:
        return RunStatus((state["final"] or {}).get("status") or RunStatus.COMPLETED)
    if live:
        return RunStatus.RUNNING
    return STOPPED.get(last, RunStatus.INTERRUPTED)


def is_child(step_id: str) -> bool:
    """Whether an id names a child of a composition step (``review[3]``, ``sub.fetch``, ``poll[2]``)."""
    return "[" in step_id or "." in step_id


def top_step(unit_id: str) -> str:
    """The plan step a unit belongs to: ``review[3].diff`` -> ``review``."""
    for i, char in enumerate(unit_id):
        if char in "[.":
            return unit_id[:i]
    return unit_id


def parent_unit(unit_id: str) -> str:
    """The unit a child belongs to: ``review[3]`` -> ``review``, ``poll[2].check`` -> ``poll[2]``; a step -> ``""``."""
    cut = max(unit_id.rfind("["), unit_id.rfind("."))
    return unit_id[:cut] if cut > 0 else ""


@dataclass(frozen=True)
class StepProgress:
    """One step (or child) as the journal left it. ``output`` is read on demand (spills from their store)."""

    id: str
    status: StepStatus
    attempts: int = 0
    duration: float | None = None
    replayed: bool = False
    error: Mapping[str, Any] | None = None
    spilled: bool = False
    fields: Mapping[str, Any] = field(default_factory=dict)  # everything the settling event carried
    _load: Callable[[str], Any] | None = field(default=None, compare=False, repr=False)

    @property
    def output(self) -> Any:
        if self._load is None or not self.status.has_output:
            return None
        return self._load(self.id)

    @property
    def alternative(self) -> int:
        return int(self.fields.get("alternative") or 0)

    @property
    def handled(self) -> bool:
        return self.status is StepStatus.HANDLED


@dataclass(frozen=True)
class Progress:
    run_id: str
    status: RunStatus
    steps: Mapping[str, StepProgress]
    final: Mapping[str, Any] | None  # the plan_completed event's fields, once finished
    waiting: tuple[Mapping[str, Any], ...] = ()  # the gate requests of a waiting run
    answers: Mapping[str, Any] = field(default_factory=dict)  # recorded gate answers by full step id

    @property
    def done(self) -> int:
        """Settled steps of the plan itself (children are not counted)."""
        return sum(1 for s in self.steps.values() if s.status.settled and not is_child(s.id))

    def by_status(self, status: StepStatus) -> list[str]:
        return [s.id for s in self.steps.values() if s.status is status]


@no_gc_pauses()  # a progress object per step: many small objects at once
def progress_of(
    run_id: str, state: Mapping[str, Any], plan_ids: list[str], live: bool, load: Callable[[str], Any]
) -> Progress:
    """The :class:`Progress` of a folded state; steps of the plan never mentioned are pending.

    A step that started and never settled is ``running`` while its run is live, else ``interrupted``.
    """
    steps = {}
    for sid, s in state["steps"].items():
        status = StepStatus(s["status"])
        if status is StepStatus.RUNNING and not live:
            status = StepStatus.INTERRUPTED
        steps[sid] = StepProgress(
            sid,
            status,
            s.get("attempts", 0),
            s.get("duration"),
            bool(s.get("replayed")),
            s.get("error"),
            "spill" in s,
            {k: v for k, v in s.items() if k != "output"},
            load,
        )
    for sid in plan_ids:
        steps.setdefault(sid, StepProgress(sid, StepStatus.PENDING, _load=load))
    return Progress(
        run_id,
        run_status(state, live),
        steps,
        state["final"],
        tuple(state.get("waiting") or ()),
        dict(state.get("answers") or {}),
    )


@dataclass(frozen=True)
class RunInfo:
    """One line of ``dagplan runs``."""

    id: str
    plan_name: str
    status: RunStatus
    done: int
    total: int
    started: float  # epoch seconds
    pid: int | None = None
    notice: str | None = None
    waiting: tuple[Mapping[str, Any], ...] = ()
    usage: Mapping[str, Any] = field(default_factory=dict)
    finished: float | None = None
    had_errors: bool = False  # it completed, but a step failed on the way (a refused gate, a failed step)

    @property
    def shown_status(self) -> str:
        """The status as people read it: ``completed with errors`` is not the green ``completed``."""
        return shown_status(self.status, self.had_errors)

    def to_json(self) -> dict:
        from datetime import datetime

        return {
            "id": self.id,
            "plan": self.plan_name,
            "status": str(self.status),
            "done": self.done,
            "total": self.total,
            "started": datetime.fromtimestamp(self.started).isoformat(timespec="seconds"),
            "pid": self.pid,
            "notice": self.notice,
            "waiting": [dict(w) for w in self.waiting],
            "usage": dict(self.usage),
            "had_errors": self.had_errors,
        }


def plan_step_ids(plan_doc: Mapping[str, Any]) -> list[str]:
    """Step ids of a canonical plan document, in document order."""
    steps = plan_doc.get("steps") or []
    if isinstance(steps, Mapping):
        return [str(k) for k in steps]
    return [str(s.get("id")) for s in steps if isinstance(s, Mapping)]


def shown_status(status: Any, had_errors: bool) -> str:
    """A run's status in a table or a page: a completed run with errors says so (one rule, every view)."""
    return f"{status} with errors" if had_errors and str(status) == RunStatus.COMPLETED else str(status)
