"""The Plan IR: small immutable values, produced by ``parse`` and read by everything after it.

Spans are excluded from equality so that tests compare structure, not positions.
Argument trees are JSON-like: read-only mappings, tuples, scalars, and the
expression nodes below in any leaf.
"""

from __future__ import annotations

import enum
import re
from .record import record, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Iterator, Literal, Mapping, Union

from .errors import NOSPAN, Span

Root = Literal["input", "state", "item", "index"]  # item/index: inside a for_each step
Key = Union[str, int]
SIGIL = "\u2020"  # the dagger, canonical spelling of a reference
ASCII_SIGIL = "$"

EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Any:
    return field(default_factory=lambda: EMPTY)


def _span() -> Any:
    return field(default=NOSPAN, compare=False, repr=False)


@record(frozen=True, slots=True)
class Ref:
    """``†state.a.b[0]``: a path into the run inputs or the shared state."""

    root: Root
    path: tuple[Key, ...]
    span: Span = _span()

    def __str__(self) -> str:
        return SIGIL + self.root + format_path(self.path)


@record(frozen=True, slots=True)
class AnyOf:
    """``†a || †b`` in an argument: the first alternative that gets written; ``†a || "none"``: a
    literal ``default`` when none was (the read is then never unset)."""

    options: tuple[Ref, ...]
    span: Span = _span()
    default: Any = None
    has_default: bool = False

    def __str__(self) -> str:
        import json

        shown = " || ".join(map(str, self.options))
        return f"{shown} || {json.dumps(self.default, ensure_ascii=False)}" if self.has_default else shown


@record(frozen=True, slots=True)
class AllOf:
    """``†a && †b`` in an argument: waits for all, takes the last."""

    refs: tuple[Ref, ...]
    span: Span = _span()

    def __str__(self) -> str:
        return " && ".join(map(str, self.refs))


Expr = Union[Ref, AnyOf, AllOf]


# --- conditions (``when:``) ------------------------------------------------------------------

MISSING: Any = type("Missing", (), {"__repr__": lambda s: "MISSING", "__bool__": lambda s: False})()
"""No value at a path (nobody wrote it): the one sentinel of the dsl and the interpreter."""

BAD_LITERAL = object()  # a literal the parser could not read (judged by the validator, never evaluated)
_SQ_ESCAPES = re.compile(r'\\.|"')  # in a 'single-quoted' literal: an escape (kept whole) or a bare double quote
_SQ_SWAP = {"\\'": "'", '"': '\\"'}


def literal_value(text: str) -> Any:
    """A literal as written in a condition or an argument's default: ``"a"``, ``'it\\'s'`` (JSON's escapes,
    quotes swapped), a number, ``true``, ``false``, ``null``; BAD_LITERAL when it cannot be read."""
    import json

    if text in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[text]
    if text.startswith("'"):
        text = '"' + _SQ_ESCAPES.sub(lambda m: _SQ_SWAP.get(m.group(), m.group()), text[1:-1]) + '"'
    try:
        if text.startswith('"'):
            return json.loads(text)
        if not any(c in text for c in ".eE"):
            return int(text)
        number = float(text)
        return number if number not in (float("inf"), float("-inf")) else BAD_LITERAL
    except (ValueError, OverflowError):  # a bad escape, a number past Python's digit limit
        return BAD_LITERAL


@record(frozen=True, slots=True)
class Const:
    """A literal in a condition: a string, a number, true, false or null."""

    value: Any
    span: Span = _span()
    source: str = field(default="", compare=False)  # as written, for messages


@record(frozen=True, slots=True)
class Compare:
    """``a == b`` and the other comparisons of a condition."""

    op: Literal["==", "!=", "<", "<=", ">", ">="]
    left: Any
    right: Any
    span: Span = _span()


@record(frozen=True, slots=True)
class Contains:
    """``a in b`` / ``a not in b``: a substring, a list member, an object key."""

    item: Any
    container: Any
    negated: bool = False
    span: Span = _span()


@record(frozen=True, slots=True)
class Length:
    """``len(x)`` of a string, a list or an object."""

    value: Any
    span: Span = _span()


@record(frozen=True, slots=True)
class Not:
    """``not x`` in a condition."""

    value: Any
    span: Span = _span()


@record(frozen=True, slots=True)
class BoolOp:
    """``a and b``, ``a or b`` in a condition."""

    op: Literal["and", "or"]
    values: tuple[Any, ...]
    span: Span = _span()


@record(frozen=True, slots=True)
class Guard:
    """A step's ``when:``: the step runs only when ``condition`` holds (``text`` as written)."""

    condition: Any
    text: str
    span: Span = _span()


