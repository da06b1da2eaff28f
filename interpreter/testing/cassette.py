"""Cassettes: every tool call and model call of a real run, replayed offline.

A cassette is written from a run's journal (:func:`from_journal`: ``dagplan run --record``,
``dagplan runs export``), never by a second recorder beside it: the journal already
holds each tool attempt (``tool_called`` with its arguments; its outcome is the unit's
output, or the error of ``plan_step_retrying`` / ``plan_step_failed``)
and each model call (its ``memo`` record carries the request beside the response). So a
cassette can be exported from any durable run, even one that nobody meant to record.

:class:`CassetteCalls` replays one: a call matches a recorded one of the same tool (or
model conversation) with the same arguments (or messages); several equal calls replay in
their recorded order (a retry's error, then its success). A call the cassette lacks is an
error naming the closest recorded call and the difference. Secrets never enter a
cassette (:func:`redact`): values under keys that name credentials, bearer tokens and
API keys by their look, the values of ``*_API_KEY``/``*_TOKEN`` environment variables, and
the configured ``redact`` patterns.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, get_args

from ...dsl.errors import RunError, Span, error
from ...dsl.ir import Purity
from ..engine.attempts import StepFailure
from ..core.calls import ModelCall, step_names
from .expect import show
from .mocks import mock_error
from ..core.redact import REDACTED, matches, redact, secret_inputs
from ..tools.catalog import Branch
from ..core.vocabulary import EventType

FORMAT = 1
# --- writing ----------------------------------------------------------------------------------


def from_journal(journal: Any, patterns: Iterable[str] = ()) -> dict[str, Any]:
    """The cassette of a recorded run: its plan, inputs and every real call, redacted."""
    calls: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}  # unit id -> its tool attempt awaiting an outcome
    for event in journal.events():
        data, unit = event.data, event.step or ""
        if event.type is EventType.TOOL_CALLED:
            pending[unit] = {
                "kind": "tool",
                "step": unit,
                "name": data.get("name"),
                "args": data.get("args"),
                "ts": event.ts,
            }
        elif event.type is EventType.STEP_RETRYING and unit in pending:
            calls.append(_settled(pending.pop(unit), event.ts, error=data.get("error")))
        elif event.type is EventType.STEP_FAILED and unit in pending and not data.get("replayed"):
            calls.append(_settled(pending.pop(unit), event.ts, error=data.get("error")))
        elif event.type is EventType.STEP_COMPLETED and unit in pending and not data.get("replayed"):
            entry = pending.pop(unit)
            output = journal.step_output(unit) if "output" not in data else data["output"]
            calls.append(_settled(entry, event.ts, result=output, alternative=data.get("alternative")))
        elif event.type is EventType.GATE_ANSWERED:
            calls.append({"kind": "gate", "step": unit, "value": data.get("value")})
        elif event.type is EventType.MEMO and "call" in data:
            found, value = journal.memo_get(data["key"]) if "value" not in data else (True, data["value"])
            if found:
                calls.append(_memo_call(unit, data["call"], value))
    secret = secret_inputs(journal.plan_doc)  # inputs the plan passes as credentials: secrets everywhere
    inputs = journal.inputs or {}
    also = [str(inputs[name]) for name in secret if isinstance(inputs.get(name), (str, int))]
    return redact(
        {
            "dagplan_cassette": FORMAT,
            "plan": journal.plan_name,
            "run_id": journal.id,
            "inputs": {k: (REDACTED if k in secret else v) for k, v in inputs.items()},
            "calls": calls,
        },
        patterns,
        also,
    )


def _settled(entry: dict[str, Any], ts: float, **outcome: Any) -> dict[str, Any]:
    started = entry.pop("ts")
    entry["duration"] = round(max(0.0, ts - started), 6)
    if outcome.get("error") is not None:
        entry["error"] = {k: v for k, v in outcome["error"].items() if k in ("type", "message", "transient")}
    else:
        entry["result"] = outcome.get("result")
        if outcome.get("alternative"):
            entry["alternative"] = outcome["alternative"]
    return entry


def _memo_call(unit: str, call: Mapping[str, Any], value: Any) -> dict[str, Any]:
    if call.get("kind") == "model":
        usage = value.get("usage", {}) if isinstance(value, dict) else {}
        return {
            "kind": "model",
            "step": unit,
            "model": call.get("model"),
            "request": call.get("request"),
            "response": {k: value.get(k) for k in ("message", "usage", "cost", "model")},
            "duration": call.get("duration"),
            "tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0),
        }
    return {"kind": "tool", "step": unit, "name": call.get("name"), "args": call.get("args"), "result": value,
            "duration": call.get("duration"), "in_llm_step": True}  # fmt: skip


def with_tools(cassette: dict[str, Any], specs: Iterable[Any]) -> dict[str, Any]:
    """The cassette with the catalog of the run's tools (their specs, never their code): a replay checks
    the plan against it when no tools are given, and calls none of them."""
    found = sorted((spec.to_json() for spec in specs), key=lambda t: t["name"])
    return {**cassette, "tools": found} if found else cassette


def replay_tools(cassette: Mapping[str, Any]) -> dict[str, Any]:
    """The tools a replay checks the plan against: the recorded catalog, as tools that are never called
    (every call is answered by the cassette; one it lacks is a miss)."""
    from ..tools.catalog import Tool

    def never_called(**_: Any) -> Any:
        raise StepFailure("a replay calls no tool: the cassette answers")

    return {
        t["name"]: Tool(t["name"], never_called, t.get("description") or "", t.get("parameters") or {"type": "object"},
                        t.get("purity"), output_schema=t.get("output_schema"), destructive=bool(t.get("destructive")),
                        alternatives=t.get("alternatives") if isinstance(t.get("alternatives"), int) else None)
        for t in cassette.get("tools") or ()
    }  # fmt: skip


def write(cassette: Mapping[str, Any], path: str | os.PathLike) -> None:
    from ...dsl.files import json_safe, write_file

    data = (json_safe(json.dumps(cassette, indent=1, ensure_ascii=False, default=str)) + "\n").encode("utf-8")
    write_file(path, data, what="cassette")


def read(path: str | os.PathLike) -> dict[str, Any]:
    """A cassette file (read like any document: regular file, limits, positions in errors)."""
    from ...dsl.load import read_document

    data, source = read_document(
        path, holds="a cassette's fields", example="record one: dagplan run PLAN --record FILE"
    )
    if data.get("dagplan_cassette") != FORMAT or not isinstance(data.get("calls"), list):
        raise RunError.make(
            "bad-cassette",
            f"{os.fspath(path)} is not a dagplan cassette (format {FORMAT})",
            source.locate(Span(os.fspath(path), ("calls",) if "dagplan_cassette" in data else ())),
            hint="record one with: dagplan run PLAN --record FILE, or dagplan runs export RUN -o FILE",
        )
    problems = [
        error("bad-cassette", message, source.locate(Span(os.fspath(path), ("calls", index, *where))))
        for index, call in enumerate(data["calls"])
        for where, message in _call_problems(call, index)
    ] + [
        error("bad-cassette", message, source.locate(Span(os.fspath(path), ("tools", *where))))
        for where, message in _tools_problems(data.get("tools"))
    ]
    if problems:
        raise RunError(problems)
    return data


_FIELDS: dict[str, dict[str, type]] = {
    "tool": {"name": str, "args": dict},
    "model": {"request": dict, "response": dict},
    "gate": {},
}


def _call_problems(call: Any, index: int) -> Iterable[tuple[tuple, str]]:
    """What makes one recorded call unusable (its place under it, the message)."""
    if not isinstance(call, dict):
        yield (), f"calls[{index}] must be an object, not {type(call).__name__}"
        return
    kind = call.get("kind")
    if not isinstance(kind, str) or kind not in _FIELDS:
        yield ("kind",) if "kind" in call else (), f"calls[{index}].kind must be tool, model or gate, not {kind!r}"
        return
    for name, wanted in _FIELDS[kind].items():
        if name in call and not isinstance(call[name], wanted):
            shown = "an object" if wanted is dict else "a string"
            yield (name,), f"calls[{index}].{name} must be {shown}, not {type(call[name]).__name__}"
    if "error" in call and not isinstance(call["error"], dict):
        yield ("error",), f"calls[{index}].error must be an object with type and message"
    alternative = call.get("alternative")
    if alternative is not None and (type(alternative) is not int or alternative < 0):
        yield ("alternative",), f"calls[{index}].alternative must be the number of an output alternative (0, 1, ...)"
    for key, wanted, shown in (("model", str, "a model name"), ("name", str, "a tool name")):
        if key in call and call[key] is not None and not isinstance(call[key], wanted):
            yield (key,), f"calls[{index}].{key} must be {shown}"
    if "duration" in call and (type(call["duration"]) not in (int, float) or call["duration"] < 0):
        yield ("duration",), f"calls[{index}].duration must be a number of seconds"
    request = call.get("request")
    if kind == "model" and isinstance(request, dict):
        params = request.get("params")
        if params is not None and not isinstance(params, dict):
            yield ("request", "params"), f"calls[{index}].request.params must be an object"
        elif isinstance(params, dict) and params.get("response_format") is not None:
            if not isinstance(params["response_format"], dict):
                yield (
                    ("request", "params", "response_format"),
                    (f"calls[{index}].request.params.response_format must be an object"),
                )
    if "step" in call and not isinstance(call["step"], str):
        yield ("step",), f"calls[{index}].step must be a step id"


def _tools_problems(tools: Any) -> Iterable[tuple[tuple, str]]:
    """What makes a recorded tool catalog unusable (its place under ``tools``, the message)."""
    if tools is None:
        return
    if not isinstance(tools, list):
        yield (), f"tools must be a list of tool specs, not {type(tools).__name__}"
        return
    for index, spec in enumerate(tools):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
            yield (index,), f"tools[{index}] must be an object with a name"
            continue
        for key in ("parameters", "output_schema"):
            if spec.get(key) is not None and not isinstance(spec[key], dict):
                yield (index, key), f"tools[{index}].{key} must be a JSON Schema object"
        if spec.get("purity") not in (None, *get_args(Purity)):
            yield (index, "purity"), f"tools[{index}].purity {spec['purity']!r} is not a purity"


# --- replaying --------------------------------------------------------------------------------


class CassetteMiss(StepFailure):
    """A call the cassette has no recording of: the replay stops there (nothing after it would mean anything)."""

    stops_run = True


@dataclass
class CassetteCalls:
    """The :class:`~.calls.Calls` replaying a cassette: no real tool or model is called."""

    cassette: Mapping[str, Any]
    name: str = "cassette"
    offline: bool = True
    misses: list[str] = field(default_factory=list)
    patterns: tuple[str, ...] = ()  # the configured `redact` patterns: a miss message shows no secret either

    def __post_init__(self) -> None:
        self._left = list(self.cassette.get("calls", []))
        self._structured = {
            c.get("model")
            for c in self._left
            if c.get("kind") == "model"
            and ((c.get("request") or {}).get("params") or {}).get("response_format", {}).get("json_schema")
        }

    def tool(
        self, unit_id: str, name: str, args: Mapping[str, Any], real: Callable[[], Awaitable[Any]] | None
    ) -> Awaitable[Any]:
        wanted = dict(args)
        entry = self._take(
            unit_id, lambda c: c.get("kind") == "tool" and c.get("name") == name and _same(c.get("args"), wanted)
        )
        if entry is None:
            return self._miss(
                unit_id, f"tool {name}", wanted, [c for c in self._all("tool") if c.get("name") == name], "args"
            )
        return _replayed_tool(entry)

    async def model(self, call: ModelCall, real: Callable[[], Awaitable[dict]]) -> dict:
        wanted = call.request
        entry = self._take(call.unit_id, lambda c: c.get("kind") == "model" and _same(c.get("request"), wanted))
        if entry is None:
            return await self._miss(call.unit_id, f"model {call.model}", wanted, self._all("model"), "request")
        response = dict(entry["response"])
        response.setdefault("usage", {"prompt_tokens": 0, "completion_tokens": 0})
        response.setdefault("cost", 0.0)
        return response

    def structured(self, model: str) -> bool:
        return model in self._structured

    def recorded_model(self) -> str | None:
        """The model of the first recorded model call (what a replay runs LLM steps "with")."""
        return next((c.get("model") for c in self.cassette.get("calls", []) if c.get("kind") == "model"), None)

    def gate(self, unit_id: str) -> tuple[bool, Any]:
        """The recorded answer of a gate (found, value)."""
        for entry in self.cassette.get("calls", []):
            if entry.get("kind") == "gate" and entry.get("step") == unit_id:
                return True, entry.get("value")
        return False, None

    def answer_gate(self, request: Mapping[str, Any]) -> Any:
        unit_id = str(request.get("step", ""))
        found, value = self.gate(unit_id)
        if not found:
            message = f"{self.name} has no answer of gate {unit_id}"
            self.misses.append(message)
            raise CassetteMiss(message)
        return value

    def _take(self, unit_id: str, fits: Callable[[Mapping[str, Any]], bool]) -> Mapping[str, Any] | None:
        """The first unused recording that fits, one of the same step first."""
        mine = set(step_names(unit_id))
        for same_step in (True, False):
            for index, entry in enumerate(self._left):
                if fits(entry) and (not same_step or entry.get("step") in mine):
                    return self._left.pop(index)
        return None

    def _all(self, kind: str) -> list[Mapping[str, Any]]:
        return [c for c in self.cassette.get("calls", []) if c.get("kind") == kind]

    async def _miss(self, unit_id: str, what: str, wanted: Any, recorded: list, key: str) -> Any:
        wanted = redact(wanted, self.patterns)  # an error message must not show what a cassette would not keep
        message = f"{self.name} has no recording of {what} called by step {unit_id} with {show(wanted, 200)}"
        closest = _closest(wanted, [c.get(key) for c in recorded])
        if closest is not None:
            diff = _diff(closest, _diff_of(closest, wanted))
            message += f"; the closest recorded call differs:\n{diff}"
        else:
            message += f"; it recorded no call of {what}"
        self.misses.append(message)
        raise CassetteMiss(message)


def _replayed_tool(entry: Mapping[str, Any]) -> Any:
    async def answer() -> Any:
        if "error" in entry:
            raise mock_error(entry["error"])
        value = entry.get("result")
        return Branch(entry["alternative"], value) if entry.get("alternative") else value

    return answer()


def _diff_of(recorded: Any, wanted: Any) -> Any:
    """``wanted`` with what the recording redacted redacted too (no line differs only by a secret)."""
    if recorded == REDACTED:
        return REDACTED
    if isinstance(recorded, dict) and isinstance(wanted, dict):
        return {k: _diff_of(recorded[k], v) if k in recorded else v for k, v in wanted.items()}
    if isinstance(recorded, list) and isinstance(wanted, list) and len(recorded) == len(wanted):
        return [_diff_of(r, w) for r, w in zip(recorded, wanted)]
    return wanted


def _same(recorded: Any, actual: Any) -> bool:
    """Equal, a redacted recorded value matching anything (a redacted part of a string: any text there)."""
    if recorded == REDACTED:
        return True
    if isinstance(recorded, str) and isinstance(actual, str):
        return matches(recorded, actual)
    if isinstance(recorded, dict) and isinstance(actual, dict):
        return recorded.keys() == actual.keys() and all(_same(recorded[k], actual[k]) for k in recorded)
    if isinstance(recorded, list) and isinstance(actual, list):
        return len(recorded) == len(actual) and all(_same(r, a) for r, a in zip(recorded, actual))
    return bool(recorded == actual) and type(recorded) is type(actual) or (
        isinstance(recorded, (int, float)) and isinstance(actual, (int, float)) and recorded == actual
        and not isinstance(recorded, bool) and not isinstance(actual, bool)
    )  # fmt: skip


def _closest(wanted: Any, recorded: list[Any]) -> Any:
    if not recorded:
        return None
    text = _lines(wanted)
    return max(recorded, key=lambda r: difflib.SequenceMatcher(None, _lines(r), text).ratio())


def _lines(value: Any) -> list[str]:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str).splitlines()


def _diff(recorded: Any, wanted: Any, limit: int = 30) -> str:
    lines = list(difflib.unified_diff(_lines(recorded), _lines(wanted), "recorded", "this call", n=1, lineterm=""))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more lines)"]
    return "\n".join(lines)
