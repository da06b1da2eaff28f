"""Operations on recorded runs: list, report, events, answer a gate, discard.

What ``dagplan runs``, ``runs show``, ``events``, ``answer`` and ``discard`` do (and the
viewer), as functions over a registry (:mod:`.journal`): they return values, the callers
render them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
import itertools
from typing import Any, Iterable, Iterator, Mapping

from ...dsl.errors import RunError
from ..stores.registry import open_registry
from ..core.progress import RunInfo, plan_step_ids, shown_status
from ..core.calls import matches
from ..core.values import word_value
from ..engine.runners import answer_problem
from .asking import asked, post
from ..core.vocabulary import (
    PERSON_HINT,
    Channel,
    Event,
    EventType,
    RunStatus,
    StepStatus,
    answer_refused,
    event_types,
)


def list_runs(state: Any = None, limit: int | None = None, statuses: Any = ()) -> list[RunInfo]:
    """The newest ``limit`` runs of the registry (every run: None) in one of ``statuses`` (any: empty), newest
    first. Only as many runs as it takes are read: pages, each four times the last, until ``limit`` match."""
    registry = open_registry(state)
    wanted = {str(s) for s in statuses}
    if limit is None:
        return [i for i in map(_asking(registry), registry.list()) if not wanted or str(i.status) in wanted]
    page = limit
    while True:
        found = [*map(_asking(registry), registry.list(page))]
        matched = [i for i in found if not wanted or str(i.status) in wanted]
        if len(matched) >= limit or len(found) < page:
            return matched[:limit]
        page *= 4


def _asking(registry: Any) -> Any:
    """A live run asking a person at a terminal is waiting, as one stopped at a gate is (with what it asks)."""
    import dataclasses

    def seen(info: RunInfo) -> RunInfo:
        if info.status is not RunStatus.RUNNING or info.pid is None:
            return info
        requests = asked(registry.open(info.id))
        return dataclasses.replace(info, status=RunStatus.WAITING, waiting=tuple(requests)) if requests else info

    return seen


@dataclass(frozen=True)
class StepRow:
    id: str
    status: StepStatus
    attempts: int
    duration: float | None
    replayed: bool
    error: Mapping[str, Any] | None
    spilled: bool
    output: Any
    request: Mapping[str, Any] | None = None  # what a waiting gate asks
    reused: str | None = None  # the run its result was taken from (`run --reuse`)
    fingerprint: str | None = None  # what determined its result (engine/reuse.py)
    trace: list | None = None  # where its tool failed: the user's frames (core/trace.py)

    def to_json(self) -> dict[str, Any]:
        out = {
            "status": str(self.status),
            "attempts": self.attempts,
            "duration": self.duration,
            "replayed": self.replayed,
            "error": self.error,
            "spilled": self.spilled,
            "output": self.output,
        }
        if self.request is not None:
            out["request"] = dict(self.request)
        if self.reused:
            out["reused"] = self.reused
        if self.fingerprint:
            out["fingerprint"] = self.fingerprint
        if self.trace:
            out["traceback"] = list(self.trace)
        return out


@dataclass(frozen=True)
class RunReport:
    """What ``dagplan runs show`` prints: the run, its final event, and each step in plan order."""

    run_id: str
    plan: str
    status: RunStatus
    created: float
    inputs: Mapping[str, Any]
    done: int
    total: int
    final: Mapping[str, Any] | None
    steps: Mapping[str, StepRow]
    waiting: tuple[Mapping[str, Any], ...] = ()
    children: Mapping[str, StepRow] = field(default_factory=dict)  # items, iterations, sub-plans' steps
    prompts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # unit -> {prompt, spans, seq}
    printed: Mapping[str, str] = field(default_factory=dict)  # unit -> what its tool printed (every attempt)

    @property
    def shown_status(self) -> str:
        """The status as people read it (``completed with errors``), as ``dagplan runs`` shows it."""
        return shown_status(self.status, bool((self.final or {}).get("had_errors")))

    def to_json(self) -> dict[str, Any]:
        from datetime import datetime

        return {
            "run_id": self.run_id,
            "plan": self.plan,
            "status": str(self.status),
            "started": datetime.fromtimestamp(self.created).isoformat(timespec="seconds"),
            "inputs": dict(self.inputs),
            "done": self.done,
            "total": self.total,
            "final": dict(self.final) if self.final is not None else None,
            "steps": {sid: row.to_json() for sid, row in self.steps.items()},
            "waiting": [dict(w) for w in self.waiting],
            "children": {sid: row.to_json() for sid, row in self.children.items()},
            "prompts": {unit: dict(found) for unit, found in self.prompts.items()},
            "printed": dict(self.printed),
        }


def run_report(run_id: str, state: Any = None) -> RunReport:
    return report_of(open_registry(state).open(run_id))


def report_of(journal: Any) -> RunReport:
    progress = journal.progress()
    ids = plan_step_ids(journal.plan_doc)
    rows = {sid: _row(s) for sid, s in progress.steps.items()}
    return RunReport(
        journal.id,
        journal.plan_name,
        progress.status,
        journal.created,
        journal.inputs,
        progress.done,
        len(ids),
        progress.final,
        {sid: rows[sid] for sid in ids},
        progress.waiting,
        {sid: row for sid, row in rows.items() if sid not in set(ids)},
        *_kept(journal),
    )


def _kept(journal: Any) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """What the journal keeps beside the steps' results, in one read of its events: each LLM step's
    prompt provenance (:func:`prompts_of`) and what each tool printed."""
    events = list(journal.events([EventType.STEP_COMPLETED, EventType.PROMPT_RESOLVED, EventType.STEP_PRINTED]))
    printed: dict[str, str] = {}
    for event in events:
        if event.type is EventType.STEP_PRINTED:
            printed[event.step or ""] = printed.get(event.step or "", "") + str(event.data.get("text", ""))
    return prompts_of(events), printed


def prompts_of(events: Any) -> dict[str, dict[str, Any]]:
    """Each LLM step's last resolved prompt and where each part of it came from (``spans``, each with the
    ``event``: the journal position of the completion it read, when a step's output)."""
    completed: dict[str, int] = {}
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.type is EventType.STEP_PRINTED:
            continue
        if event.type is EventType.STEP_COMPLETED:
            if not event.data.get("replayed"):  # the event that carries the output (a replay only points to it)
                completed[event.step or ""] = event.seq or 0
            continue
        spans = [dict(s, **({"event": completed[s["step"]]} if s.get("step") in completed else {}))
                 for s in event.data.get("spans") or ()]  # fmt: skip
        found[event.step or ""] = {"prompt": event.data.get("prompt", ""), "spans": spans, "seq": event.seq}
    return found


