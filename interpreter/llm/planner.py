"""The planner: a model turns a task into a plan; our validator checks it; the model repairs it.

``aplan`` asks for a plan in our format (structured output with the plan JSON
Schema where the model supports it, else JSON mode; the answer goes through our
tolerant loader either way, so prose, code fences and the other dialects are
fine), checks it with ``dagplan.dsl.check`` against the tool catalog, and on
errors sends the diagnostics back (``PATH:LINE:COL: error CODE: message`` lines,
headline first) for up to ``repair`` more attempts. The valid plan comes back
with its canonical YAML.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ...dsl.errors import Diagnostic, PlanInvalid, RunError, error
from ...dsl.ir import Plan, ToolSpec
from .conversation import Budget, complete

DEFAULT_REPAIR = 2
# how a small model is guided (see aplan); each measured in bench_planning --graph (README: "Guiding a small model")
GUIDES = ("order", "values", "narrow", "solve", "flow", "compact", "named")

SYSTEM_PROMPT = """\
You are a planner. Turn the user's task into a plan: a small graph of steps that an \
interpreter will run. Answer with ONE JSON object in the format below, nothing else.

{
  "summary": "one line: what the plan achieves",
  "inputs": {"customerId": {"type": "string", "description": "..."}},
  "steps": [
    {"id": "history", "description": "Look up the billing history",
     "tool": "checkBillingHistory", "args": {"customerId": "$input.customerId"},
     "output": "$state.history"},
    {"id": "refund", "description": "Issue the refund",
     "tool": "issueRefund", "args": {"customerId": "$input.customerId", "history": "$state.history"},
     "output": "$state.receipt || $state.error"},
    {"id": "answer", "description": "Compose the answer for the user",
     "llm": "Write a short confirmation. Receipt: #refund.head=400",
     "output": "$state.answer"}
  ],
  "result": "$state.answer"
}

