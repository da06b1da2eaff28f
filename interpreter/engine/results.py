"""What a run ends with, as values: a :class:`RunResult` and a :class:`StepReport` per step (what the API returns,
what ``--format json`` prints). The engine (:mod:`.execution`) makes them; nothing here runs anything."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..core.values import MISSING, as_text, view_text
from ..core.vocabulary import RunStatus, StepStatus

HEAD = 200  # characters of a step's output a report's line shows


@dataclass(frozen=True)
class StepReport:
    """One step of a finished run: its status, the call it made, its attempts, output, error and how long it took."""

    id: str
    call: str  # the tool name, or the kind: llm, plan, loop, gate
    status: StepStatus
    attempts: int
    duration: float
    output: Any
    error: Mapping[str, Any] | None = None
    reason: str | None = None
    replayed: bool = False
    usage: Mapping[str, Any] | None = None
    reused: str | None = None  # the run its result was taken from (`run --reuse`)
    trace: list | None = None  # where its tool failed: the user's frames (core/trace.py)
    taken: tuple[int, str] | None = None  # a fan-out's items taken from another run: (how many, from which)

    @property
    def head(self) -> str:
        if self.output is MISSING or self.output is None:
            return ""
        return view_text(as_text(self.output), "head", HEAD)

    def to_json(self) -> dict[str, Any]:
        out = {
            "status": str(self.status),
            "call": self.call,
            "output": None if self.output is MISSING else self.output,
            "attempts": self.attempts,
            "duration": round(self.duration, 6),
        }
        for key in ("error", "reason", "usage"):
            if getattr(self, key):
                out[key] = dict(getattr(self, key)) if key != "reason" else self.reason
        if self.replayed:
            out["replayed"] = True
        if self.reused:
            out["reused"] = self.reused
        if self.taken:
            out["items_reused"] = {"count": self.taken[0], "from": self.taken[1]}
        if self.trace:
            out["traceback"] = list(self.trace)
        return out


@dataclass(frozen=True)
class RunResult:
    """What a run ended with: its id and status, the plan's result, the final state, and a :class:`StepReport` per step
    (``steps``)."""

    run_id: str
    status: RunStatus  # completed | failed | aborted | waiting
    had_errors: bool
    result: Any
    steps: Mapping[str, StepReport] = field(repr=False)
    order: tuple[str, ...] = field(repr=False)
    state: Mapping[str, Any] = field(repr=False)
    usage: Mapping[str, Any] = field(default_factory=dict, repr=False)
    message: str = ""  # why the run stopped early (abort, budget, waiting)
    waiting: tuple[Mapping[str, Any], ...] = ()  # the gate requests a waiting run stopped at

    def to_json(self) -> dict[str, Any]:
        out = {
            "run_id": self.run_id,
            "status": str(self.status),
            "message": self.message,
            "had_errors": self.had_errors,
            "result": self.result,
            "steps": {sid: self.steps[sid].to_json() for sid in self.order},
            "usage": dict(self.usage),
        }
        if self.waiting:
            out["waiting"] = [dict(w) for w in self.waiting]
        return out
