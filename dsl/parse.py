"""Canonical document data -> Plan IR.

The data has already been loaded (and normally schema-checked); this stage turns
strings into references, templates and output paths, durations into seconds,
and lists into tuples. It collects *every* syntax diagnostic (one per bad
string) and never raises: a document that is not a mapping of the expected
shape gets ``schema`` diagnostics instead of a traceback, because parse may be
called on data that never went through the schema.
"""

from __future__ import annotations

from .record import record, field, replace
from functools import lru_cache
from types import MappingProxyType
from collections.abc import Mapping
from typing import Any, cast

from .compose import composition_fields
from .condition import parse_condition
from .errors import Diagnostic, PlanInvalid, Span, error
from .expr import SPECIAL, _single_ref_parts, classify, parse_output, parse_template
from .ir import EMPTY, NOT_GIVEN, Catch, LLMCall, Output, Plan, Ref, Retry, Root, Step, Template, parse_duration

_LLM_KEYS = ("system", "model", "params", "tools", "output_schema", "max_iterations")


def parse_document(
    data: Any, name: str = "<string>", dialect: str = "canonical"
) -> tuple[Plan | None, list[Diagnostic]]:
    """Build the Plan IR from canonical data; ``(None, diagnostics)`` when any string is bad."""
    ctx = _Context(name)
    if not isinstance(data, Mapping):
        ctx.fail("schema", "a plan document must be a mapping (object) with a `steps` list", ())
        return None, ctx.diagnostics
    dialect = str(data.get("x-dialect") or dialect)
    steps = _steps(ctx, data.get("steps"))
    plan_kwargs = _plan_fields(ctx, data)
    if ctx.diagnostics:
        return None, ctx.diagnostics
    plan = Plan(steps=steps, dialect=dialect, source=name, span=Span(name), document=data, **plan_kwargs)
    return plan, []


@record
class _Context:
    """Where diagnostics accumulate while building one plan."""

    name: str
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def span(self, path: tuple) -> Span:
        return Span(self.name, path)

    def fail(self, code: str, message: str, path: tuple, hint: str | None = None) -> None:
        self.diagnostics.append(error(code, message, self.span(path), hint))

    def value(self, raw: Any, path: tuple) -> Any:
        """A JSON value with its strings classified, as arguments are (for the composition keys)."""
        return _value(self, raw, path)

    def guard(self, build, *args, default=None):
        """Run an expression parser; a syntax error becomes a diagnostic and ``default``."""
        try:
            return build(*args)
        except PlanInvalid as exc:
            self.diagnostics.extend(exc.diagnostics)
            return default


# --- plan level -------------------------------------------------------------------------


def _plan_fields(ctx: _Context, data: Mapping) -> dict:
    inputs = data.get("inputs")
    out: dict[str, Any] = {
        "summary": str(data.get("summary") or ""),
        "mode": data.get("mode") or "eager",
        "on_failure": data.get("on_failure") or "continue",
        "inputs": frozen(inputs) if isinstance(inputs, Mapping) else None,
        "required_inputs": _required_inputs(inputs),
        "state": frozen(data["state"]) if isinstance(data.get("state"), Mapping) else None,
        "initial_state": frozen(data.get("initial_state") or {}),
        "declared_groups": _groups(ctx, data.get("parallel_groups")),
    }
    if data.get("timeout") is not None:
        out["timeout"] = _seconds(ctx, data["timeout"], ("timeout",))
    for key in ("max_cost", "max_tokens"):
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value
    if data.get("executor") in ("local", "ray"):
        out["executor"] = data["executor"]
    if data.get("result") is not None:
        out["result"] = _value(ctx, data["result"], ("result",))
    return out


def _required_inputs(inputs: Any) -> tuple[str, ...]:
    if not isinstance(inputs, Mapping):
        return ()
    return tuple(k for k, v in inputs.items() if not (isinstance(v, Mapping) and "default" in v))


def _groups(ctx: _Context, groups: Any) -> tuple[tuple[str, ...], ...] | None:
    if groups is None:
        return None
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        ctx.fail("schema", "`parallel_groups` must be a list of lists of step ids", ("parallel_groups",))
        return None
    return tuple(tuple(str(s) for s in g) for g in groups)


# --- steps ------------------------------------------------------------------------------


def _steps(ctx: _Context, raw: Any) -> tuple[Step, ...]:
    if not isinstance(raw, list):
        ctx.fail("schema", "`steps` must be a list of steps", ("steps",))
        return ()
    steps = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            ctx.fail("schema", f"step {i + 1} must be a mapping", ("steps", i))
            continue
        steps.append(_step(ctx, item, ("steps", i)))
    return tuple(steps)


