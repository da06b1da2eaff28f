"""Structured output the model is held to: the plan shape for the task's own tool catalog, and the way
each kind of provider is asked for it.

The published plan schema is too large and too general for grammar engines (a small model asked with
it does not follow it). :func:`catalog_schema` derives a schema for the task at hand instead: a plan
of 1 to ``max_steps`` steps, each either a call of one tool of the catalog (``"tool": {"const": ...}``,
that tool's own arguments, each its declared type or a ``$input`` / ``$state`` reference) or a model
step; ids and output paths by pattern. It stays within what llama.cpp's JSON-Schema-to-grammar, vLLM's
guided decoding and the hosted providers' structured outputs accept: ``anyOf``, ``const``, ``enum``,
``pattern``, ``required``, ``additionalProperties: false``, ``minItems``/``maxItems``; no ``$ref``.

:func:`response_params` turns a schema into the request parameters of a provider: strict
``json_schema`` where litellm reports support, ``json_object`` with ``schema`` for llama.cpp servers,
``format`` for Ollama, ``guided_json`` for vLLM; ``structured_output`` in the configuration forces one.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from ...dsl.ir import ToolSpec, escape_text
from ...dsl.validate_tools import output_fits
from ..core.config import STRUCTURED_OUTPUT  # noqa: F401 - the modes, named once
from .grammar import plain as _plain
from .guide import PLACE_WORDS, is_date, is_place, name_words


# patterns written with character classes only ([$], [.]): llama.cpp's grammar parser takes no \$ escape,
# and unbounded repetition keeps the grammar small (a {0,30} unrolls into 30 nested rules per use)
STEP_ID = "^[a-z][a-z0-9_]*$"
OUTPUT = "^[$]state[.][a-z][a-z0-9_]*( [|][|] [$]state[.][a-z][a-z0-9_]*)?$"
REFERENCE = "^[$](input|state)[.][A-Za-z_][A-Za-z0-9_.]*$"
STATE_REFERENCE = "^[$]state[.][A-Za-z_][A-Za-z0-9_.]*$"  # no inputs declared: none to read
INPUT_REFERENCE = "^[$]input[.][A-Za-z_][A-Za-z0-9_]*$"
# a plain text value: none of the characters that start a reference, an expression or a placeholder (a
# string with a stray $ is read as an expression), no quote, backslash or control character
PLAIN_TEXT = '^[^$#\u2020"\\\\\\x00-\\x1f]*$'
TEXT = '^[^"\\\\\\x00-\\x1f]*$'


def catalog_schema(
    tools: Mapping[str, ToolSpec] | None,
    inputs: Mapping[str, Any] | None = None,
    max_steps: int = 7,
    state_references: bool = True,
    guide: list[list[str]] | None = None,
    values: list[str] | None = None,
    flow: bool = False,
    clause_values: list[list[str]] | None = None,
    implied: bool = False,
    request: str | None = None,
) -> dict[str, Any]:
    """The JSON Schema of a plan for this catalog (see the module docstring). Without ``state_references``
    an argument is a value or an input, never another step's output: a grammar cannot tie a read to a path
    some step writes, and a very small model invents the paths it reads (each plan it failed, it failed on
    that); its steps then pass data through their prompts' ``#id`` placeholders only. ``guide`` (numbered
    steps only; :func:`.guide.positions`): the tools offered at each position, one position per clause the
    request states in order, each depending on the one before; after them, one more step at most. ``values``
    (numbered steps only): the values the request gives, the only ones a text argument (and a number argument,
    when the request gives numbers) may take. ``flow`` (with ``guide``): an argument that can carry data may take
    the step before it's output (:func:`carries`), a chain has exactly its clauses' steps, and
    ``clause_values`` (the values each clause gives) are what its position's arguments take. ``implied`` (with
    ``guide``): the model writes only each step's tool and arguments (or its prompt); what its position implies
    (its id, its output, the step it follows) and the summary are written in by :func:`positioned`, as a
    grammar would have forced them token by token. ``request`` (with ``values``): an argument the request names
    with its value ("a base of 10", "a=2") takes that value; an optional argument the request never names is not
    offered (:func:`.guide.named_values`)."""
    if state_references:
        reference: str | None = REFERENCE if inputs else STATE_REFERENCE
    else:
        reference = INPUT_REFERENCE if inputs else None
    variants = [_tool_step(spec, reference) for _, spec in sorted((tools or {}).items())] + [_llm_step(tools)]
    steps: dict[str, Any] = {"type": "array", "minItems": 1, "maxItems": max_steps, "items": {"anyOf": variants}}
    if not state_references and values:
        specs = [spec for _, spec in sorted((tools or {}).items())] + [None]  # the variants' tools, the model step's
        variants = [_offering(v, values, (), request, spec) for v, spec in zip(variants, specs)]
    if not state_references and guide:
        steps = _guided(tools or {}, reference, guide, max_steps, values, flow, clause_values, implied, request)
    elif not state_references:  # steps numbered by position: ids and outputs cannot repeat or clash
        positions = [{"anyOf": [_numbered(v, n) for v in variants]} for n in range(1, max_steps + 1)]
        steps = {"type": "array", "minItems": 1, "maxItems": max_steps, "items": False, "prefixItems": positions}
    plan: dict[str, Any] = {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "pattern": TEXT},
            "steps": steps,
        },
        # no `result`: a grammar cannot tie it to a path some step writes, and a plan without one returns
        # its last step's output (a small model's invented result path was the first reason plans failed)
        "required": ["summary", "steps"],
        "additionalProperties": False,
    }
    if implied and not state_references and guide:
        del plan["properties"]["summary"]
        plan["required"].remove("summary")
    if inputs:
        plan["properties"]["inputs"] = {
            "type": "object",
            "properties": {name: _plain(schema) for name, schema in inputs.items()},
            "additionalProperties": False,
        }
        plan["required"].insert(1, "inputs")
    return plan


def agent_schema(tools: Mapping[str, ToolSpec], output_schema: Mapping[str, Any] | None = None, max_calls: int = 7,
                 live: Mapping[str, Any] | None = None, inputs: bool = False) -> dict[str, Any]:  # fmt: skip
    """The JSON Schema of an agent turn (:mod:`.agent`): the next calls, each a call of one tool of the catalog
    in the calls dialect (``_tool``, its own arguments, ``_outputPath``), and the final ``output`` (the output
    schema's shape) or null while work remains. An argument is its declared type or a reference; with
    ``live`` (the live state, for a small model) a reference is one of the state's own paths (a grammar
    cannot tie a read to a path a call of the same turn writes, and a small model invents the rest), and an
    argument that is a free-form object or list is a reference only (a small model garbles those)."""
    if live is None:
        reference: dict[str, Any] | None = {"type": "string", "pattern": REFERENCE}
    else:
        known = [f"$state.{key}" for key in sorted(live) if str(key).isidentifier()]
        reference = {"enum": known} if known else None
        if inputs:
            reference = {"anyOf": [r for r in (reference, {"type": "string", "pattern": INPUT_REFERENCE}) if r]}
    variants = []
    for name, spec in sorted(tools.items()):
        params = spec.parameters or {}
        properties: dict[str, Any] = {"_tool": {"const": name}}
        for arg, schema in (params.get("properties") or {}).items():
            if arg == "idempotency_key":
                continue
            value = _value_schema(schema)
            free = value.get("type") in ("object", "array") and not value.get("properties") and not value.get("items")
            if live is not None and free:
                if reference is not None:
                    properties[arg] = reference
                continue
            properties[arg] = {"anyOf": [value, reference]} if reference is not None else value
        properties["_outputPath"] = {"type": "string", "pattern": OUTPUT}
        required = ["_tool", *(a for a in params.get("required") or () if a in properties), "_outputPath"]
        variants.append({"type": "object", "properties": properties, "required": required,
                         "additionalProperties": False})  # fmt: skip
    output = _plain(output_schema) if output_schema else {"type": "string", "pattern": TEXT}
    return {
        "type": "object",
        "properties": {
            "calls": {"type": "array", "maxItems": max_calls, "items": {"anyOf": variants}},
            "output": {"anyOf": [output, {"type": "null"}]},
        },
        "required": ["calls", "output"],
        "additionalProperties": False,
    }


def _tool_step(spec: ToolSpec, reference: str | None) -> dict[str, Any]:
    params = spec.parameters or {}
    properties = {
        name: {"anyOf": [_value_schema(schema), {"type": "string", "pattern": reference}]}
        if reference
        else _value_schema(schema)
        for name, schema in (params.get("properties") or {}).items()
        if name != "idempotency_key"  # filled in by the run, never by the plan
    }
    required = [name for name in params.get("required") or () if name in properties]
    return {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": STEP_ID},
            "description": {"type": "string", "pattern": TEXT},
            "tool": {"const": spec.name},
            "args": {"type": "object", "properties": properties, "required": required, "additionalProperties": False},
            "output": {"type": "string", "pattern": OUTPUT},
        },
        "required": ["id", "tool", "args", "output"],
        "additionalProperties": False,
    }


def _llm_step(tools: Mapping[str, ToolSpec] | None) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "id": {"type": "string", "pattern": STEP_ID},
        "description": {"type": "string", "pattern": TEXT},
        "llm": {"type": "string", "minLength": 1, "pattern": TEXT},
        "output": {"type": "string", "pattern": OUTPUT},
    }
    if tools:
        properties["tools"] = {"type": "array", "items": {"enum": sorted(tools)}, "maxItems": 5}
    return {
        "type": "object",
        "properties": properties,
        "required": ["id", "llm", "output"],
        "additionalProperties": False,
    }


def _guided(tools: Mapping[str, ToolSpec], reference: str | None, guide: list[list[str]], max_steps: int,
            values: list[str] | None = None, flow: bool = False,
            clause_values: list[list[str]] | None = None, implied: bool = False,
            request: str | None = None) -> dict:  # fmt: skip
    """Numbered steps held to the guide: position N offers the tools of the request's Nth clause and, from the
    second on, depends on the step before it (the order the request states); a request of one clause offers
    its tools at up to three positions. With ``flow``, from the second step on an argument that can carry data
    takes what the step before it wrote (``$state.sN-1``): the plan passes data, not only the request's words;
    the values a position's arguments take are those its clause gives (``clause_values``; all of the request's
    when it gives none); and a chain has exactly one step per clause (the optional step after them repeated a
    tool out of order; made to depend on the last, it cost 7 points of edge F1: bench_planning --graph)."""
    chain = len(guide) >= 2
    whole = sorted({name for names in guide for name in names if name in tools})
    positions = []
    last = len(guide) if flow else (len(guide) + 1 if chain else 3)  # flow: one step a clause, no more

    def offered_at(number: int) -> list[str]:
        return guide[number - 1] if chain and number <= len(guide) else whole

    for number in range(1, min(max_steps, last) + 1):
        names = offered_at(number)
        earlier = [f"$state.s{number - 1}"] if flow and number > 1 else []
        before = [tools[n].output_schema for n in offered_at(number - 1) if n in tools] if earlier else []
        own = clause_values[number - 1] if flow and clause_values and number <= len(clause_values) else None
        variants = [_numbered(_offering(_tool_step(tools[name], reference), own or values, earlier, request,
                                        tools[name], before), number, implied)
                    for name in names if name in tools]  # fmt: skip
        if not chain or number > len(guide):
            variants.append(_numbered(_llm_step(None), number, implied))
        if chain and 1 < number <= len(guide) and not implied:
            variants = [_depending(v, number) for v in variants]
        positions.append({"anyOf": variants})
    least = len(guide) if chain else 1
    return {"type": "array", "minItems": least, "maxItems": len(positions), "items": False, "prefixItems": positions}


# Words of a parameter's name that say it takes what another step produced (a text to translate, an image to
# caption, the results to format), not a value the request spells out (a city, a date, a count).
_CARRIED = frozenset(
    "text content body message summary data input document doc image photo picture audio video file files items "
    "item results result list report caption transcript html markdown json code source note notes article entries "
    "records rows table commits log changes diff output context question answer translation draft details info "
    "payload contents lines events history suggestion weather forecast receipt order error errors".split()
)


# Words of a parameter's name that say it takes a date; a channel (or a tag), written #name.
DATE_WORDS = frozenset("date deadline birthday".split())
CHANNEL_WORDS = frozenset("channel hashtag".split())


def _fitting(name: str, values: list[str]) -> list[str]:
    """The request's values an argument named ``name`` is offered: a place's name gets the places the request
    gives (a path, a URL, ".", a file name; else no date: a date is no place), a date's name its dates, a
    channel's the ``#names`` (post 'paid' to #finance), when it gives some; any other argument, every value (a
    date among them: ``checkIn`` names no date)."""
    words = name_words(name)
    if words & DATE_WORDS:
        return [v for v in values if is_date(v)] or values
    if words & CHANNEL_WORDS:
        return [v for v in values if v.startswith("#")] or values
    if words & PLACE_WORDS:
        return [v for v in values if is_place(v)] or [v for v in values if not is_date(v)] or values
    return values


def carries(name: str, schema: Any) -> bool:
    """Whether argument ``name`` (of JSON Schema ``schema``) can take an earlier step's output: a structured value
    (an object or a list, which a request does not spell out), or a text whose name says it is data."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind in ("object", "array"):
        return True
    if kind not in ("string", None):
        return False
    return bool(name_words(name) & _CARRIED)


