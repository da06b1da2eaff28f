"""Tools: Python callables a plan may call, registered with ``@dagplan.tool``.

A tool's argument JSON Schema is derived from its type hints (or given), so the
validator can check calls statically (``dagplan check --tools``) before anything runs.
Sync tools run in worker threads so they never block other steps.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import opcode
import queue
import threading
import types
import typing
from functools import cached_property
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Iterable, Literal, Mapping

from ...dsl.ir import Purity, ToolSpec
from ...dsl.validate_tools import parameter_types


_WAITS = frozenset(opcode.opmap[name] for name in ("YIELD_VALUE", "SEND", "GET_AWAITABLE", "BEFORE_ASYNC_WITH",
                                                  "GET_AITER", "GET_ANEXT") if name in opcode.opmap)  # fmt: skip


class TransientError(Exception):
    """Raise from a tool to say "this may work if tried again": the step is retried."""


@dataclass(frozen=True)
class Branch:
    """Return from a tool to write ``value`` to another alternative of a branching output path.

    ``alternative`` is an index (0 is the first) or the path as written in the plan
    (``"†state.error"``, ``"$state.error"`` or ``"state.error"``).
    """

    alternative: int | str
    value: Any = None


@dataclass(frozen=True)
class Tool:
    """A function a plan may call, with its name, parameter schema, purity (``pure``, ``idempotent``, ``side_effect``)
    and retry policy: what ``@dagplan.tool`` makes."""

    name: str
    fn: Callable[..., Any]
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({"type": "object"}))
    purity: Purity | None = None
    retry_on: tuple[type[BaseException], ...] = ()
    is_async: bool = False
    executor: str | None = None  # "ray": its calls run as Ray tasks (else the run's executor; local by default)
    resources: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # Ray's: num_gpus, ...
    source: Any = None  # what its calls go through, closed when a run ends (an MCP server's session)
    output_schema: Mapping[str, Any] | None = None
    destructive: bool = False
    alternatives: int | None = None  # outcomes it may answer with Branch(i, value); None: not said
    version: str = ""  # what it declares it is (`@tool(version=...)`; an MCP tool: its lock entry's hash)

    @cached_property
    def parameter_types(self) -> dict[str, frozenset[str]]:
        """Each typed parameter's accepted JSON types (``dsl.validate_tools.parameter_types``), worked out
        once: the engine checks every call's arguments against them."""
        return parameter_types(self.parameters)

    @cached_property
    def never_waits(self) -> bool:
        """An ``async def`` whose own code awaits nothing (no ``await``, ``async with`` or ``async for``): its
        coroutine answers at its first step, so the engine may run its call in place, without a task of its
        own (engine/execution.py). Read from the function's bytecode: exact, and a wrapper that awaits the
        function it wraps is not such a tool."""
        code = getattr(self.fn, "__code__", None)
        if not self.is_async or code is None or not inspect.iscoroutinefunction(self.fn):
            return False
        return _WAITS.isdisjoint(code.co_code[::2])  # wordcode: an instruction (or cache entry) every 2 bytes

    @cached_property
    def identity(self) -> str:
        """What a step's fingerprint holds of the tool: its name and the version it declares, else its code's
        identity (:mod:`.identity`: an edit of the code it runs, helpers and constants included, re-runs its
        steps under ``--reuse``)."""
        if self.version:
            return f"{self.name}@{self.version}"
        return f"{self.name}@code:{self.code_identity}"

    @cached_property
    def code_identity(self) -> str:
        """The hash of the code this tool runs (:func:`.identity.code_identity`): what an approval binds,
        whatever version the tool declares."""
        from .identity import code_identity

        return code_identity(self.fn)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters, self.purity, self.output_schema, self.destructive,
                        self.alternatives)  # fmt: skip

    @cached_property
    def takes_idempotency_key(self) -> bool:
        """Whether the function declares ``idempotency_key``: the run passes it (:func:`idempotency_key`)."""
        try:
            return IDEMPOTENCY_KEY in inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return False


IDEMPOTENCY_KEY = "idempotency_key"  # a tool parameter the run fills in, never the plan


def idempotency_key(run_id: str, unit_id: str) -> str:
    """The key of one unit's side effect: the same for every attempt, retry and resume of that unit in that
    run, different for any other unit or run. Pass it to an API that deduplicates (``Idempotency-Key``)."""

    return "dagplan-" + hashlib.sha256(f"{run_id}\0{unit_id}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def tool(
    fn: Callable | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    purity: Purity | None = None,
    retry_on: Iterable[type[BaseException]] = (),
    executor: Literal["local", "ray"] | None = None,
    resources: Mapping[str, Any] | None = None,
    alternatives: int | None = None,
    version: str | None = None,
):
    """Register a function as a tool: ``@tool`` or ``@tool(name=..., purity="pure")``;
    ``executor="ray"`` (with ``resources={"num_gpus": 1}``) runs its calls as Ray tasks;
    ``alternatives=2``: it answers one of two outcomes (``Branch(1, value)`` for the second), so
    ``check`` holds a step calling it to an output with as many alternatives. ``version="2"``: what
    ``run --reuse`` holds of the tool (by default the hash of its source: any edit of it re-runs its steps).

    The function is returned unchanged (still callable by your own code); its
    :class:`Tool` is at ``fn.__dagplan_tool__``.
    """

    def register(func: Callable) -> Callable:
        func.__dagplan_tool__ = Tool(  # type: ignore[attr-defined]
            name=name or func.__name__,
            fn=func,
            description=description if description is not None else inspect.cleandoc(func.__doc__ or ""),
            parameters=MappingProxyType(dict(parameters)) if parameters else schema_from_signature(func),
            output_schema=return_schema(func),
            purity=purity,
            retry_on=tuple(retry_on),
            is_async=inspect.iscoroutinefunction(func),
            executor=executor,
            resources=MappingProxyType(dict(resources or {})),
            alternatives=alternatives,
            version=version or "",
        )
        return func

    return register(fn) if fn is not None else register