def _row(s: Any) -> StepRow:
    return StepRow(
        s.id, s.status, s.attempts, s.duration, s.replayed, s.error, s.spilled, s.output, s.fields.get("request"),
        s.fields.get("reused"), s.fields.get("fingerprint"), s.fields.get("traceback"),
    )  # fmt: skip


def run_events(run_id: str, state: Any = None, types: Iterable[str] | None = None) -> list[Event]:
    """A run's journaled events, oldest first; ``types`` keeps only those (unknown names are an error)."""
    try:
        wanted = event_types(types) if types else None
    except ValueError as exc:
        raise RunError.make("unknown-event-type", str(exc)) from None
    return list(open_registry(state).open(run_id).events(wanted))


class Watch:
    """A run followed as another process writes it: each :meth:`poll` returns the events recorded since
    the previous one (the first returns every event so far)."""

    def __init__(self, run_id: str, state: Any = None):
        self.state = state
        self.journal = open_registry(state).open(run_id)
        self.run_id = self.journal.id
        self.cursor: Any = None

    def poll(self) -> list[Event]:
        found, self.cursor = self.journal.follow(self.cursor)
        return found

    def report(self) -> RunReport:
        """The run's report (see :func:`run_report`): as of this watch's opening, or, once it has polled,
        read again, so that it is at least as new as the events returned (what a later poll returns may be
        in it already: a page applying those events again ends where the run is)."""
        if self.cursor is None:
            return report_of(self.journal)
        return report_of(open_registry(self.state).open(self.run_id))

    def plan(self, config: Any) -> Any:
        """The run's own plan from its artifact, not checked against any tools (to show it)."""
        from .driver import stored_plan

        return stored_plan(self.journal, None, config)


def output_chunks(run_id: str, step_id: str, state: Any = None) -> Iterator[bytes]:
    """A step's recorded output as bytes, in chunks, for people to read: secrets masked (the journal keeps the
    value whole for resume); checked now (an unknown run or step raises here)."""
    from ..core.redact import redacted_chunks

    journal = open_registry(state).open(run_id)
    chunks = journal.output_chunks(step_id)
    first = next(chunks, b"")
    return redacted_chunks(itertools.chain([first], chunks))


def waiting_requests(run_id: str, state: Any = None) -> tuple[Mapping[str, Any], ...]:
    """What a waiting run waits for: its gates' requests."""
    return open_registry(state).open(run_id).progress().waiting