def _offering(variant: Mapping[str, Any], values: list[str] | None, earlier: Sequence[str] = (),
              request: str | None = None, spec: ToolSpec | None = None,
              before: Sequence[Mapping[str, Any] | None] = ()) -> dict[str, Any]:  # fmt: skip
    """A tool step whose text and number arguments are held to ``values`` (what the request gives; a small model
    let write free text after a value's first letters goes on writing, measured: Paris_toRomeDbCe...) and, where
    an argument can carry one, to the outputs of the ``earlier`` steps (when what each tool ``before`` it returns
    fits it, as the argument check will judge: :func:`output_fits`). With the ``request``: an argument it names
    with its value takes that value, and an optional one it never names is not offered (a small model fills
    every argument it is offered: BFCL's simple requests, a default written over with a value meant for another;
    benchmarks/bfcl.py)."""
    if (not values and not earlier) or "args" not in variant["properties"]:
        return dict(variant)
    from .guide import by_role, named_values

    args = dict(variant["properties"]["args"])
    properties: dict[str, Any] = args.get("properties") or {}
    required = set(args.get("required") or ())
    written = ((spec.parameters or {}).get("properties") or {}) if spec is not None else {}  # with descriptions
    named = named_values(request, list(properties), values or []) if request else None
    passing = {name for name, schema in properties.items() if earlier and carries(name, schema)
               and all(output_fits(said, written.get(name) or schema) for said in before)}  # fmt: skip
    skipped = set()
    if named is not None:  # optional with a default, and the request never names it: its default stands
        skipped = {name for name in properties if name not in required and name not in named.mentioned
                   and name not in passing and _has_default(written.get(name))}  # fmt: skip
    bound: dict[str, str] = {}
    if named is not None and request:
        roles = {k: v for k, v in by_role(request, list(properties), values or []).items() if k not in passing}
        bound = {**roles, **named.bound}  # named with its value first: "a departure of Rome"
        bound.update(_in_order(properties, skipped | passing, bound, values or []))
    offered: dict[str, Any] = {}
    written_in: list[str] = []  # what the request gives a value of is written, optional or not
    for name, schema in properties.items():
        kind = schema.get("type") if isinstance(schema, dict) else None
        passed = list(earlier) if name in passing else []
        if name in skipped:
            continue
        if name in bound and kind in ("string", "number", "integer") and not passed:
            value = bound[name]
            if kind == "string":
                offered[name] = {"enum": [escape_text(value)]}
                written_in.append(name)
                continue
            number = _number(value)
            if number is not None and (kind == "number" or number.is_integer()):
                offered[name] = {"enum": [int(number) if kind == "integer" else number]}
                written_in.append(name)
                continue
        if named is not None and kind == "boolean" and name in named.mentioned and not passed and request:
            offered[name] = {"enum": [not _negated(request, name)]}  # "a direct flight": direct_flight true
            written_in.append(name)
            continue
        if kind == "string" and "enum" not in schema and "const" not in schema:
            # as a plan must write them to mean themselves: "#dev" is a channel, not a placeholder; never the
            # argument's own name (a small model answers `repository: repository`)
            given = [escape_text(v) for v in _fitting(name, values or []) if v.casefold() != name.casefold()]
            if passed:  # a text that carries data, from the second step on: what an earlier step wrote
                offered[name] = {"enum": passed}
            else:
                offered[name] = {"enum": given} if given else schema
        elif kind in ("number", "integer") and values:
            wanted = numbers_offered(kind, values)
            offered[name] = {"enum": wanted} if wanted else schema
        elif passed:  # an object or a list, from the second step on: what an earlier step wrote
            offered[name] = {"enum": passed}
        else:
            offered[name] = schema
    args["properties"] = offered
    if written_in:
        args["required"] = [*(args.get("required") or ()), *(n for n in written_in if n not in required)]
    return {**variant, "properties": {**variant["properties"], "args": args}}


