"""The durable run store: one directory per run under a state directory.

Per run (``<state>/runs/<run_id>/``):

- ``plan.json``   the decomposition artifact: the checked canonical plan document,
                  the inputs and metadata, with a checksum; written once, atomically.
                  A plan is never re-derived (re-asking a model would change step ids).
- ``wal.jsonl``   the write-ahead log: checksummed JSON lines (see :mod:`.wal`),
                  appended to a buffer and made durable by :meth:`Run.commit`
                  (group commit: callers that arrive during an fsync share the next).
- ``snapshot.json`` progress folded from the log up to a byte offset, rewritten
                  atomically at compaction points whose spacing doubles, so the
                  amortised cost per step stays constant however long the run.
- ``step_results/<step>.txt|.json`` and ``memo/<key>.txt|.json``: values whose
                  JSON is over 32 KB, spilled verbatim *before* the event naming them.
- ``lock``        flock'ed by the process that owns the run; holds its pid.

The log is never truncated except for a torn tail: it is the run's audit trail
(``dagplan events``), and the snapshot only saves reading it from the start.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import signal
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ..dsl.errors import RunError
from . import wal
from .config import RESUME_DEFAULTS  # one source of the resume policy's defaults
from .wal import COMPLETED, FAILED, INTERRUPTED, PENDING, SETTLED, SKIPPED, empty_state, fold, owner_pid

INLINE_LIMIT = 32 * 1024  # bytes of JSON above which a value is spilled to its own file
COMPACT_MIN = 512  # events in the log tail before the first compaction
FORMAT = "dagplan-run/1"



def default_state_dir() -> Path:
    """``$DAGPLAN_STATE_DIR``, else ``./.dagplan``."""
    return Path(os.environ.get("DAGPLAN_STATE_DIR") or ".dagplan")


def _new_run_id() -> str:
    """Short, sortable by start time, file-name safe: ``20261121-224501-3f9a``."""
    return f"{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def _discard_hint(run_id: str) -> str:
    return f"the run cannot be resumed (it is never re-planned); remove it with: dagplan discard {run_id}"


def _run_status(state: dict, running: bool) -> str:
    last = state["lifecycle"]
    if last == "plan_aborted":
        return "aborted"
    if last == "plan_completed":
        final = state["final"] or {}
        return "failed" if final.get("status") in ("failed", "aborted") else "completed"
    if running:
        return "running"
    return "waiting" if last == "plan_waiting" else "interrupted"


# --- public values -----------------------------------------------------------------------


@dataclass(frozen=True)
class StepProgress:
    """One step as the log left it. ``output`` is read lazily (spilled outputs from disk)."""

    id: str
    status: str  # pending | completed_with_result | failed | interrupted | skipped
    attempts: int = 0
    duration: float | None = None
    replayed: bool = False
    error: dict | None = None
    handled: bool = False  # failed, but a branching output took the error object
    spilled: bool = False
    fields: Mapping[str, Any] = field(default_factory=dict)  # everything the settling event carried
    _load: Callable[[str], Any] | None = field(default=None, compare=False, repr=False)

    @property
    def output(self) -> Any:
        return self._load(self.id) if self._load and self.status == COMPLETED else None


@dataclass(frozen=True)
class Progress:
    run_id: str
    status: str  # running | interrupted | waiting | completed | failed | aborted
    steps: Mapping[str, StepProgress]
    final: Mapping[str, Any] | None  # the plan_completed event's fields, once finished

    @property
    def done(self) -> int:
        """Settled steps of the plan itself (children of composition steps, ``review[3]`` or
        ``sub.fetch``, have ids no plan step can have, and are not counted)."""
        return sum(1 for s in self.steps.values() if s.status in SETTLED and "[" not in s.id and "." not in s.id)

    def by_status(self, status: str) -> list[str]:
        return [s.id for s in self.steps.values() if s.status == status]


@dataclass(frozen=True)
class RunInfo:
    id: str
    plan_name: str
    status: str  # running | interrupted | waiting | completed | failed | aborted | discarded
    done: int
    total: int
    started: str  # ISO 8601, local time
    pid: int | None = None
    notice: str | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "plan": self.plan_name, "status": self.status, "done": self.done,
                "total": self.total, "started": self.started, "pid": self.pid, "notice": self.notice}


def plan_step_ids(plan_doc: Mapping[str, Any]) -> list[str]:
    """Step ids of a canonical plan document, in document order."""
    steps = plan_doc.get("steps") or []
    if isinstance(steps, Mapping):
        return [str(k) for k in steps]
    return [str(s.get("id")) for s in steps if isinstance(s, Mapping)]


# --- the store ---------------------------------------------------------------------------


class RunStore:
    """All runs under one state directory. Cheap to create; holds no open files."""

    def __init__(self, state_dir: str | os.PathLike | None = None):
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.runs_dir = self.state_dir / "runs"

    def create(self, *, plan_doc: dict, plan_name: str, inputs: dict, meta: dict | None = None) -> "Run":
        """A new run whose artifact is durable before this returns (the run is not locked yet)."""
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        while True:
            run_id = _new_run_id()
            try:
                (self.runs_dir / run_id).mkdir()
                break
            except FileExistsError:
                continue
        run_dir = self.runs_dir / run_id
        artifact = {"format": FORMAT, "id": run_id, "plan_name": plan_name, "created": time.time(),
                    "inputs": inputs, "meta": meta or {}, "plan": plan_doc}
        wal.atomic_write(run_dir / "plan.json", wal.checksummed(artifact))
        wal.fsync_dir(self.runs_dir)
        return Run(run_dir, artifact)

    def resolve(self, run_id: str) -> Path:
        """The directory of a run given its id or a unique prefix of it."""
        if run_id and "/" not in run_id and (self.runs_dir / run_id).is_dir():
            return self.runs_dir / run_id
        found = [p for p in self._run_dirs() if p.name.startswith(run_id)] if run_id else []
        if len(found) == 1:
            return found[0]
        if not found:
            raise RunError.make("unknown-run", f"no run {run_id!r} in {self.state_dir}",
                                hint="list runs with: dagplan runs")
        names = ", ".join(p.name for p in found[:5])
        raise RunError.make("ambiguous-run", f"{run_id!r} matches several runs: {names}",
                            hint="give more of the run id")

    def open(self, run_id: str) -> "Run":
        run_dir = self.resolve(run_id)
        return Run(run_dir, _read_artifact(run_dir))

    def list(self) -> list[RunInfo]:
        """Every run, newest first. Reads without locks; tolerates runs being written."""
        return [self._info(d) for d in sorted(self._run_dirs(), key=lambda p: p.name, reverse=True)]

    def discard(self, run_id: str, *, wait: float = 10.0) -> None:
        """Cancel the run if a live process owns it, record plan_aborted, remove its state."""
        run_dir = self.resolve(run_id)
        _stop_owner(run_dir, wait)
        try:
            run = Run(run_dir, _read_artifact(run_dir))
        except RunError:
            run = None  # a broken artifact: nothing to record into, just remove it
        if run is not None:
            run.acquire()
            run.append({"type": "plan_aborted", "reason": "discarded"})
            run.commit_sync()
            run.close()
        self._audit({"type": "plan_aborted", "run": run_dir.name, "ts": round(time.time(), 6)})
        doomed = run_dir.with_name(f".{run_dir.name}.discarded")
        os.replace(run_dir, doomed)  # one atomic step: the run is gone from list() at once
        shutil.rmtree(doomed, ignore_errors=True)
        wal.fsync_dir(self.runs_dir)

    # -- helpers --

    def _run_dirs(self) -> list[Path]:
        try:
            return [p for p in self.runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
        except FileNotFoundError:
            return []

    def _info(self, run_dir: Path) -> RunInfo:
        started = datetime.fromtimestamp(_mtime(run_dir)).isoformat(timespec="seconds")
        try:
            artifact = _read_artifact(run_dir)
        except RunError as exc:
            return RunInfo(run_dir.name, "?", "discarded", 0, 0, started, notice=exc.diagnostics[0].message)
        run = Run(run_dir, artifact, tolerate_corruption=True)
        progress = run.progress()
        started = datetime.fromtimestamp(artifact.get("created") or 0).isoformat(timespec="seconds")
        return RunInfo(run.id, run.plan_name, progress.status, progress.done, len(plan_step_ids(run.plan_doc)),
                       started, owner_pid(run_dir) if progress.status == "running" else None, run.notice)

    def _audit(self, event: dict) -> None:
        """The store-wide log keeps a line for every discarded run (its own log is removed)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.state_dir / "discarded.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            wal.write_all(fd, wal.encode_line(event))
            os.fsync(fd)
        finally:
            os.close(fd)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _read_artifact(run_dir: Path) -> dict:
    run_id = run_dir.name
    try:
        artifact = wal.read_checksummed(run_dir / "plan.json")
    except FileNotFoundError:
        raise RunError.make("missing-artifact", f"run {run_id}: its plan artifact is missing",
                            hint=_discard_hint(run_id)) from None
    except OSError as exc:
        raise RunError.make("corrupt-artifact", f"run {run_id}: cannot read its plan artifact: {exc}",
                            hint=_discard_hint(run_id)) from None
    if artifact is None or artifact.get("format") != FORMAT or not isinstance(artifact.get("plan"), dict):
        raise RunError.make("corrupt-artifact", f"run {run_id}: its plan artifact is corrupt",
                            hint=_discard_hint(run_id))
    return artifact