def as_tool(obj: Any) -> Tool:
    """A Tool from a decorated function, a Tool, or a plain callable."""
    if isinstance(obj, Tool):
        return obj
    found = getattr(obj, "__dagplan_tool__", None)
    if found is not None:
        return found
    if callable(obj):
        return tool(obj).__dagplan_tool__
    raise TypeError(f"not a tool: {obj!r}")


def registry(tools: Iterable[Any] | Mapping[str, Any] | None) -> dict[str, Tool]:
    """Normalize what a caller passes as ``tools=`` into ``{name: Tool}``."""
    if tools is None:
        return {}
    if isinstance(tools, Mapping):
        out = {}
        for key, obj in tools.items():
            t = as_tool(obj)
            out[key] = t if t.name == key else replace(t, name=key)
        return out
    return {t.name: t for t in map(as_tool, tools)}


# --- running sync tools -------------------------------------------------------------------------


class WorkerThreads:
    """Threads that run sync tools, at most ``size`` at once.

    Daemon threads, unlike ``ThreadPoolExecutor``'s: a sync tool that ignores its timeout
    (Python cannot stop a thread) is abandoned when the run has reported, instead of
    keeping the process alive until it returns. Results go straight to the event loop's
    future (no ``concurrent.futures`` layer in between).
    """

    def __init__(self, size: int):
        self.size = max(1, size)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def run(self, fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((loop, future, functools.partial(contextvars.copy_context().run, fn), kwargs))
        with self._lock:
            if self._idle == 0 and self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._work, name="dagplan-tool", daemon=True).start()
            else:
                self._idle -= 1 if self._idle else 0
        return future

    def shutdown(self) -> None:
        """Let idle threads end; a thread still running a tool ends when the tool returns (or with the process)."""
        with self._lock:
            for _ in range(self._threads):
                self._jobs.put(None)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            loop, future, fn, kwargs = job
            try:
                outcome: tuple = (fn(**kwargs), None)
            except BaseException as exc:  # noqa: BLE001 - SystemExit too: the step's failure, judged by the engine
                outcome = (None, exc)
            try:
                loop.call_soon_threadsafe(_deliver, future, *outcome)
            except RuntimeError:  # the loop has closed: the run ended without this result
                pass
            with self._lock:
                self._idle += 1


def _deliver(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled (a timeout): nobody waits for this result
        return
    if error is None:
        future.set_result(value)
    elif isinstance(error, StopIteration):  # no future carries it (asyncio refuses, and the run would hang):
        wrapped = RuntimeError(f"the tool raised StopIteration{': ' + str(error) if str(error) else ''}")
        wrapped.__cause__ = error  # as a coroutine that raises it does (PEP 479)
        future.set_exception(wrapped)
    else:
        future.set_exception(error)


# --- JSON Schema from type hints ------------------------------------------------------------

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def schema_from_signature(func: Callable) -> Mapping[str, Any]:
    sig = inspect.signature(func)
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # unresolvable forward references: fall back to "any"
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra = False
    for pname, param in sig.parameters.items():
        if pname == IDEMPOTENCY_KEY:
            continue  # filled in by the run, not by the plan
        if param.kind is param.VAR_KEYWORD:
            extra = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            continue
        properties[pname] = type_schema(hints.get(pname, Any))
        if param.default is param.empty:
            required.append(pname)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": extra}
    if required:
        schema["required"] = required
    return MappingProxyType(schema)


def return_schema(func: Callable) -> Mapping[str, Any] | None:
    """What the function's return annotation says it returns (``-> list[str]``), as JSON Schema; None when it
    says nothing a schema holds (no annotation, ``Any``, a class of its own). ``check`` reads it where a step's
    output is passed on: a ``list[str]`` into a ``list[dict]`` parameter is refused before the run."""
    try:
        hint = typing.get_type_hints(func).get("return", Any)
    except Exception:  # unresolvable forward references: nothing is said
        return None
    schema = type_schema(hint)
    return MappingProxyType(schema) if schema.get("type") else None


def type_schema(hint: Any) -> dict[str, Any]:
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]} if hint is not float else {"type": "number"}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [type_schema(a) for a in args]}
    if hint in (list, tuple, set) or origin in (list, tuple, set, frozenset):
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        return {"type": "object"}
    return {}
