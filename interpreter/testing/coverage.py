"""Branch coverage of a plan: what it could do (:func:`points`) and what a run did (:func:`observe`).

A *point* is one thing a run can do or not do: a step running, one alternative of a
branching output (its ``||`` paths and its ``catch:`` paths), one choice of a gate, a loop
ending by its ``until`` condition or by its bound, a fan-out over zero items or some, a
``when:`` condition true or false. Points of sub-plans and loop bodies carry the
parent's prefix (``sub.fetch``, ``poll.check``), as their events do once the indexes
are dropped (``poll[2].check``). What a run did is read from its events, the same ones
the journal keeps, so the coverage of a test run and of a recorded run are one thing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ...dsl.ir import AllOf, AnyOf, Placeholder, Plan, Ref, Step, walk
from ..core.calls import step_names
from ..core.vocabulary import Cause, Event, EventType


@dataclass(frozen=True)
class Point:
    key: str  # stable: "branch:weather:1"
    step: str  # the step's full id (sub-plans prefixed)
    kind: str  # step | branch | gate | loop | fanout | when
    choice: Any  # the alternative's index, the gate's choice, "condition"/"bound", "zero"/"some", True/False
    label: str  # what a person reads: "weather -> †state.notSunny"
    guard: Any = field(default=None, compare=False, repr=False)  # a `when` point's condition

    @property
    def decision(self) -> str:
        """The decision this point is one outcome of (points with the same decision exclude each other)."""
        return f"{self.kind}:{self.step}"


def points(plan: Plan, possible_only: bool = False, limit: int = 4096) -> list[Point]:
    """Everything a run of ``plan`` can do, in plan order; ``possible_only``: only what some run can do
    (:func:`paths`: a step no path reaches, a decision's outcome no input gives, a fan-out over a literal
    list going over zero items are no gaps), unless the paths are more than ``limit``."""
    out: list[Point] = []
    for sid, step in walk(plan):
        out.append(Point(f"step:{sid}", sid, "step", None, f"{sid} runs"))
        out += decision_points(sid, step)
    if not possible_only:
        return out
    walker = _Paths(plan, _analysis(plan), limit)
    walker.visit(0, frozenset(), frozenset(), ())
    return out if walker.truncated else [p for p in out if p.key in walker.reached]


def _analysis(plan: Plan) -> Any:
    from ...dsl.schedule import analysis_of

    return analysis_of(plan)


def decision_points(sid: str, step: Step) -> list[Point]:
    """The outcomes of the decisions a step makes (none for a step that always does the same)."""
    out = []
    if step.guard is not None:
        text = step.guard.text
        out += [
            Point(f"when:{sid}:true", sid, "when", True, f"{sid} when {text}: true", step.guard),
            Point(f"when:{sid}:false", sid, "when", False, f"{sid} when {text}: false", step.guard),
        ]
    if step.output is not None and step.output.branching:
        for index, alternative in enumerate(step.output.alternatives):
            paths = " && ".join(map(str, alternative))
            routed = index >= len(step.output.own)
            what = f"catch -> {paths}" if routed else f"-> {paths}"
            out.append(Point(f"branch:{sid}:{index}", sid, "branch", index, f"{sid} {what}"))
    if step.gate is not None and step.gate.choices:
        out += [Point(f"gate:{sid}:{c}", sid, "gate", c, f"{sid} answered {c}") for c in step.gate.choices]
    if step.loop is not None and step.loop.until is not None:
        out += [
            Point(f"loop:{sid}:condition", sid, "loop", "condition", f"{sid} ends by its until condition"),
            Point(f"loop:{sid}:bound", sid, "loop", "bound", f"{sid} reaches max_iterations"),
        ]
    if step.for_each is not None:
        out += [
            Point(f"fanout:{sid}:zero", sid, "fanout", "zero", f"{sid} over zero items"),
            Point(f"fanout:{sid}:some", sid, "fanout", "some", f"{sid} over some items"),
        ]
    return out


def observe(plan: Plan, events: Iterable[Event]) -> set[str]:
    """The keys of the points a run's events show it did."""
    steps = dict(walk(plan))
    seen: set[str] = set()
    fanned: set[str] = set()  # fan-outs with at least one item
    for event in events:
        if event.step is None or not isinstance(event.type, EventType):
            continue
        names = step_names(event.step)
        sid = names[1] if len(names) > 1 else names[0]  # the id without indexes
        step = steps.get(sid)
        if step is None:
            continue
        child = sid != event.step and event.step.endswith("]")  # a fan-out item or a loop iteration
        if child and step.for_each is not None:
            fanned.add(sid)
        _seen(seen, event, sid, step, child, fanned)
    return seen


