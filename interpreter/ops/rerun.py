"""What ``run --reuse RUN`` would run again, and why, found without calling anything.

The plan runs once with every tool, model and gate faked (:class:`..core.calls.Fakes`: nothing acts) and the
results of RUN offered by fingerprint (:mod:`..engine.reuse`), exactly as ``--reuse`` offers them: a step
whose fingerprint matches is taken, every other runs (its fake answer then changes what its dependents
read, so they run too, as they would). Each step that runs says why: it is new, its definition changed
(which fields, from the semantic diff against RUN's plan), a step it depends on runs again, it is a kind
that always runs (a gate, a sub-plan, a loop), or what it reads or its tool's code changed. A fan-out of a tool
or a model is taken item by item: it says how many of its items run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from ...dsl.ir import Plan
from ...dsl.schedule import analysis_of
from ..core.calls import Fakes
from ..core.vocabulary import EventType, StepStatus
from ..engine.execution import Execution
from ..engine.reuse import Reuse, reusable, reusable_item
from ..engine.scope import Options, RunScope


@dataclass(frozen=True)
class Rerun:
    """Each step of the plan: taken from a run (``reused``) or run again, and why."""

    runs: tuple[str, ...]  # the runs offered
    steps: tuple[Mapping[str, Any], ...]  # {id, action: reuse | run | skip, why, from}
    model_calls: tuple[int, int] = (0, 0)  # (would run, saved): worst-case model calls of those steps
    input_tokens: tuple[int | None, int | None] = (0, 0)  # the same, in input tokens (None: unbounded)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def again(self) -> list[str]:
        return [s["id"] for s in self.steps if s["action"] == "run"]

    @property
    def reused(self) -> list[str]:
        return [s["id"] for s in self.steps if s["action"] == "reuse"]

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": list(self.runs),
            "steps": [dict(s) for s in self.steps],
            "again": self.again,
            "reused": self.reused,
            "model_calls": {"again": self.model_calls[0], "saved": self.model_calls[1]},
            "input_tokens": {"again": self.input_tokens[0], "saved": self.input_tokens[1]},
        }


async def would_rerun(
    plan: Plan,
    tools: Mapping[str, Any],
    journals: Sequence[Any],
    options: Options,
    inputs: Mapping[str, Any] | None = None,
    before: Plan | None = None,
    config: Any = None,
) -> Rerun:
    """What running ``plan`` with ``reuse`` of ``journals`` would run again (nothing is called); ``before``:
    the plan the first of them ran (for the fields that changed); ``inputs``: the first run's, unless
    given."""
    from ..engine.inputs import prepare_inputs

    reuse = Reuse.of(journals)
    fakes = Fakes()
    now: dict[str, Any] = {}  # what each step would read now: a tool call's arguments, a prompt as resolved
    items: dict[str, list[int]] = {}  # by fan-out step: [items taken from the runs, items that run]
    dry = replace(options, calls=fakes, ask_gate=fakes.answer_gate, reuse=reuse,
                  subscribers=[_reads(now), _items(items)],
                  backoff_scale=0.0, person_gates=False)  # fmt: skip
    given = dict(inputs if inputs is not None else (journals[0].inputs if journals else {}))
    values = prepare_inputs(plan, given)
    scope = RunScope("rerun-preview", tools, dry)
    try:
        result = await Execution(plan, values, scope).run()
    finally:
        scope.close()
    changed = _changed(before, plan, tools) if before is not None else None
    analysis = analysis_of(plan)
    rows, again = [], set()
    # a step that failed here failed on a stand-in's answer; a run that stops on it skips what it had not started
    failed = [sid for sid in analysis.order if result.steps[sid].status is StepStatus.FAILED]
    for sid in analysis.order:
        report, step = result.steps[sid], plan.by_id[sid]
        if report.reused:
            rows.append({"id": sid, "action": "reuse", "why": "the same step, reading the same values",
                         "from": report.reused})  # fmt: skip
            continue
        deciders = sorted({*(d for d in analysis.deps[sid] if d in again), *(f for f in failed if f != sid)})
        if report.status is StepStatus.SKIPPED and not deciders:
            # decided by what is known for certain: the inputs and the results taken from the runs
            rows.append({"id": sid, "action": "skip", "why": f"not reached here ({report.reason})"})
            continue
        if report.status is StepStatus.SKIPPED:
            again.add(sid)
            # skipped here on a stand-in's answer (nothing is called): what the run reads there decides, so it
            # is counted as running, as the run may run it (a preview never says skipped of what then runs)
            rows.append({"id": sid, "action": "run", "why": f"if reached: {', '.join(deciders)} runs again, and "
                         "what it returns decides"})  # fmt: skip
            continue
        taken, ran = items.get(sid, (0, 0))
        if taken and not ran and report.status is StepStatus.COMPLETED:
            rows.append({"id": sid, "action": "reuse", "why": f"each of its {taken} item(s), reading the same values",
                         "from": journals[0].id})  # fmt: skip
            continue
        again.add(sid)
        why = _why(sid, step, analysis.deps[sid], again, changed)
        if why == _UNSAID and journals:
            why = _which_changed(sid, step, now, _reads_of(journals[0]))
        if taken:
            why = f"{ran} of its {taken + ran} items run ({why}); {taken} are taken from the run"
        rows.append({"id": sid, "action": "run", "why": why})
    calls, tokens = _calls(plan, again, config)
    return Rerun(tuple(j.id for j in journals), tuple(rows), calls, tokens)


def _why(sid: str, step: Any, deps: Any, again: set[str], changed: Any) -> str:
    if changed is not None:
        added, renamed, fields = changed
        if sid in added:
            return "a new step"
        if sid in renamed:
            return f"renamed from {renamed[sid]}"
        if sid in fields:
            return "changed: " + ", ".join(sorted(fields[sid]))
    upstream = sorted(d for d in deps if d in again)
    if upstream:
        return f"{', '.join(upstream)} runs again"
    if step.for_each is not None and reusable_item(step):
        return "its items are new or read other values"
    if not reusable(step):
        return f"a {step.kind if step.for_each is None else 'fan-out'} step runs every time"
    return _UNSAID if changed is not None else "not in the run"


_UNSAID = "what it reads, its tool's code or its model changed"
_READ = {EventType.TOOL_CALLED: "args", EventType.PROMPT_RESOLVED: "prompt"}  # the events that say what a step read


def _reads(into: dict[str, Any]) -> Any:
    def seen(event: Any) -> None:
        key = _READ.get(event.type)
        if key is not None and event.step:
            into[event.step] = event.data.get(key)

    return seen


def _items(into: dict[str, list[int]]) -> Any:
    """Counts, by fan-out step, the items taken from the runs by their fingerprint and the items that run."""

    def seen(event: Any) -> None:
        unit = event.step or ""
        if "[" not in unit or event.type not in (EventType.STEP_COMPLETED, EventType.STEP_FAILED):
            return
        counts = into.setdefault(unit.split("[", 1)[0], [0, 0])
        counts[0 if event.data.get("reused") else 1] += 1

    return seen


def _reads_of(journal: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for event in journal.events():
        _reads(found)(event)
    return found


def _which_changed(sid: str, step: Any, now: Mapping[str, Any], before: Mapping[str, Any]) -> str:
    """Which part of a step's fingerprint moved, where the runs say: what it read (the arguments that
    differ, or its prompt), else its tool's code (a tool step) or its model, settings or tools (a model step)."""
    if sid in now and sid in before and now[sid] != before[sid]:
        was, is_ = before[sid], now[sid]
        if isinstance(was, Mapping) and isinstance(is_, Mapping):
            keys = sorted(k for k in {*was, *is_} if was.get(k) != is_.get(k))
            return f"what it reads changed ({', '.join('args.' + k for k in keys)})"
        return "what it reads changed (its prompt)" if step.llm is not None else "what it reads changed"
    if step.tool is not None:
        return "its tool's code changed (its module, or a module of the project it uses)"
    if step.llm is not None:
        return "its model, a model setting or a tool it may call changed"
    return _UNSAID


