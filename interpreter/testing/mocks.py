"""Mocked tools, models and gates: the :class:`~.calls.Calls` of a plan test case.

A case's ``mocks`` say, per tool, per LLM step and per gate, what the world answers. A
tool or an LLM step mock is a response, a ``sequence`` of responses (one per call, the
last one repeating: retries and loops), or a list of rules, the first whose ``args`` (a
tool's) or ``prompt`` (an LLM step's) match answering. A response is ``result`` (a tool's;
with ``alternative`` for a branching output), ``text``/``json``/``tool_calls`` (a model's),
or ``error`` (``type``, ``message``, ``transient``), optionally after ``delay`` seconds.

A call nothing mocks fails its step (never retried) and is recorded: the case fails with
the step id, the tool and the arguments, whatever the plan did with the failure. Only the
tools a case names in ``real``, and those that declare themselves pure (``purity="pure"``: they change
nothing) when no mock names them, are ever really called.
"""

from __future__ import annotations

import asyncio
import builtins
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ..engine.attempts import StepFailure
from ..core.calls import ModelCall, step_names
from ..core.calls import matches as unit_matches
from .expect import matches, show
from ..tools.catalog import Branch, TransientError


@dataclass(frozen=True)
class Unmocked:
    """A call no mock answered: what the case reports."""

    unit_id: str
    kind: str  # "tool" | "model" | "gate"
    name: str  # the tool, the model, or the gate's step
    args: Any

    def describe(self) -> str:
        if self.kind == "tool":
            return (
                f"step {self.unit_id} called tool {self.name} with {show(self.args, 300)}, which no mock answers"
                f" (add mocks.tools.{self.name}, or list it in real:)"
            )
        if self.kind == "gate":
            return (
                f"gate {self.unit_id} asked {show(self.args, 200)}, and the case gives no answer"
                f" (add mocks.gates.{self.unit_id})"
            )
        return (
            f"LLM step {self.unit_id} called the model with the prompt {show(self.args, 200)}, which no mock answers"
            f" (add mocks.llm.{step_names(self.unit_id)[-1]})"
        )


class UnmockedCall(StepFailure):
    """Raised in the step that made an unmocked call: the case's run stops there."""

    stops_run = True


@dataclass
class _Rule:
    match: Any  # the args / prompt a call must match (None: any call)
    exact: bool
    responses: list[Mapping[str, Any]]
    used: int = 0

    def next(self) -> Mapping[str, Any]:
        response = self.responses[min(self.used, len(self.responses) - 1)]
        self.used += 1
        return response


def _rules(spec: Any, key: str) -> list[_Rule]:
    """A mock as given (a response, ``{sequence: [...]}``, or a list of rules) -> rules, in order."""
    specs = spec if isinstance(spec, list) else [spec]
    out = []
    for one in specs:
        responses = list(one["sequence"]) if "sequence" in one else [one]
        out.append(_Rule(one.get(key), bool(one.get("exact")), responses))
    return out


@dataclass
class MockCalls:
    """The mocks of one case (see the module doc); ``real``: the tools really called."""

    tools: Mapping[str, Any] = field(default_factory=dict)
    llm: Mapping[str, Any] = field(default_factory=dict)
    gates: Mapping[str, Any] = field(default_factory=dict)
    real: frozenset[str] = frozenset()
    offline: bool = True
    unmocked: list[Unmocked] = field(default_factory=list)
    pure: frozenset[str] = frozenset()  # tools that declare themselves pure: called for real unless mocked

    def __post_init__(self) -> None:
        self._tool_rules = {name: _rules(spec, "args") for name, spec in self.tools.items()}
        self._llm_rules = {name: _rules(spec, "prompt") for name, spec in self.llm.items()}

    # --- tools ---

    def tool(
        self, unit_id: str, name: str, args: Mapping[str, Any], real: Callable[[], Awaitable[Any]] | None
    ) -> Awaitable[Any]:
        if name in self.real:
            if real is None:
                raise StepFailure(f"tool {name!r} is listed in `real` but no tool of that name was loaded (tools:)")
            return real()
        if name in self.pure and name not in self.tools and real is not None:  # changes nothing: its real answer
            return real()
        rule = _first(
            self._tool_rules.get(name, ()),
            lambda r: r.match is None or matches(r.match, dict(args), subset=not r.exact),
        )
        if rule is None:
            return self._unmocked(Unmocked(unit_id, "tool", name, dict(args)))
        return _respond(rule.next(), _tool_value)

    # --- models ---

    async def model(self, call: ModelCall, real: Callable[[], Awaitable[dict]]) -> dict:
        key = next((n for n in step_names(call.unit_id) if n in self._llm_rules), None)
        prompt = _prompt(call.messages)
        if key is None:
            return await self._unmocked(Unmocked(call.unit_id, "model", call.model, prompt))
        rule = _first(self._llm_rules[key], lambda r: r.match is None or matches(r.match, prompt))
        if rule is None:
            return await self._unmocked(Unmocked(call.unit_id, "model", call.model, prompt))
        return await _respond(rule.next(), lambda r: _model_record(r, call))

    def structured(self, model: str) -> bool:
        return False  # the schema goes into the instructions: the same answer is read either way

    # --- gates ---

    def answer_gate(self, request: Mapping[str, Any]) -> Any:
        unit_id = str(request.get("step", ""))
        for name in step_names(unit_id):
            if name in self.gates:
                return self.gates[name]
        for pattern in self.gates:  # each[*].approve_close: every item's gate
            if "*" in pattern and unit_matches(pattern, unit_id):
                return self.gates[pattern]
        self.unmocked.append(Unmocked(unit_id, "gate", unit_id, request.get("question")))
        raise UnmockedCall(f"gate {unit_id} has no answer in this case (mocks.gates)")

    async def _unmocked(self, call: Unmocked) -> Any:
        self.unmocked.append(call)
        raise UnmockedCall(call.describe())