def _step(ctx: _Context, raw: Mapping, path: tuple) -> Step:
    get = raw.get  # absent fields skip their parser: this runs once per step of 10,000-step plans
    step_id = get("id")
    if not isinstance(step_id, str):
        ctx.fail("schema", "every step needs a string `id`", path + ("id",) if "id" in raw else path)
        step_id = str(step_id)
    output = None
    if get("output") is not None:
        output = _output(ctx, raw["output"], path + ("output",))
    tool, args, deps, retry, timeout = get("tool"), get("args"), get("deps"), get("retry"), get("timeout")
    rules = _retry_rules(ctx, retry, path + ("retry",)) if isinstance(retry, list) else ()
    if rules:
        retry = None
    routing = _routing_fields(ctx, raw, path, output) if not _ROUTING_KEYS.isdisjoint(raw) else {}
    output = routing.pop("output", output)
    return Step(
        id=step_id,
        tool=tool if isinstance(tool, str) else None,
        llm=_llm(ctx, raw, path) if get("llm") is not None else None,
        description=str(get("description") or ""),
        args=EMPTY if args is None else _args(ctx, args, path + ("args",)),
        deps=() if deps is None else _deps(ctx, deps, path + ("deps",)),
        output=output,
        retry=(rules[0] if rules else _DEFAULT_RETRY) if retry is None else _retry(ctx, retry, path + ("retry",)),
        retry_rules=rules,
        timeout=None if timeout is None else _seconds(ctx, timeout, path + ("timeout",)),
        purity=get("purity"),
        trigger=get("trigger") or "all_succeeded",
        trigger_given=get("trigger") is not None,
        retry_given=get("retry") is not None,
        precomputed=frozen(raw["precomputed"]) if "precomputed" in raw else NOT_GIVEN,
        span=Span(ctx.name, path),
        **(composition_fields(ctx, raw, path) if not _COMPOSITION_KEYS.isdisjoint(raw) else {}),
        **routing,
    )


_COMPOSITION_KEYS = frozenset(("for_each", "plan", "loop", "gate"))
_ROUTING_KEYS = frozenset(("when", "catch"))


def _routing_fields(ctx: _Context, raw: Mapping, path: tuple, output: Output | None) -> dict[str, Any]:
    """``when:`` (a guard) and ``catch:`` (failure routes, appended to the output's alternatives)."""
    out: dict[str, Any] = {}
    if raw.get("when") is not None:
        guard, diagnostics = parse_condition(raw["when"], ctx.span(path + ("when",)))
        ctx.diagnostics.extend(diagnostics)
        out["guard"] = guard
    entries = raw.get("catch")
    if isinstance(entries, list) and entries:
        own = output.alternatives if output is not None else ((),)  # no output: success is written nowhere
        routes: list[tuple[Ref, ...]] = []
        catches: list[Catch] = []
        for i, entry in enumerate(entries):
            where = path + ("catch", i)
            if not isinstance(entry, Mapping):
                continue  # the schema reports it
            target = _output(ctx, entry.get("output"), where + ("output",))
            if target is None:
                continue
            if target.branching:
                ctx.fail("schema", "a catch entry's output is one path (no `||`)", where + ("output",))
                continue
            errors = entry.get("errors")
            names = tuple(str(e) for e in errors) if isinstance(errors, list) else ("*",)
            catches.append(Catch(names, len(own) + len(routes), Span(ctx.name, where)))
            routes.append(target.alternatives[0])
        span = output.span if output is not None else Span(ctx.name, path)
        out["output"] = Output(own + tuple(routes), span, routed=len(routes))
        out["catch"] = tuple(catches)
    return out


def _args(ctx: _Context, raw: Any, path: tuple) -> Mapping[str, Any]:
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, Mapping):
        ctx.fail("schema", "`args` must be a mapping of argument names to values", path)
        return MappingProxyType({})
    return _value(ctx, raw, path)


def _value(ctx: _Context, value: Any, path: tuple) -> Any:
    """A JSON value with every string classified (reference, expression, template or text)."""
    kind = type(value)
    if kind is str:
        if not _special(value):
            return value  # most strings: no sigil, no span needed
        ref = _single_ref_parts(value)
        if ref is not None:  # the commonest of the rest, as classify would read it
            return Ref(cast(Root, ref[0]), ref[1], Span(ctx.name, path))
        return ctx.guard(classify, value, ctx.span(path), default=value)
    if kind is dict or isinstance(value, Mapping):
        # Values that stay as they are (most of them) are taken inline: no call, no path.
        return MappingProxyType({k: v if _as_is(v) else _value(ctx, v, path + (k,)) for k, v in value.items()})
    if kind is list or kind is tuple:
        return tuple(v if _as_is(v) else _value(ctx, v, path + (i,)) for i, v in enumerate(value))
    return value


_special = SPECIAL.search
_SCALARS = frozenset({int, float, bool, type(None)})


def _as_is(value: Any) -> bool:
    kind = type(value)
    return kind in _SCALARS or (kind is str and not _special(value))


