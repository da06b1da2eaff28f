"""A semantic diff of two plans: what a reviewer needs to know, not how the text moved.

Steps are matched by id, whatever their order, dialect or key order (a JSON plan and its YAML form
are the same plan); a removed and an added step that call the same tool with the same arguments are
a rename. Each step is compared field by field on its meaning (references in their canonical
spelling, defaults left out), the graph edge by edge (the data-flow dependencies ``validate``
derives, not only the written ``deps``), and the plan's own keys. Steps that act on the world
(``side_effect``, declared by the step or its tool) that appear or disappear are listed first.
"""

from __future__ import annotations

import enum
from .record import NOTHING, field, fields, is_record, record
from typing import Any, Mapping, TypeGuard

from .ir import (
    NOT_GIVEN,
    AllOf,
    AnyOf,
    Guard,
    Output,
    Placeholder,
    Plan,
    Ref,
    Step,
    SubPlan,
    Template,
    ToolSpec,
    acts_as_known,
)

_NOT_COMPARED = frozenset({"id", "span"})
_SETS = frozenset({"deps", "required_inputs"})  # lists whose order means nothing
# Fields that say how something was written, not what it does: a sub-plan's resolved file name, a condition
# as typed (its parsed form is compared).
_FORM_FIELDS = frozenset({("source", SubPlan), ("text", Guard)})
# Every key of a plan is compared but these: its steps (compared one by one), where it was read from and
# in which dialect (form, not meaning), and what is derived from the rest.
_PLAN_FORM = frozenset({"steps", "source", "dialect", "span", "document", "by_id"})
_PLAN_KEYS = tuple(f.name for f in fields(Plan) if f.name not in _PLAN_FORM)


@record
class PlanDiff:
    """What changed from plan ``before`` to plan ``after``."""

    before: str
    after: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    changed: dict[str, dict[str, tuple[Any, Any]]] = field(default_factory=dict)  # step -> field -> (was, is)
    edges_added: list[tuple[str, str]] = field(default_factory=list)  # (dependency, step)
    edges_removed: list[tuple[str, str]] = field(default_factory=list)
    side_effects_added: list[str] = field(default_factory=list)
    side_effects_removed: list[str] = field(default_factory=list)
    side_effects_changed: list[str] = field(default_factory=list)  # steps that act on the world, and changed
    purity_unknown: list[str] = field(default_factory=list)  # added or changed, and no tools to tell if they act
    gates_lost: dict[str, list[str]] = field(default_factory=dict)  # a step that acts -> the gates no longer before it
    plan_changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    cost: tuple[Any, Any] | None = None  # the worst case before and after, when a caller priced them

    @property
    def same(self) -> bool:
        return not (self.added or self.removed or self.renamed or self.changed or self.edges_added
                    or self.edges_removed or self.plan_changed)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "same": self.same,
            "side_effects_added": self.side_effects_added,
            "side_effects_removed": self.side_effects_removed,
            "side_effects_changed": self.side_effects_changed,
            "purity_unknown": self.purity_unknown,
            "gates_lost": {sid: list(gates) for sid, gates in self.gates_lost.items()},
            "added": self.added,
            "removed": self.removed,
            "renamed": [{"from": a, "to": b} for a, b in self.renamed],
            "changed": {
                sid: {k: {"before": a, "after": b} for k, (a, b) in fields.items()}
                for sid, fields in self.changed.items()
            },  # fmt: skip
            "edges_added": [list(e) for e in self.edges_added],
            "edges_removed": [list(e) for e in self.edges_removed],
            "plan": {k: {"before": a, "after": b} for k, (a, b) in self.plan_changed.items()},
            **({"cost": {"before": self.cost[0], "after": self.cost[1]}} if self.cost else {}),
        }


def diff(before: Plan, after: Plan, tools: Mapping[str, ToolSpec] | None = None) -> PlanDiff:
    """The semantic difference of two valid plans (``tools``: their specs, for purity)."""
    from .schedule import analysis_of

    out = PlanDiff(before.source or "before", after.source or "after")
    old = dict(before.walked)  # the steps of sub-plans too, by their full id (`child.refund`)
    new = dict(after.walked)
    views_old = {sid: step_view(s) for sid, s in old.items()}
    views_new = {sid: step_view(s) for sid, s in new.items()}
    gone = [sid for sid in old if sid not in new]
    came = [sid for sid in new if sid not in old]
    renames = _renames(gone, came, views_old, views_new)
    out.renamed = sorted(renames.items())
    out.removed = [sid for sid in gone if sid not in renames]
    out.added = [sid for sid in came if sid not in renames.values()]
    for sid in old:
        twin = sid if sid in new else renames.get(sid)
        if twin is None:
            continue
        fields = _changed(views_old[sid], views_new[twin])
        if fields:
            out.changed[twin] = fields
    name = {sid: renames.get(sid, sid) for sid in old}
    edges_old = {(name.get(d, d), name.get(s, s)) for d, s in _edges(before, analysis_of(before))}
    edges_new = set(_edges(after, analysis_of(after)))
    out.edges_added = sorted(edges_new - edges_old)
    out.edges_removed = sorted(edges_old - edges_new)
    acting_old = {name[s] for s in old if _leaf(old[s]) and acts_as_known(old[s], tools)}
    acting_new = {s for s in new if _leaf(new[s]) and acts_as_known(new[s], tools)}
    out.side_effects_added = sorted(acting_new - acting_old)
    out.side_effects_removed = sorted(acting_old - acting_new)
    out.side_effects_changed = sorted(s for s in out.changed if s in acting_new and s in acting_old)
    guarded_old, guarded_new = _gated(before, analysis_of(before)), _gated(after, analysis_of(after))
    for sid in sorted(acting_new & acting_old):
        was = {name.get(g, g) for g in guarded_old.get(next((o for o in old if name[o] == sid), sid), ())}
        if was and not guarded_new.get(sid):  # every gate before it is gone: nobody is asked before it acts
            out.gates_lost[sid] = sorted(was)
    # without tools, a step whose purity only its tool knows is said to be unknown, never left out silently
    out.purity_unknown = sorted(s for s in (*out.added, *out.changed)
                                if _leaf(new[s]) and acts_as_known(new[s], tools) is None)  # fmt: skip
    plan_old, plan_new = _plan_view(before), _plan_view(after)
    out.plan_changed = _changed(plan_old, plan_new)
    return out