def _in_order(properties: Mapping[str, Any], left: set[str], bound: Mapping[str, str], values: list[str]) -> dict:
    """The request's numbers, in its order, given to the number arguments it names no value of, in the tool's
    order, when they are as many, two or more, and each fits ("the highest common factor of 36 and 24": number1 36,
    number2 24; "20 kg of water at 30 degrees mixed with 15 kg at 60": mass1, temperature1, mass2, temperature2).
    Measured on BFCL's simple requests (benchmarks/bfcl.py): a small model let choose among them swapped or
    repeated them."""
    names = [name for name, schema in properties.items() if name not in left and name not in bound
             and isinstance(schema, Mapping) and schema.get("type") in ("number", "integer")
             and "enum" not in schema]  # fmt: skip
    taken = set(bound.values())
    numbers = [v for v in values if _number(v) is not None and v not in taken]
    if len(names) < 2 or len(names) != len(numbers):
        return {}
    pairs = list(zip(names, numbers))
    fits = all(properties[n].get("type") == "number" or float(_number(v) or 0).is_integer() for n, v in pairs)
    return dict(zip(names, numbers)) if fits else {}


_NOT = re.compile(r"\b(?:no|not|without|non|never|don't|do not|doesn't|exclude|excluding)\b[\s-]+(?:\w+\s+)?$", re.I)


