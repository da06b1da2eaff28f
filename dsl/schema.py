"""The document against ``schemas/plan.schema.json``, in words a person and an LLM can act on.

jsonschema is the judge, but it costs about 110 us per step (1.1 s for 10,000 steps),
more than the whole budget. So the schema is also compiled into a small yes/no check
(:func:`_compile`) that understands the keywords our schema uses; whatever it accepts is
valid, and only what it doubts goes through jsonschema: the top level with the steps
left out, then each doubtful step with a validator made once for the step schema. Any
keyword the compiler does not know makes it answer "doubt", so it can only be slower,
never wrong.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
import os
from typing import Any, Callable, Iterable, Mapping

from .errors import Diagnostic, DocPath, Span, did_you_mean, error
from .ir import format_path

Check = Callable[[Any], bool]


def plan_schema() -> dict:
    """The published JSON Schema of a canonical plan (a fresh copy)."""
    return copy.deepcopy(_schema())


def schema_errors(doc: Any) -> list[Diagnostic]:
    """Every schema problem of ``doc.data`` as a ``schema`` diagnostic (unlocated spans)."""
    data, name = doc.data, doc.name
    if _fast_checks()[0](data):
        return []
    top, step = _validators()
    found = [_diagnostic(e, (), data, name) for e in top.iter_errors(data)]
    steps = data.get("steps") if isinstance(data, dict) else None
    if isinstance(steps, list):
        step_ok = _fast_checks()[1]
        for i, item in enumerate(steps):
            if not step_ok(item):
                found += [_diagnostic(e, ("steps", i), data, name) for e in step.iter_errors(item)]
    return sorted(found, key=lambda d: (_path_key(d.span.path), d.message))


def surely_valid_schema(schema: Any, depth: int = 0) -> bool:
    """True when ``schema`` is certainly valid JSON Schema (2020-12), for the common keywords with
    values of their meta-schema's types; False means "ask the meta-schema" (jsonschema, about 35 ms
    to import, is then loaded), never "invalid". Input schemas are mostly this plain."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > 32:
        return False
    for key, value in schema.items():
        test = _META.get(key)
        if test is None or not test(value, depth + 1):
            return False
    return True


def _schemas(value: Any, depth: int) -> bool:
    return isinstance(value, list) and bool(value) and all(surely_valid_schema(v, depth) for v in value)


def _schema_map(value: Any, depth: int) -> bool:
    return isinstance(value, dict) and all(surely_valid_schema(v, depth) for v in value.values())


def _count(value: Any, depth: int) -> bool:
    return type(value) is int and value >= 0


def _number(value: Any, depth: int) -> bool:
    return type(value) in (int, float)


def _text(value: Any, depth: int) -> bool:
    return isinstance(value, str)


def _names_list(value: Any, depth: int) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value) and len(set(value)) == len(value)


def _type_names(value: Any, depth: int) -> bool:
    names = value if isinstance(value, list) else [value]
    return bool(names) and all(isinstance(n, str) and n in _TYPES for n in names) and len(set(names)) == len(names)


_META: dict[str, Callable[[Any, int], bool]] = {
    "type": _type_names,
    "title": _text, "description": _text, "format": _text, "pattern": _text, "$comment": _text,
    "default": lambda v, d: True, "const": lambda v, d: True,
    "examples": lambda v, d: isinstance(v, list), "enum": lambda v, d: isinstance(v, list),
    "minimum": _number, "maximum": _number, "exclusiveMinimum": _number, "exclusiveMaximum": _number,
    "multipleOf": lambda v, d: _number(v, d) and v > 0,
    "minLength": _count, "maxLength": _count, "minItems": _count, "maxItems": _count,
    "minProperties": _count, "maxProperties": _count,
    "uniqueItems": lambda v, d: isinstance(v, bool),
    "required": _names_list,
    "items": surely_valid_schema, "additionalProperties": surely_valid_schema, "not": surely_valid_schema,
    "properties": _schema_map,
    "anyOf": _schemas, "oneOf": _schemas, "allOf": _schemas,
}  # fmt: skip


