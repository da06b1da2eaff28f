"""Run inputs: parsed from the command line, defaulted and validated against the plan's input schema."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable, Mapping

from ...dsl.errors import DEFAULT_LIMITS, RunError, error
from ...dsl.ir import Plan
from ...dsl.errors import did_you_mean
from ..core.values import thaw, word_value


def parse_assignments(pairs: Iterable[str], plan: Plan | None = None) -> dict[str, Any]:
    """``key=value`` strings -> a dict; values are JSON when the input's type is not a string."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise RunError.make(
                "bad-input", f"--input {pair!r} is not key=value", hint="e.g. --input customerId=cust_123"
            )
        out[key] = _coerce(raw, (plan.inputs or {}).get(key) if plan else None)
    return out


def _coerce(raw: str, schema: Mapping[str, Any] | None) -> Any:
    if schema and schema.get("type") == "string":
        return raw
    try:
        return word_value(raw)
    except ValueError as exc:
        raise RunError.make(
            "bad-input", f"--input {raw[:40]!r}: {exc}", hint="an input is a small JSON value"
        ) from None


def prepare_inputs(plan: Plan, given: Mapping[str, Any] | None, strict: bool = False) -> dict[str, Any]:
    """Apply defaults and validate; every problem is listed in one RunError. ``strict`` (a run's own
    inputs): a name the plan does not declare is an error too (a sub-plan or a loop iteration
    receives a step's arguments or the last result, which may carry more)."""
    values = dict(given or {})
    if plan.inputs is None:
        problems = list(_not_json(values))
        if problems:
            raise RunError(problems)
        return values
    for name, schema in plan.inputs.items():
        if name not in values and isinstance(schema, Mapping) and "default" in schema:
            values[name] = thaw(schema["default"])  # a fresh copy: a run may not change the plan's default
    problems = [*(_extra(plan, values) if strict else ()), *_not_json(values), *_problems(plan, values)]
    if problems:
        raise RunError(problems)
    return values


_BROKEN = re.compile("[\ud800-\udfff]")


def _not_json(values: Mapping[str, Any]):
    """NaN and the infinities are numbers to Python but not JSON, and a lone surrogate (a command-line
    argument that was not UTF-8) is no text: no journal, database or model could carry them faithfully,
    so an input holding one is refused (at any depth)."""
    stack: list[tuple[str, Any, int]] = [(k, v, 1) for k, v in values.items()]
    while stack:
        where, value, depth = stack.pop()
        if depth > DEFAULT_LIMITS.max_depth:
            yield error("bad-input", f"input {where.split('.')[0].split('[')[0]} nests deeper than "
                        f"{DEFAULT_LIMITS.max_depth} levels", hint="inputs are small JSON values")  # fmt: skip
            return
        if isinstance(value, float) and not math.isfinite(value):
            yield error("bad-input", f"input {where} is {value}, which JSON cannot hold",
                        hint="give a finite number, or null")  # fmt: skip
        elif isinstance(value, str) and _BROKEN.search(value):
            yield error("bad-input", f"input {where} holds a lone surrogate (bytes that are not UTF-8)",
                        hint="give the text as UTF-8")  # fmt: skip
        elif isinstance(value, Mapping):
            stack.extend((f"{where}.{k}", v, depth + 1) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{where}[{i}]", v, depth + 1) for i, v in enumerate(value))


def _extra(plan: Plan, values: Mapping[str, Any]):
    """A given input the plan does not declare is a mistake (a typo, usually), never silently dropped."""
    declared = plan.inputs or {}
    for name in values:
        if name not in declared:
            known = ", ".join(declared) or "none"
            yield error(
                "extra-input",
                f"the plan has no input {name!r}",
                hint=did_you_mean(name, declared) or f"the plan's inputs: {known}",
            )


def _problems(plan: Plan, values: dict[str, Any]):
    from jsonschema import Draft202012Validator

    properties = {k: thaw(v) for k, v in (plan.inputs or {}).items()}
    required = [k for k, v in properties.items() if "default" not in v]
    schema = {"type": "object", "properties": properties, "required": required}
    for err in Draft202012Validator(schema).iter_errors(values):
        where = ".".join(map(str, err.absolute_path)) or "inputs"
        if err.validator == "required":
            name = err.message.split("'")[1]
            yield error(
                "missing-input",
                f"input {name!r} is required",
                hint=f"give it with --input {name}=VALUE or --input-file",
            )
        else:
            from ...dsl.schema import schema_diagnostic, shape_example

            said = schema_diagnostic(err, values, "inputs").message
            name = str(err.absolute_path[0]) if err.absolute_path else where
            shown = shape_example(properties.get(name), as_json=True)
            value = json.loads(shown)  # text is given as it is (an enum's first value; TEXT for any), else JSON
            example = ("TEXT" if value == "text" else value) if isinstance(value, str) else f"'{shown}'"
            yield error("bad-input", f"input {said}", hint=f"e.g. --input {name}={example}")
