"""The journal protocol: what the engine, resume and the run commands need from durable storage.

A **registry** holds runs; a **journal** is one run's record: its artifact (the checked
plan document, the inputs, how it was started), its events, and what is derived from
them (progress, spilled outputs, the memo of completed calls). The engine only
*records* events and *commits*; everything else is read back by folding the events
(:mod:`.progress`), the same way in every implementation:

- :class:`MemoryRegistry` / :class:`MemoryJournal` here: for tests and embedding. Values
  go through the same JSON round trip as on disk, so a resume sees what it would see there.
- :mod:`.store`: files under a state directory (write-ahead log, snapshot, spills, flock).
- a database (issue "Beyond one machine") implements the same two protocols.

The guarantees every implementation keeps: ``commit()`` returns once everything recorded
before it is durable (completions that arrive together may share one commit); a run is
written by one owner at a time (``acquire``/``release``); recorded values read back equal
(JSON-equal) to what was recorded.
"""

from __future__ import annotations

import asyncio
import secrets
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, runtime_checkable

from ...dsl.errors import RunError
from ..core.progress import Progress, RunInfo, empty_state, fold, plan_step_ids, progress_of
from ..core.vocabulary import Event, EventType, StepStatus


@runtime_checkable
class Journal(Protocol):
    """One run's durable record."""

    id: str
    plan_name: str
    inputs: dict
    meta: dict
    created: float

    @property
    def plan_doc(self) -> dict:
        """The run's plan: its artifact's, or the plan a streamed run wrote later."""

    @property
    def plan_written(self) -> bool:
        """Whether a streamed run's plan was written."""

    def record(self, event: Event) -> object:
        """Buffer one event (values over the inline limit are spilled first); durable at the next commit.
        (What it returns is the implementation's: the file journal returns the stored line.)"""

    async def commit(self, durable: bool = True) -> None:
        """Return once everything recorded before this call is durable (group commit); with ``durable``
        False, once it is written where another process reads it (it outlives the writer's ``kill -9``;
        a crash of the machine or the database may lose its last moment, made durable by the next
        durable commit): see the note DURABLE below."""

    def commit_sync(self) -> None: ...

    def progress(self) -> Progress: ...

    def events(self, types: Iterable[EventType] | None = None) -> Iterator[Event]: ...

    def follow(self, cursor: Any = None) -> tuple[list[Event], Any]:
        """The events recorded after ``cursor`` (None: from the start) and the cursor after them: how a
        viewer tails a run another process writes (the cursor is the store's own: an offset, a seq)."""

    def step_output(self, step_id: str) -> Any: ...

    def output_chunks(self, step_id: str) -> Iterator[bytes]:
        """A step's output as bytes, in chunks (a large one is never loaded whole)."""

    def memo_get(self, key: str) -> tuple[bool, Any]: ...

    def acquire(self) -> None:
        """Own the run (one writer at a time); raises RunError ``run-locked``."""

    def release(self) -> None:
        """Commit what was recorded and let the run go."""


@runtime_checkable
class Registry(Protocol):
    """All runs of one place (a state directory, a database)."""

    location: str

    def create(self, *, plan_doc: dict, plan_name: str, inputs: dict, meta: dict | None = None) -> Journal: ...

    def open(self, run_id: str) -> Journal: ...

    def list(self, limit: int | None = None) -> list[RunInfo]:
        """The newest ``limit`` runs (every run: None), newest first, reading only those."""

    def discard(self, run_id: str) -> str:
        """Stop the run's owner, record ``plan_aborted``, forget the run; returns its full id."""

    def cancel(self, run_id: str) -> str:
        """Stop the run's owner, record ``plan_cancelled``, keep the run's record; returns its full id."""

    def owner(self, run_id: str) -> int | None:
        """The process that runs it now (None: nobody)."""


# --- what every journal derives the same way ---------------------------------------------------------


def record_dict(event: Event) -> dict:
    """The stored form of an event: its JSON without the fields the journal adds (seq, ts, crc)."""
    out = event.to_json()
    out.pop("seq", None)
    return out


@dataclass(frozen=True)
class StepMemo:
    """The memo protocol of :mod:`.llm` (``memo_get``/``memo_put``/``commit``) for one step of a run."""

    journal: Journal
    step_id: str

    def memo_get(self, key: str) -> tuple[bool, Any]:
        return self.journal.memo_get(key)

    def memo_put(self, key: str, value: Any, call: Mapping[str, Any] | None = None) -> None:
        data = {"key": key, "value": value, **({"call": call} if call else {})}
        self.journal.record(Event(EventType.MEMO, self.journal.id, self.step_id, data=data))

    async def commit(self) -> None:
        """Make the puts so far durable (an LLM step commits after every model call)."""
        await self.journal.commit()


