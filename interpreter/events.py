"""Run events: frozen values handed to every subscriber, and written to the run's log."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol

PLAN_STARTED = "plan_started"
STEP_STARTED = "plan_step_started"
STEP_COMPLETED = "plan_step_completed"
STEP_RETRYING = "plan_step_retrying"
STEP_FAILED = "plan_step_failed"
STEP_SKIPPED = "plan_step_skipped"
PLAN_COMPLETED = "plan_completed"
PLAN_INTERRUPTED = "plan_run_interrupted"
PLAN_ABORTED = "plan_aborted"

EVENT_TYPES = (
    PLAN_STARTED,
    STEP_STARTED,
    STEP_COMPLETED,
    STEP_RETRYING,
    STEP_FAILED,
    STEP_SKIPPED,
    PLAN_COMPLETED,
    PLAN_INTERRUPTED,
    PLAN_ABORTED,
)


@dataclass(frozen=True)
class Event:
    type: str
    run_id: str
    step: str | None = None
    ts: float = field(default_factory=time.time)
    duration: float | None = None
    data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "run_id": self.run_id, "ts": round(self.ts, 6)}
        if self.step is not None:
            out["step"] = self.step
        if self.duration is not None:
            out["duration"] = round(self.duration, 6)
        out.update(self.data)
        return out


class EventSink(Protocol):
    def __call__(self, event: Event) -> None: ...


Subscriber = Callable[[Event], None]
