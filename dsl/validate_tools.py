"""The rules that check tool calls against the tool catalog (``validate(plan, tools)``).

A step's tool must exist; its arguments must be ones the tool declares, with every
required one given, and of a JSON type the tool's parameter schema allows when that
type can be known before the run (a literal, or a reference whose schema is declared
in the plan's ``inputs`` or ``state``). Rules take the :class:`.validate.Facts` the
other rules share; ``validate`` lists them in its ``RULES`` table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator, Protocol

from .errors import Diagnostic, Span, did_you_mean, error, warning
from .ir import PURITY_RANK, AllOf, AnyOf, Plan, Ref, Step, Template, ToolSpec
from .refschema import MISSING, descend, input_schema
from .schedule import refs_of


class Facts(Protocol):
    """What the tool rules read of :class:`.validate.Facts` (typed here, so that this module does not import
    the one whose rule table lists these rules)."""

    @property
    def plan(self) -> Plan: ...

    @property
    def tools(self) -> Mapping[str, ToolSpec] | None: ...

    @property
    def deps(self) -> Mapping[str, tuple[str, ...]]: ...

    def writers(self, ref: Ref) -> list[tuple[str, int]]: ...


def _at(step: Step, *more: str | int) -> Span:
    return step.span.at(*more)


def tool_names(facts: Facts) -> Iterator[Diagnostic]:
    tools = facts.tools
    if tools is None:
        return
    for step in facts.plan.steps:
        if step.tool is not None and step.tool not in tools:
            yield error("unknown-tool", f"unknown tool '{step.tool}'", _at(step, "tool"), _tool_hint(step.tool, tools))
        for j, name in enumerate(step.llm.tools if step.llm else ()):
            if name not in tools:
                yield error("unknown-tool", f"unknown tool '{name}'", _at(step, "tools", j), _tool_hint(name, tools))


def _tool_hint(name: str, tools: Mapping) -> str | None:
    if not tools:
        return "no tools were given: pass --tools tools.py (or `tools` in dagplan.toml; tools= in the API)"
    return did_you_mean(name, tools) or f"the tools given are: {', '.join(sorted(tools))}"


def tool_arguments(facts: Facts) -> Iterator[Diagnostic]:
    if facts.tools is None:
        return
    for step in facts.plan.steps:
        spec = facts.tools.get(step.tool) if step.tool else None
        if spec is not None:
            yield from _check_call(facts.plan, step, spec, lambda ref: written_schema(facts, ref))


def destructive_overrides(facts: Facts) -> Iterator[Diagnostic]:
    """A step's ``purity:`` may make its tool stricter, never laxer: ``pure`` on a side-effect tool is an
    error (a resume would repeat it, a gate would let it through); on a destructive tool that declares no
    purity, a warning."""
    if facts.tools is None:
        return
    for step in facts.plan.steps:
        spec = facts.tools.get(step.tool) if step.tool else None
        if spec is None or step.purity is None:
            continue
        if spec.purity is not None and PURITY_RANK[step.purity] < PURITY_RANK[spec.purity]:
            yield error(
                "laxer-purity",
                f"step {step.id} declares `purity: {step.purity}`, but tool '{spec.name}' says it is {spec.purity}",
                _at(step, "purity"),
                f"a step may make its tool stricter, never laxer: remove `purity: {step.purity}` "
                "(or fix the tool's own declaration if it is wrong)",
            )
        elif spec.destructive and step.purity in ("pure", "idempotent"):
            yield warning(
                "destructive-as-pure",
                f"step {step.id} declares `purity: {step.purity}`, but tool '{spec.name}' says it is destructive",
                _at(step, "purity"),
                "a resumed run would call it again without asking; remove the override unless the tool is wrong",
            )


def acting_triggers(facts: Facts) -> Iterator[Diagnostic]:
    """A step that acts on the world with a trigger written to run it after a failure or a refusal
    (``all_done``, ``none_failed``, ``one_succeeded``): the engine holds it back then (engine/world.py),
    so the trigger does not do what it seems to say."""
    if facts.tools is None:
        return
    from .ir import can_act

    for step in facts.plan.steps:
        if not step.trigger_given or step.trigger == "all_succeeded" or not can_act(step, facts.tools):
            continue
        deps = facts.deps.get(step.id) or ()
        if not deps:
            continue
        gates = [d for d in deps if facts.plan.by_id.get(d) is not None and facts.plan.by_id[d].gate is not None]
        after = f"the gate '{gates[0]}' was refused" if gates else f"'{deps[0]}' failed"
        yield warning(
            "acts-on-failure",
            f"step '{step.id}' acts on the world, and `trigger: {step.trigger}` asks to run it after {after}: "
            "it will not (a step that acts never runs on a failure value or after a person's refusal)",
            _at(step, "trigger"),
            "drop `trigger:` (a step that acts runs once what it depends on succeeded), or route the outcome to "
            "it: a `catch:` or an output branch it reads (`\u2020state.ok || \u2020state.rejected`)",
        )


def written_schema(facts: Facts, ref: Ref) -> Mapping[str, Any] | None:
    """What a step's output says a ``†state`` reference holds: the schema its tool's return (or its model's
    ``output_schema``) declares, when every step that writes the reference's key writes the whole answer there
    (one output path, no alternatives; a fan-out: a list of them), descended by the rest of the path. None when
    any writer does not say (then nothing is known)."""
    if ref.root != "state" or not ref.path or facts.tools is None:
        return None
    found: list[Mapping[str, Any]] = []
    for writer, _ in facts.writers(ref):
        step = facts.plan.by_id[writer]
        if step.output is None or len(step.output.alternatives) != 1 or len(step.output.alternatives[0]) != 1:
            return None
        written = step.output.alternatives[0][0].path
        spec = facts.tools.get(step.tool) if step.tool else None
        said = (spec.output_schema if spec is not None else None) or (step.llm.output_schema if step.llm else None)
        if not isinstance(said, Mapping) or not said or tuple(ref.path[: len(written)]) != tuple(written):
            return None
        schema: Any = {"type": "array", "items": said} if step.for_each is not None else said
        for key in ref.path[len(written) :]:
            schema = _below(schema, key)
            if schema is None:
                return None
        found.append(schema)
    return found[0] if found and all(s == found[0] for s in found) else None


def _below(schema: Any, key: Any) -> Any:
    """The schema of ``key`` inside a value of ``schema`` (a property, or an array's items), else None."""
    if not isinstance(schema, Mapping):
        return None
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        return schema.get("items") if schema.get("type") == "array" else None
    properties = schema.get("properties")
    return properties.get(key) if isinstance(properties, Mapping) else None


def _check_call(plan: Plan, step: Step, spec: ToolSpec, written: Any = None) -> Iterator[Diagnostic]:
    from .schema import shape_example

    own = len(step.output.own) if step.output is not None else 0
    if spec.alternatives and step.output is not None and step.for_each is None and own < spec.alternatives:
        paths = " || ".join(f"\u2020state.{name}" for name in ("a", "b", "c", "d")[: spec.alternatives])
        yield error(
            "bad-output",
            f"tool '{spec.name}' answers one of {spec.alternatives} outcomes, but the output of step '{step.id}' "
            f"names {own}: an answer past them fails the step at run time",
            step.output.span if step.output.span.path else _at(step, "output"),
            f"one path per outcome, in order: output: {paths}",
        )
    params = spec.parameters
    props = params.get("properties") or {}
    for name in params.get("required") or ():
        if name not in step.args:
            example = shape_example(props.get(name)) if isinstance(props, Mapping) else "..."
            yield error("bad-argument", f"tool '{spec.name}' needs argument '{name}'", _at(step, "args"),
                        f"add it: args: {{{name}: {example}}}")  # fmt: skip
    extra = params.get("additionalProperties", False)
    closed = bool(props) and not (extra is True or isinstance(extra, Mapping))
    for name, value in step.args.items():
        if name not in props:
            if closed:
                yield error(
                    "bad-argument",
                    f"tool '{spec.name}' has no argument '{name}'",
                    _at(step, "args", name),
                    did_you_mean(name, props) or f"its arguments: {', '.join(props)}",
                )
            continue
        wanted = _types(props[name])
        got = _value_types(plan, value)
        said = written(value) if written is not None and isinstance(value, Ref) and not got else None
        if said is not None:  # what the step that writes it returns (its tool's return type, a model's schema)
            got = _types(said)
            if got == {"array"} == wanted and not output_fits(said, props[name]):
                yield error(
                    "bad-argument",
                    f"argument '{name}' of tool '{spec.name}' must be a list of "
                    f"{' or '.join(sorted(_types(props[name].get('items'))))}, not a list of "
                    f"{' or '.join(sorted(_types(said.get('items'))))} ({value} is what the step writing it returns)",
                    _at(step, "args", name),
                    f"e.g. {name}: {shape_example(props[name])}",
                )
                continue
        if wanted and got and not _compatible(got, wanted):
            declared = _fitting_key(plan, value, wanted) if isinstance(value, Ref) else ""
            yield error(
                "bad-argument",
                f"argument '{name}' of tool '{spec.name}' must be {' or '.join(sorted(wanted))}, "
                f"not {' or '.join(sorted(got))}",
                _at(step, "args", name),
                f"e.g. {name}: {shape_example(props[name])}{declared}",
            )


def output_fits(said: Mapping[str, Any] | None, wanted: Mapping[str, Any] | None) -> bool:
    """Whether a step whose output is ``said`` (JSON Schema; None: unsaid) may be passed to a parameter of schema
    ``wanted``: the argument check's rule (below), asked also by a planner before it offers a step's output."""
    if said is None or not isinstance(wanted, Mapping):
        return True
    got, types = _types(said), _types(wanted)
    if got == {"array"} == types and not _items_fit(said, wanted):
        return False
    return not (types and got and not _compatible(got, types))


def _items_fit(got: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether a list whose items are ``got``'s fits a parameter whose items are ``wanted``'s (unknown: fits)."""
    have, need = _types(got.get("items")), _types(wanted.get("items"))
    return not have or not need or _compatible(have, need)


def argument_problem(parameters: Mapping[str, Any], name: str, value: Any) -> str | None:
    """Why a value (as the call would receive it) does not fit a tool's parameter ``name``, by the JSON type
    its schema declares; None when it fits or nothing is declared. The one type rule: ``check`` applies it
    where a type is known before the run, the engine to every argument before a call (through
    :func:`parameter_types`, the same sets worked out once a tool)."""
    props = parameters.get("properties")
    declared = _types(props.get(name) if isinstance(props, Mapping) else None)
    if not declared or _json_type(value) in _accepted(declared):
        return None
    return f"argument '{name}' must be {' or '.join(sorted(declared))}, not {_json_type(value)}"


def parameter_types(parameters: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """Each typed parameter's accepted JSON types (a number takes an integer): what :func:`argument_problem`
    tests a value's type against (a parameter with no declared type takes anything, and is left out)."""
    props = parameters.get("properties")
    found = {}
    for name, schema in props.items() if isinstance(props, Mapping) else ():
        declared = _types(schema)
        if declared:
            found[name] = _accepted(declared)
    return found


def _accepted(declared: set[str]) -> frozenset[str]:
    """The JSON types a parameter declared as ``declared`` takes: a number takes an integer too."""
    return frozenset(declared | {"integer"} if "number" in declared else declared)


def _fitting_key(plan: Plan, ref: Ref, wanted: set[str]) -> str:
    """A key of the referenced object whose type fits (``; did you mean †input.trip.days?``), else ""."""
    schema = input_schema(plan.inputs, ref.path) if ref.root == "input" and plan.inputs else None
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    for name, sub in properties.items() if isinstance(properties, Mapping) else ():
        if _types(sub) and _compatible(_types(sub), wanted):
            return f"; did you mean {Ref(ref.root, (*ref.path, name))}?"
    return ""


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    return set(kind) if isinstance(kind, (list, tuple)) else set()


def _value_types(plan: Plan, value: Any) -> set[str]:
    """JSON types a value may have when the call is made; empty when it cannot be known."""
    if isinstance(value, (Template, str)):
        return {"string"}
    if isinstance(value, Ref):
        if value.root == "input" and plan.inputs is not None:
            schema = input_schema(plan.inputs, value.path)
        else:
            schema = descend(plan.state, value.path) if plan.state else None
        return _types(schema) if schema is not MISSING else set()
    if isinstance(value, (AnyOf, AllOf)):
        per_ref = [_value_types(plan, r) for r in refs_of(value)]
        if isinstance(value, AnyOf) and value.has_default:
            per_ref.append({_json_type(value.default)})
        return set().union(*per_ref) if all(per_ref) else set()
    return {_json_type(value)}


JSON_TYPES = {type(None): "null", bool: "boolean", int: "integer", str: "string", dict: "object", list: "array"}


def _json_type(value: Any) -> str:
    found = JSON_TYPES.get(type(value))  # the common types at once (a subclass goes the long way)
    if found is not None:
        return found
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, Mapping) else "array"


def _compatible(got: set[str], wanted: set[str]) -> bool:
    return got <= _accepted(wanted)