def cleared_ids(progress: Progress, step_id: str, order: list[str]) -> list[str]:
    """``step_id``, every step after it in ``order`` (topological), and all their children."""
    check_step(progress.run_id, step_id, order)
    cleared = order[order.index(step_id) :]
    parents = tuple(p + c for p in cleared for c in ("[", "."))  # children: review[3], sub.fetch
    return cleared + [sid for sid in progress.steps if sid.startswith(parents)]


def clear_from(journal: Journal, step_id: str, order: list[str]) -> list[str]:
    """Forget recorded results of ``step_id`` onward (``resume --from``); call with the run acquired."""
    cleared = cleared_ids(journal.progress(), step_id, order)
    journal.record(Event(EventType.STEPS_CLEARED, journal.id, data={"from": step_id, "steps": cleared}))
    return cleared


def check_step(run_id: str, step_id: str, order: list[str]) -> None:
    """Reject a ``--from`` step id that is not in the run's plan, listing the valid ones."""
    if step_id not in order:
        raise RunError.make(
            "no-such-step", f"run {run_id} has no step {step_id!r}", hint="valid step ids: " + ", ".join(order)
        )


RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")  # what a run id (or a prefix of one) may be


def new_run_id() -> str:
    """Short, sortable by start time, file-name safe: ``20261121-224501-3f9a``."""
    return f"{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def refuse_finished(journal: Any) -> None:
    """A run that has finished (completed, failed, aborted, cancelled) cannot be cancelled."""
    status = journal.progress().status
    if status.finished:
        raise RunError.make(
            "run-finished", f"run {journal.id} has finished ({status}): nothing to cancel", hint="dagplan runs"
        )


def not_a_run_id(run_id: Any) -> RunError:
    """What a registry says of a run id that cannot be one (a path, an empty string)."""
    return RunError.make(
        "unknown-run",
        f"{run_id!r} is not a run id",
        hint="run ids look like 20261121-224501-3f9a; list them with: dagplan runs",
    )


LATEST = ("@last", "-")  # what a person types for the newest run: `dagplan runs show @last`


def newest_if_asked(run_id: Any, newest: Callable[[], str | None], where: str) -> Any:
    """``@last`` or ``-``: the id of the run started last (``newest`` asks the registry); any other id
    as given."""
    if run_id not in LATEST:
        return run_id
    found = newest()
    if found is None:
        raise RunError.make("unknown-run", f"no runs yet in {where}", hint="start one with: dagplan run PLAN")
    return found


def unknown_run(run_id: str, where: str) -> RunError:
    return RunError.make("unknown-run", f"no run {run_id!r} in {where}", hint="list runs with: dagplan runs")


def json_copy(value: Any) -> Any:
    """A value as a journal reads it back: the JSON round trip of the log's own spelling."""
    from .wal import dumps

    return json.loads(dumps(value))


# --- in memory ------------------------------------------------------------------------------


class Artifact:
    """What every journal carries from its run's artifact (written before the run starts, never changed), and
    the plan a streamed run's journal wrote later (``plan_written``), which is then its plan."""

    id: str
    plan_name: str
    inputs: dict
    meta: dict
    created: float
    _state: dict
    _artifact_plan: dict

    @property
    def plan_doc(self) -> dict:
        written = self._state.get("plan")
        return written if written is not None else self._artifact_plan

    @property
    def plan_written(self) -> bool:
        """Whether a streamed run's plan was written (then it is the run's plan)."""
        return self._state.get("plan") is not None

    def _take_artifact(self, artifact: Mapping[str, Any]) -> None:
        """The one reading of an artifact: the plan document, its name, the inputs, meta, creation time."""
        self._artifact_plan = artifact["plan"]
        self.plan_name = artifact.get("plan_name", "")
        self.inputs = artifact.get("inputs") or {}
        self.meta = artifact.get("meta") or {}
        self.created = artifact.get("created") or 0.0