View = Literal["full", "summary", "head", "last"]


def view_length(count: str) -> int | None:
    """``N`` of ``#E1.head=N``; -1 for more than 9 digits (the validator refuses it with its position)."""
    if not count:
        return None
    return int(count) if len(count) <= 9 else -1


@record(frozen=True, slots=True)
class Placeholder:
    """``#E1``, ``#E1.summary``, ``#E1.head=200``, ``#E1.last=200``: a step's output as text."""

    step: str
    view: View = "full"
    n: int | None = None
    span: Span = _span()
    default: Any = None  # ``#E1 || "none"`` in text: what it reads as when the step was skipped
    has_default: bool = False

    def __str__(self) -> str:
        suffix = {"full": "", "summary": ".summary"}.get(self.view, f".{self.view}={self.n}")
        if self.has_default:
            import json

            return f"#{self.step}{suffix} || {json.dumps(self.default, ensure_ascii=False)}"
        return f"#{self.step}{suffix}"


@record(frozen=True, slots=True)
class Template:
    """Text with references and placeholders interpolated as text; ``†a || †b || "none"`` in it is one
    :class:`AnyOf` part (the first written, else the default)."""

    parts: tuple[Union[str, Ref, AnyOf, Placeholder], ...]
    span: Span = _span()

    def __str__(self) -> str:
        return "".join(escape_text(p) if isinstance(p, str) else str(p) for p in self.parts)


@record(frozen=True, slots=True)
class Output:
    """An output path: alternatives separated by ``||``, each a set of targets joined by ``&&``.

    ``†state.a && †state.b || †state.err`` is ``((a, b), (err,))``: a plain
    value goes to every target of the first alternative.
    """

    alternatives: tuple[tuple[Ref, ...], ...]
    span: Span = _span()
    routed: int = 0  # the last ``routed`` alternatives are the step's ``catch:`` paths

    @property
    def branching(self) -> bool:
        """Whether it has exclusive alternatives (its own ``||``, or ``catch:`` paths)."""
        return len(self.alternatives) > 1

    @property
    def own(self) -> tuple[tuple[Ref, ...], ...]:
        """The alternatives written in ``output:`` (what a tool's Branch or a model chooses among)."""
        return self.alternatives[: len(self.alternatives) - self.routed]

    @property
    def error_alternative(self) -> int | None:
        """Where a failure no ``catch`` entry takes goes: the last of an ``a || b`` output, else nowhere."""
        own = len(self.alternatives) - self.routed
        return own - 1 if own > 1 else None

    @property
    def targets(self) -> tuple[Ref, ...]:
        return tuple(r for alt in self.alternatives for r in alt)

    def __str__(self) -> str:
        return " || ".join(" && ".join(map(str, alt)) for alt in self.own)


@record(frozen=True, slots=True)
class Retry:
    """A step's retry policy: how many attempts, the backoff, and which failures it retries."""

    limit: int = 3
    backoff: float = 0.5  # seconds before the first retry; doubles each time, with jitter
    max_backoff: float = 30.0
    errors: tuple[str, ...] = ()  # per-type form: the error types this rule is for ("*": any transient)


@record(frozen=True, slots=True)
class Catch:
    """One ``catch:`` entry: failures of these types (after retries) go, as the error object, to the
    step's output alternative ``alternative`` (catch paths are appended to the output's alternatives)."""

    errors: tuple[str, ...]
    alternative: int
    span: Span = _span()


@record(frozen=True, slots=True)
class LLMCall:
    """What an ``llm:`` step asks of a model."""

    prompt: Template
    system: Template | None = None
    model: str | None = None
    params: Mapping[str, Any] = _empty()  # temperature, max_tokens, ... passed to litellm
    tools: tuple[str, ...] = ()  # tools the model may call inside the step
    output_schema: Mapping[str, Any] | None = None
    max_iterations: int | None = None


Purity = Literal["pure", "idempotent", "side_effect"]


@record(frozen=True, slots=True)
class FanOut:
    """``for_each``: run the step once per item of a list, results in item order."""

    over: Any  # a Ref / AnyOf / AllOf giving the list
    name: str = "item"
    max_items: int | None = None  # None: the configured default cap
    max_concurrency: int | None = None


@record(frozen=True)
class SubPlan:
    """``plan:``: another plan run as one step (a file relative to the caller, or inline)."""

    path: str | None  # as written; None for an inline plan
    source: str  # the resolved file name (or the caller's, for an inline plan)
    plan: "Plan | None" = field(default=None, compare=False, repr=False)  # filled by dsl.compose
    analysis: Any = field(default=None, compare=False, repr=False)
    inline: Any = field(default=None, compare=False, repr=False)  # the inline plan's document data
    at: tuple = field(default=(), compare=False, repr=False)  # document path of the `plan` key