def _changed(before: Plan, after: Plan, tools: Mapping[str, Any]) -> tuple[set[str], dict[str, str], dict]:
    from ...dsl.diff import diff

    found = diff(before, after, {name: getattr(t, "spec", t) for name, t in tools.items()})
    return set(found.added), {new: old for old, new in found.renamed}, {s: set(f) for s, f in found.changed.items()}


def _calls(plan: Plan, again: set[str], config: Any) -> tuple[tuple[int, int], tuple[int | None, int | None]]:
    """Worst-case model calls and input tokens of the steps that run again, and of those reused."""
    from ..llm.preflight import llm_steps

    if not llm_steps(plan):
        return (0, 0), (0, 0)
    from ..llm.estimate import estimate

    model, max_items, iterations = (config.default_model, config.max_items, config.step_max_iterations) if config \
        else (None, None, 5)  # fmt: skip
    found = estimate(plan, model, max_items, iterations)
    runs = [s for s in found.llm if s.step.split(".")[0].split("[")[0] in again]
    kept = [s for s in found.llm if s not in runs]

    def tokens(costs: list) -> int | None:
        if any(s.input_tokens is None for s in costs):
            return None
        return sum(s.input_tokens * s.total_calls for s in costs)

    return (sum(s.total_calls for s in runs), sum(s.total_calls for s in kept)), (tokens(runs), tokens(kept))