class FoldedReads:
    """Reads a journal answers from its folded state when values are kept inline (memory, a database)."""

    id: str
    _state: dict

    def step_output(self, step_id: str) -> Any:
        s = self._state["steps"].get(step_id)
        if s is None or not StepStatus(s["status"]).has_output:
            raise RunError.make("no-output", f"run {self.id}: step {step_id!r} has no recorded output")
        return s.get("output")

    def output_chunks(self, step_id: str) -> Iterator[bytes]:
        yield output_bytes(self.step_output(step_id))

    def memo_get(self, key: str) -> tuple[bool, Any]:
        m = self._state["memo"].get(key)
        return (False, None) if m is None else (True, m.get("value"))


def output_bytes(value: Any) -> bytes:
    """An output as the bytes a viewer shows: text as itself, anything else as indented JSON."""
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return text.encode("utf-8", "surrogatepass")


class GroupCommit:
    """The group commit of a durable journal (files, a database): :meth:`commit` returns once everything
    recorded before it is durable (or, asked for less, written: see the note DURABLE below). At most one write runs
    at a time, in a worker thread; callers that arrive meanwhile share the next one. When no other callback is
    ready to run (a chain), the write runs inline: the hop to a thread and back costs about as much as the
    write itself.

    A journal provides ``_seq`` (recorded), ``_durable_seq`` (durable), ``_written_seq`` (written, durable or
    not), ``_inflight`` (None at first), :meth:`_write` (write the recorded events, synchronously, durably when
    asked; a durable write also makes durable what was only written before) and may override
    :meth:`_after_commit`."""

    _seq: int
    _durable_seq: int
    _written_seq: int
    _inflight: "asyncio.Future | None"

    def _write(self, durable: bool) -> None:
        raise NotImplementedError

    def _after_commit(self) -> None:
        return None

    def _done(self, target: int, durable: bool) -> bool:
        return (self._durable_seq if durable else self._written_seq) >= target

    async def commit(self, durable: bool = True) -> None:
        target = self._seq
        if not self._done(target, durable) and self._inflight is None and not loop_idle():
            await asyncio.sleep(0)  # let ready callbacks run (and ready steps record: they share this commit)
        if not self._done(target, durable) and self._inflight is None and loop_idle() and not _IN_THREADS:
            self._write(durable)  # nothing else could run meanwhile: a thread hop would only add latency
        while not self._done(target, durable):
            if self._inflight is None:
                self._inflight = asyncio.ensure_future(self._write_in_thread(durable))
            await asyncio.shield(self._inflight)
        self._after_commit()

    async def _write_in_thread(self, durable: bool = True) -> None:
        _IN_THREADS.add(self)
        try:
            await asyncio.to_thread(self._write, durable)
        finally:
            _IN_THREADS.discard(self)
            self._inflight = None


# DURABLE: what a run makes durable before it goes on, and what it only writes (the one rule, asked by the engine
# through :meth:`RunScope.acts`): durable, a step's intent before it may act, its completion once it may
# have acted, a paid call's memo, the run's lifecycle (started, waiting, ended, interrupted); only written,
# the completion of a step that cannot act. Written is where another process reads it: a resume after the
# writer's kill -9 finds it. A crash of the machine (or of the database server) may lose the last moment of
# what was only written; a resume then runs those steps again, which is safe because they cannot act, and
# every durable commit makes what was written before it durable too (one log, written in order). Why: a
# durable commit is an fsync, the one part of a run no worker can share (benchmarks/bench_pool.py).

# The journals whose durable write runs in a thread now. While one does, another run's commit goes to a
# thread too instead of blocking the loop: the loop looks idle, but that run's write finishes meanwhile
# and its steps would wait for this one's (a worker's runs: 100 queued 20-step runs, 1 worker, measured).
_IN_THREADS: set["GroupCommit"] = set()


async def release(journal: Any) -> None:
    """The one way a run's journal is let go at the end of a run: a journal that writes (GroupCommit) in a
    worker thread when other work is ready, so a worker's other runs go on while its last writes and unlock
    travel (inline when nothing else could run)."""
    if isinstance(journal, GroupCommit) and not loop_idle():
        await asyncio.to_thread(journal.release)  # type: ignore[attr-defined]
    else:
        journal.release()


def loop_idle() -> bool:
    """Whether the running loop has nothing else ready to run (CPython's ready queue)."""
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    return ready is not None and not ready