def _seen(seen: set[str], event: Event, sid: str, step: Step, child: bool, fanned: set[str]) -> None:
    data: Mapping[str, Any] = event.data
    kind = event.type
    if kind is EventType.GATE_ANSWERED:  # a refusal fails the gate: the answer is still a choice made
        if step.gate is not None and step.gate.choices and not child:
            seen.add(f"gate:{sid}:{data.get('value')}")
        return
    if kind is EventType.STEP_SKIPPED:
        if step.guard is not None and data.get("cause") == Cause.CONDITION:
            seen.add(f"when:{sid}:false")
        return
    if kind not in (EventType.STEP_STARTED, EventType.STEP_COMPLETED, EventType.STEP_FAILED):
        return
    seen.add(f"step:{sid}")
    if step.guard is not None:
        seen.add(f"when:{sid}:true")
    if kind is EventType.STEP_STARTED:
        return
    branching = step.output is not None and step.output.branching
    if branching and "alternative" in data and (kind is EventType.STEP_COMPLETED or data.get("handled")):
        if not (child and kind is EventType.STEP_COMPLETED):  # an item's success is the step's first path
            seen.add(f"branch:{sid}:{data['alternative']}")
    if child:
        return
    if kind is EventType.STEP_COMPLETED:
        if step.gate is not None and step.gate.choices and "output" in data:
            seen.add(f"gate:{sid}:{data['output']}")
        if step.loop is not None and step.loop.until is not None:
            seen.add(f"loop:{sid}:condition")
        if step.for_each is not None:
            seen.add(f"fanout:{sid}:{'some' if sid in fanned else 'zero'}")
    elif kind is EventType.STEP_FAILED:
        if step.loop is not None and (data.get("error") or {}).get("cause") == Cause.MAX_ITERATIONS:
            seen.add(f"loop:{sid}:bound")


@dataclass
class PlanCoverage:
    """The points of one plan and those some case did."""

    plan: str
    points: list[Point]
    covered: set[str]

    @property
    def percent(self) -> float:
        return 100.0 * len(self.hit) / len(self.points) if self.points else 100.0

    @property
    def hit(self) -> list[Point]:
        return [p for p in self.points if p.key in self.covered]

    @property
    def missed(self) -> list[Point]:
        return [p for p in self.points if p.key not in self.covered]

    def to_json(self) -> dict[str, Any]:
        kinds: dict[str, dict[str, int]] = {}
        for p in self.points:
            entry = kinds.setdefault(p.kind, {"total": 0, "covered": 0})
            entry["total"] += 1
            entry["covered"] += p.key in self.covered
        return {
            "plan": self.plan,
            "percent": round(self.percent, 1),
            "covered": len(self.hit),
            "total": len(self.points),
            "kinds": kinds,
            "missed": [{"key": p.key, "step": p.step, "label": p.label} for p in self.missed],
        }


# --- paths --------------------------------------------------------------------------------


def combinations(plan: Plan, limit: int) -> tuple[list[tuple[Point, ...]], bool]:
    """The combinations of decision outcomes some run can take (at most ``limit``), and whether there were
    more: :func:`paths` without the inputs that reach them."""
    found, truncated = paths(plan, limit)
    return [combo for combo, _ in found], truncated


def paths(plan: Plan, limit: int) -> tuple[list[tuple[tuple[Point, ...], dict[str, Any]]], bool]:
    """Each way a run of ``plan`` can go: the outcomes of the decisions it reaches, in order (a decision of
    a step the path skips is not part of it), with input values that make its ``when:`` conditions come
    out that way (``{}`` when none matter). A combination no input can reach is not one: a step runs when
    what it reads was written on the path (its trigger rule and defaults as the engine applies them), and
    the path's conditions must hold together for some values of what they read."""
    walker = _Paths(plan, _analysis(plan), limit)
    walker.visit(0, frozenset(), frozenset(), ())
    return walker.found, walker.truncated


