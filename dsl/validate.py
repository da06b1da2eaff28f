"""Meaning checks on a parsed plan: a table of small rules, each yielding diagnostics.

Every rule sees the same :class:`Facts` (the plan, the tool catalog and the
graph, computed once) and yields :class:`Diagnostic` values; ``validate`` runs
them all and returns everything found, unsorted (the facade locates and sorts).
Rules that need an acyclic graph are skipped when there is a cycle, so one
mistake does not produce a cascade of confusing follow-ups.
"""

from __future__ import annotations

import re
from .record import record
from functools import cached_property
from types import MappingProxyType
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Iterator

from .errors import Diagnostic, Span, did_you_mean, error, warning
from .condition import atom, condition_rules
from .ir import AnyOf, BoolOp, Guard, Placeholder, Plan, Ref, Step, Template, ToolSpec, acts_as_known, format_path
from .schema import surely_valid_schema
from .refschema import MISSING, input_schema, ref_schema
from .validate_tools import acting_triggers, destructive_overrides, tool_arguments, tool_names
from .schedule import (
    Analysis,
    _overlapping,
    _toposort,
    _reverse,
    all_reads,
    dependencies,
    index_writers,
    iter_reads,
    natural_key,
    refs_of,
)

ID_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(-[A-Za-z0-9_]+)*$")
MAX_ID_LENGTH = 64


@record
class Facts:
    """What the rules share; everything derived is computed once, on first use."""

    plan: Plan
    tools: Mapping[str, ToolSpec] | None

    @cached_property
    def index(self):
        return index_writers(self.plan)

    @cached_property
    def reads(self) -> list[list]:
        return all_reads(self.plan)

    @cached_property
    def marked_texts(self) -> list[tuple[Step, list[tuple[tuple, str]]]]:
        """The steps whose literal texts hold ``$``, ``†`` or ``{``, with those texts and their paths: one walk
        for every rule that reads text (a 10,000-step plan: one pass, not one a rule)."""
        found = [(step, _step_texts(step, _marked)) for step in self.plan.steps]
        return [(step, texts) for step, texts in found if texts]

    @cached_property
    def deps(self) -> dict[str, tuple[str, ...]]:
        exact, below = self.index
        return dependencies(self.plan, exact, below, self.reads)

    @cached_property
    def cycles(self) -> list[list[str]]:
        if _is_topological(self.order[0], self.deps):
            return []  # the common case, without a strongly-connected-components pass
        return find_cycles(self.deps, self.plan)

    @cached_property
    def dependents(self) -> dict[str, tuple[str, ...]]:
        return _reverse(self.deps)

    @cached_property
    def order(self) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        return _toposort(self.deps, self.dependents)

    def writers(self, ref: Ref) -> list[tuple[str, int]]:
        exact, below = self.index
        return _overlapping(exact, below, ref)

    @cached_property
    def branches(self) -> dict[str, frozenset]:
        return branch_conditions(self)

    @cached_property
    def unused(self) -> set[str]:
        return _unused(self)

    @cached_property
    def result_reads(self) -> list:
        return list(iter_reads(self.plan.result))

    @cached_property
    def read_refs(self) -> tuple[list[Ref], list[Ref], list[Placeholder]]:
        """(†state refs, †input refs, placeholders) read by the steps and the result, in
        document order: the one walk the reference rules share."""
        state: list[Ref] = []
        inputs: list[Ref] = []
        placeholders: list[Placeholder] = []
        for nodes in (*self.reads, self.result_reads):
            for node in nodes:
                kind = type(node)
                if kind is Placeholder:
                    placeholders.append(node)
                    continue
                for ref in (node,) if kind is Ref else refs_of(node):
                    if ref.root == "state":
                        state.append(ref)
                    elif ref.root == "input":
                        inputs.append(ref)
        return state, inputs, placeholders