Rules:
- 2 to 7 steps. Each step does one narrow thing. Ids are short snake_case names, unique.
- A step is either a tool call ("tool" + "args" using exactly the tool's parameter names) or a \
model call ("llm": the prompt; optional "tools": [names] the model may call inside the step).
- Use only tools from the catalog. Do not invent tools or parameters.
- Pass data by reference, never by copying values. A step writes its result with \
"output": "$state.<name>"; a later step reads it as "$state.<name>" (a whole string that is a \
reference passes the value with its JSON type) or inside text as "#<step id>" (the output as text; \
"#<id>.head=N" its first N characters, "#<id>.summary" its first line).
- Values the caller provides are "$input.<name>", each declared under "inputs" with a JSON Schema.
- A step that may fail can branch: "output": "$state.ok || $state.error" (a failure goes to the \
last path); later steps read the path they handle.
- Dependencies follow from references; "deps": [ids] only orders steps that share no data. No cycles.
- The last step composes the final answer, and "result" names its output.
"""

REPAIR_PROMPT = """\
That plan is not valid. The validator found these problems (the first one matters most):

{problems}

Answer with the complete corrected plan as one JSON object."""


@dataclass(frozen=True)
class PlanAttempt:
    text: str  # the model's answer, verbatim
    diagnostics: tuple[Diagnostic, ...]  # what our validator found (located in `text`)

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)


@dataclass(frozen=True)
class PlanResult:
    plan: Plan
    document_yaml: str  # canonical YAML, ready to write to a file
    attempts: tuple[PlanAttempt, ...]
    warnings: tuple[Diagnostic, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    calls: int = 0
    model: str = ""
    run: Any = None  # the RunResult, when the plan was also run (dagplan.aplan(..., run=True))

    @property
    def repairs(self) -> int:
        return len(self.attempts) - 1


# What `check` holds a plan to, and what it cannot know: `dagplan plan` says both.
CHECKED = ("checked: its shape, the tool and argument names, the arguments' types, the references and the order "
           "(no cycles); not checked: that these are the right tools, order and values for the request "
           "(dagplan eval measures that on tasks with known answers)")  # fmt: skip


def request_warnings(task: str, plan: Plan) -> list[Diagnostic]:
    """What a valid plan may still get wrong about its request, said as warnings: fewer steps than the
    clauses the request states in order ("..., then ..."), and no step using a value the request gives (a
    city, a date, an id, a quoted text)."""
    from ...dsl.errors import warning
    from ...dsl.ir import walk

    found = []
    from .guide import clauses as stated

    clauses = len(stated(task))
    steps = [s for _, s in walk(plan) if s.tool or s.llm is not None or s.gate is not None]
    if clauses > len(steps):
        found.append(
            warning(
                "fewer-steps-than-clauses",
                f"the request states {clauses} things to do in order, and "
                f"the plan has {len(steps)} step(s)",  # fmt: skip
                hint="read the plan: a step may be missing (ask again, or write it)",
            )
        )
    from .guide import request_values

    values = set(request_values(task))
    if values:
        written = json.dumps(plan.document, ensure_ascii=False, default=lambda v: dict(v) if hasattr(v, "keys") else
                             list(v)).casefold() if plan.document is not None else ""  # fmt: skip
        if not any(v.casefold() in written for v in values):
            shown = ", ".join(sorted(values)[:4])
            found.append(warning("request-values-unused", f"no step uses a value the request gives ({shown})",
                                 hint="the plan may answer another request: read its arguments"))  # fmt: skip
    return found


class PlanningFailed(PlanInvalid):
    """No valid plan after every repair; ``attempts`` holds each answer and its diagnostics."""

    def __init__(self, diagnostics, attempts: tuple[PlanAttempt, ...] = ()):
        self.attempts = tuple(attempts)
        self.usage: dict[str, Any] = {}  # what the failed attempts cost (tokens, cost, calls)
        super().__init__(diagnostics)

    def __reduce__(self):
        return (type(self), (self.diagnostics, self.attempts))


async def aplan(
    task: str,
    *,
    tools: Mapping[str, ToolSpec] | None,
    model: str,
    repair: int = DEFAULT_REPAIR,
    completion_kwargs: Mapping[str, Any] = {},
    inputs: Mapping[str, Any] | None = None,
    budget: Budget | None = None,
    on_attempt: Callable[[PlanAttempt], None] | None = None,
    structured_output: str = "auto",
    guide: tuple[str, ...] = GUIDES,
    on_prefix: Callable[["Streamed"], None] | None = None,
    memo: Any = None,
) -> PlanResult:
    """A valid plan for ``task`` using only ``tools``; raises :class:`PlanningFailed`.

    ``guide`` (the local model only; :mod:`.guide`): ``order``, the request split into the clauses it states
    in order, each step position held to the few tools its clause is about and depending on the one before
    (``narrow``: to the one tool it is most about); ``values``, a text or number argument may be one of the
    values the request gives; ``solve``, a request that asks a question gets a last step that answers it from
    what the steps found (:func:`.guide.solver_step`); ``flow``, from the second step on an argument that can
    carry data takes the output of the step before it, and each position the values its clause gives
    (:func:`.constrained.carries`); ``compact``, the model writes each step's tool and arguments only, and
    what its position implies (id, output, the step it follows) and the summary are written in after
    (:func:`.constrained.positioned`: tokens a grammar forced one by one cost a decoding step each). ``()``:
    none.

    ``inputs``: JSON Schema properties of values the caller will provide (shown
    to the model). ``repair``: how many times the model may fix its plan.
    ``on_attempt`` sees each checked answer (progress lines in the CLI). ``structured_output``: how
    the answer is held to the catalog's plan schema (:mod:`.constrained`; ``auto`` by provider).

    ``on_prefix(streamed)``: the answer is streamed, and each time a step's text is complete the plan so far
    is checked (:mod:`dagplan.dsl.stream`) and handed over as a :class:`Streamed`. ``memo``
    (``memo_get``/``memo_put``/``commit``): each attempt's model call is memoized there once complete (a
    resumed streamed run does not pay for it again).
    """
    from .constrained import catalog_schema, positioned, response_params
    from .guide import PER_CLAUSE, clauses, positions, request_values
    from .preflight import model_problems

    problems = list(model_problems({model: None}, completion_kwargs))
    if problems:  # no key, no litellm: said before any call, with the usage code
        raise RunError(problems)
    from .local import is_local

    small = is_local(model)
    if small and tools and "order" in guide:  # a small model calls some tool whatever it is asked: say so first
        from .guide import unrelated

        why = unrelated(task, tools)
        if why:
            raise PlanningFailed((error("no-tool-fits", why, hint="give the tools this request needs (--tools), "
                                        "or ask for what these tools do"),))  # fmt: skip
    per_clause = 1 if "narrow" in guide else PER_CLAUSE
    order = positions(task, tools or {}, per_clause=per_clause) if small and "order" in guide and tools else None
    given = request_values(task, words=True) if small and "values" in guide else None
    flow = small and "flow" in guide
    own = (
        [request_values(c, words=True) for c in clauses(task, tools)] if flow and given is not None and order else None
    )
    compact = bool(order) and "compact" in guide
    schema = catalog_schema(tools, inputs, state_references=not small, guide=order, values=given, flow=flow,
                            clause_values=own, implied=compact,
                            request=task if given is not None and "named" in guide else None)  # fmt: skip
    chain = len(order) if order and len(order) >= 2 else 0
    written_in = (lambda text: positioned(text, task, chain)) if compact else (lambda text: text)
    params = response_params(schema, model, structured_output)
    shown = (
        {name: spec for name, spec in (tools or {}).items() if name in {n for p in order for n in p}}
        if order
        else tools
    )
    steps = clauses(task, tools)
    said = task if not order or len(steps) < 2 else task + "\n\nDo these in order:\n" + "\n".join(
        f"{number}. {clause}" for number, clause in enumerate(steps, 1))  # fmt: skip
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task_prompt(said, shown, inputs)},
    ]
    usage = _Usage()
    attempts: list[PlanAttempt] = []
    for number in range(1, repair + 2):
        if budget:
            budget.check("planner")
        streaming = _Prefixes(tools, number, on_prefix, written_in) if on_prefix is not None else None
        record = await _ask(model, messages, params, completion_kwargs, number, memo, streaming)
        usage.add(record, budget)
        answer = written_in(record["message"].get("content") or "")
        checked = _check(answer, tools, number)
        attempts.append(PlanAttempt(answer, checked.diagnostics))
        if on_attempt:
            on_attempt(attempts[-1])
        if checked.ok and checked.plan is not None:
            if small and "solve" in guide:
                checked = _solved(checked, task, tools, number)
            found = usage.result(checked, tuple(attempts), model)
            from dataclasses import replace

            return replace(found, warnings=(*found.warnings, *request_warnings(task, checked.plan)))
        messages += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": REPAIR_PROMPT.format(problems=repair_text(checked.diagnostics))},
        ]
    failed = _failed(attempts)
    failed.usage = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                    "cost": usage.cost, "calls": usage.calls}  # fmt: skip
    raise failed


async def _ask(model: str, messages: list, params: Mapping[str, Any], completion_kwargs: Mapping[str, Any],
               number: int, memo: Any, prefixes: "_Prefixes | None") -> dict:  # fmt: skip
    """One attempt's model call: from the memo when it holds it, else asked (streamed to ``prefixes``) and
    memoized once complete."""
    from .conversation import memo_key, recall

    key = memo_key("planner", f"attempt-{number}", model, [messages, dict(params)])
    if memo is not None:
        hit, record = recall(memo, key)
        if hit:
            if prefixes is not None:
                await prefixes.whole(record["message"].get("content") or "")
            return record
    try:
        record = await complete(model, messages, params, completion_kwargs, "planner",
                                on_text=prefixes.feed if prefixes is not None else None)  # fmt: skip
    except BaseException:
        if prefixes is not None:
            await prefixes.stop()  # a cut stream: no check of it is handed over after this
        raise
    if prefixes is not None:
        await prefixes.whole(record["message"].get("content") or "")
    if memo is not None:
        memo.memo_put(key, record)
        await memo.commit()
    return record


@dataclass(frozen=True)
class Streamed:
    """A prefix of the model's answer that completes a step, checked."""

    checked: Any  # the dsl.check result of the prefix (closed where it stands)
    complete: int  # how many of its steps are whole (0 when it failed check: nothing after it is handed over)
    attempt: int  # the answer's number (1, then each repair)
    final: bool  # the whole answer (the stream ended)