def _gated(plan: Plan, analysis: Any) -> dict[str, set[str]]:
    """Each top-level step -> the gates it comes after (its dependencies', transitively)."""
    gates = {s.id for s in plan.steps if s.gate is not None}
    before: dict[str, set[str]] = {}
    for sid in analysis.order:
        found: set[str] = set()
        for dep in analysis.deps[sid]:
            found |= before.get(dep, set()) | ({dep} & gates)
        before[sid] = found
    return before


def _edges(plan: Plan, analysis: Any, prefix: str = "") -> Any:
    """The dependency edges of a plan and of the plans it runs, by full step id."""
    for sid, deps in analysis.deps.items():
        for dep in deps:
            yield prefix + dep, prefix + sid
    for step in plan.steps:
        child = step.plan or (step.loop.child if step.loop is not None else None)
        if child is not None and child.plan is not None and child.analysis is not None:
            yield from _edges(child.plan, child.analysis, prefix + step.id + ".")


def step_view(step: Step) -> dict[str, Any]:
    """A step's meaning as plain data: every field but its id and position, defaults left out."""
    return {k: v for k, v in _norm(step).items() if k not in _NOT_COMPARED}


def _plan_view(plan: Plan) -> dict[str, Any]:
    out = {}
    for key in _PLAN_KEYS:
        value = getattr(plan, key, None)
        normed = sorted(value) if key in _SETS and _names(value) else _norm(value)
        if normed not in (None, [], {}):
            out[key] = normed
    return out


_SCALARS = (str, int, float, bool)


def _norm(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if value is None or value is NOT_GIVEN:
        return None
    if isinstance(value, (Ref, AnyOf, AllOf, Template, Placeholder, Output)):  # as canonically written
        return str(value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, Plan):  # a loaded sub-plan: its steps are compared one by one (full ids)
        return None
    if is_record(value):
        out = {}
        for name, default, as_set in _compared(kind):
            got = getattr(value, name)
            if default is not NOTHING and got == default:
                continue
            normed = sorted(got) if as_set and _names(got) else _norm(got)
            if normed is not None:
                out[name] = normed
        return out
    if isinstance(value, Mapping):  # a JSON Schema's `required` is a set of names, whatever its order
        return {str(k): sorted(v) if k == "required" and _names(v) else _norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_norm(v) for v in value]
    return value


_COMPARED: dict[type, tuple[tuple[str, Any, bool], ...]] = {}


def _compared(kind: type) -> tuple[tuple[str, Any, bool], ...]:
    """What a record class's fields say of its meaning, once per class: (name, default, compared as a set),
    leaving out its position, fields not compared, and how it was written."""
    found = _COMPARED.get(kind)
    if found is None:
        found = _COMPARED[kind] = tuple(
            (f.name, f.initial(), f.name in _SETS)
            for f in fields(kind)
            if f.name != "span" and f.compare and (f.name, kind) not in _FORM_FIELDS
        )
    return found


def _names(value: Any) -> TypeGuard[list[str] | tuple[str, ...]]:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _changed(was: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields that differ; a step's ``args`` key by key (``args.city``), so a reviewer sees which."""
    out: dict[str, tuple[Any, Any]] = {}
    for k in sorted(set(was) | set(now)):
        before, after = was.get(k), now.get(k)
        if before == after:
            continue
        if k == "args" and isinstance(before, Mapping) and isinstance(after, Mapping):
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name):
                    out[f"args.{name}"] = (before.get(name), after.get(name))
        else:
            out[k] = (before, after)
    return out


def _renames(gone: list[str], came: list[str], old: Mapping, new: Mapping) -> dict[str, str]:
    """Removed -> added pairs that call the same thing with the same arguments (the first match each)."""
    out: dict[str, str] = {}
    free = list(came)
    for sid in gone:
        key = _call_key(old[sid])
        match = next((other for other in free if _call_key(new[other]) == key), None)
        if match is not None and key is not None:
            out[sid] = match
            free.remove(match)
    return out


def _leaf(step: Step) -> bool:
    """A step that calls something itself (a sub-plan's or a loop's steps are listed by their full ids)."""
    return step.plan is None and step.loop is None


def _call_key(view: Mapping[str, Any]) -> Any:
    what = view.get("tool") or view.get("llm") or view.get("gate") or view.get("plan") or view.get("loop")
    return None if what is None else repr((what, view.get("args")))