class MemoryJournal(Artifact, FoldedReads):
    """A journal in a process's memory: the durability semantics, without a disk."""

    def __init__(self, registry: "MemoryRegistry", run_id: str, artifact: dict):
        self.registry, self.id = registry, run_id
        self._take_artifact({"created": time.time(), **artifact})
        self._log: list[dict] = []
        self._state = empty_state()
        self._owned = False

    def record(self, event: Event) -> None:
        if not self._owned:
            raise RunError.make("run-not-acquired", f"run {self.id}: record before acquire()")
        line = {**json_copy(record_dict(event)), "seq": len(self._log) + 1}
        self._log.append(line)
        fold(self._state, line)

    async def commit(self, durable: bool = True) -> None:
        return None

    def commit_sync(self) -> None:
        return None

    def progress(self) -> Progress:
        live = self.registry.owner(self.id) is not None
        return progress_of(self.id, self._state, plan_step_ids(self.plan_doc), live, self.step_output)

    def events(self, types: Iterable[EventType] | None = None) -> Iterator[Event]:
        wanted = set(types) if types is not None else None
        for line in self._log:
            if wanted is None or line.get("type") in wanted:
                yield Event.from_json(line, self.id)

    def follow(self, cursor: Any = None) -> tuple[list[Event], Any]:
        start = cursor or 0
        return [Event.from_json(line, self.id) for line in self._log[start:]], len(self._log)

    def acquire(self) -> None:
        self.registry.take(self)
        self._owned = True

    def release(self) -> None:
        if self._owned:
            self._owned = False
            self.registry.let_go(self)


class MemoryRegistry:
    """Runs kept in memory (tests, embedding): ``dagplan.run(..., durable=True, state_dir=MemoryRegistry())``."""

    location = "<memory>"

    def __init__(self) -> None:
        self._runs: dict[str, MemoryJournal] = {}
        self._owners: dict[str, int] = {}

    def create(self, *, plan_doc: dict, plan_name: str, inputs: dict, meta: dict | None = None) -> MemoryJournal:
        run_id = new_run_id()
        while run_id in self._runs:
            run_id = new_run_id()
        artifact = {
            "plan": json_copy(plan_doc),
            "plan_name": plan_name,
            "inputs": json_copy(inputs),
            "meta": json_copy(meta or {}),
            "created": time.time(),
        }
        self._runs[run_id] = MemoryJournal(self, run_id, artifact)
        return self._runs[run_id]

    def open(self, run_id: str) -> MemoryJournal:
        run_id = newest_if_asked(run_id, lambda: next((i.id for i in self.list()), None), self.location)
        found = [r for r in self._runs if r.startswith(run_id)] if run_id else []
        if run_id in self._runs:
            return self._runs[run_id]
        if len(found) == 1:
            return self._runs[found[0]]
        raise unknown_run(run_id, self.location)

    def list(self, limit: int | None = None) -> list[RunInfo]:
        out = []
        for run_id in sorted(self._runs, key=lambda r: (self._runs[r].created, r), reverse=True)[:limit]:
            journal = self._runs[run_id]
            p = journal.progress()
            out.append(
                RunInfo(
                    run_id,
                    journal.plan_name,
                    p.status,
                    p.done,
                    len(plan_step_ids(journal.plan_doc)),
                    journal.created,
                    self.owner(run_id),
                    None,
                    p.waiting,
                    dict((p.final or {}).get("usage") or {}),
                    (p.final or {}).get("ts"),
                    bool((p.final or {}).get("had_errors")),
                )
            )
        return out

    def discard(self, run_id: str) -> str:
        journal = self.open(run_id)
        journal.acquire()
        journal.record(Event(EventType.PLAN_ABORTED, journal.id, data={"reason": "discarded"}))
        journal.release()
        del self._runs[journal.id]
        return journal.id

    def cancel(self, run_id: str) -> str:
        journal = self.open(run_id)
        refuse_finished(journal)
        journal.acquire()
        journal.record(Event(EventType.PLAN_CANCELLED, journal.id, data={"reason": "cancelled"}))
        journal.release()
        return journal.id

    # -- ownership --

    def owner(self, run_id: str) -> int | None:
        return self._owners.get(run_id)

    def take(self, journal: MemoryJournal) -> None:
        if self._owners.get(journal.id) is not None:
            raise RunError.make(
                "run-locked",
                f"run {journal.id} is in use",
                hint=f"wait for it, or cancel it with: dagplan discard {journal.id}",
            )
        self._owners[journal.id] = os.getpid()

    def let_go(self, journal: MemoryJournal) -> None:
        self._owners.pop(journal.id, None)