class _Prefixes:
    """The model's answer as it streams: each prefix that completes a step, checked and handed over.

    Checking is off the event loop (a worker thread: the early steps and, in ``dagplan mcp``, other
    requests go on meanwhile), one check at a time; prefixes that complete while one is checked are
    coalesced into the newest (it holds every step the older ones held), so an answer costs a bounded
    number of checks however fast it streams."""

    def __init__(self, tools: Mapping[str, ToolSpec] | None, number: int, hand: Callable[[Streamed], None],
                 written_in: Callable[[str], str] = lambda text: text):  # fmt: skip
        from ...dsl.stream import StepStream

        self.tools, self.number, self.hand, self.written_in = tools, number, hand, written_in
        self.stream, self.stopped, self.done = StepStream(), False, False
        self._pending: Any = None  # the newest prefix not checked yet
        self._checking: asyncio.Task | None = None

    def feed(self, piece: str) -> None:
        found = self.stream.feed(piece)
        if not found or self.stopped:
            return
        self._pending = found[-1]
        if self._checking is None:
            self._checking = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._pending is not None and not self.stopped:
                prefix, self._pending = self._pending, None
                await self._offer(prefix)
        finally:
            self._checking = None

    async def stop(self) -> None:
        """The answer will not be whole: hand nothing more over, and let a check under way end."""
        self.stopped, self._pending = True, None
        if self._checking is not None:
            await asyncio.wait([self._checking])

    async def whole(self, text: str) -> None:
        """The complete answer (streamed, or from the memo): its steps are all complete."""
        if self.done:
            return
        self.done = True
        if not self.stream.text:  # from the memo: nothing was streamed
            self.stream.feed(text)
        self._pending = None  # the whole answer holds every step a pending prefix held
        if self._checking is not None:
            await asyncio.shield(self._checking)
        await self._offer(self.stream.end())

    async def _offer(self, prefix: Any) -> None:
        if self.stopped:
            return
        checked = await asyncio.to_thread(_check, self.written_in(prefix.text), self.tools, self.number)
        if self.stopped:
            return
        if not checked.ok or checked.plan is None:
            if not prefix.last_open:  # a complete step failed check: nothing after it starts early
                self.stopped = True
                self.hand(Streamed(checked, 0, self.number, prefix.final))
            return
        steps = len(checked.plan.steps)
        self.hand(Streamed(checked, steps - 1 if prefix.last_open else steps, self.number, prefix.final))