# --- loading and compiling the schema -------------------------------------------------------


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(schema_text("plan.schema.json"))


def schema_text(name: str) -> str:
    """A published schema's text, read from the installed ``dagplan.schemas`` folder (a plain
    path beside this package: ``importlib.resources`` would add ~8 ms of imports to every ``check``)."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas")
    if not os.path.isfile(os.path.join(folder, name)):  # installed or checked out, the two are siblings; else ask
        from importlib import import_module

        folder = os.path.dirname(import_module("dagplan.schemas").__file__ or "")
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return f.read()


@lru_cache(maxsize=1)
def _validators() -> tuple[Any, Any]:
    from jsonschema import Draft202012Validator

    schema = _schema()
    top = copy.deepcopy(schema)
    top["properties"]["steps"]["items"] = True  # steps are checked one by one
    step = dict(schema["$defs"]["step"], **{"$schema": schema["$schema"]})
    return Draft202012Validator(top), Draft202012Validator(step)


@lru_cache(maxsize=1)
def _fast_checks() -> tuple[Check, Check]:
    schema = _schema()
    return _compile(schema, schema), _compile(schema["$defs"]["step"], schema)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    # JSON Schema counts 1.0 as an integer, as jsonschema does
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}
_ANNOTATIONS = {"title", "description", "$schema", "$id", "$defs", "default", "examples", "x-message", "x-hint"}


def _doubt(value: Any) -> bool:
    return False


def _anything(value: Any) -> bool:
    return True


def _compile(schema: Any, root: dict) -> Check:
    """A JSON Schema -> a predicate that is True only for valid instances."""
    if schema is True or (isinstance(schema, dict) and _ANNOTATIONS.issuperset(schema)):
        return _anything
    if schema is False:
        return _doubt
    if "$ref" in schema:
        if not schema["$ref"].startswith("#/$defs/") or len(schema) > 1:
            return _doubt
        return _compile(root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root)
    checks = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or keyword in ("properties", "patternProperties", "additionalProperties"):
            continue
        make = _KEYWORDS.get(keyword)
        if make is None:
            return _doubt
        checks.append(make(value, root))
    if any(k in schema for k in ("properties", "patternProperties", "additionalProperties")):
        checks.append(_object_check(schema, root))
    return _all(checks)


def _all(checks: list[Check]) -> Check:
    checks = [c for c in checks if c is not _anything]
    if not checks:
        return _anything
    if len(checks) == 1:
        return checks[0]

    def check(value: Any) -> bool:
        for one in checks:
            if not one(value):
                return False
        return True

    return check


def _object_check(schema: dict, root: dict) -> Check:
    props = {k: _compile(s, root) for k, s in schema.get("properties", {}).items()}
    patterns = [(re.compile(p), _compile(s, root)) for p, s in schema.get("patternProperties", {}).items()]
    extra = schema.get("additionalProperties", True)
    other = _compile(extra, root)

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for key, item in value.items():
            known = props.get(key)
            if known is not None:
                if known is not _anything and not known(item):
                    return False
                continue
            matched = [c for p, c in patterns if p.search(key)]
            if matched:
                if not all(c(item) for c in matched):
                    return False
            elif not other(item):
                return False
        return True

    return check


def _type(value: Any, root: dict) -> Check:
    names = value if isinstance(value, list) else [value]
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(t(v) for t in tests)


def _enum(value: Any, root: dict) -> Check:
    return lambda v: any(v == option and type(v) is type(option) for option in value)


def _const(value: Any, root: dict) -> Check:
    return lambda v: v == value and type(v) is type(value)


def _pattern(value: str, root: dict) -> Check:
    regex = re.compile(value)
    return lambda v: not isinstance(v, str) or regex.search(v) is not None


def _min_length(value: int, root: dict) -> Check:
    return lambda v: not isinstance(v, str) or len(v) >= value


def _max_length(value: int, root: dict) -> Check:
    return lambda v: not isinstance(v, str) or len(v) <= value


def _minimum(value: float, root: dict) -> Check:
    return lambda v: not _TYPES["number"](v) or v >= value


def _min_items(value: int, root: dict) -> Check:
    return lambda v: not isinstance(v, list) or len(v) >= value


def _items(value: Any, root: dict) -> Check:
    item = _compile(value, root)

    def check(v: Any) -> bool:
        if isinstance(v, list):
            for x in v:
                if not item(x):
                    return False
        return True

    return check


def _unique_items(value: bool, root: dict) -> Check:
    def check(v: Any) -> bool:
        if not value or not isinstance(v, list):
            return True
        if all(isinstance(x, str) for x in v):
            return len(set(v)) == len(v)
        return False  # doubt: jsonschema compares JSON values

    return check


def _required(value: list[str], root: dict) -> Check:
    keys = frozenset(value)
    return lambda v: not isinstance(v, dict) or keys.issubset(v.keys())


def _one_of(value: list, root: dict) -> Check:
    keys = [
        s["required"][0] for s in value if isinstance(s, dict) and s.keys() == {"required"} and len(s["required"]) == 1
    ]
    if len(keys) == len(value) and len(set(keys)) == len(keys):
        return _exactly_one_key(frozenset(keys))
    options = [_compile(s, root) for s in value]

    def check(v: Any) -> bool:
        passed = 0
        for option in options:
            passed += option(v)
        return passed == 1

    return check


def _exactly_one_key(keys: frozenset) -> Check:
    """``oneOf`` of single ``required`` keys (a step's kind): one set intersection instead of one call per option."""
    if len(keys) == 1:  # a non-object passes the one `required`
        return lambda v: len(keys.intersection(v)) == 1 if isinstance(v, dict) else True
    return lambda v: len(keys.intersection(v)) == 1 if isinstance(v, dict) else False  # ... and every one of several


def _any_of(value: list, root: dict) -> Check:
    options = [_compile(s, root) for s in value]

    def check(v: Any) -> bool:
        for option in options:
            if option(v):
                return True
        return False

    return check


_KEYWORDS: dict[str, Callable[[Any, dict], Check]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "pattern": _pattern,
    "minLength": _min_length,
    "maxLength": _max_length,
    "minimum": _minimum,
    "minItems": _min_items,
    "items": _items,
    "uniqueItems": _unique_items,
    "required": _required,
    "oneOf": _one_of,
    "anyOf": _any_of,
}


# --- jsonschema errors -> diagnostics -----------------------------------------------------------


def _path_key(path: DocPath) -> tuple:
    return tuple((0, k, "") if isinstance(k, int) else (1, 0, k) for k in path)


_EXAMPLES = {"string": "text", "integer": 3, "number": 12.5, "boolean": True, "null": None}


def shape_example(schema: Any, as_json: bool = False) -> str:
    """A value of the shape ``schema`` asks for, written as YAML flow (``{city: text, days: 3}``,
    ``[text]``, ``12.5``) or as JSON: what a type error's hint shows. Its first enum value or its
    default when it has one; a few properties at most."""
    value = _example(schema, 0)
    return json.dumps(value, ensure_ascii=False) if as_json else _flow(value)


def _example(schema: Any, depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > 3:
        return "..."
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _example(schema[key][0], depth + 1)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or (kind is None and isinstance(schema.get("properties"), Mapping)):
        found = schema.get("properties")
        properties: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        required = [k for k in schema.get("required") or () if k in properties]
        shown = required + [k for k in properties if k not in required]
        if not shown:  # any keys: one written out, not an empty `{}` that reads as "nothing needed"
            extra = schema.get("additionalProperties")
            return {"key": _example(extra, depth + 1) if isinstance(extra, Mapping) else "value"}
        return {k: _example(properties[k], depth + 1) for k in shown[:3]}
    if kind == "array":
        return [_example(schema.get("items"), depth + 1)] if isinstance(schema.get("items"), Mapping) else []
    return _EXAMPLES.get(kind, "...") if isinstance(kind, str) else "..."


def _flow(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str):  # a word as YAML writes it; anything else quoted
        return value if value == "..." or value.replace("_", "").replace("-", "").isalnum() else json.dumps(value)
    return json.dumps(value)


def schema_diagnostic(err: Any, data: Any, name: str, code: str = "schema") -> Diagnostic:
    """One jsonschema error of ``data`` in our words (what is wrong, where, a hint), for any document
    validated against one of our schemas (a plan, a test file); its span is unlocated."""
    from .record import replace

    found = _diagnostic(err, (), data, name)
    return found if code == "schema" else replace(found, code=code)


def _diagnostic(err: Any, prefix: DocPath, data: Any, name: str) -> Diagnostic:
    inner = _branch_error(err)
    if inner is not None:  # the one anyOf branch of the value's shape says it best
        return _diagnostic(inner, prefix, data, name)
    path = prefix + tuple(err.absolute_path)
    where = _where(path, data)
    make = _MESSAGES.get(err.validator, _default)
    message, hint, path = make(err, path, where)
    return error("schema", message, Span(name, path=path, key=err.validator == "additionalProperties"), hint)


_SHAPES = {"object": dict, "array": list}


def _branch_error(err: Any) -> Any:
    """For an object or a list failing an ``anyOf`` (``retry``: one rule or a list of rules): the
    best error inside the branch of that shape, else None."""
    if err.validator != "anyOf" or not err.context or not isinstance(err.instance, (dict, list)):
        return None
    from jsonschema.exceptions import best_match

    shape = type(err.instance)
    inside = [
        e
        for e in err.context
        if e.relative_schema_path
        and _SHAPES.get(err.validator_value[e.relative_schema_path[0]].get("type")) is shape
        and not (e.validator == "type" and not e.relative_path)  # the branch's own shape: not the story
    ]
    return best_match(inside) if inside else None


def _where(path: DocPath, data: Any) -> str:
    """``step 'refund'`` / ``steps[2].args.x in step 'refund'`` / ``the plan``."""
    if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
        step = data["steps"][path[1]] if isinstance(data, dict) else None
        sid = step.get("id") if isinstance(step, dict) else None
        label = f"step {sid!r}" if isinstance(sid, str) else f"steps[{path[1]}]"
        inner = path[2:]
        return label if not inner else f"{_dotted(inner)} in {label}"
    return _dotted(path) if path else "the plan"


def _dotted(path: DocPath) -> str:
    return format_path(tuple(path)).lstrip(".")


def _names(values: Iterable[Any]) -> str:
    return ", ".join(str(v) for v in values)


def _did_you_mean(word: Any, options: Iterable[str]) -> str | None:
    return did_you_mean(word, options)


def _unknown_keys(err: Any, path: DocPath, where: str) -> tuple[str, str | None, DocPath]:
    schema = err.schema
    known = list(schema.get("properties", {}))
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    extra = [k for k in err.instance if k not in known and not any(p.search(k) for p in patterns)]
    key = extra[0] if extra else "?"
    extensions = " (and x-... extensions)" if any(p.pattern.startswith("^x-") for p in patterns) else ""
    hint = _did_you_mean(key, known) or f"allowed keys: {_names(known)}{extensions}"
    more = f" (and {_names(repr(k) for k in extra[1:])})" if len(extra) > 1 else ""
    return f"unknown key {key!r} in {where}{more}", hint, path + (key,)


def _one_of_message(err: Any, path: DocPath, where: str) -> tuple[str, str | None, DocPath]:
    options = [s.get("required", ["?"])[0] for s in err.validator_value if isinstance(s, dict)]
    present = [o for o in options if isinstance(err.instance, dict) and o in err.instance]
    if len(present) > 1:
        return f"{where} has both {_names(present)}; it needs exactly one", "split it into two steps", path
    return (
        f"{where} needs exactly one of {_names(options)}",
        "a tool step has `tool: <name>` and `args`; an LLM step has `llm: <prompt>`",
        path,
    )


def _required_message(err: Any, path: DocPath, where: str) -> tuple[str, str | None, DocPath]:
    missing = [k for k in err.validator_value if isinstance(err.instance, dict) and k not in err.instance]
    key = missing[0] if missing else "?"
    return f"{where} is missing {key!r}", f"add `{key}:`", path


_JSON_TYPE = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}
_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _type_message(err: Any, path: DocPath, where: str) -> tuple[str, str | None, DocPath]:
    wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
    words = " or ".join(_TYPE_WORDS.get(w) or str(w) for w in wanted)
    got = _JSON_TYPE.get(type(err.instance), type(err.instance).__name__)
    shaped = isinstance(err.schema, Mapping) and ("properties" in err.schema or "items" in err.schema)
    key = path[-1] if path and isinstance(path[-1], str) else None
    hint = f"e.g. {key + ': ' if key else ''}{shape_example(err.schema)}" if shaped else None
    return f"{where} must be {words}, not {got}", hint, path


def _enum_message(err: Any, path: DocPath, where: str) -> tuple[str, str | None, DocPath]:
    options = [str(v) for v in err.validator_value]
    hint = _did_you_mean(err.instance, options)
    return f"{where} must be one of {_names(options)}, not {err.instance!r}", hint, path


def _any_of_message(err: Any, path: DocPath, where: str) -> tuple[str, str | None, DocPath]:
    if path and path[-1] in ("timeout", "backoff", "max_backoff"):
        return (
            f"{where} must be a number of seconds or a duration like 500ms, 30s, 2m, 1h, 2d, not {err.instance!r}",
            None,
            path,
        )
    branches = (
        [b for b in err.validator_value if isinstance(b, Mapping)] if isinstance(err.validator_value, list) else []
    )
    kinds = [b.get("type") for b in branches]
    named = [k for k in kinds if isinstance(k, str)]
    if branches and len(named) == len(kinds) and not isinstance(err.instance, (dict, list)):
        words = " or ".join(dict.fromkeys(_TYPE_WORDS.get(k) or k for k in named))
        got = _JSON_TYPE.get(type(err.instance), type(err.instance).__name__)
        key = f"{path[-1]}: " if path and isinstance(path[-1], str) else ""
        return f"{where} must be {words}, not {got} ({err.instance!r})", f"e.g. {key}{shape_example(branches[0])}", path
    return _default(err, path, where)


def _pattern_message(err: Any, path: DocPath, where: str) -> tuple[str, str | None, DocPath]:
    """A pattern's own words from the schema (``x-message``, ``x-hint``), never the raw expression."""
    said = err.schema.get("x-message") if isinstance(err.schema, dict) else None
    if said is None:
        return f"{where} does not match {err.validator_value}", None, path
    what = "step id" if path and path[-1] == "id" else path[-1] if path else where
    return f"{what} {err.instance!r} {said}", err.schema.get("x-hint"), path


def _default(err: Any, path: DocPath, where: str) -> tuple[str, str | None, DocPath]:
    return f"{where}: {err.message}", None, path


_MESSAGES: dict[str, Callable[[Any, DocPath, str], tuple[str, str | None, DocPath]]] = {
    "additionalProperties": _unknown_keys,
    "oneOf": _one_of_message,
    "required": _required_message,
    "type": _type_message,
    "enum": _enum_message,
    "anyOf": _any_of_message,
    "pattern": _pattern_message,
    "minItems": lambda e, p, w: (
        f"{w} must not be empty",
        "a plan has at least one step" if p == ("steps",) else None,
        p,
    ),  # fmt: skip
    "const": lambda e, p, w: (f"{w} must be {e.validator_value!r}, not {e.instance!r}", None, p),
    "maxLength": lambda e, p, w: (f"{w} is longer than {e.validator_value} characters", None, p),
    "minLength": lambda e, p, w: (f"{w} must not be empty", None, p),
    "minimum": lambda e, p, w: (f"{w} must be at least {e.validator_value}, not {e.instance!r}", None, p),
    "uniqueItems": lambda e, p, w: (f"{w} lists an item twice", None, p),
}