def answer_gate(
    run_id: str,
    step: str,
    value: Any,
    state: Any = None,
    *,
    text: bool = False,
    channel: Channel | str = Channel.ANSWER,
    who: str | None = None,
) -> str:
    """Durably record the answer of a gate a run waits at (``resume`` then continues); returns the run id.

    ``step`` is a gate's full id (``each[2].approve_close``) or a pattern where ``*`` stands for any
    characters (``each[*].approve_close``, ``*``): every waiting gate it matches gets the answer, each
    checked first, all recorded together or none. With ``text``, ``value`` is a command-line word: kept
    as text when the gate has choices, else read as JSON when it is JSON. ``channel`` and ``who`` are
    recorded with it; a gate only a person may answer refuses a channel a model holds (``person-only``).
    """
    journal = open_registry(state).open(run_id)
    progress = journal.progress()
    live = asked(journal) if progress.status is not RunStatus.WAITING else []  # a person is asked at a terminal
    requests = _requests(journal.id, step, tuple(live) or (progress.waiting if progress.status is RunStatus.WAITING
                                                           else ()))  # fmt: skip
    answers = []
    for request in requests:
        refused = answer_refused(request, channel)
        if refused:
            raise RunError.make("person-only", refused, hint=PERSON_HINT)
        given = _parse(value, request) if text else value
        problem = answer_problem(request, given)
        if problem:
            raise RunError.make("bad-answer", f"step {request['step']}: {problem}", hint=_choices_hint(request))
        answers.append((str(request["step"]), given))
    if live:  # the run asking on a terminal takes it (asking.py), records it and goes on
        for unit, given in answers:
            post(journal, unit, given, Channel(channel).value, who)
        return journal.id
    journal.acquire()
    try:
        for unit, given in answers:
            data = {"value": given, "channel": Channel(channel).value, "who": who}
            journal.record(Event(EventType.GATE_ANSWERED, journal.id, unit, data=data))
    finally:
        journal.release()
    return journal.id


def _requests(run_id: str, step: str, waiting: tuple[Mapping[str, Any], ...]) -> list[Mapping[str, Any]]:
    if not waiting:
        raise RunError.make(
            "not-waiting", f"run {run_id} is not waiting for an answer", hint="dagplan runs shows each run's status"
        )
    found = [request for request in waiting if matches(step, str(request.get("step")))]
    if found:
        return found
    names = ", ".join(str(r.get("step", "?")) for r in waiting)
    raise RunError.make("no-such-step", f"run {run_id} is not waiting at {step!r}", hint=f"it waits at: {names}")


def _parse(value: str, request: Mapping[str, Any]) -> Any:
    if request.get("choices"):
        return value
    try:
        return word_value(value)  # JSON, else the text itself (the schema says whether it will do)
    except ValueError as exc:
        raise RunError.make("bad-answer", f"the answer: {exc}", hint="an answer is a small JSON value") from None


def _choices_hint(request: Mapping[str, Any]) -> str | None:
    if request.get("choices"):
        return "answer one of: " + ", ".join(request["choices"])
    if request.get("schema"):
        return "the answer must match: " + json.dumps(request["schema"])
    return None


def discard_run(run_id: str, state: Any = None, force: bool = False) -> str:
    """Record ``plan_aborted`` and remove the run; returns its full id. A run that is running now is
    refused unless ``force`` (then its owner is stopped first): ``cancel_run`` stops it and keeps its record."""
    registry = open_registry(state)
    if not force:
        full = registry.open(run_id).id
        pid = registry.owner(full)
        if pid is not None:
            raise RunError.make(
                "run-running",
                f"run {full} is running (process {pid}): discarding it would stop it and remove its record",
                hint=f"stop it and keep its record: dagplan cancel {full}; or: dagplan discard {full} --force",
            )
    return registry.discard(run_id)


def prune_runs(older_than: float, statuses: Iterable[str] = (), state: Any = None, *, dry_run: bool = False,
               now: float | None = None) -> list[RunInfo]:  # fmt: skip
    """Discard the runs that ended (or, if never ended, started) more than ``older_than`` seconds ago and
    are in one of ``statuses`` (default: every finished status). A run some process owns now is never
    pruned, whatever its status. Returns the runs pruned (or, with ``dry_run``, that would be)."""
    import time

    registry = open_registry(state)
    wanted = {str(s) for s in statuses} or {str(s) for s in RunStatus if s.finished}
    cutoff = (time.time() if now is None else now) - older_than
    doomed = [i for i in registry.list()
              if str(i.status) in wanted and i.pid is None and (i.finished or i.started) < cutoff]  # fmt: skip
    if not dry_run:
        for info in doomed:
            registry.discard(info.id)
    return doomed


def cancel_run(run_id: str, state: Any = None) -> str:
    """Stop a running or waiting run for good: its owner lets go (the steps running are interrupted), the run
    is recorded ``cancelled`` and kept (``runs show``, ``events``); it cannot be resumed. Its full id."""
    return open_registry(state).cancel(run_id)