def _negated(request: str, name: str) -> bool:
    """Whether the request names a yes-or-no argument after a negation ("without transfers", "not direct")."""
    words = [w for w in name_words(name) if len(w) > 2]
    for match in re.finditer(rf"\b(?:{'|'.join(re.escape(w[:5]) for w in words)})\w*", request, re.I) if words else ():
        if _NOT.search(request[max(0, match.start() - 40) : match.start()]):  # the few words before it
            return True
    return False


def _has_default(schema: Any) -> bool:
    """Whether an argument has a default: its schema says one, or its description does ("Default is 2")."""
    return isinstance(schema, Mapping) and (
        "default" in schema or "default" in str(schema.get("description", "")).lower()
    )


def numbers_offered(kind: str, values: list[str]) -> list[Any]:
    """The numbers among the request's ``values`` that a ``kind`` ("number", "integer") argument may take."""
    numbers = [n for n in map(_number, values) if n is not None]
    return [int(n) if kind == "integer" else n for n in numbers if kind == "number" or n.is_integer()]


def _number(text: str) -> float | None:
    """A number the request gives, as written (12,000 with its thousands separated: 12000)."""
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    if not any(c.isdigit() for c in text):  # "inf", "nan", "infinity" are words
        return None
    try:
        return float(text)
    except ValueError:
        return None