# --- cancelling the owner ----------------------------------------------------------------


def _stop_owner(run_dir: Path, wait: float) -> None:
    """SIGTERM the owner (the engine treats it as Ctrl-C) and wait for it to let go."""
    pid = owner_pid(run_dir)
    if pid is None:
        return
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
    deadline = time.monotonic() + wait
    while owner_pid(run_dir) is not None:
        if time.monotonic() > deadline:
            raise RunError.make("run-locked", f"run {run_dir.name} is still owned by process {pid}",
                                hint=f"stop process {pid}, then discard again")
        time.sleep(0.02)


# --- one run -----------------------------------------------------------------------------


class Run:
    """One run: its artifact, its progress folded from snapshot + log, and (once acquired) its log writer."""

    def __init__(self, run_dir: Path, artifact: dict, *, tolerate_corruption: bool = False):
        self.dir = run_dir
        self.id: str = run_dir.name
        self.plan_doc: dict = artifact["plan"]
        self.plan_name: str = artifact.get("plan_name", "")
        self.inputs: dict = artifact.get("inputs") or {}
        self.meta: dict = artifact.get("meta") or {}
        self.created: float = artifact.get("created") or 0.0
        self.notice: str | None = None
        self._wal = run_dir / "wal.jsonl"
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._io = threading.Lock()  # orders buffer swaps with writes (flushes run in a worker thread)
        self._buf: list[bytes] = []
        self._inflight: asyncio.Future | None = None
        self._load(tolerate_corruption)

    # -- reading --

    def _load(self, tolerate: bool) -> None:
        snap = self._read_snapshot()
        self._state, offset, lines = snap or (empty_state(), 0, 0)
        found = wal.scan(self._wal, offset, lines + 1)
        if found.corrupt_line is not None:
            message = f"run {self.id}: {self._wal} line {found.corrupt_line} is corrupt (checksum)"
            if not tolerate:
                raise RunError.make("corrupt-log", message, hint=_discard_hint(self.id))
            self.notice = message
        for event in found.events:
            fold(self._state, event)
        self._seq = found.events[-1]["seq"] if found.events else self._state.get("seq", 0)
        self._durable_seq = self._seq
        self._offset, self._lines, self._torn = found.end, lines + found.lines, found.torn
        self._snap_lines, self._tail = lines, found.lines

    def _read_snapshot(self) -> tuple[dict, int, int] | None:
        """The snapshot if whole and consistent with the log (else None: fold from the start)."""
        try:
            snap = wal.read_checksummed(self.dir / "snapshot.json")
        except OSError:
            return None
        if not snap or snap.get("format") != FORMAT or snap["offset"] > _size(self._wal):
            return None
        snap["state"]["seq"] = snap["seq"]
        return snap["state"], snap["offset"], snap["lines"]

    def progress(self) -> Progress:
        steps = {sid: self._step_progress(sid, s) for sid, s in self._state["steps"].items()}
        for sid in plan_step_ids(self.plan_doc):
            steps.setdefault(sid, StepProgress(sid, PENDING, _load=self.step_output))
        running = self._lock_fd is not None or owner_pid(self.dir) is not None
        return Progress(self.id, _run_status(self._state, running), steps, self._state["final"])

    def _step_progress(self, step_id: str, s: dict) -> StepProgress:
        return StepProgress(
            step_id, s["status"], s.get("attempts", 0), s.get("duration"), bool(s.get("replayed")),
            s.get("error"), bool(s.get("handled")), "spill" in s,
            {k: v for k, v in s.items() if k not in ("output", "status")}, self.step_output,
        )

    def step_output(self, step_id: str) -> Any:
        """A completed step's output, inline or spilled: exactly what was recorded."""
        s = self._state["steps"].get(step_id)
        if s is None or s["status"] != COMPLETED:
            raise RunError.make("no-output", f"run {self.id}: step {step_id!r} has no recorded output")
        return self._value(s, f"step {step_id!r}")

    def memo_get(self, key: str) -> tuple[bool, Any]:
        m = self._state["memo"].get(key)
        return (False, None) if m is None else (True, self._value(m, f"memo {key}"))

    def _value(self, record: dict, what: str) -> Any:
        if "spill" not in record:
            return record.get("output", record.get("value"))
        data = (self.dir / record["spill"]).read_bytes()
        if record.get("spill_crc") is not None and zlib.crc32(data) != record["spill_crc"]:
            raise RunError.make("corrupt-spill", f"run {self.id}: {what}: {record['spill']} does not match its checksum")
        if record["spill"].endswith(".txt"):
            return data.decode("utf-8", "surrogatepass")
        return json.loads(data)

    def events(self, types: set[str] | None = None) -> Iterator[dict]:
        """The whole log from the start (what is on disk), optionally only some types."""
        found = wal.scan(self._wal)
        if found.corrupt_line is not None:
            raise RunError.make("corrupt-log", f"run {self.id}: {self._wal} line {found.corrupt_line} is corrupt")
        for event in found.events:
            if types is None or event.get("type") in types:
                yield event

    # -- the lock --

    def acquire(self) -> None:
        """Own the run (exclusive flock; the lock file holds our pid) and open the log for appending."""
        if self._lock_fd is not None:
            return
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise RunError.make("run-locked", f"run {self.id} is in use by process {pid}",
                                hint=f"wait for it, or cancel it with: dagplan discard {self.id}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd
        self._reload_locked()

    def _reload_locked(self) -> None:
        """Under the lock: re-read what the previous owner left, and cut a torn tail before appending."""
        if self._torn or self.notice or _size(self._wal) != self._offset:
            self._load(tolerate=False)  # the log changed since we read it (or was damaged)
        if self._torn or _size(self._wal) > self._offset:
            with open(self._wal, "r+b") as f:
                f.truncate(self._offset)
                os.fsync(f.fileno())
        self._fd = os.open(self._wal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def release(self) -> None:
        if self._lock_fd is None:
            return
        self.commit_sync()
        os.close(self._fd)
        self._fd = None
        os.ftruncate(self._lock_fd, 0)  # no pid: nobody owns it
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)
        self._lock_fd = None

    def close(self) -> None:
        self.release()

    def __enter__(self) -> "Run":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writing --

    def append(self, event: dict) -> dict:
        """Buffer one event (seq, ts and checksum added); durable at the next commit."""
        if self._fd is None:
            raise RunError.make("run-not-acquired", f"run {self.id}: append before acquire()")
        with self._io:
            self._seq += 1
            event["seq"] = self._seq
            event.setdefault("ts", round(time.time(), 6))
            self._buf.append(wal.encode_line(event))
        fold(self._state, event)
        return event

    def complete_step(self, step_id: str, output: Any, **fields: Any) -> dict:
        """Record a completed step; a large output is spilled (durably) before the event names it."""
        event = {"type": "plan_step_completed", "step": step_id, **fields}
        event.update(self._inline_or_spill(output, "step_results", step_id, "output"))
        return self.append(event)

    def memo_put(self, key: str, value: Any, **fields: Any) -> None:
        """Record a completed call (``fields`` should name its ``step`` so ``--from`` can clear it)."""
        event = {"type": "memo", "key": key, **fields}
        event.update(self._inline_or_spill(value, "memo", _file_safe(key), "value"))
        self.append(event)

    def memo_for(self, step_id: str) -> "StepMemo":
        """The memo as seen by one step: puts are tagged with the step."""
        return StepMemo(self, step_id)

    def _inline_or_spill(self, value: Any, folder: str, name: str, key: str) -> dict:
        text = wal.dumps(value)
        if len(text) <= INLINE_LIMIT:
            return {key: value}
        if isinstance(value, str):
            data, rel = value.encode("utf-8", "surrogatepass"), f"{folder}/{name}.txt"
        else:
            data, rel = text.encode("ascii"), f"{folder}/{name}.json"
        (self.dir / folder).mkdir(exist_ok=True)
        wal.atomic_write(self.dir / rel, data)
        return {"spill": rel, "spill_bytes": len(data), "spill_crc": zlib.crc32(data)}

    def commit_sync(self) -> None:
        """Write and fsync everything appended so far."""
        self._flush()
        self._maybe_compact()

    async def commit(self) -> None:
        """Group commit: wait until everything appended before this call is durable.

        At most one fsync runs at a time, in a worker thread; callers that arrive
        while it runs wait for it and then share the next one. When no other
        callback is ready to run (a chain), the fsync runs inline: the hop to a
        thread and back costs about as much as the fsync itself.
        """
        target = self._seq
        if self._durable_seq < target and self._inflight is None and not _loop_idle():
            await asyncio.sleep(0)  # let ready callbacks run (and ready steps append: they share this commit)
        if self._durable_seq < target and self._inflight is None and _loop_idle():
            self._flush()  # nothing else could run meanwhile: a thread hop would only add latency
        while self._durable_seq < target:
            if self._inflight is None:
                self._inflight = asyncio.ensure_future(self._flush_in_thread())
            await asyncio.shield(self._inflight)
        self._maybe_compact()

    async def _flush_in_thread(self) -> None:
        try:
            await asyncio.to_thread(self._flush)
        finally:
            self._inflight = None

    def _flush(self) -> None:
        with self._io:
            self._write_buffer()

    def _write_buffer(self) -> None:
        """Under ``self._io``: write the buffered lines and fsync them."""
        if not self._buf:
            return
        data, upto = b"".join(self._buf), self._seq
        self._buf = []
        wal.write_all(self._fd, data)
        os.fsync(self._fd)
        self._offset += len(data)
        self._tail += data.count(b"\n")
        self._durable_seq = upto

    # -- compaction --

    def _maybe_compact(self) -> None:
        """Compact when the tail is as long as what the snapshot covers: amortised O(1) per event."""
        if self._tail >= max(COMPACT_MIN, self._snap_lines) and self._inflight is None:
            self.compact()

    def compact(self) -> None:
        """Write the snapshot (folded progress up to the durable end of the log) atomically."""
        if self._fd is None:
            return
        with self._io:
            self._write_buffer()  # only durable events may be in a snapshot
            lines = self._snap_lines + self._tail
            snap = {"format": FORMAT, "seq": self._durable_seq, "offset": self._offset, "lines": lines,
                    "state": {k: v for k, v in self._state.items() if k != "seq"}}
            wal.atomic_write(self.dir / "snapshot.json", wal.checksummed(snap))
            self._snap_lines, self._tail = lines, 0

    # -- resume --

    def clear_from(self, step_id: str, order: list[str]) -> list[str]:
        """Forget recorded results of ``step_id`` and every step after it in ``order`` (topological).

        Appends ``plan_steps_cleared`` (earlier results stay and replay at no cost);
        returns the cleared ids. Call with the run acquired, then commit.
        """
        check_step(self, step_id, order)
        cleared = order[order.index(step_id) :]
        parents = tuple(p + c for p in cleared for c in ("[", "."))  # children: review[3], sub.fetch
        cleared += [sid for sid in self._state["steps"] if sid.startswith(parents)]
        self.append({"type": "plan_steps_cleared", "from": step_id, "steps": cleared})
        return cleared


@dataclass(frozen=True)
class StepMemo:
    """The memo protocol (``memo_get``/``memo_put``) for one step of a run."""

    run: Run
    step_id: str

    def memo_get(self, key: str) -> tuple[bool, Any]:
        return self.run.memo_get(key)

    def memo_put(self, key: str, value: Any, **fields: Any) -> None:
        self.run.memo_put(key, value, step=self.step_id, **fields)

    async def commit(self) -> None:
        """Make the puts so far durable (LLM steps call it after each model call)."""
        await self.run.commit()


def check_step(run: Run, step_id: str, order: list[str] | None = None) -> None:
    """Reject a ``--from`` step id that is not in the run's plan, listing the valid ones."""
    valid = order if order is not None else plan_step_ids(run.plan_doc)
    if step_id not in valid:
        raise RunError.make("unknown-step", f"run {run.id} has no step {step_id!r}",
                            hint="valid step ids: " + ", ".join(valid))


def _loop_idle() -> bool:
    """Whether the running loop has nothing else ready to run (CPython's ready queue)."""
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    return ready is not None and not ready


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _file_safe(key: str) -> str:
    ok = key.replace("-", "").replace("_", "").isalnum() and key.isascii() and len(key) <= 128
    return key if ok else hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


# --- resume analysis ---------------------------------------------------------------------



@dataclass(frozen=True)
class ResumePlan:
    """What a resume does with each step: ``replay`` | ``run`` | ``retry`` | ``adopt`` | ``ask``."""

    policy: str  # retry_pending | discard
    classes: Mapping[str, str]  # step -> pending | completed_with_result | failed | interrupted
    actions: Mapping[str, str]

    def asking(self) -> list[str]:
        """Interrupted side-effecting steps whose fate a person must decide."""
        return [sid for sid, action in self.actions.items() if action == "ask"]


def classify(progress: Progress, plan: Any) -> dict[str, str]:
    """Each step of ``plan`` as the log left it; a skipped step is pending again (re-evaluated)."""
    classes = {}
    for step_id, _ in _purities(plan):
        status = progress.steps[step_id].status if step_id in progress.steps else PENDING
        classes[step_id] = PENDING if status == SKIPPED else status
    return classes


def resume_plan(progress: Progress, plan: Any, policy: Mapping[str, str] | None = None) -> ResumePlan:
    """Apply the resume policy (``Config.resume``) to the classified steps.

    Completed steps replay; pending and failed ones run; an interrupted step is
    retried, adopted or asked about according to its purity (undeclared purity
    follows ``policy["undeclared"]``, retry by default: at-least-once).
    """
    policy = {**RESUME_DEFAULTS, **(policy or {})}
    classes = classify(progress, plan)
    actions = {}
    for step_id, purity in _purities(plan):
        cls = classes[step_id]
        if cls == COMPLETED:
            actions[step_id] = "replay"
        elif cls == INTERRUPTED:
            actions[step_id] = policy.get(purity or "undeclared", "retry")
        else:
            actions[step_id] = "run"
    return ResumePlan(policy["default"], classes, actions)


def _purities(plan: Any) -> list[tuple[str, str | None]]:
    """(id, purity) of each step of a Plan IR or of a canonical plan document."""
    if isinstance(plan, Mapping):
        steps = plan.get("steps") or []
        if isinstance(steps, Mapping):
            return [(str(k), (v or {}).get("purity")) for k, v in steps.items()]
        return [(str(s.get("id")), s.get("purity")) for s in steps if isinstance(s, Mapping)]
    return [(s.id, s.purity) for s in plan.steps]


def prepare_resume(store: RunStore, run_id: str, from_step: str | None = None,
                   order: list[str] | None = None) -> Run:
    """Open a run for resuming, rejecting what cannot be resumed.

    Raises RunError ``unknown-run`` / ``ambiguous-run``, ``missing-artifact`` /
    ``corrupt-artifact`` (hint: ``dagplan discard RUN``), ``corrupt-log``,
    ``unknown-step`` (listing the valid ids), ``run-finished`` for an aborted run.
    The run is returned unlocked; the caller acquires it.
    """
    run = store.open(run_id)
    if from_step is not None:
        check_step(run, from_step, order)
    if run.progress().status == "aborted":
        raise RunError.make("run-finished", f"run {run.id} was discarded", hint="start a new run")
    return run