def _first(rules: Sequence[_Rule], accept: Callable[[_Rule], bool]) -> _Rule | None:
    return next((r for r in rules if accept(r)), None)


async def _respond(response: Mapping[str, Any], value: Callable[[Mapping[str, Any]], Any]) -> Any:
    if response.get("delay"):
        await asyncio.sleep(float(response["delay"]))
    if "error" in response:
        raise mock_error(response["error"])
    return value(response)


def _tool_value(response: Mapping[str, Any]) -> Any:
    value = response.get("result")
    if "alternative" in response:
        return Branch(response["alternative"], value)
    return value


_ERROR_TYPES: dict[tuple[str, bool], type[Exception]] = {}


def mock_error(spec: Mapping[str, Any]) -> Exception:
    """The exception a mocked error raises: of a class named ``type`` (builtin ones are themselves:
    ``TimeoutError`` is transient as in production), transient when ``transient`` says so."""
    name = str(spec.get("type") or "Error")
    message = str(spec.get("message", ""))
    transient = spec.get("transient")
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, Exception) and transient is None:
        return _stand_in(builtin)(message)
    key = (name, bool(transient))
    cls = _ERROR_TYPES.get(key)
    if cls is None:
        bases: tuple[type, ...] = (TransientError,) if transient else (Exception,)
        cls = _ERROR_TYPES[key] = type(name, bases, {"__module__": "dagplan.mock"})
    return cls(message)


_STAND_INS: dict[type, type] = {}


def _stand_in(builtin: type) -> type:
    """A subclass of a builtin exception that takes one message and shows it as it was recorded: every
    builtin replays as its own type (``catch:`` routes it the same way), ``UnicodeDecodeError`` (five
    arguments) and ``KeyError`` (which quotes its message) included."""
    cls = _STAND_INS.get(builtin)
    if cls is None:

        def __init__(self: BaseException, message: str = "") -> None:
            BaseException.__init__(self, message)

        def __str__(self: BaseException) -> str:
            return str(self.args[0]) if self.args else ""

        namespace = {"__init__": __init__, "__str__": __str__, "__module__": "dagplan.replayed"}
        cls = _STAND_INS[builtin] = type(builtin.__name__, (builtin,), namespace)
    return cls


def _prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    """The last user message of a conversation (what a mock's ``prompt`` matches)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def _model_record(response: Mapping[str, Any], call: ModelCall) -> dict:
    """A mocked answer as the record a real model call returns."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if "tool_calls" in response:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})},
            }
            for i, c in enumerate(response["tool_calls"])
        ]
    else:
        value = response["json"] if "json" in response else response.get("text", "")
        if call.alternatives:
            value = {"alternative": _alternative(call, response.get("alternative", 0)), "value": value}
        message["content"] = (
            value if isinstance(value, str) and not call.alternatives and "json" not in response else json.dumps(value)
        )
    usage = response.get("usage") or {}
    return {
        "message": message,
        "usage": {
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
        },
        "cost": float(response.get("cost", 0.0)),
        "model": call.model,
    }


def _alternative(call: ModelCall, chosen: Any) -> str:
    """The alternative a mock names (an index, or a path as written) as the text the model would choose."""
    if isinstance(chosen, int) and 0 <= chosen < len(call.alternatives):
        return call.alternatives[chosen]
    wanted = str(chosen).strip().lstrip("\u2020$")
    for alt in call.alternatives:
        if alt.lstrip("\u2020$") == wanted or wanted in (p.strip().lstrip("\u2020$") for p in alt.split("&&")):
            return alt
    raise StepFailure(f"the mock chooses alternative {chosen!r}, not one of {', '.join(call.alternatives)}")