@record(frozen=True)
class Loop:
    """``loop:``: repeat a sub-plan, each result the next input, until ``until`` holds (bounded)."""

    child: SubPlan
    max_iterations: int
    until: Any  # a Ref / AnyOf / AllOf on †result (root "state" of the child's result object)


@record(frozen=True)
class Gate:
    """``gate:``: wait for a person's answer (one of ``choices``, or a value matching ``schema``)."""

    question: Any  # str or Template
    choices: tuple[str, ...] | None = None
    schema: Mapping[str, Any] | None = None
    timeout: float | None = None  # seconds from when it first waited
    on_timeout: Any = "fail"  # "fail", or the answer given in the person's place
    notify: tuple[str, ...] = ()  # notifier names of the configuration ([notify.NAME])
    answered_by: Literal["person", "anyone"] = "anyone"  # person: no channel a model holds may answer


class StepKind(enum.StrEnum):
    """What a step does: call a tool, ask a model, run a sub-plan, loop a sub-plan, ask a person."""

    TOOL = "tool"
    LLM = "llm"
    PLAN = "plan"
    LOOP = "loop"
    GATE = "gate"


# A step's trigger rule: all_succeeded (the default: a dependency skipped or a value never written skips
# it), all_done (it runs once they all settled), none_failed (unless one failed), one_succeeded (if one
# completed). Under any rule but the default, a value never written reads as null.
Trigger = Literal["all_succeeded", "all_done", "none_failed", "one_succeeded"]
TRIGGERS: tuple[str, ...] = ("all_succeeded", "all_done", "none_failed", "one_succeeded")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


MAX_DURATION = 366 * 86400.0  # seconds: the one bound of every duration (timeouts, backoffs, gate deadlines)


def parse_duration(raw: Any) -> float | None:
    """``30``, ``2.5``, ``"500ms"``, ``"30s"``, ``"2m"``, ``"1h"``, ``"2d"`` -> seconds; None if not a
    duration: negative, not finite (``.inf``, NaN), or longer than :data:`MAX_DURATION` (366 days; a
    deadline past it could not even be written as a date)."""
    if isinstance(raw, bool):
        return None
    seconds = None
    if isinstance(raw, (int, float)):
        seconds = float(raw)
    elif isinstance(raw, str):
        m = _DURATION.match(raw)
        if m:
            seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    return seconds if seconds is not None and 0 <= seconds <= MAX_DURATION else None


def format_duration(seconds: float) -> str:
    """Seconds as a person writes them: ``2d``, ``90m``, ``30s``, ``1.5s``."""
    for unit in ("d", "h", "m"):
        size = _UNIT_SECONDS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


NOT_GIVEN: Any = type("NotGiven", (), {"__repr__": lambda s: "NOT_GIVEN", "__bool__": lambda s: False})()


@record(frozen=True, slots=True)
class Step:
    """One step of a plan, as parsed: what it does, what it reads and where its output goes."""

    id: str
    tool: str | None = None
    llm: LLMCall | None = None
    description: str = ""
    args: Mapping[str, Any] = _empty()
    deps: tuple[str, ...] = ()  # explicit ones; data-flow deps are derived by ``validate``
    output: Output | None = None
    retry: Retry = Retry()
    timeout: float | None = None
    purity: Purity | None = None
    precomputed: Any = NOT_GIVEN  # a latent ``_output`` given by the model (calls dialect)
    span: Span = _span()
    for_each: FanOut | None = None
    plan: SubPlan | None = None
    loop: Loop | None = None
    gate: Gate | None = None
    guard: Guard | None = None  # when:
    retry_rules: tuple[Retry, ...] = ()  # retry: [...] (per error type); `retry` is then the first rule
    catch: tuple[Catch, ...] = ()
    trigger: Trigger = "all_succeeded"  # when it runs, given what its dependencies did
    trigger_given: bool = False  # the plan wrote `trigger:`: the rule then means what it says, for every step
    retry_given: bool = False  # the plan wrote `retry:` (a step that acts is retried only when it says so)

    @property
    def kind(self) -> StepKind:
        if self.llm is not None:
            return StepKind.LLM
        if self.plan is not None:
            return StepKind.PLAN
        if self.loop is not None:
            return StepKind.LOOP
        return StepKind.GATE if self.gate is not None else StepKind.TOOL

    @property
    def label(self) -> str:
        """What a person reads in progress lines: the description, else the tool it calls, else its id (a
        model call, a gate, a fan-out or a sub-plan: its kind alone would not say which)."""
        return self.description or self.tool or self.id