def plan(task: str, **kwargs: Any) -> PlanResult:
    """Sync twin of :func:`aplan`."""
    return asyncio.run(aplan(task, **kwargs))


# --- prompts --------------------------------------------------------------------------------


def task_prompt(task: str, tools: Mapping[str, ToolSpec] | None, inputs: Mapping[str, Any] | None = None) -> str:
    parts = [f"Task: {task.strip()}", "", "Tool catalog:", tool_catalog(tools)]
    if inputs:
        parts += [
            "",
            'Inputs the caller will provide (declare them under "inputs"):',
            json.dumps(dict(inputs), ensure_ascii=False, default=str),
        ]
    return "\n".join(parts)


def tool_catalog(tools: Mapping[str, ToolSpec] | None) -> str:
    """One entry per tool: name, description, parameters schema (compact JSON)."""
    if not tools:
        return "(no tools: use llm steps only)"
    lines = []
    for name in sorted(tools):
        spec = tools[name]
        description = " ".join((spec.description or "").split()) or "(no description)"
        parameters = json.dumps(spec.parameters, ensure_ascii=False, default=dict, separators=(",", ":"))
        lines.append(f"- {name}: {description}\n  parameters: {parameters}")
    return "\n".join(lines)


def repair_text(diagnostics: tuple[Diagnostic, ...]) -> str:
    """Errors first, the headline (first by position) leading; warnings are left out."""
    errors = sorted((d for d in diagnostics if d.severity == "error"), key=Diagnostic.sort_key)
    return "\n".join(d.format() for d in errors)


# --- checking -------------------------------------------------------------------------------


def _check(answer: str, tools: Mapping[str, ToolSpec] | None, number: int):
    from ...dsl import check

    return check(text=answer, name=f"plan-attempt-{number}", tools=tools)


def _solved(checked: Any, task: str, tools: Mapping[str, ToolSpec] | None, number: int) -> Any:
    """The checked plan with the solver step appended when the request asks a question (checked again; the
    plan as it was when the solver cannot be added)."""
    from .guide import solver_step

    document = json.loads(json.dumps(checked.plan.document, default=_plain))
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return checked  # another dialect: the model wrote its own plan, its own way
    step = solver_step(task, steps)
    if step is None:
        return checked
    document["steps"].append(step)
    document["result"] = step["output"]
    again = _check(json.dumps(document), tools, number)
    return again if again.ok and again.plan is not None else checked


def _plain(value: Any) -> Any:
    return dict(value) if hasattr(value, "keys") else list(value)


def canonical_yaml(result: Any) -> str:
    """The checked document as canonical YAML (``dagplan fmt``'s output)."""
    from ...dsl.fmt import format_document

    return format_document(result.document, refs=True, bound=True)  # checked: its arguments were given


def _failed(attempts: list[PlanAttempt]) -> PlanningFailed:
    last = attempts[-1].diagnostics
    n_errors = sum(d.severity == "error" for d in last)
    head = error(
        "planning-failed",
        f"no valid plan after {len(attempts)} attempt(s); the last one has {n_errors} error(s)",
        hint="raise --repair, try a stronger model, or narrow the task or the tool catalog",
    )
    return PlanningFailed((head, *last), tuple(attempts))


@dataclass
class _Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    calls: int = 0
    model: str = ""

    def add(self, record: dict, budget: Budget | None) -> None:
        usage = record.get("usage", {})
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        self.cost += record.get("cost", 0.0)
        self.calls += 1
        self.model = record.get("model") or self.model
        if budget:
            budget.charge(
                "planner", usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), record.get("cost", 0.0)
            )

    def result(self, checked: Any, attempts: tuple[PlanAttempt, ...], model: str) -> PlanResult:
        warnings = tuple(d for d in checked.diagnostics if d.severity == "warning")
        return PlanResult(
            checked.plan,
            canonical_yaml(checked),
            attempts,
            warnings,
            self.prompt_tokens,
            self.completion_tokens,
            self.cost,
            self.calls,
            self.model or model,
        )
