"""The cost of a plan before it runs: model calls, input tokens and dollars, in the worst case.

For every LLM step (inside sub-plans and loops too) the prompt's size is bounded from its
text: literal text counts as written; ``#ID.head=N`` and ``#ID.last=N`` count N
characters; a whole ``#ID`` (or a reference) counts what the producing step's
``output_schema`` allows (strings with ``maxLength``, arrays with ``maxItems``, enums,
numbers...) or, when nothing bounds it, makes the step *unbounded*, naming the
placeholder responsible. Tokens are counted at 3 characters a token (an upper bound
for most text; tokenizers average about 4). A step calls its model once, or up to its
``max_iterations`` when it may call tools (whose results are not bounded). Each step is
multiplied by the worst-case bounds of the composition around it (``max_items``,
``max_iterations``) and priced with litellm's offline cost map, read as a file (litellm
itself is never imported here): "worst case 61 steps, 12 model calls, <= 38k input
tokens, <= $0.19".
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from ...dsl.record import record, field
from functools import lru_cache
from typing import Any, Iterator, Mapping

from ...dsl.errors import Diagnostic, Span, counted, error, warning
from ...dsl.compose import items_bound, over_schema
from ...dsl.refschema import ref_schema
from ...dsl.ir import AnyOf, Placeholder, Plan, Ref, Step, Template

CHARS_PER_TOKEN = 3
_MESSAGE_OVERHEAD = 8  # tokens of role and framing per message
_SCALAR_CHARS = {"number": 24, "integer": 20, "boolean": 5, "null": 4}


@record
class StepCost:
    step: str  # full id
    model: str | None
    times: int  # how many times the composition may run it
    calls: int  # model calls per run of the step
    input_tokens: int | None  # per call; None: unbounded
    output_tokens: int | None  # per call (max_tokens, else the model's maximum output)
    unbounded_by: str | None = None  # the placeholder or reference that leaves the prompt unbounded
    largest: str | None = None  # the part of the prompt that counts most
    span: Span = field(default_factory=Span)

    @property
    def total_calls(self) -> int:
        return self.times * self.calls


@record
class Estimate:
    steps: int  # the most steps the plan can execute
    llm: list[StepCost]
    cost: float | None  # USD; None when some price is unknown or some prompt unbounded
    priced: bool  # every model had a price in the cost map

    @property
    def llm_steps(self) -> int:
        return sum(s.times for s in self.llm)

    @property
    def model_calls(self) -> int:
        return sum(s.total_calls for s in self.llm)

    @property
    def input_tokens(self) -> int | None:
        if any(s.input_tokens is None for s in self.llm):
            return None
        return sum((s.input_tokens or 0) * s.total_calls for s in self.llm)

    @property
    def unbounded(self) -> list[StepCost]:
        return [s for s in self.llm if s.input_tokens is None]

    def summary(self, steps: bool = True) -> str:
        """``worst case 61 steps, 12 LLM steps, 12 model calls, <= 38k input tokens, <= $0.19`` (``steps``:
        with the step counts; without, the model calls on)."""
        parts = [f"worst case {counted(self.steps, 'step')}", counted(self.llm_steps, "LLM step")] if steps else []
        if self.llm:
            parts.append(counted(self.model_calls, "model call"))
            tokens = self.input_tokens
            if tokens is None:
                names = ", ".join(sorted({s.unbounded_by or s.step for s in self.unbounded})[:3])
                parts.append(f"input tokens unbounded ({names})")
            else:
                parts.append(f"<= {_short(tokens)} input tokens")
            if all(_local(s.model) for s in self.llm):  # however many tokens
                parts.append("free (the local model, on this machine)")
            elif tokens is not None and self.cost is not None:
                parts.append(f"<= ${self.cost:.2f}")
            elif tokens is not None:
                parts.append("price unknown (a model without a price in litellm's cost map, or none set)")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "llm_steps": self.llm_steps,
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "cost": None if self.cost is None else round(self.cost, 6),
            "llm": [
                {
                    "step": s.step,
                    "model": s.model,
                    "times": s.times,
                    "calls": s.calls,
                    "input_tokens": s.input_tokens,
                    "output_tokens": s.output_tokens,
                    **({"unbounded_by": s.unbounded_by} if s.unbounded_by else {}),
                }
                for s in self.llm
            ],
        }


def estimate(plan: Plan, default_model: str | None = None, default_max_items: int | None = None,
             step_max_iterations: int = 5) -> Estimate:  # fmt: skip
    from ...dsl.compose import worst_case

    found = list(_llm_costs(plan, "", 1, default_model, default_max_items, step_max_iterations))
    total: float | None = 0.0
    priced = True
    for s in found:
        price = _price(s.model)
        if price is None:
            priced = False
        if price == (0.0, 0.0):  # free whatever the tokens (the local model)
            continue
        if price is None or s.input_tokens is None or s.output_tokens is None:
            total = None
            continue
        if total is not None:
            total += s.total_calls * (s.input_tokens * price[0] + s.output_tokens * price[1])
    return Estimate(worst_case(plan, default_max_items).steps, found, total, priced)


def diagnostics(found: Estimate, max_cost: float | None, plan: Plan) -> list[Diagnostic]:
    """``too-expensive`` (an error: the worst case is over ``max_cost``), ``unbounded-cost`` (a warning:
    ``max_cost`` is set and nothing bounds a prompt), ``context-window`` (a warning per prompt whose worst
    case exceeds its model's context window, naming the part responsible)."""
    out = []
    if max_cost is not None and found.cost is not None and found.cost > max_cost:
        out.append(
            error(
                "too-expensive",
                f"this plan could cost ${found.cost:.2f} in the worst case, over max_cost ${max_cost:.2f} "
                f"({found.model_calls} model calls, <= {_short(found.input_tokens or 0)} input tokens)",
                Span(plan.source),
                "bound the prompts (#ID.head=N), lower max_items / max_iterations, or raise max_cost",
            )
        )
    elif max_cost is not None and found.unbounded:
        s = found.unbounded[0]
        out.append(
            warning(
                "unbounded-cost",
                f"max_cost is ${max_cost:.2f} but nothing bounds the prompt of LLM step '{s.step}' ({s.unbounded_by})",
                s.span,
                f"write {s.unbounded_by}.head=N, or give the producing step an output_schema with maxLength",
            )
        )
    for s in found.llm:
        window = _context_window(s.model)
        if window and s.input_tokens is not None and s.input_tokens > window:
            out.append(
                warning(
                    "context-window",
                    f"the prompt of LLM step '{s.step}' can reach {_short(s.input_tokens)} tokens, over the "
                    f"{_short(window)} context window of {s.model}"
                    + (f"; most of it is {s.largest}" if s.largest else ""),
                    s.span,
                    "bound it with .head=N / .last=N",
                )
            )
    return out


# --- the prompts -------------------------------------------------------------------------------


def _llm_costs(plan: Plan, prefix: str, times: int, model: str | None, max_items: int | None,
               iterations: int) -> Iterator[StepCost]:  # fmt: skip
    for step in plan.steps:
        over = over_schema(plan, step)
        n = times * (items_bound(plan, step, max_items) if step.for_each is not None else 1)
        if step.llm is not None:
            item = over.get("items") if isinstance(over, Mapping) else None
            yield _step_cost(plan, step, prefix + step.id, n, model, iterations, item)
        child = step.plan or (step.loop.child if step.loop is not None else None)
        if child is not None and child.plan is not None:
            loops = step.loop.max_iterations if step.loop is not None else 1
            yield from _llm_costs(child.plan, prefix + step.id + ".", n * loops, model, max_items, iterations)


def _step_cost(plan: Plan, step: Step, full: str, times: int, default_model: str | None, iterations: int,
               item: Any = None) -> StepCost:  # fmt: skip
    call = step.llm
    assert call is not None
    chosen = call.model or default_model
    tokens: int | None = _MESSAGE_OVERHEAD
    unbounded, largest, most = None, None, 0
    for template in (call.prompt, call.system):
        if template is None:
            continue
        for part, chars in _parts(plan, template, item):
            if chars is None:
                unbounded = unbounded or part
            elif tokens is not None:
                tokens += math.ceil(chars / CHARS_PER_TOKEN)
                if chars > most and part:
                    largest, most = part, chars
    if call.output_schema is not None:
        tokens = (
            None
            if tokens is None
            else tokens + math.ceil(len(json.dumps(call.output_schema, default=str)) / CHARS_PER_TOKEN) + 40
        )
    calls = (call.max_iterations or iterations) if call.tools else 1
    if call.tools and unbounded is None:
        unbounded = f"the results of the tools it calls ({', '.join(call.tools)})"
    output = call.params.get("max_tokens") if isinstance(call.params.get("max_tokens"), int) else _max_output(chosen)
    return StepCost(full, chosen, times, calls, None if unbounded else tokens, output, unbounded, largest, step.span)


def _parts(plan: Plan, template: Template, item: Any = None) -> Iterator[tuple[str, int | None]]:
    """Each part of a template and the most characters it can be (None: unbounded)."""
    for part in template.parts:
        if isinstance(part, str):
            yield "", len(part)
        elif isinstance(part, Placeholder):
            if part.view in ("head", "last") and part.n is not None:
                yield str(part), part.n + 3
            else:
                producer = plan.by_id.get(part.step)
                bound = _schema_chars(producer.llm.output_schema) if producer and producer.llm else None
                yield str(part), bound if part.view != "summary" or bound is not None else None
        elif isinstance(part, Ref):
            yield str(part), _schema_chars(ref_schema(plan, part, item))
        elif isinstance(part, AnyOf):  # the longest alternative, or the default's text
            bounds = [_schema_chars(ref_schema(plan, r, item)) for r in part.options]
            if part.has_default:
                bounds.append(len(json.dumps(part.default, ensure_ascii=False)))
            known = [b for b in bounds if b is not None]
            yield str(part), max(known) if len(known) == len(bounds) else None


def _schema_chars(schema: Any, depth: int = 0) -> int | None:
    """The most characters a JSON value matching ``schema`` takes, or None (unbounded)."""
    if not isinstance(schema, Mapping) or depth > 20:
        return None
    if "enum" in schema:
        return max((len(json.dumps(v, default=str)) for v in schema["enum"]), default=0)
    if "const" in schema:
        return len(json.dumps(schema["const"], default=str))
    kind = schema.get("type")
    if kind == "string":
        return schema["maxLength"] * 2 + 2 if isinstance(schema.get("maxLength"), int) else None  # escapes
    if kind in _SCALAR_CHARS:
        return _SCALAR_CHARS[kind]
    if kind == "array":
        items = _schema_chars(schema.get("items"), depth + 1)
        count = schema.get("maxItems")
        return None if items is None or not isinstance(count, int) else 2 + count * (items + 2)
    if kind == "object":
        props = schema.get("properties") or {}
        if schema.get("additionalProperties", True) is not False:
            return None  # any key may come with any value
        total = 2
        for name, sub in props.items():
            inner = _schema_chars(sub, depth + 1)
            if inner is None:
                return None
            total += len(name) + 4 + inner
        return total
    return None


# --- litellm's cost map, read as data --------------------------------------------------------


@lru_cache(maxsize=1)
def cost_map() -> Mapping[str, Any]:
    """litellm's offline price list (the JSON file it ships), without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "model_prices_and_context_window_backup.json")
        try:
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            continue
    return {}


def _entry(model: str | None) -> Mapping[str, Any] | None:
    if not model:
        return None
    table = cost_map()
    found = table.get(model)
    if found is None and "/" in model:
        found = table.get(model.split("/", 1)[1])
    return found if isinstance(found, Mapping) else None


def _price(model: str | None) -> tuple[float, float] | None:
    if _local(model):  # the local model runs on this machine: it costs nothing per token
        return 0.0, 0.0
    entry = _entry(model)
    if entry is None or "input_cost_per_token" not in entry:
        return None
    return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)


def _local(model: str | None) -> bool:
    from .local import NAME

    return model == NAME


def _context_window(model: str | None) -> int | None:
    entry = _entry(model)
    found = entry.get("max_input_tokens") if entry else None
    return int(found) if isinstance(found, (int, float)) else None


def _max_output(model: str | None) -> int | None:
    entry = _entry(model)
    found = entry.get("max_output_tokens") or entry.get("max_tokens") if entry else None
    return int(found) if isinstance(found, (int, float)) else None


def _short(n: int) -> str:
    return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)
