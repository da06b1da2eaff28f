"""Traces: a run's events as OpenTelemetry spans (the optional extra ``dagplan[otel]``).

Tracing is on when the OpenTelemetry API is installed and the application or the environment
configured it: a tracer provider set by the application, or ``OTEL_TRACES_EXPORTER`` /
``OTEL_EXPORTER_OTLP_ENDPOINT`` (``OTEL_SDK_DISABLED=true`` turns it off). Otherwise nothing
is imported and nothing changes (:func:`tracer_for` returns None without importing anything).

The spans are built from the run's events, the same ones the journal keeps, with their own
timestamps (an event's ``ts`` ends what it settles; its ``duration`` says when that began):

- the run: ``dagplan.run <plan>``, from ``plan_started`` / ``plan_resumed`` to the event that
  stops it (completed, waiting, interrupted, aborted, timed out);
- each unit (a step, a fan-out item, a loop iteration, a sub-plan's step): ``dagplan.step <id>``,
  a child of its parent unit (``review[3]`` under ``review``, ``sub.fetch`` under ``sub``), with
  ``dagplan.step.id``, ``dagplan.step.kind``, ``dagplan.step.status``, ``dagplan.step.parent`` and
  the error (status ERROR, ``error.type``, the message);
- each attempt: ``dagplan.attempt <n>`` under its unit, ended by its error or its outcome;
- each model call: ``chat <model>`` under the unit's current attempt, with the GenAI semantic
  conventions (``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.response.model``,
  ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``) and ``dagplan.cost_usd``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Callable, Mapping

from ..core.progress import parent_unit, top_step
from ..core.vocabulary import STOPPED, Event, EventType, RunStatus, StepStatus, step_status_after

_ENV = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def tracer_for(plan_name: str, kinds: Callable[[], Mapping[str, str]]) -> Callable[[Event], None] | None:
    """A subscriber turning a run's events into spans, or None when tracing is not configured.
    ``kinds()``: each step id's kind (tool name, llm, plan, loop, gate) for the spans' attributes (asked
    only when there is a tracer: a run without tracing pays nothing per step)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    configured_here = "opentelemetry.trace" in sys.modules  # the application set tracing up itself
    if not configured_here and not any(os.environ.get(name) for name in _ENV):
        return None
    if importlib.util.find_spec("opentelemetry") is None:
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider) and not _configure_from_environment():
        return None
    return _Spans(trace.get_tracer("dagplan"), plan_name, kinds())