def _output(ctx: _Context, raw: Any, path: tuple):
    if not isinstance(raw, str):
        ctx.fail("schema", "`output` must be a string such as †state.result", path)
        return None
    ref = _single_ref_parts(raw)
    if ref is not None:  # one target, as parse_output would read it
        span = Span(ctx.name, path)
        return Output(((Ref(cast(Root, ref[0]), ref[1], span),),), span)
    return ctx.guard(parse_output, raw, ctx.span(path))


def _deps(ctx: _Context, raw: Any, path: tuple) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if not isinstance(raw, list):
        ctx.fail("schema", "`deps` must be a list of step ids", path)
        return ()
    return tuple(str(d) for d in raw)


def _llm(ctx: _Context, raw: Mapping, path: tuple) -> LLMCall | None:
    prompt = _template(ctx, raw["llm"], path + ("llm",))
    system = _template(ctx, raw["system"], path + ("system",)) if raw.get("system") is not None else None
    tools = raw.get("tools") or ()
    params = raw.get("params") or {}
    schema = raw.get("output_schema")
    return LLMCall(
        prompt=prompt or Template(()),
        system=system,
        model=raw.get("model"),
        params=frozen(params) if isinstance(params, Mapping) else MappingProxyType({}),
        tools=tuple(str(t) for t in tools) if isinstance(tools, list) else (),
        output_schema=frozen(schema) if isinstance(schema, Mapping) else None,
        max_iterations=raw.get("max_iterations"),
    )


def _template(ctx: _Context, raw: Any, path: tuple) -> Template | None:
    if not isinstance(raw, str):
        ctx.fail("schema", "a prompt must be a string", path)
        return None
    return ctx.guard(parse_template, raw, ctx.span(path))


# --- numbers ----------------------------------------------------------------------------


_DEFAULT_RETRY = Retry()
_RETRIES: dict[tuple, Retry] = {}  # a plan repeats a few retry settings on many steps


def _retry(ctx: _Context, raw: Any, path: tuple) -> Retry:
    if raw is None:
        return _DEFAULT_RETRY
    if isinstance(raw, bool) or isinstance(raw, int):
        return Retry(limit=int(raw))
    if not isinstance(raw, Mapping):
        ctx.fail("schema", "`retry` must be a mapping such as {limit: 3, backoff: 0.5}", path)
        return Retry()
    # Types are part of the key: True == 1 and 1 == 1.0, but only some of them are durations.
    key = tuple((k, type(v), v) for k, v in raw.items() if type(v) in _SCALARS or type(v) is str)
    if len(key) == len(raw) and key in _RETRIES:
        return _RETRIES[key]
    found = len(ctx.diagnostics)
    retry = _retry_from(ctx, raw, path)
    if len(key) == len(raw) and len(ctx.diagnostics) == found and len(_RETRIES) < 1024:
        _RETRIES[key] = retry
    return retry


def _retry_rules(ctx: _Context, raw: list, path: tuple) -> tuple[Retry, ...]:
    """``retry: [{errors: [RateLimitError], limit: 6, backoff: 2s}, {errors: ["*"], limit: 2}]``."""
    rules = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            ctx.fail("schema", "each retry rule is a mapping such as {errors: [TimeoutError], limit: 3}", path + (i,))
            continue
        errors = entry.get("errors")
        names = tuple(str(e) for e in errors) if isinstance(errors, list) and errors else ("*",)
        rules.append(replace(_retry_from(ctx, entry, path + (i,)), errors=names))
    return tuple(rules)


def _retry_from(ctx: _Context, raw: Mapping, path: tuple) -> Retry:
    default = Retry()
    backoff = _seconds(ctx, raw.get("backoff"), path + ("backoff",))
    max_backoff = _seconds(ctx, raw.get("max_backoff"), path + ("max_backoff",))
    limit = raw.get("limit", default.limit)
    return Retry(
        limit=int(limit) if isinstance(limit, (int, float)) else default.limit,
        backoff=default.backoff if backoff is None else backoff,
        max_backoff=default.max_backoff if max_backoff is None else max_backoff,
    )


@lru_cache(maxsize=1024)
def _string_duration(raw: str) -> float | None:
    return parse_duration(raw)


def _seconds(ctx: _Context, raw: Any, path: tuple) -> float | None:
    if raw is None:
        return None
    seconds = _string_duration(raw) if type(raw) is str else parse_duration(raw)
    if seconds is None:
        ctx.fail(
            "bad-duration",
            f"{raw!r} is not a duration (at most 366d)",
            path,
            'write a number of seconds or a string such as "500ms", "30s", "2m", "1h", "2d"',
        )
    return seconds


def frozen(value: Any) -> Any:
    """A read-only deep copy of JSON data: mappings become MappingProxyType, lists tuples."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value