@record(frozen=True)
class Plan:
    """A parsed plan: its steps in order, its inputs, initial state, result and policies."""

    steps: tuple[Step, ...]
    summary: str = ""
    mode: Literal["eager", "lazy"] = "eager"
    inputs: Mapping[str, Any] | None = None  # JSON Schema properties of †input
    required_inputs: tuple[str, ...] = ()
    state: Mapping[str, Any] | None = None  # JSON Schema of †state
    initial_state: Mapping[str, Any] = _empty()
    result: Any = None  # an Expr, a Template, or None (last step in order)
    on_failure: Literal["continue", "skip_dependents", "abort"] = "continue"
    timeout: float | None = None  # the whole run, in seconds
    max_cost: float | None = None  # USD, the whole run
    max_tokens: int | None = None
    executor: Literal["local", "ray"] | None = None  # where its tool calls run (a tool's own executor wins)
    dialect: str = "canonical"
    declared_groups: tuple[tuple[str, ...], ...] | None = None  # steps dialect's parallel_groups
    source: str = "<string>"
    span: Span = field(default=NOSPAN, compare=False, repr=False)
    # The checked canonical document the plan was parsed from: stored as a run's
    # artifact so a resumed run never re-derives its plan.
    document: Any = field(default=None, compare=False, repr=False)
    by_id: Mapping[str, Step] = field(default_factory=lambda: EMPTY, compare=False, repr=False, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_id", MappingProxyType({s.id: s for s in self.steps}))

    def step(self, step_id: str) -> Step:
        return self.by_id[step_id]

    @cached_property
    def walked(self) -> tuple[tuple[str, Step], ...]:
        """:func:`walk`'s answer, computed once (a plan never changes; a run asks for it several times)."""
        return tuple(_walk(self, ""))

    @cached_property
    def all_steps(self) -> tuple[Step, ...]:
        """Every step of the plan and of the plans it runs (what :func:`walk` gives, without the ids)."""
        return tuple(step for _, step in self.walked)

    @cached_property
    def llm_steps(self) -> tuple[Step, ...]:
        """Every LLM step, its sub-plans' included (what a run's preflight and warm-up look at)."""
        return tuple(step for step in self.all_steps if step.llm is not None)

    @cached_property
    def nesting_steps(self) -> tuple[Step, ...]:
        """The sub-plan and loop steps (a refusal inside one is held by what comes after it)."""
        return tuple(step for step in self.all_steps if step.plan is not None or step.loop is not None)

    @cached_property
    def gate_steps(self) -> tuple[Step, ...]:
        return tuple(step for step in self.all_steps if step.gate is not None)

    @cached_property
    def tool_names(self) -> frozenset[str]:
        """The tools its steps call, its sub-plans' included."""
        return frozenset(step.tool for step in self.all_steps if step.tool)


def walk(plan: Plan) -> Iterator[tuple[str, Step]]:
    """Every step of a plan and of the plans it runs, with its full id (``sub.fetch``, ``poll.check``)."""
    return iter(plan.walked)


# --- purity: one rule for what a step may do to the world ------------------------------------------

PURITY_RANK: Mapping[str, int] = MappingProxyType({"pure": 0, "idempotent": 1, "side_effect": 2})


def purity_of(step: Step, tools: Mapping[str, Any] | None, undeclared: Purity | None = None) -> Purity | None:
    """What a step may do to the world: its tool's word, made stricter (never laxer) by the step's own
    ``purity:``. A tool that declares nothing counts as ``undeclared`` (None: unknown; the side-effect
    gate passes ``"side_effect"``); a tool that says it may destroy something (MCP's ``destructiveHint``)
    acts, whatever else it says. The one place this rule is written: check, diff, resume, the gate."""
    tool = (tools or {}).get(step.tool) if step.tool else None
    declared = "side_effect" if getattr(tool, "destructive", False) else getattr(tool, "purity", None) or undeclared
    if step.purity is None or declared is None:
        return step.purity or declared
    return step.purity if PURITY_RANK[step.purity] > PURITY_RANK[declared] else declared


def can_act(step: Step, tools: Mapping[str, Any] | None, undeclared: Purity | None = "side_effect") -> bool:
    """Whether running ``step`` may act on the world: its tool, the tools its model may call, and every
    step of the plans it runs (sub-plans, loops; a fan-out runs the same step per item)."""
    if step.purity == "side_effect" or (step.tool and purity_of(step, tools, undeclared) == "side_effect"):
        return True
    if step.llm is not None and any(purity_of(Step(id=step.id, tool=name), tools, undeclared) == "side_effect"
                                    for name in step.llm.tools):  # fmt: skip
        return True
    child = step.plan or (step.loop.child if step.loop is not None else None)
    return child is not None and child.plan is not None and any(can_act(s, tools, undeclared) for s in child.plan.steps)


def resume_class(step: Step, tools: Mapping[str, Any] | None) -> str:
    """The key of the resume policy (``Config.resume``) an interrupted unit of ``step`` follows:
    ``side_effect`` for every step that can act (:func:`can_act`, the one rule: a tool that declares
    nothing, a model step with an acting tool), else what it declares (``pure``, ``idempotent``), else
    ``undeclared`` (a step that calls nothing that acts: a model step without acting tools)."""
    if can_act(step, tools):
        return "side_effect"
    return purity_of(step, tools) or "undeclared"


def acts_as_known(step: Step, tools: Mapping[str, Any] | None) -> bool | None:
    """:func:`can_act` where the tools are known; without them (``tools`` None) what the plan itself says:
    True when a step says ``purity: side_effect`` (or holds one that does), None when it cannot be told
    (a tool or a model's tools whose purity only the tools know: ``preview`` and ``diff`` say so), else False."""
    if tools is not None:
        return can_act(step, tools)
    if can_act(step, {}, undeclared=None):
        return True
    child = step.plan or (step.loop.child if step.loop is not None else None)
    if step.tool or (step.llm is not None and step.llm.tools):
        return None
    if child is not None and child.plan is not None:
        found = [acts_as_known(s, None) for s in child.plan.steps]
        return None if None in found else False
    return False


def starts_early(step: Step, tools: Mapping[str, Any] | None) -> bool:
    """Whether a step may start while a model is still writing its plan (a streamed plan), when every step
    it depends on may too: a tool call whose tool itself says it changes nothing (``pure`` or
    ``idempotent``, and not destructive), no fan-out, no ``when:``. The step's own ``purity:`` comes from
    the plan, that is from the model: it may hold a step back, never start one (:func:`can_act`). Never a
    side effect, a gate, a model step or a composition: those wait for the whole plan."""
    return step.kind is StepKind.TOOL and step.for_each is None and step.guard is None and not can_act(step, tools)


def _walk(plan: Plan, prefix: str) -> Iterator[tuple[str, Step]]:
    for step in plan.steps:
        full = prefix + step.id
        yield full, step
        child = step.plan or (step.loop.child if step.loop is not None else None)
        if child is not None and child.plan is not None:
            yield from _walk(child.plan, full + ".")


# --- canonical spelling ----------------------------------------------------------------

# What would otherwise start a reference, a placeholder or an escape.
_NEEDS_ESCAPE = re.compile(r"\\(?=[\u2020$#\\])|\u2020|\$(?=(?:input|state|item|index)\b)|#(?=[A-Za-z_])")


def escape_text(text: str) -> str:
    """Literal text as it must be written inside a template (escapes only where needed)."""
    return _NEEDS_ESCAPE.sub(lambda m: "\\" + m.group(0), text)


def format_path(path: tuple[Key, ...]) -> str:
    out = []
    for key in path:
        if isinstance(key, int):
            out.append(f"[{key}]")
        elif key.isidentifier():
            out.append("." + key)
        else:
            out.append("[" + _quote(key) + "]")
    return "".join(out)


def _quote(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


@record(frozen=True)
class ToolSpec:
    """What the validator knows of a tool: enough to check a call before anything runs.

    The interpreter's registry builds these from decorated functions; ``dsl``
    never imports the interpreter.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({"type": "object"}))
    purity: Purity | None = None
    output_schema: Mapping[str, Any] | None = None  # what the tool returns, when it says (an MCP outputSchema)
    destructive: bool = False  # it may destroy something (MCP's destructiveHint): preview shows it
    alternatives: int | None = None  # how many outcomes it may answer (``Branch(i, ...)``); None: unsaid

    def to_json(self) -> dict[str, Any]:
        """As plain JSON: what `dagplan tools list --format json` and the MCP server's list_tools give."""
        import json

        plain = json.loads(json.dumps({"parameters": self.parameters, "output_schema": self.output_schema},
                                      default=lambda v: dict(v)))  # fmt: skip
        return {"name": self.name, "description": self.description, "purity": self.purity,
                "destructive": self.destructive, **plain,
                **({"alternatives": self.alternatives} if self.alternatives else {})}  # fmt: skip