class _Paths:
    """The depth-first walk of :func:`paths`: steps in the schedule's order, a branch per outcome."""

    def __init__(self, plan: Plan, analysis: Any, limit: int):
        self.plan, self.analysis, self.limit = plan, analysis, limit
        self.order = list(analysis.order)
        self.children: dict[str, list[tuple[str, Step]]] = {}
        for full, step in walk(plan):
            if "." in full:
                self.children.setdefault(full.split(".", 1)[0], []).append((full, step))
        self.found: list[tuple[tuple[Point, ...], dict[str, Any]]] = []
        self.reached: set[str] = set()  # the keys of the points some path found takes
        self.truncated = False

    def visit(self, index: int, ran: frozenset, wrote: frozenset, combo: tuple[Point, ...]) -> None:
        if len(self.found) >= self.limit:
            self.truncated = True
            return
        if index == len(self.order):
            witness = _witness(combo)
            if witness is not None:
                self.found.append((combo, witness))
                self.reached.update(p.key for p in combo)
                self.reached.update(f"step:{sid}" for sid in ran)
                self.reached.update(f"step:{full}" for sid in ran for full, _ in self.children.get(sid, []))
            return
        sid = self.order[index]
        step = self.plan.by_id[sid]
        if not self._runs(step, ran, wrote):
            self.visit(index + 1, ran, wrote, combo)
            return
        for outcome, alternative in self._outcomes(sid, step):
            if outcome and outcome[-1].kind == "when" and outcome[-1].choice is False:
                if _witness(combo + outcome) is not None:
                    self.visit(index + 1, ran, wrote, combo + outcome)
                continue
            if outcome and _witness(combo + outcome) is None:
                continue  # conditions that cannot hold together: no input takes this way
            written = wrote | {(sid, alternative)} if step.output is not None else wrote
            for inner in self._inside(sid):
                self.visit(index + 1, ran | {sid}, written, combo + outcome + inner)

    def _outcomes(self, sid: str, step: Step) -> list[tuple[tuple[Point, ...], int]]:
        """The step's own decisions, combined: (their outcomes in order, the output alternative written)."""
        points = decision_points(sid, step)
        when = [p for p in points if p.kind == "when"]
        rest = [p for p in points if p.kind != "when" and _possible(self.plan, step, p)]
        groups: dict[str, list[Point]] = {}
        for p in rest:
            groups.setdefault(p.kind, []).append(p)
        out: list[tuple[tuple[Point, ...], int]] = []
        for chosen in itertools.product(*groups.values()):
            branch = next((p for p in chosen if p.kind == "branch"), None)
            zero = any(p.kind == "fanout" and p.choice == "zero" for p in chosen)
            if zero and branch is not None and branch.choice != 0:
                continue  # over zero items no item fails: only the step's first path is written
            out.append(((*when[:1], *chosen), int(branch.choice) if branch is not None else 0))
        if when:
            out.append(((when[1],), -1))  # false: skipped, nothing written
        return out

    def _inside(self, sid: str) -> list[tuple[Point, ...]]:
        """The decisions inside a sub-plan or loop body the step runs, each outcome free (a body's own
        reachability is its run's: the parent's path does not decide it)."""
        decisions: dict[str, list[Point]] = {}
        for full, child in self.children.get(sid, []):
            for p in decision_points(full, child):
                decisions.setdefault(p.decision, []).append(p)
        return [tuple(c) for c in itertools.product(*decisions.values())] or [()]

    def _runs(self, step: Step, ran: frozenset, wrote: frozenset) -> bool:
        """Whether a step whose dependencies settled as the path says would run (not be skipped)."""
        deps = self.analysis.deps[step.id]
        if step.trigger == "all_done" or step.trigger == "none_failed":
            return True
        if step.trigger == "one_succeeded":
            return not deps or any(d in ran for d in deps)
        if any(d not in ran for d in step.deps):
            return False
        from ...dsl.schedule import step_reads

        # what it reads skips it when unwritten; its `when:` reads such a value as null instead
        return all(self._written(node, ran, wrote) for node in step_reads(step, guard=False))

    def _written(self, node: Any, ran: frozenset, wrote: frozenset) -> bool:
        if isinstance(node, Placeholder):
            return node.has_default or node.step in ran
        if isinstance(node, AnyOf):
            return node.has_default or any(self._ref_written(r, wrote) for r in node.options)
        if isinstance(node, AllOf):
            return all(self._ref_written(r, wrote) for r in node.refs)
        return self._ref_written(node, wrote)

    def _ref_written(self, ref: Ref, wrote: frozenset) -> bool:
        if ref.root != "state":
            return True
        path = tuple(ref.path)
        if _get(self.plan.initial_state, path):
            return True
        key = ("state", *path)
        writers = [w for k in range(2, len(key) + 1) for w in self.analysis.writers.get(key[:k], ())]
        writers += list(self.analysis.below.get(key, ()))
        return any((w[0], w[1]) in wrote for w in writers)


