"""The one seam where a run reaches the world: a tool call and a model call.

Every tool call (a tool step, a fan-out item, a sub-plan's or a loop's step, a tool the
model calls inside an LLM step) and every model call goes through the run's
:class:`Calls` when it has one (``Options.calls``); without one the real tool or model is
called directly (the default, at no cost). Plan tests give mocks (:mod:`.mocks`), a
replayed run gives a cassette (:mod:`.cassette`): the engine, the attempt policy, the
journal and the events are the same in every case, so a test runs the plan exactly as
production does, minus the outside world.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Protocol, Sequence


@dataclass(frozen=True)
class ModelCall:
    """One model call as the LLM step makes it: what a mock or a cassette answers."""

    unit_id: str  # the unit making it: ``summarize``, ``review[3]``, ``sub.summarize``
    model: str
    messages: Sequence[Mapping[str, Any]]
    params: Mapping[str, Any]  # tools, response_format, temperature... (never transport keys or secrets)
    alternatives: tuple[str, ...] = ()  # the output paths a branching step chooses from (the answer wraps its value)

    @property
    def request(self) -> dict[str, Any]:
        return {"messages": [dict(m) for m in self.messages], "params": dict(self.params)}


class Calls(Protocol):
    """What stands between a run and its tools and models."""

    offline: bool  # True: no real model can be called (no preflight of models and keys, no litellm import)

    def tool(
        self, unit_id: str, name: str, args: Mapping[str, Any], real: Callable[[], Awaitable[Any]] | None
    ) -> Awaitable[Any]:
        """The result of tool ``name`` called by ``unit_id`` (``real``: the real call; None: the run lacks it)."""

    async def model(self, call: ModelCall, real: Callable[[], Awaitable[dict]]) -> dict:
        """A model call's record ``{message, usage, cost, model}`` (what :func:`.llm.complete` returns)."""

    def structured(self, model: str) -> bool:
        """Whether ``model`` takes a JSON schema as its response format (asked of litellm when real)."""


@dataclass
class Counted:
    """Any :class:`Calls`, counting every call it answers: per tool name, and per name of the unit making a
    model call (:func:`step_names`: ``review[2]``, ``review``). Plan tests read call counts from here, so
    they do not depend on which events a run keeps. Everything else is the wrapped calls'."""

    inner: Any
    counts: Counter[str] = field(default_factory=Counter)

    def tool(
        self, unit_id: str, name: str, args: Mapping[str, Any], real: Callable[[], Awaitable[Any]] | None
    ) -> Awaitable[Any]:
        self.counts[name] += 1
        return self.inner.tool(unit_id, name, args, real)

    def model(self, call: ModelCall, real: Callable[[], Awaitable[dict]]) -> Awaitable[dict]:
        self.counts.update(dict.fromkeys(step_names(call.unit_id), 1))
        return self.inner.model(call, real)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def step_names(unit_id: str) -> list[str]:
    """The names a unit answers to, most precise first: ``sub.review[3]`` -> ``sub.review[3]``,
    ``sub.review``, ``review``: what a mock or a cassette entry may be keyed by."""
    names = [unit_id]
    plain = _without_indexes(unit_id)
    if plain != unit_id:
        names.append(plain)
    last = plain.rsplit(".", 1)[-1]
    if last != plain:
        names.append(last)
    return names


def matches(pattern: str, unit_id: str) -> bool:
    """Whether a unit's full id matches ``pattern``: the id itself, or ``*`` standing for any characters
    (``each[*].approve_close``); the one rule of ``dagplan answer``, ``--answer`` and a test's gate mocks."""
    if "*" not in pattern:
        return pattern == unit_id
    import re

    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), unit_id) is not None


def _without_indexes(unit_id: str) -> str:
    out, depth = [], 0
    for char in unit_id:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


class Fakes:
    """Every tool answers a small object of its arguments, every model a short text, every gate
    ``approve``: what it takes to see whether a plan runs to its end, acting on nothing."""

    offline = True

    async def _tool(self, args: Mapping[str, Any]) -> Any:
        return {"ok": True, **{k: v for k, v in args.items() if isinstance(v, (str, int, float, bool))}}

    def tool(self, unit_id: str, name: str, args: Mapping[str, Any], real: Any) -> Any:
        return self._tool(args)

    async def model(self, call: Any, real: Any) -> dict:
        content = json.dumps({"alternative": call.alternatives[0], "value": "ok"}) if call.alternatives else "ok"
        return {"message": {"role": "assistant", "content": content}, "model": call.model, "cost": 0.0,
                "usage": {"prompt_tokens": 0, "completion_tokens": 0}}  # fmt: skip

    def structured(self, model: str) -> bool:
        return False

    def answer_gate(self, request: Mapping[str, Any]) -> Any:
        choices = request.get("choices") or ["approve"]
        return choices[0]