_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+")


def _depending(variant: Mapping[str, Any], number: int) -> dict[str, Any]:
    """A step at position ``number`` that runs after the one before it."""
    properties = {**variant["properties"], "deps": {"const": [f"s{number - 1}"]}}
    return {**variant, "properties": properties, "required": [*variant["required"], "deps"]}


def _numbered(variant: Mapping[str, Any], number: int, implied: bool = False) -> dict[str, Any]:
    """A step variant at position ``number``: its id ``sN`` and its output ``$state.sN``, fixed (``implied``: not
    written at all, nor a description: :func:`positioned` writes them in); a model step's prompt plain text
    (no ``#id`` placeholder naming a step that is not there)."""
    properties = dict(variant["properties"])
    properties["id"] = {"const": f"s{number}"}
    properties["output"] = {"const": f"$state.s{number}"}
    if "llm" in properties:
        properties["llm"] = {"type": "string", "pattern": PLAIN_TEXT[:-2] + "+$"}  # not empty
    if not implied:
        return {**variant, "properties": properties}
    kept = {k: v for k, v in properties.items() if k not in ("id", "output", "description")}
    return {**variant, "properties": kept, "required": [k for k in variant["required"] if k in kept]}


def positioned(text: str, task: str, chain: int) -> str:
    """A plan written to an ``implied`` schema (:func:`catalog_schema`), with what its positions imply written
    in: step N's id ``sN`` and output ``$state.sN``, the step before it as its dependency when it is one of a
    chain of ``chain`` clauses, and the request as its summary. Text that is no such plan is left as it is
    (check says what is wrong with it)."""
    import json

    from ...dsl.jsontext import loads

    try:
        data = loads(text)
    except ValueError:
        return text
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        return text
    written = []
    for number, step in enumerate(steps, 1):
        if not isinstance(step, dict):
            written.append(step)
            continue
        implied: dict[str, Any] = {"id": f"s{number}", **step, "output": step.get("output", f"$state.s{number}")}
        if 1 < number <= chain:
            implied.setdefault("deps", [f"s{number - 1}"])
        written.append(implied)
    summary = " ".join(task.split())
    whole = {"summary": summary if len(summary) <= 200 else summary[:199] + "\u2026", **data, "steps": written}
    return json.dumps(whole, ensure_ascii=False)