def _get(state: Any, path: tuple) -> bool:
    for key in path:
        if not isinstance(state, Mapping) or key not in state:
            return False
        state = state[key]
    return True


def _possible(plan: Plan, step: Step, point: Point) -> bool:
    """Whether an outcome can happen at all: a fan-out over a literal list, or over an input whose schema
    asks for items (``minItems``), never goes over zero items."""
    if point.kind != "fanout" or point.choice != "zero" or step.for_each is None:
        return True
    over = step.for_each.over
    if isinstance(over, (list, tuple)):
        return len(over) == 0
    if isinstance(over, Ref) and over.root == "input":
        from ...dsl.compose import over_schema

        schema = over_schema(plan, step)
        return not (isinstance(schema, Mapping) and isinstance(schema.get("minItems"), int) and schema["minItems"] > 0)
    return True


_WITNESS_BOUND = 4096  # assignments tried before a set of conditions is taken as satisfiable


def _witness(combo: tuple[Point, ...]) -> dict[str, Any] | None:
    """Values of what the combination's ``when:`` conditions read that make each come out as it says
    (``{"input": {...}, "state": {...}}`` by reference), or None when no values do."""
    from ...dsl.condition import ConditionError, condition_refs, evaluate

    wanted = [(p.guard, p.choice) for p in combo if p.kind == "when" and p.guard is not None and "." not in p.step]
    if not wanted:
        return {}
    refs: dict[tuple, Ref] = {}
    for guard, _ in wanted:
        for ref in condition_refs(guard.condition):
            refs.setdefault((ref.root, tuple(ref.path)), ref)
    keys = list(refs)
    options = [_candidates(refs[k], [g for g, _ in wanted]) for k in keys]
    total = 1
    for o in options:
        total *= len(o)
    if total > _WITNESS_BOUND:
        return {}
    for values in itertools.product(*options):
        chosen = dict(zip(keys, values))

        def read(ref: Ref, chosen: dict = chosen) -> Any:
            return chosen.get((ref.root, tuple(ref.path)))

        try:
            if all(evaluate(g.condition, read) is want for g, want in wanted):
                return {str(refs[key]): value for key, value in chosen.items()}
        except ConditionError:  # undecidable for these values (null < 3): the step would fail, try others
            continue
    return None


def _candidates(ref: Ref, guards: list[Any]) -> list[Any]:
    """Values worth trying for a reference: each literal it is compared with, and its neighbours (a
    number one less and one more, another text), an empty and a one-item list, true, false and null."""
    from ...dsl.condition import children
    from ...dsl.ir import Compare, Const, Contains, Length

    found: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, Compare):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if _is(side.value if isinstance(side, Length) else side, ref) and isinstance(other, Const):
                    value = other.value
                    if isinstance(side, Length) and isinstance(value, int):
                        found.extend([["x"] * max(0, value + d) for d in (-1, 0, 1)])
                    elif isinstance(value, (int, float)) and not isinstance(value, bool):
                        found.extend([value - 1, value, value + 1])
                    else:
                        found.extend([value, f"not {value}"])
        elif isinstance(node, Contains):
            for side, other in ((node.container, node.item), (node.item, node.container)):
                if _is(side, ref) and isinstance(other, Const):
                    found.extend([[other.value], [], other.value])
        for child in children(node):
            visit(child)

    for guard in guards:
        visit(guard.condition)
    found += [None, True, False]
    unique: list[Any] = []
    for value in found:
        if not any(value == u and type(value) is type(u) for u in unique):
            unique.append(value)
    return unique


def covered_by(combo: tuple[Point, ...], runs: Iterable[set[str]]) -> bool:
    """Whether one run made every decision of ``combo`` that it reached as ``combo`` says (and made at
    least one of them)."""
    if not combo:  # a plan without decisions: one way, which any case that ran took
        return any(runs)
    for seen in runs:
        made = [p for p in combo if any(k.startswith(f"{p.kind}:{p.step}:") for k in seen)]
        if made and all(p.key in seen for p in made):
            return True
    return False


def _is(node: Any, ref: Ref) -> bool:
    return isinstance(node, Ref) and (node.root, tuple(node.path)) == (ref.root, tuple(ref.path))
