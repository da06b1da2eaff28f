"""The plan's graph: dependencies, a stable topological order and parallel groups.

Pure functions of a :class:`Plan`, shared by ``check``, ``preview`` and the
interpreter. A step depends on

* its explicit ``deps``,
* every step that may write a ``†state`` path it reads (prefix overlap either
  way: reading ``†state.a`` waits for a writer of ``†state.a.b`` and the other
  way round),
* every step its placeholders (``#E1``) name.

Writers are indexed by path and by every proper prefix of their path, so
finding the writers of a reference costs O(depth), not O(steps).
"""

from __future__ import annotations

import heapq
import re
from functools import lru_cache
from .record import record, field
from types import MappingProxyType
from collections.abc import Mapping
from typing import Any, Iterator

from .ir import AllOf, AnyOf, Placeholder, Plan, Ref, Step, Template

Writer = tuple[str, int]  # (step id, index of the output alternative)
PathKey = tuple  # (root,) + path


@record(frozen=True)
class Analysis:
    """A plan's dependencies, its stable order and its parallel groups."""

    deps: Mapping[str, tuple[str, ...]]
    order: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]
    writers: Mapping[PathKey, tuple[Writer, ...]]
    dependents: Mapping[str, tuple[str, ...]]
    # writers strictly below each path prefix: prefix -> ((step, alt), ...)
    below: Mapping[PathKey, tuple[Writer, ...]] = field(default_factory=lambda: MappingProxyType({}), repr=False)

    def position(self) -> dict[str, int]:
        return {s: i for i, s in enumerate(self.order)}


_DIGITS = re.compile(r"(\d+)")


@lru_cache(maxsize=1 << 17)
def natural_key(step_id: str) -> tuple:
    """Sort key that puts E2 before E10 (text and numbers alternate, so types always line up). A number
    is compared as (its length, its digits) without leading zeros: the order of integers, with no
    conversion, so a 5,000-digit id is no error (Python converts at most 4,300 digits)."""
    parts = _DIGITS.split(step_id)
    return tuple(_number(p) if i % 2 else p for i, p in enumerate(parts))


def _number(digits: str) -> tuple[int, str]:
    significant = digits.lstrip("0")
    return len(significant), significant


# --- what a step reads ------------------------------------------------------------------


_NODES = (Ref, AnyOf, AllOf, Placeholder)
_SCALARS = frozenset({str, int, float, bool, type(None)})
_CONTAINERS = frozenset({dict, MappingProxyType, tuple, list})


def iter_reads(value: Any) -> list[Ref | AnyOf | AllOf | Placeholder]:
    """Every expression and placeholder inside an argument tree or template, in document order."""
    out: list = []
    _collect(value, out)
    return out