def _configure_from_environment() -> bool:
    """No provider set by the application: one from ``OTEL_TRACES_EXPORTER`` (console, otlp) if the
    SDK (and the OTLP exporter, for otlp) is installed."""
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "otlp" if any(os.environ.get(n) for n in _ENV[1:]) else "")
    if not exporter_name or exporter_name == "none" or importlib.util.find_spec("opentelemetry.sdk") is None:
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    exporter: Any
    if exporter_name == "console":
        exporter = ConsoleSpanExporter()
    elif importlib.util.find_spec("opentelemetry.exporter.otlp") is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    else:
        return False
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "dagplan")})
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class _Spans:
    """The subscriber: keeps the open spans of a run (the run's, each unit's, each unit's attempt)."""

    def __init__(self, tracer: Any, plan_name: str, kinds: Mapping[str, str]):
        self.tracer, self.plan_name, self.kinds = tracer, plan_name, kinds
        self.run: Any = None
        self.units: dict[str, Any] = {}
        self.attempts: dict[str, tuple[Any, int]] = {}
        self.tools: dict[str, Any] = {}  # a unit's tool call in flight: ``execute_tool NAME``

    def __call__(self, event: Event) -> None:
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    # --- the run ---

    def _run_started(self, event: Event) -> None:
        if self.run is None:
            name = os.path.basename(self.plan_name) or "plan"
            self.run = self.tracer.start_span(  # GenAI conventions: a run is an agent's invocation
                f"invoke_agent {name}",
                start_time=_ns(event.ts),
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": name,
                    "gen_ai.conversation.id": event.run_id,
                    "dagplan.run.id": event.run_id,
                    "dagplan.plan": self.plan_name,
                },  # fmt: skip
            )

    def _run_stopped(self, event: Event) -> None:
        if self.run is None:
            return
        status = event.data.get("status") or _STOPPED.get(event.type, "")
        self.run.set_attribute("dagplan.run.status", str(status))
        if event.data.get("had_errors") or status in (RunStatus.FAILED, RunStatus.ABORTED):
            self._error(self.run, str(event.data.get("message") or status))
        for unit_id in list(self.units):  # units a stop left open (interrupted, waiting)
            self._end_unit(
                unit_id, event.ts, StepStatus.INTERRUPTED if status != RunStatus.WAITING else StepStatus.WAITING
            )
        self.run.end(end_time=_ns(event.ts))
        self.run = None

    # --- units and attempts ---

    def _started(self, event: Event) -> None:
        unit_id = event.step or ""
        if unit_id not in self.units:
            parent = self.units.get(parent_unit(unit_id)) or self.run
            step = top_step(unit_id)
            attributes = {
                "dagplan.step.id": unit_id,
                "dagplan.step.kind": self.kinds.get(step, ""),
                "dagplan.run.id": event.run_id,
            }
            if unit_id != step:
                attributes["dagplan.step.parent"] = parent_unit(unit_id) or step
            self.units[unit_id] = self._start(f"dagplan.step {unit_id}", parent, event.ts, attributes)
        attempt = int(event.data.get("attempt") or 1)
        self._attempt(unit_id, attempt, event.ts)

    def _attempt(self, unit_id: str, number: int, ts: float) -> None:
        self._end_attempt(unit_id, ts)
        span = self._start(f"dagplan.attempt {number}", self.units[unit_id], ts, {"dagplan.attempt": number})
        self.attempts[unit_id] = (span, number)

    def _retrying(self, event: Event) -> None:
        unit_id = event.step or ""
        if unit_id not in self.units:
            return
        error = event.data.get("error") or {}
        self._end_attempt(unit_id, event.ts, error)
        number = int(event.data.get("attempt") or 1) + 1
        self._attempt(unit_id, number, event.ts + float(event.data.get("delay") or 0))

    def _settled(self, event: Event) -> None:
        unit_id = event.step or ""
        if unit_id not in self.units:
            return
        status = step_status_after(event.type, event.data) or StepStatus.WAITING
        if event.type is EventType.STEP_FAILED:
            self._end_attempt(unit_id, event.ts, event.data.get("error") or {})
            self._end_unit(unit_id, event.ts, status, event.data.get("error"))
        else:
            self._end_attempt(unit_id, event.ts)
            self._end_unit(unit_id, event.ts, status)

    def _skipped(self, event: Event) -> None:
        unit_id = event.step or ""
        if unit_id in self.units:
            self._end_unit(unit_id, event.ts, StepStatus.SKIPPED)
            return
        parent = self.units.get(parent_unit(unit_id)) or self.run
        span = self._start(f"dagplan.step {unit_id}", parent, event.ts, {"dagplan.step.id": unit_id})
        span.set_attribute("dagplan.step.status", str(StepStatus.SKIPPED))
        span.set_attribute("dagplan.step.reason", str(event.data.get("reason", "")))
        span.end(end_time=_ns(event.ts))

    def _model(self, event: Event) -> None:
        unit_id = event.step or ""
        parent = (self.attempts.get(unit_id) or (None, 0))[0] or self.units.get(unit_id) or self.run
        model = str(event.data.get("model") or "")
        start = event.ts - float(event.duration or 0)
        span = self._start(
            f"chat {model}",
            parent,
            start,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": model.split("/", 1)[0] if "/" in model else "openai",
                "gen_ai.request.model": model,
                "gen_ai.response.model": str(event.data.get("response_model") or model),
                "gen_ai.usage.input_tokens": int(event.data.get("prompt_tokens") or 0),
                "gen_ai.usage.output_tokens": int(event.data.get("completion_tokens") or 0),
                "dagplan.cost_usd": float(event.data.get("cost") or 0.0),
                "dagplan.step.id": unit_id,
            },
        )
        span.end(end_time=_ns(event.ts))

    def _tool(self, event: Event) -> None:
        """A tool call (GenAI conventions: ``execute_tool {name}``), under the attempt making it; it ends
        with the attempt, or when the unit calls its next tool (an LLM step's tool loop)."""
        unit_id = event.step or ""
        self._end_tool(unit_id, event.ts)
        parent = (self.attempts.get(unit_id) or (None, 0))[0] or self.units.get(unit_id) or self.run
        name = str(event.data.get("name") or "")
        self.tools[unit_id] = self._start(f"execute_tool {name}", parent, event.ts, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
            "dagplan.step.id": unit_id})  # fmt: skip

    def _end_tool(self, unit_id: str, ts: float, error: Mapping[str, Any] | None = None) -> None:
        span = self.tools.pop(unit_id, None)
        if span is not None:
            if error:
                self._error(span, f"{error.get('type')}: {error.get('message')}", error.get("type"))
            span.end(end_time=_ns(ts))

    # --- helpers ---

    def _start(self, name: str, parent: Any, ts: float, attributes: Mapping[str, Any]) -> Any:
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=context, start_time=_ns(ts), attributes=dict(attributes))

    def _end_attempt(self, unit_id: str, ts: float, error: Mapping[str, Any] | None = None) -> None:
        self._end_tool(unit_id, ts, error)
        found = self.attempts.pop(unit_id, None)
        if found is None:
            return
        span = found[0]
        if error:
            self._error(span, f"{error.get('type')}: {error.get('message')}", error.get("type"))
        span.end(end_time=_ns(ts))

    def _end_unit(self, unit_id: str, ts: float, status: StepStatus, error: Any = None) -> None:
        self._end_attempt(unit_id, ts)
        span = self.units.pop(unit_id, None)
        if span is None:
            return
        span.set_attribute("dagplan.step.status", str(status))
        if error:
            self._error(span, f"{error.get('type')}: {error.get('message')}", error.get("type"))
        span.end(end_time=_ns(ts))

    @staticmethod
    def _error(span: Any, message: str, kind: Any = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, message))
        if kind:
            span.set_attribute("error.type", str(kind))


_STOPPED = STOPPED
_HANDLERS: dict[EventType, Callable[[_Spans, Event], None]] = {
    EventType.PLAN_STARTED: _Spans._run_started,
    EventType.PLAN_RESUMED: _Spans._run_started,
    EventType.PLAN_COMPLETED: _Spans._run_stopped,
    EventType.PLAN_WAITING: _Spans._run_stopped,
    EventType.PLAN_NEEDS_DECISION: _Spans._run_stopped,
    EventType.PLAN_INTERRUPTED: _Spans._run_stopped,
    EventType.PLAN_ABORTED: _Spans._run_stopped,
    EventType.PLAN_CANCELLED: _Spans._run_stopped,
    EventType.PLAN_TIMED_OUT: _Spans._run_stopped,
    EventType.STEP_STARTED: _Spans._started,
    EventType.STEP_RETRYING: _Spans._retrying,
    EventType.STEP_COMPLETED: _Spans._settled,
    EventType.STEP_FAILED: _Spans._settled,
    EventType.STEP_WAITING: _Spans._settled,
    EventType.STEP_SKIPPED: _Spans._skipped,
    EventType.MODEL_CALLED: _Spans._model,
    EventType.TOOL_CALLED: _Spans._tool,
}