def _is_topological(order: tuple[str, ...], deps: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether every step comes after all of its dependencies (false on any cycle, self-loops included)."""
    position = {s: i for i, s in enumerate(order)}
    return all(position[d] < i for i, s in enumerate(order) for d in deps[s])


Rule = Callable[[Facts], Iterable[Diagnostic]]


def validate(plan: Plan, tools: Mapping[str, ToolSpec] | None = None) -> list[Diagnostic]:
    """Every problem of ``plan`` (errors and warnings), from every rule in :data:`RULES`."""
    return validate_and_analyze(plan, tools)[0]


def validate_and_analyze(
    plan: Plan, tools: Mapping[str, ToolSpec] | None = None
) -> tuple[list[Diagnostic], Analysis | None]:
    """``validate`` plus the plan's :class:`Analysis` (None when there is an error), sharing the work."""
    facts = Facts(plan, tools)
    found: list[Diagnostic] = []
    for rule in RULES:
        if rule in NEEDS_ACYCLIC and facts.cycles:
            continue
        found.extend(rule(facts))
    if any(d.severity == "error" for d in found):
        return found, None
    exact, below = facts.index
    order, groups = facts.order
    analysis = Analysis(
        deps=MappingProxyType(facts.deps),
        order=order,
        groups=groups,
        writers=MappingProxyType({k: tuple(v) for k, v in exact.items()}),
        dependents=MappingProxyType(facts.dependents),
        below=MappingProxyType({k: tuple(v) for k, v in below.items()}),
    )
    return found, analysis


def _at(step: Step, *more: str | int) -> Span:
    return step.span.at(*more)


# --- ids and names ----------------------------------------------------------------------


def duplicate_ids(facts: Facts) -> Iterator[Diagnostic]:
    first: dict[str, int] = {}
    for i, step in enumerate(facts.plan.steps):
        if step.id in first:
            yield error(
                "duplicate-id",
                f"step id '{step.id}' is already used by step {first[step.id] + 1}",
                _at(step, "id"),
                "give every step its own id",
            )
        else:
            first[step.id] = i


def unsafe_ids(facts: Facts) -> Iterator[Diagnostic]:
    for step in facts.plan.steps:
        if len(step.id) > MAX_ID_LENGTH:
            yield error("unsafe-id", f"step id is longer than {MAX_ID_LENGTH} characters", _at(step, "id"))
        elif not ID_PATTERN.match(step.id):
            yield error(
                "unsafe-id",
                f"step id {step.id!r} is not safe as a file name",
                _at(step, "id"),
                "ids are letters, digits and `_`, in parts joined by single `-` (no `/`, `\\`, `..` or spaces)",
            )


def unknown_steps(facts: Facts) -> Iterator[Diagnostic]:
    known = facts.plan.by_id
    for step in facts.plan.steps:
        for j, dep in enumerate(step.deps):
            if dep not in known:
                yield _unknown(dep, known, _at(step, "deps", j), "depends on")
    for node in facts.read_refs[2]:
        if node.step not in known:
            yield _unknown(node.step, known, node.span, "placeholder names")
        if node.n == -1:
            yield error(
                "syntax",
                f"#{node.step}.{node.view}= takes a length of at most 9 digits",
                node.span,
                f"e.g. #{node.step}.{node.view}=400",
            )


def _unknown(name: str, known: Iterable[str], span: Span, what: str) -> Diagnostic:
    return error("unknown-step", f"{what} unknown step '{name}'", span, did_you_mean(name, known))


def forward_deps(facts: Facts) -> Iterator[Diagnostic]:
    """Steps dialect: a dependency must be declared earlier (the planner's contract)."""
    if facts.plan.dialect != "steps":
        return
    seen: set[str] = set()
    for step in facts.plan.steps:
        for j, dep in enumerate(step.deps):
            if dep in facts.plan.by_id and dep not in seen:
                yield error(
                    "forward-dep",
                    f"step '{step.id}' depends on '{dep}', which comes later",
                    _at(step, "deps", j),
                    "in the steps form, deps must point to earlier steps",
                )
        seen.add(step.id)


# --- references ---------------------------------------------------------------------------


def bad_outputs(facts: Facts) -> Iterator[Diagnostic]:
    for step in facts.plan.steps:
        for ref in step.output.targets if step.output else ():
            if ref.root != "state" or not ref.path:
                yield error(
                    "bad-output",
                    f"output {ref} must be a path under †state, "
                    f"not {'†input' if ref.root == 'input' else 'the whole state'}",
                    ref.span,
                    "write for example †state.result",
                )


def unwritten_state(facts: Facts) -> Iterator[Diagnostic]:
    reads = facts.read_refs[0]
    initial = facts.plan.initial_state
    unwritten = {
        path
        for path in {ref.path for ref in reads}
        if not _is_written(facts.index, path) and not _provided(initial, path)
    }
    for ref in reads if unwritten else ():
        if ref.path in unwritten:
            yield error(
                "unwritten-state",
                f"{ref} is read but no step writes it and it is not in initial_state",
                ref.span,
                _writable_hint(facts, ref),
            )


def _is_written(index: tuple[Mapping, Mapping], path: tuple) -> bool:
    """Whether some output overlaps †state ``path`` (what ``Facts.writers`` finds, without listing them)."""
    exact, below = index
    key = ("state", *path)
    return key in exact or key in below or any(key[:n] in exact for n in range(1, len(key)))


def _provided(initial: Any, path: tuple) -> bool:
    """Whether ``initial_state`` holds ``path`` (or a non-container value on the way there)."""
    if not path:
        return bool(initial)
    node = initial
    for key in path:
        if isinstance(node, Mapping) and isinstance(key, str):
            if key not in node:
                return False
            node = node[key]
        elif isinstance(node, tuple) and isinstance(key, int):
            if key >= len(node):
                return False
            node = node[key]
        else:
            return True
    return True


def _writable_hint(facts: Facts, ref: Ref) -> str:
    """The path a step writes that the read most likely meant (``†state.isue.title`` -> ``†state.issue.title``:
    each written path put in place of as much of the read as it is long), else how to write it."""
    exact, _ = facts.index
    meant = {format_path((*key[1:], *ref.path[len(key) - 1 :])) for key in exact if 1 < len(key) <= len(ref.path) + 1}
    return did_you_mean(format_path(ref.path), sorted(meant), shown=lambda path: "\u2020state" + path) or (
        "write it with some step's `output:`, or give it a value in `initial_state`"
    )


def unknown_inputs(facts: Facts) -> Iterator[Diagnostic]:
    inputs = facts.plan.inputs
    if inputs is None:
        return
    for ref in facts.read_refs[1]:
        if input_schema(inputs, ref.path) is MISSING:
            yield error(
                "unknown-input",
                f"{ref} is not declared in `inputs`",
                ref.span,
                did_you_mean(str(ref.path[0]), inputs, _declared(inputs)) if ref.path else _declared(inputs),
            )


_A = {"string": "a string", "integer": "an integer", "number": "a number", "object": "an object",
      "boolean": "a boolean"}  # fmt: skip


def fan_outs_over_inputs(facts: Facts) -> Iterator[Diagnostic]:
    """A fan-out over an input whose schema says it is not a list (a string, a number, an object): the run
    would refuse it when it starts; said here, at the ``for_each``."""
    inputs = facts.plan.inputs
    if not inputs:
        return
    for step in facts.plan.steps:
        over = step.for_each.over if step.for_each is not None else None
        if not isinstance(over, Ref) or over.root != "input":
            continue
        schema = input_schema(inputs, over.path)
        kind = schema.get("type") if isinstance(schema, Mapping) else None
        kinds = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()
        if kinds and "array" not in kinds:
            yield error(
                "bad-for-each",
                f"step {step.id!r} fans out over {over}, which is "
                f"{' or '.join(_A.get(k, k) for k in sorted(kinds))} (its input schema): a fan-out needs a list",
                over.span or step.span,
                f"declare it as a list ({{type: array, items: {{type: {sorted(kinds)[0]}}}}}), or fan out over a list",
            )


def _declared(inputs: Any) -> str:
    """What an unknown input's hint lists: the inputs the plan declares, or how to declare one."""
    names = [str(name) for name in inputs] if isinstance(inputs, Mapping) else []
    if not names:
        return "the plan declares no inputs: declare it under `inputs:`"
    shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
    return f"the inputs declared: {shown} (or declare it under `inputs:`)"


_FOREIGN = re.compile(
    r"\{\{\s*\$?(input|state|item|index)((?:\.[A-Za-z_]\w*)*)\s*\}\}"
    r"|\$\{(input|state|item|index)((?:\.[A-Za-z_]\w*)*)\}"
)


def foreign_templates(facts: Facts) -> Iterator[Diagnostic]:
    """``{{ input.topic }}`` / ``${state.s}`` (Jinja, shell) stay literal text here: say how to write them."""
    for step, texts in facts.marked_texts:
        for path, text in texts:
            found = _FOREIGN.search(text) if _braces(text) else None
            if found:
                root = found.group(1) or found.group(3)
                rest = found.group(2) or found.group(4)
                yield warning(
                    "foreign-template",
                    f"step '{step.id}': {found.group(0)!r} is not a reference here and stays as text",
                    _at(step, *path),
                    f"write \u2020{root}{rest} (or ${root}{rest})",
                )


_ROOTLIKE = re.compile(r"(?<![\\\w])[$\u2020]([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*)+)")
_ROOTS = ("input", "state", "item", "index")


def misspelt_references(facts: Facts) -> Iterator[Diagnostic]:
    """``$stat.kind``, ``†imput.city``: a reference whose root is misspelt is text, silently (a model writes
    it; a person does too): said, with the reference it was probably meant to be."""
    for step, texts in facts.marked_texts:
        for path, text in texts:
            for found in _ROOTLIKE.finditer(text) if _sigils(text) else ():
                root = found.group(1)
                meant = did_you_mean(root, _ROOTS, None, cutoff=0.7) if root not in _ROOTS else None
                if meant is None:
                    continue
                close = meant.split("'")[1]
                yield warning(
                    "misspelt-reference",
                    f"step '{step.id}': {found.group(0)!r} is text, not a reference ({root!r} is no root)",
                    _at(step, *path),
                    f"did you mean \u2020{close}{found.group(2)}?",
                )


def _marked(text: str) -> bool:
    """``$``, ``†`` or ``{``: what the text rules (misspelt references, foreign templates) look for."""
    return "$" in text or "\u2020" in text or "{" in text


def _step_texts(step: Step, maybe: Callable[[str], bool]) -> list[tuple[tuple, str]]:
    """The literal texts of a step's arguments and prompt, each with its path; none (without building any
    path: the common case) when no text could hold what ``maybe`` looks for."""
    if not _any_text(step.args, maybe) and (step.llm is None or not _any_text(step.llm.prompt, maybe)):
        return []
    texts = [(("args", *p), t) for p, t in _strings(step.args, ())]
    if step.llm is not None:
        texts += [(("llm",), t) for _, t in _strings(step.llm.prompt, ())]
    return texts


def _sigils(text: str) -> bool:
    """``$`` or ``†``: what a misspelt reference needs."""
    return "$" in text or "\u2020" in text


def _braces(text: str) -> bool:
    """``{{`` or ``${``: what a foreign template needs."""
    return "{" in text and ("{{" in text or "${" in text)


def _any_text(value: Any, maybe: Callable[[str], bool]) -> bool:
    """Whether some text inside ``value`` passes ``maybe`` (a fast test on the raw IR)."""
    kind = type(value)
    if kind is str:
        return maybe(value)
    if kind is Template:
        return any(type(p) is str and maybe(p) for p in value.parts)
    if isinstance(value, Mapping):
        return any(type(v) is not int and _any_text(v, maybe) for v in value.values())
    if kind is tuple or kind is list:
        return any(_any_text(v, maybe) for v in value)
    return False


def length_keys(facts: Facts) -> Iterator[Diagnostic]:
    """``†state.summary.length`` where the summary is text or a list (a model's text answer, a schema's
    string or array): a key that is not there, so the read is never written; the length is ``len(...)``."""
    for ref in facts.read_refs[0] + facts.read_refs[1]:
        if not ref.path or ref.path[-1] not in ("length", "size", "count") or len(ref.path) < 2:
            continue
        parent = Ref(ref.root, ref.path[:-1], ref.span)
        kind = _known_kind(facts, parent)
        if kind in ("string", "array"):
            yield warning(
                "length-key",
                f"{ref} reads a key {ref.path[-1]!r} of {parent}, which is {'text' if kind == 'string' else 'a list'}: "
                "it has no keys, so the read is never written",
                ref.span,
                f"its length is len({parent}), in a `when:` condition (`when: len({parent}) > 0`)",
            )


def _known_kind(facts: Facts, ref: Ref) -> str | None:
    """What a reference holds when the plan says it: "string" (a model's text answer, a schema's string),
    "array", or None when unknown."""
    schema = ref_schema(facts.plan, ref)
    if schema is None and ref.root == "state":
        for writer, _ in facts.writers(ref):
            step = facts.plan.by_id[writer]
            written = step.output.alternatives[0][0].path if step.output is not None else None
            if step.llm is not None and written == ref.path and step.for_each is None:
                return "string" if step.llm.output_schema is None else step.llm.output_schema.get("type")
            tool = (facts.tools or {}).get(step.tool or "")
            if tool is not None and tool.output_schema and written == ref.path and step.for_each is None:
                schema = tool.output_schema
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return kind if isinstance(kind, str) else None


def _strings(value: Any, path: tuple) -> Iterator[tuple[tuple, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Template):
        yield path, "".join(p for p in value.parts if isinstance(p, str))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, (*path, i))


def input_schemas(facts: Facts) -> Iterator[Diagnostic]:
    """Each input's schema must itself be valid JSON Schema (else `run` could not check the input)."""
    inputs = facts.plan.inputs
    if not inputs:
        return
    meta = None
    for name, schema in inputs.items():
        plain = _plain(schema)
        if not isinstance(plain, (dict, bool)) or surely_valid_schema(plain):
            continue  # the plan schema reports a non-object; most input schemas are plainly valid
        if meta is None:
            from jsonschema import Draft202012Validator

            meta = Draft202012Validator(Draft202012Validator.META_SCHEMA)
        for err in meta.iter_errors(plain):
            path = ("inputs", name, *err.absolute_path)
            yield error(
                "bad-schema",
                f"the schema of input {name!r} is not valid JSON Schema: {err.message}",
                Span(facts.plan.source, path),
                "JSON Schema types are string, number, integer, boolean, array, object and null",
            )
            break  # one per input: the first says enough


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def conditions(facts: Facts) -> Iterator[Diagnostic]:
    """``when:`` conditions: unreadable literals, comparisons the input schemas rule out, constants."""
    for step in facts.plan.steps:
        if step.guard is not None:
            yield from condition_rules(step.guard, facts.plan.inputs, step.id)


def gate_choices(facts: Facts) -> Iterator[Diagnostic]:
    """A ``when:`` that compares a gate's decision with a value the gate cannot answer (``"aprove"`` for
    ``choices: [approve, reject]``) never holds, or always does: a warning with a did-you-mean, an error when
    no choice is close. The run would complete and the step guarded by it would silently never act."""
    from .condition import children
    from .ir import Compare, Const

    by_id = facts.plan.by_id
    for step in facts.plan.steps:
        if step.guard is None:
            continue
        todo = [step.guard.condition]
        while todo:
            node = todo.pop()
            todo.extend(children(node))
            if not isinstance(node, Compare) or node.op not in ("==", "!="):
                continue
            for ref, const in ((node.left, node.right), (node.right, node.left)):
                if not isinstance(ref, Ref) or not isinstance(const, Const) or not isinstance(const.value, str):
                    continue
                for writer, alternative in facts.writers(ref) if ref.root == "state" else ():
                    gate = by_id[writer].gate if writer in by_id else None
                    if gate is None or not gate.choices or alternative != 0 or const.value in gate.choices:
                        continue
                    choices = ", ".join(gate.choices)
                    close = did_you_mean(const.value, gate.choices)
                    where = const.span if const.span.path else step.guard.span
                    message = f"step {step.id}: gate {writer} answers one of {choices}, never {const.value!r}"
                    if close:
                        yield warning("misspelt-choice", message, where, close)
                    else:
                        yield error("unknown-choice", message, where, f"compare with one of {choices}")


# --- graph ----------------------------------------------------------------------------------


def cycles(facts: Facts) -> Iterator[Diagnostic]:
    for cycle in facts.cycles:
        first = facts.plan.by_id[cycle[0]]
        own = _reads_own_output(facts, first) if len(cycle) == 1 else None
        if own is not None:  # the common shape: "improve †state.x" written back to †state.x
            others = sorted({w for w, _ in facts.writers(own) if w != first.id})
            also = f"; {', '.join(repr(o) for o in others)} writes it too" if others else ""
            yield error(
                "cycle",
                f"step '{first.id}' reads {own}, which it writes itself{also}",
                own.span or _at(first, "id"),
                "a step's output is a new value: write it to a path of its own (such as "
                f"{own}_2) and read that after it",
            )
            continue
        text = " -> ".join(cycle + [cycle[0]])
        yield error(
            "cycle",
            f"dependency cycle: {text}" if len(cycle) > 1 else f"step '{cycle[0]}' depends on itself",
            _at(first, "id"),
            "each arrow means the next step needs the previous one (deps, a †state path it reads, or a placeholder)",
        )


def _reads_own_output(facts: Facts, step: Step) -> Ref | None:
    """The first †state path ``step`` reads that it also writes (its own output), if any."""
    index = facts.plan.steps.index(step)
    for node in facts.reads[index]:
        if type(node) is Placeholder:
            continue
        for ref in (node,) if type(node) is Ref else refs_of(node):
            if ref.root == "state" and any(w == step.id for w, _ in facts.writers(ref)):
                return ref
    return None


def find_cycles(deps: Mapping[str, tuple[str, ...]], plan: Plan) -> list[list[str]]:
    """One cycle per strongly connected component (iterative Tarjan), in flow order."""
    position = {s.id: i for i, s in enumerate(plan.steps)}
    found = []
    for component in _strong_components(deps):
        start = min(component, key=position.__getitem__)
        if len(component) == 1 and start not in deps[start]:
            continue
        found.append(_cycle_through(start, set(component), deps))
    return sorted(found, key=lambda c: position[c[0]])


def _strong_components(deps: Mapping[str, tuple[str, ...]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in deps:
        if root in index:
            continue
        work = [(root, iter(deps[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(deps[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
    return out


def _cycle_through(start: str, members: set[str], deps: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The shortest cycle through ``start`` inside its component, written writer-first."""
    parent: dict[str, str] = {start: start}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for dep in deps[node]:
                if dep == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    # path is node, ..., start along "depends on": node feeds ... feeds start, and start feeds node
                    return [start] + path[:-1]
                if dep in members and dep not in parent:
                    parent[dep] = node
                    nxt.append(dep)
        frontier = nxt
    return [start]


# --- writers ---------------------------------------------------------------------------------


def conflicting_writers(facts: Facts) -> Iterator[Diagnostic]:
    """Two steps writing one path (or one inside the other's) that are not exclusive branches: one diagnostic a
    path, naming every writer (seven steps writing one path are one error, not 21 pairs)."""
    exact, _ = facts.index
    conditions = facts.branches
    reported: set[tuple[str, str]] = set()
    found: dict[tuple, list[tuple[str, str]]] = {}
    for key, writers in exact.items():
        if len(writers) == 1 and not any(key[:n] in exact for n in range(1, len(key))):
            continue  # one writer, none above it: the common case
        candidates = [w for n in range(1, len(key) + 1) for w in exact.get(key[:n], ())]
        for later, _ in writers:
            for other, _ in candidates:
                pair = tuple(sorted((later, other), key=natural_key))
                if other == later or pair in reported or _exclusive(conditions, later, other):
                    continue
                reported.add(pair)
                found.setdefault(key, []).append(pair)
    for key, pairs in found.items():
        yield _conflict(facts.plan, key, pairs)


def _conflict(plan: Plan, key: tuple, pairs: list[tuple[str, str]]) -> Diagnostic:
    steps = sorted({s for pair in pairs for s in pair}, key=lambda s: plan.steps.index(plan.by_id[s]))
    hint = ("give each step its own output path, or make them exclusive "
            "(downstream of different alternatives of one `||` output)")  # fmt: skip
    if len(steps) == 2:
        message = f"†state{format_path(key[1:])} is written by both '{steps[0]}' and '{steps[1]}'"
    else:
        named = ", ".join(f"'{s}'" for s in steps)
        message = f"†state{format_path(key[1:])} is written by {len(steps)} steps that are not exclusive: {named}"
    return error("conflicting-writers", message, _at(plan.by_id[steps[1]], "output"), hint)


Condition = frozenset  # of (branching step id, alternative index)


def branch_conditions(facts: Facts) -> dict[str, Condition]:
    """For each step, the branch alternatives it runs only under.

    A step reading a path that only alternative *i* of a branching step writes
    runs only if that alternative was taken; conditions flow to dependents. A
    path written under several conditions (a join) is conditioned only on what
    all of its writers share.
    """
    plan = facts.plan
    if not any((s.output is not None and s.output.branching) or s.guard is not None for s in plan.steps):
        return {}  # nothing branches: no two writers can be exclusive
    cond: dict[str, Condition] = {}
    reads = {s.id: nodes for s, nodes in zip(plan.steps, facts.reads)}
    for step_id in facts.order[0]:
        step = plan.by_id[step_id]
        acc: set = set(guard_conditions(step.guard)) if step.guard is not None else set()
        if step.trigger != "all_succeeded":  # it runs whatever its dependencies did: only its own `when:`
            cond[step_id] = frozenset(acc)
            continue
        for dep in step.deps:
            acc |= cond.get(dep, frozenset())
        for node in reads[step_id]:
            if isinstance(node, Placeholder):
                acc |= cond.get(node.step, frozenset())
            elif isinstance(node, AnyOf):
                if not node.has_default:  # with a default the read always has a value
                    acc |= _shared(_ref_condition(facts, cond, r, step_id) for r in node.options)
            else:
                for ref in refs_of(node):
                    acc |= _ref_condition(facts, cond, ref, step_id)
        cond[step_id] = frozenset(acc)
    return cond


def guard_conditions(guard: Guard) -> Iterator[tuple[tuple[str, str], int]]:
    """A guarded step runs only when each conjunct of its ``when:`` holds: one (atom, polarity) each.

    ``x == "a"`` and ``x != "a"`` (or ``C`` and ``not C``) give one atom with two polarities,
    so steps guarded by them exclude each other as alternatives of one branch do."""
    node = guard.condition
    parts = node.values if isinstance(node, BoolOp) and node.op == "and" else (node,)
    for part in parts:
        key, polarity = atom(part)
        yield ("when", key), polarity


def _ref_condition(facts: Facts, cond: Mapping, ref: Ref, reader: str) -> Condition:
    if ref.root != "state":
        return frozenset()
    options = []
    for writer, alt in facts.writers(ref):
        if writer == reader:
            continue
        own = cond.get(writer, frozenset())
        step = facts.plan.by_id[writer]
        options.append(own | {(writer, alt)} if step.output is not None and step.output.branching else own)
    return _shared(options)


def _shared(conditions: Iterable[Condition]) -> Condition:
    conditions = list(conditions)
    return frozenset.intersection(*conditions) if conditions else frozenset()


def _exclusive(cond: Mapping[str, Condition], a: str, b: str) -> bool:
    taken = dict(cond.get(a, ()))
    return any(s in taken and taken[s] != alt for s, alt in cond.get(b, ()))


def maybe_unset(facts: Facts) -> Iterator[Diagnostic]:
    """A read that some path leaves unset skips its step, silently at run time: say so where the reader did
    not choose that path itself (its `when:`, a branch alternative it reads, its `deps:`), once per read, at
    the first step of a cascade (a reader of a step skipped with it is not reported again)."""
    cond = facts.branches
    if not cond:
        return
    plan = facts.plan
    explicit = {s.id: _chosen(facts, cond, s, nodes) for s, nodes in zip(plan.steps, facts.reads)}
    for step, nodes in zip(plan.steps, facts.reads):
        if step.trigger != "all_succeeded":
            continue
        for node in nodes:
            if isinstance(node, (AnyOf, Placeholder)) and node.has_default:
                continue
            writers = (
                [node.step]
                if isinstance(node, Placeholder)
                else [w for r in refs_of(node) if r.root == "state" for w, _ in facts.writers(r) if w != step.id]
            )
            if not writers:
                continue
            unset = _shared(cond.get(w, frozenset()) for w in writers) - explicit[step.id]
            chosen = [w for w in writers if unset & explicit.get(w, frozenset())]
            if chosen:
                yield _maybe_unset(plan, step, node, chosen[0], sorted(unset & explicit[chosen[0]], key=str)[0])


def _chosen(facts: Facts, cond: Mapping[str, Condition], step: Step, nodes: list) -> Condition:
    """The conditions a step chose itself: its `when:`, the branch alternatives it reads, its `deps:`'s."""
    acc: set = set(guard_conditions(step.guard)) if step.guard is not None else set()
    for dep in step.deps:
        acc |= cond.get(dep, frozenset())
    for node in nodes:
        for ref in () if isinstance(node, Placeholder) else refs_of(node):
            for writer, alt in facts.writers(ref) if ref.root == "state" else ():
                output = facts.plan.by_id[writer].output
                if writer != step.id and output is not None and output.branching:
                    acc.add((writer, alt))
    return frozenset(acc)


def _maybe_unset(plan: Plan, step: Step, node: Any, writer: str, condition: tuple) -> Diagnostic:
    read = f"#{node.step}" if isinstance(node, Placeholder) else str(node)
    where, alt = condition  # (step id, alternative), or (("when", atom), polarity)
    if isinstance(where, tuple):
        when = f"the `when:` of '{writer}' holds"
    else:
        output = plan.by_id[where].output
        taken = " && ".join(map(str, output.alternatives[alt])) if output is not None else f"alternative {alt}"
        when = f"'{where}' writes {taken}"
    default = f'{node} || "none"'
    return warning(
        "maybe-unset",
        f"step '{step.id}' reads {read}, which '{writer}' gives only when {when}; otherwise '{step.id}' is skipped",
        node.span if node.span.path else _at(step, "id"),
        f"give the read a default (`{default}`), or `trigger: all_done` to run '{step.id}' anyway (the value then "
        "reads as null); reading it on purpose only on that path? read the branch's own output, or add `when:`",
    )


# --- declared groups, usefulness ----------------------------------------------------------------


def parallel_groups(facts: Facts) -> Iterator[Diagnostic]:
    declared = facts.plan.declared_groups
    computed = facts.order[1]
    if declared is None:
        return
    if tuple(tuple(sorted(g, key=natural_key)) for g in declared) != computed:
        yield warning(
            "parallel-groups-mismatch",
            f"parallel_groups {_show(declared)} differ from the computed groups {_show(computed)}",
            facts.plan.span.at("parallel_groups"),
            "the computed groups are used; each step runs in the first group after all of its dependencies",
        )


def _show(groups: Iterable[Iterable[str]]) -> str:
    return "[" + ", ".join("[" + ", ".join(g) + "]" for g in groups) + "]"


def unused_outputs(facts: Facts) -> Iterator[Diagnostic]:
    """An output nobody reads, unless the step acts on the world (its effect is the point: a payment's
    receipt may go unread)."""
    for step in facts.plan.steps:
        if step.id in facts.unused and not _acts(step, facts):
            yield warning(
                "unused-output",
                f"nothing reads the output of step '{step.id}' ({step.output})",
                _at(step, "output"),
                "read it in a later step or in `result`, or drop the `output:`",
            )


def _unused(facts: Facts) -> set[str]:
    """Steps with an output that no step, placeholder or result reads."""
    plan = facts.plan
    read_exact, read_below, by_placeholder = _read_index(facts)
    default_result = facts.order[0][-1] if plan.result is None and plan.steps else None
    return {
        step.id
        for step in plan.steps
        if step.output is not None
        and step.id != default_result
        and step.id not in by_placeholder
        and not any(_is_read(r.path, read_exact, read_below) for alt in step.output.alternatives for r in alt)
    }


def _read_index(facts: Facts) -> tuple[set, set, set]:
    """(†state paths read, their proper prefixes, steps named by placeholders)."""
    state, _, placeholders = facts.read_refs
    exact = {ref.path for ref in state}
    below = {path[:n] for path in exact for n in range(len(path))}
    return exact, below, {p.step for p in placeholders}


def _is_read(path: tuple, exact: set, below: set) -> bool:
    """Whether a read overlaps ``path``: the path itself, something below it, or a prefix of it."""
    return path in exact or path in below or any(path[:n] in exact for n in range(len(path)))


def dead_steps(facts: Facts) -> Iterator[Diagnostic]:
    plan = facts.plan
    if plan.result is None:
        return
    live: set[str] = set()
    todo = []
    for node in facts.result_reads:
        if isinstance(node, Placeholder):
            todo.append(node.step)
        else:
            todo.extend(w for r in refs_of(node) for w, _ in facts.writers(r))
    while todo:
        step_id = todo.pop()
        if step_id in live or step_id not in facts.deps:
            continue
        live.add(step_id)
        todo.extend(facts.deps[step_id])
    for step in plan.steps:
        if step.id not in live and not _acts(step, facts) and step.id not in facts.unused:
            yield warning(
                "dead-step",
                f"step '{step.id}' cannot affect the result",
                _at(step, "id"),
                "mark it `purity: side_effect` if it runs for its effect, or remove it",
            )


def _acts(step: Step, facts: Facts) -> bool:
    """Whether the step acts on the world by the one rule (:func:`.ir.can_act`) where the tools are known;
    without them, where the plan itself says so."""
    return acts_as_known(step, facts.tools) is True


RULES: tuple[Rule, ...] = (
    duplicate_ids,
    unsafe_ids,
    unknown_steps,
    forward_deps,
    bad_outputs,
    unwritten_state,
    unknown_inputs,
    fan_outs_over_inputs,
    input_schemas,
    conditions,
    gate_choices,
    foreign_templates,
    misspelt_references,
    length_keys,
    cycles,
    conflicting_writers,
    maybe_unset,
    tool_names,
    tool_arguments,
    destructive_overrides,
    acting_triggers,
    parallel_groups,
    unused_outputs,
    dead_steps,
)
NEEDS_ACYCLIC = {conflicting_writers, maybe_unset, parallel_groups, unused_outputs, dead_steps}