def _value_schema(schema: Any) -> dict[str, Any]:
    """An argument's own schema, its free text held to plain text (a reference is the other variant)."""
    out = _plain(schema)
    if out.get("type") == "string" and "enum" not in out and "const" not in out:
        out["pattern"] = PLAIN_TEXT
    return out


def response_params(schema: Mapping[str, Any], model: str, mode: str = "auto", name: str = "plan") -> dict[str, Any]:
    """The completion parameters that hold ``model``'s answer to ``schema`` (``mode``: see STRUCTURED_OUTPUT)."""
    if mode == "auto":
        mode = _auto(model)
    schema = dict(schema)
    if mode == "json_schema":
        return {
            "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}
        }
    if mode == "llama_cpp":  # llama.cpp's server: a grammar built from the schema
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "ollama":
        return {"format": schema}
    if mode == "guided_json":  # vLLM
        return {"extra_body": {"guided_json": schema}, "response_format": {"type": "json_object"}}
    if mode == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


def _auto(model: str) -> str:
    from .conversation import supports_schema

    if model.startswith(("ollama/", "ollama_chat/")):
        return "ollama"
    if model.startswith("hosted_vllm/"):
        return "guided_json"
    if supports_schema(model):
        return "json_schema"
    return "llama_cpp"  # an OpenAI-compatible local server litellm does not know: llama.cpp takes a schema