def _collect(value: Any, out: list) -> None:
    # Exact type tests, not isinstance against typing ABCs: this runs for every value of every step.
    kind = type(value)
    if kind in _SCALARS:
        return
    if kind is Template:
        out.extend(p for p in value.parts if type(p) is not str)
    elif kind in _CONTAINERS:
        for v in value.values() if kind is dict or kind is MappingProxyType else value:
            if type(v) not in _SCALARS:
                _collect(v, out)
    elif isinstance(value, _NODES):
        out.append(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            _collect(v, out)


def step_reads(step: Step, guard: bool = True) -> list[Ref | AnyOf | AllOf | Placeholder]:
    """What a step reads; ``guard=False``: without its ``when:`` (which reads an unwritten value as null
    instead of being skipped)."""
    out = iter_reads(step.args)
    if step.llm is not None:
        _collect(step.llm.prompt, out)
        if step.llm.system is not None:
            _collect(step.llm.system, out)
    if step.for_each is not None:  # composition (dsl.compose): the list a fan-out reads, a gate's question
        _collect(step.for_each.over, out)
    if step.gate is not None:
        _collect(step.gate.question, out)
    if guard and step.guard is not None:  # what `when:` reads is a dependency like any argument
        from .condition import condition_refs

        out.extend(condition_refs(step.guard.condition))
    return out


def refs_of(node: Ref | AnyOf | AllOf) -> tuple[Ref, ...]:
    if isinstance(node, Ref):
        return (node,)
    return node.options if isinstance(node, AnyOf) else node.refs


def state_refs(step: Step) -> Iterator[Ref]:
    for node in step_reads(step):
        if not isinstance(node, Placeholder):
            for ref in refs_of(node):
                if ref.root == "state":
                    yield ref


def read_from(analysis: Analysis, step: Step) -> frozenset[str]:
    """The steps whose output ``step`` reads (its placeholders and state references; not its bare ``deps``):
    where a failure value would reach it from."""
    found: set[str] = set()
    for node in step_reads(step):
        if isinstance(node, Placeholder):
            found.add(node.step)
            continue
        for ref in refs_of(node):
            if ref.root == "state":
                found.update(writer for writer, _ in writers_of(analysis, ref))
    return frozenset(found)


# --- writers ----------------------------------------------------------------------------


def index_writers(plan: Plan) -> tuple[dict[PathKey, list[Writer]], dict[PathKey, list[Writer]]]:
    """(exact path -> writers, proper prefix -> writers below it) for every †state target."""
    exact: dict[PathKey, list[Writer]] = {}
    below: dict[PathKey, list[Writer]] = {}
    for step in plan.steps:
        if step.output is None:
            continue
        for alt, targets in enumerate(step.output.alternatives):
            for ref in targets:
                if ref.root != "state":
                    continue
                key = ("state",) + ref.path
                exact.setdefault(key, []).append((step.id, alt))
                for n in range(1, len(key)):
                    below.setdefault(key[:n], []).append((step.id, alt))
    return exact, below


def _overlapping(exact: Mapping, below: Mapping, ref: Ref) -> list[Writer]:
    key = (ref.root,) + ref.path
    found: list[Writer] = []
    for n in range(1, len(key) + 1):
        found.extend(exact.get(key[:n], ()))
    found.extend(below.get(key, ()))
    return found


def writers_of(analysis: Analysis, ref: Ref) -> tuple[Writer, ...]:
    """Every (step, alternative) whose output target overlaps ``ref``'s path."""
    return tuple(dict.fromkeys(_overlapping(analysis.writers, analysis.below, ref)))


# --- dependencies -----------------------------------------------------------------------


def all_reads(plan: Plan) -> list[list]:
    """``step_reads`` of every step, in step order: computed once per analysis."""
    return [step_reads(step) for step in plan.steps]


def dependencies(
    plan: Plan, exact: Mapping, below: Mapping, reads: list[list] | None = None
) -> dict[str, tuple[str, ...]]:
    """Each step's dependencies (explicit + data flow + placeholders), natural order.

    Unknown ids are left out (``validate`` reports them); a step reading what it
    writes itself depends on itself, which ``validate`` reports as a cycle.
    """
    known = plan.by_id
    deps: dict[str, tuple[str, ...]] = {}
    if reads is None:
        reads = all_reads(plan)
    writers: dict[tuple, list[str]] = {}  # path -> writer ids; a path is often read by several steps
    for step, step_nodes in zip(plan.steps, reads):
        found = {d for d in step.deps if d in known} if step.deps else set()
        for node in step_nodes:
            kind = type(node)
            if kind is Placeholder:
                if node.step in known:
                    found.add(node.step)
                continue
            for ref in (node,) if kind is Ref else refs_of(node):
                if ref.root == "state":
                    ids = writers.get(ref.path)
                    if ids is None:
                        ids = writers[ref.path] = [w for w, _ in _overlapping(exact, below, ref)]
                    found.update(ids)
        deps[step.id] = tuple(sorted(found, key=natural_key)) if len(found) > 1 else tuple(found)
    return deps


def early_steps(plan: Plan, tools: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The steps a streamed plan starts before it is whole (:func:`.ir.starts_early`, on steps that do too),
    in order: what ``preview`` shows, and the rule ``interpreter/engine/early.py`` follows."""
    from .ir import starts_early

    deps = analysis_of(plan).deps
    found: dict[str, None] = {}  # ordered
    for step in plan.steps:
        if starts_early(step, tools) and all(dep in found for dep in deps[step.id]):
            found[step.id] = None
    return tuple(found)


def analysis_of(plan: Plan) -> Analysis:
    """The plan's graph, computed once per plan and then carried by it (the IR knows nothing of the scheduler)."""
    found = vars(plan).get("_analysis")
    if found is None:
        found = vars(plan)["_analysis"] = analyze(plan)
    return found


def remember(plan: Plan, analysis: Analysis) -> None:
    """Give a plan the analysis already computed for it (``check`` computes it while validating)."""
    vars(plan)["_analysis"] = analysis


def analyze(plan: Plan) -> Analysis:
    """Graph facts of an (acyclic) plan; see the module docstring."""
    exact, below = index_writers(plan)
    deps = dependencies(plan, exact, below)
    dependents = _reverse(deps)
    order, groups = _toposort(deps, dependents)
    return Analysis(
        deps=MappingProxyType(deps),
        order=order,
        groups=groups,
        writers=MappingProxyType({k: tuple(v) for k, v in exact.items()}),
        dependents=MappingProxyType(dependents),
        below=MappingProxyType({k: tuple(v) for k, v in below.items()}),
    )


def _reverse(deps: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {s: [] for s in deps}
    for step_id, ds in deps.items():
        for d in ds:
            if d != step_id:
                out[d].append(step_id)
    return {s: tuple(sorted(v, key=natural_key)) if len(v) > 1 else tuple(v) for s, v in out.items()}


def _toposort(deps: Mapping[str, tuple[str, ...]], dependents: Mapping[str, tuple[str, ...]]):
    """Kahn's algorithm with a heap on natural ids: the same plan always gives the same order.

    Also assigns each step the group one after its deepest dependency. Steps on a
    cycle (which ``validate`` reports) are appended at the end rather than lost.
    """
    waiting = {s: len(ds) - (s in ds) for s, ds in deps.items()}  # deps hold each id once
    level = {s: 0 for s in deps}
    ready = [(natural_key(s), s) for s, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, step_id = heapq.heappop(ready)
        order.append(step_id)
        for child in dependents[step_id]:
            level[child] = max(level[child], level[step_id] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, (natural_key(child), child))
    if len(order) < len(deps):
        placed = set(order)
        order.extend(sorted((s for s in deps if s not in placed), key=natural_key))
    groups: list[list[str]] = []
    for step_id in order:
        while len(groups) <= level[step_id]:
            groups.append([])
        groups[level[step_id]].append(step_id)
    return tuple(order), tuple(tuple(sorted(g, key=natural_key)) for g in groups if g)
