"""The file journal: one directory per run under a state directory (the embedded default).

Per run (``<state>/runs/<run_id>/``):

- ``plan.json``   the decomposition artifact: the checked canonical plan document,
                  the inputs and how the run was started, with a checksum; written
                  once, atomically. A plan is never re-derived (re-asking a model
                  would change step ids).
- ``wal.jsonl``   the write-ahead log: checksummed JSON lines (see :mod:`.wal`),
                  appended to a buffer and made durable by :meth:`Run.commit`
                  (group commit: callers that arrive during an fsync share the next).
- ``snapshot.json`` progress folded from the log up to a byte offset, rewritten
                  atomically at compaction points whose spacing doubles, so the
                  amortised cost per step stays constant however long the run.
- ``step_results/<step>.txt|.json`` and ``memo/<key>.txt|.json``: values whose
                  JSON is over 32 KB, spilled verbatim *before* the event naming them.
- ``lock``        flock'ed by the process that owns the run; holds its pid.

The log is never truncated except for a torn tail and the room reserved past its end (see :mod:`.wal`):
it is the run's audit trail (``dagplan events``), and the snapshot only saves reading it from the start.
"""

from __future__ import annotations

import asyncio
import builtins
import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import threading
import time
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator

from ...dsl import no_gc_pauses
from ...dsl.errors import RunError
from . import wal
from .journal import (
    RUN_ID,
    Artifact,
    GroupCommit,
    new_run_id,
    newest_if_asked,
    not_a_run_id,
    output_bytes,
    record_dict,
    refuse_finished,
    unknown_run,
)
from ..core.progress import Progress, RunInfo, empty_state, fold, plan_step_ids, progress_of
from ..core.vocabulary import Event, EventType, RunStatus, StepStatus
from .wal import owner_pid

INLINE_LIMIT = 32 * 1024  # bytes of JSON above which a value is spilled to its own file
COMPACT_MIN = 512  # events in the log tail before the first compaction
FORMAT = "dagplan-run/2"  # /1 folded statuses under other names: its snapshots are re-folded from the log
_FORMATS = ("dagplan-run/1", FORMAT)


def default_state_dir() -> Path:
    """``$DAGPLAN_STATE_DIR``, else ``./.dagplan`` (``$DAGPLAN_STATE`` is read by :func:`.journal.open_registry`)."""
    return Path(os.environ.get("DAGPLAN_STATE_DIR") or ".dagplan")


def _discard_hint(run_id: str) -> str:
    return f"the run cannot be resumed (it is never re-planned); remove it with: dagplan discard {run_id}"


def io_error(path: Path, exc: OSError, doing: str) -> RunError:
    """The one wording of a state directory that cannot be used (code ``io``: exit 2)."""
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, (NotADirectoryError, FileExistsError)) or exc.errno in (errno.ENOTDIR, errno.EEXIST):
        reason = "a file is in the way (it must be a directory)"
    return RunError.make(
        "io",
        f"cannot {doing} {path}: {reason}",
        hint="give another --state-dir (or $DAGPLAN_STATE_DIR), or fix its permissions",
    )


# --- the registry ------------------------------------------------------------------------


class RunStore:
    """All runs under one state directory. Cheap to create; holds no open files."""

    def __init__(self, state_dir: str | os.PathLike | None = None):
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.runs_dir = self.state_dir / "runs"
        self.location = str(self.state_dir)

    def create(self, *, plan_doc: dict, plan_name: str, inputs: dict, meta: dict | None = None) -> "Run":
        """A new run whose artifact is durable before this returns (the run is not locked yet)."""
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            while True:
                run_id = new_run_id()
                try:
                    (self.runs_dir / run_id).mkdir()
                    break
                except FileExistsError:
                    continue
            run_dir = self.runs_dir / run_id
            artifact = {
                "format": FORMAT,
                "id": run_id,
                "plan_name": plan_name,
                "created": time.time(),
                "inputs": inputs,
                "meta": meta or {},
                "plan": plan_doc,
            }
            wal.atomic_write(run_dir / "plan.json", wal.checksummed(artifact))
            wal.fsync_dir(self.runs_dir)
        except OSError as exc:
            raise io_error(self.state_dir, exc, "keep runs in") from None
        return Run(run_dir, artifact)

    def resolve(self, run_id: str) -> Path:
        """The directory of a run given its id, a unique prefix of it or ``@last`` (never a path outside the store)."""
        run_id = newest_if_asked(run_id, self._newest, str(self.state_dir))
        if not isinstance(run_id, str) or not RUN_ID.match(run_id):
            raise not_a_run_id(run_id)
        if (self.runs_dir / run_id).is_dir():
            return self.runs_dir / run_id
        found = [p for p in self._run_dirs() if p.name.startswith(run_id)]
        if len(found) == 1:
            return found[0]
        if not found:
            raise unknown_run(run_id, str(self.state_dir))
        names = ", ".join(p.name for p in found[:5])
        raise RunError.make(
            "ambiguous-run", f"{run_id!r} matches several runs: {names}", hint="give more of the run id"
        )

    def open(self, run_id: str) -> "Run":
        run_dir = self.resolve(run_id)
        return Run(run_dir, _read_artifact(run_dir))

    def list(self, limit: int | None = None) -> list[RunInfo]:
        """The newest ``limit`` runs (every run: None), newest first (by start: two runs started in the same
        second too). Only those are read (the newest by their artifact, written once when each was created).
        Reads without locks; tolerates runs being written."""
        dirs = self._run_dirs()
        if limit is not None and len(dirs) > limit:
            dirs = sorted(dirs, key=lambda p: (_mtime(p / "plan.json"), p.name), reverse=True)[:limit]
        return sorted((self._info(d) for d in dirs), key=lambda i: (i.started, i.id), reverse=True)

    def _newest(self) -> str | None:
        """The run started last: its artifact, written once when it was created, is the newest."""
        dirs = self._run_dirs()
        return max(dirs, key=lambda p: (_mtime(p / "plan.json"), p.name)).name if dirs else None

    def discard(self, run_id: str, *, wait: float = 10.0) -> str:
        """Cancel the run if a live process owns it, record plan_aborted, remove its state."""
        run_dir = self.resolve(run_id)
        _stop_owner(run_dir, wait)
        try:
            run = Run(run_dir, _read_artifact(run_dir))
        except RunError:
            run = None  # a broken artifact: nothing to record into, just remove it
        try:
            if run is not None:
                run.acquire()
                run.record(Event(EventType.PLAN_ABORTED, run.id, data={"reason": "discarded"}))
                run.release()
            self._audit({"type": EventType.PLAN_ABORTED, "run": run_dir.name, "ts": round(time.time(), 6)})
            doomed = run_dir.with_name(f".{run_dir.name}.discarded")
            os.replace(run_dir, doomed)  # one atomic step: the run is gone from list() at once
            shutil.rmtree(doomed, ignore_errors=True)
            wal.fsync_dir(self.runs_dir)
        except OSError as exc:
            raise io_error(run_dir, exc, "discard") from None
        return run_dir.name

    def cancel(self, run_id: str, *, wait: float = 10.0) -> str:
        """Stop the run's owner if it has one (it records the run interrupted), then record it cancelled."""
        run_dir = self.resolve(run_id)
        run = Run(run_dir, _read_artifact(run_dir))
        refuse_finished(run)
        _stop_owner(run_dir, wait)
        run = Run(run_dir, _read_artifact(run_dir))
        run.acquire()
        try:
            run.record(Event(EventType.PLAN_CANCELLED, run.id, data={"reason": "cancelled"}))
        finally:
            run.release()
        return run_dir.name

    def owner(self, run_id: str) -> int | None:
        return owner_pid(self.resolve(run_id))

    # -- helpers --

    def _run_dirs(self) -> "builtins.list[Path]":  # `list` in this class is a method
        try:
            return [p for p in self.runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise io_error(self.state_dir, exc, "read runs from") from None

    def _info(self, run_dir: Path) -> RunInfo:
        try:
            artifact = _read_artifact(run_dir)
        except RunError as exc:
            return RunInfo(
                run_dir.name, "?", RunStatus.DISCARDED, 0, 0, _mtime(run_dir), notice=exc.diagnostics[0].message
            )
        run = Run(run_dir, artifact, tolerate_corruption=True)
        progress = run.progress()
        final = progress.final or {}
        live = progress.status is RunStatus.RUNNING
        return RunInfo(
            run.id,
            run.plan_name,
            progress.status,
            progress.done,
            len(plan_step_ids(run.plan_doc)),
            run.created,
            owner_pid(run_dir) if live else None,
            run.notice,
            progress.waiting,
            dict(final.get("usage") or {}),
            final.get("ts"),
            bool(final.get("had_errors")),
        )

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
        raise RunError.make(
            "missing-artifact", f"run {run_id}: its plan artifact is missing", hint=_discard_hint(run_id)
        ) from None
    except OSError as exc:
        raise RunError.make(
            "corrupt-artifact", f"run {run_id}: cannot read its plan artifact: {exc}", hint=_discard_hint(run_id)
        ) from None
    if artifact is None or artifact.get("format") not in _FORMATS or not isinstance(artifact.get("plan"), dict):
        raise RunError.make(
            "corrupt-artifact", f"run {run_id}: its plan artifact is corrupt", hint=_discard_hint(run_id)
        )
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
            raise RunError.make(
                "run-locked",
                f"run {run_dir.name} is still owned by process {pid}",
                hint=f"stop process {pid}, then discard again",
            )
        time.sleep(0.02)


# --- one run -----------------------------------------------------------------------------


class Run(Artifact, GroupCommit):
    """One run: its artifact, its progress folded from snapshot + log, and (once acquired) its log writer."""

    def __init__(self, run_dir: Path, artifact: dict, *, tolerate_corruption: bool = False):
        self.dir = run_dir
        self.id: str = run_dir.name
        self._take_artifact(artifact)
        self.notice: str | None = None
        self._wal = run_dir / "wal.jsonl"
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._reserved = 0  # bytes of the log file, its end and the room reserved past it (wal.reserve)
        self._io = threading.Lock()  # orders buffer swaps with writes (flushes run in a worker thread)
        self._buf: list[bytes] = []
        self._broken: RunError | None = None  # a write that failed (a full disk): the run stops, said once
        self._inflight: asyncio.Future | None = None
        self._load(tolerate_corruption)

    # -- reading --

    @no_gc_pauses()  # folding a long log builds many small objects (a 100,000-step run: 2x without)
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
        self._durable_seq = self._written_seq = self._seq
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
        live = self._lock_fd is not None or owner_pid(self.dir) is not None
        return progress_of(self.id, self._state, plan_step_ids(self.plan_doc), live, self.step_output)

    def step_output(self, step_id: str) -> Any:
        """A completed (or handled) step's output, inline or spilled: exactly what was recorded."""
        s = self._state["steps"].get(step_id)
        if s is None or not StepStatus(s["status"]).has_output:
            raise RunError.make("no-output", f"run {self.id}: step {step_id!r} has no recorded output")
        return self._value(s, f"step {step_id!r}")

    def output_chunks(self, step_id: str, size: int = 1 << 16) -> Iterator[bytes]:
        """The journal protocol: a step's output as bytes, a spilled one read from its file in chunks."""
        s = self._state["steps"].get(step_id)
        if s is None or not StepStatus(s["status"]).has_output:
            raise RunError.make("no-output", f"run {self.id}: step {step_id!r} has no recorded output")
        if "spill" not in s:
            yield output_bytes(s.get("output"))
            return
        with open(self.dir / s["spill"], "rb") as handle:
            while chunk := handle.read(size):
                yield chunk

    def memo_get(self, key: str) -> tuple[bool, Any]:
        m = self._state["memo"].get(key)
        return (False, None) if m is None else (True, self._value(m, f"memo {key}"))

    def _value(self, record: dict, what: str) -> Any:
        if "spill" not in record:
            return record.get("output", record.get("value"))
        data = (self.dir / record["spill"]).read_bytes()
        if record.get("spill_crc") is not None and zlib.crc32(data) != record["spill_crc"]:
            raise RunError.make(
                "corrupt-spill", f"run {self.id}: {what}: {record['spill']} does not match its checksum"
            )
        if record["spill"].endswith(".txt"):
            return data.decode("utf-8", "surrogatepass")
        return json.loads(data)

    def events(self, types: Iterable[EventType] | None = None) -> Iterator[Event]:
        """The whole log from the start (what is on disk), optionally only some types."""
        wanted = set(types) if types is not None else None
        for line in self.lines():
            if wanted is None or line.get("type") in wanted:
                yield Event.from_json(line, self.id)

    def follow(self, cursor: Any = None) -> tuple[list[Event], Any]:
        """The journal protocol: events after byte offset ``cursor`` (the log is append-only; a torn last
        line is left for the next call), and the offset after them."""
        found = wal.scan(self._wal, cursor or 0)
        return [Event.from_json(line, self.id) for line in found.events], found.end

    def lines(self) -> list[dict]:
        """The log's events as stored (JSON objects with seq, ts and crc)."""
        found = wal.scan(self._wal)
        if found.corrupt_line is not None:
            raise RunError.make("corrupt-log", f"run {self.id}: {self._wal} line {found.corrupt_line} is corrupt")
        return found.events

    # -- the lock --

    def acquire(self) -> None:
        """Own the run (exclusive flock; the lock file holds our pid) and open the log for appending."""
        if self._lock_fd is not None:
            return
        try:
            fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise io_error(self.dir, exc, "write the run in") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise RunError.make(
                "run-locked",
                f"run {self.id} is in use by process {pid}",
                hint=f"wait for it, or cancel it with: dagplan discard {self.id}",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd
        self._reload_locked()

    def _reload_locked(self) -> None:
        """Under the lock: re-read what the previous owner left, and cut a torn tail before appending."""
        if self._torn or self.notice or _size(self._wal) != self._offset:
            self._load(tolerate=False)  # the log changed since we read it (or was damaged)
        if self._torn or _size(self._wal) > self._offset:  # a torn tail, or the room a crash left
            with open(self._wal, "r+b") as f:
                f.truncate(self._offset)
                os.fsync(f.fileno())
        self._fd = os.open(self._wal, os.O_WRONLY | os.O_CREAT, 0o644)
        self._reserved = self._offset

    def release(self) -> None:
        if self._lock_fd is None:
            return
        try:
            self.commit_sync()
        finally:
            if self._fd is not None:
                self._give_back_room()
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

    def record(self, event: Event) -> dict:
        """The journal protocol: buffer one event; a large output or memo value is spilled first.

        Returns the line as stored (with ``seq``, and ``spill`` in place of a spilled value)."""
        line = record_dict(event)
        if event.type is EventType.STEP_COMPLETED and "output" in line:
            line.update(self._inline_or_spill(line.pop("output"), "step_results", event.step or "", "output"))
        elif event.type is EventType.MEMO:
            line.update(self._inline_or_spill(line.pop("value"), "memo", _file_safe(line["key"]), "value"))
        return self.append(line)

    def append(self, event: dict) -> dict:
        """Buffer one event as given (seq, ts and checksum added); durable at the next commit."""
        if self._fd is None:
            raise RunError.make("run-not-acquired", f"run {self.id}: append before acquire()")
        with self._io:
            self._seq += 1
            event["seq"] = self._seq
            if "ts" not in event:  # (setdefault would take the time of every event)
                event["ts"] = round(time.time(), 6)
            self._buf.append(wal.encode_line(event))
        fold(self._state, event)
        return event

    def _inline_or_spill(self, value: Any, folder: str, name: str, key: str) -> dict:
        if type(value) in _SMALL or (type(value) is str and len(value) * 12 + 2 <= INLINE_LIMIT):
            return {key: value}  # certainly inline (a character is at most 12 in ASCII JSON: a surrogate pair)
        text = wal.dumps(value)
        if len(text) <= INLINE_LIMIT:
            return {key: value}
        if isinstance(value, str):
            data, rel = value.encode("utf-8", "surrogatepass"), f"{folder}/{name}.txt"
        else:
            data, rel = text.encode("ascii"), f"{folder}/{name}.json"
        try:
            (self.dir / folder).mkdir(exist_ok=True)
            wal.atomic_write(self.dir / rel, data)
        except OSError as exc:  # a full disk while spilling: the same stop as a journal write that fails
            raise self._cannot_write(exc) from None
        return {"spill": rel, "spill_bytes": len(data), "spill_crc": zlib.crc32(data)}

    def commit_sync(self) -> None:
        """Write and fsync everything appended so far."""
        self._flush()
        self._maybe_compact()

    def _write(self, durable: bool) -> None:  # GroupCommit: a write of the buffered lines, fsync'ed if durable
        with self._io:
            self._write_buffer(durable)

    def _after_commit(self) -> None:
        self._maybe_compact()

    def _cannot_write(self, exc: OSError) -> RunError:
        """The one stop for a write the disk refused (full, a quota, gone): the run stops, said once, and what
        was committed before is kept."""
        self._broken = RunError.make(
            "io",
            f"cannot write the journal of run {self.id} in {self.dir.parent}: {exc.strerror or exc}; the run "
            "stopped, and everything committed before is kept",
            hint=f"free some space, then: dagplan resume {self.id}",
        )
        return self._broken

    def _flush(self) -> None:
        with self._io:
            self._write_buffer()

    def _write_buffer(self, durable: bool = True) -> None:
        """Under ``self._io``: write the buffered lines, and fsync them (and what was written before) if
        ``durable``."""
        if not self._buf or self._broken is not None:
            self._buf = []
            if durable and self._durable_seq < self._written_seq and self._broken is None:
                assert self._fd is not None
                wal.sync_data(self._fd)  # written lazily before: one fsync makes it durable
                self._durable_seq = self._written_seq
            return
        data, upto = b"".join(self._buf), self._seq
        self._buf = []
        assert self._fd is not None  # appending requires the run acquired
        try:
            if self._offset + len(data) > self._reserved:
                self._reserved = wal.reserve(self._fd, self._reserved, self._offset + len(data))
            wal.write_at(self._fd, data, self._offset, sync=durable)
        except OSError as exc:  # a full disk, a quota: cut the torn tail, stop the run, say what is kept
            try:
                os.ftruncate(self._fd, self._offset)
                self._reserved = self._offset
            except OSError:
                pass
            raise self._cannot_write(exc) from None
        self._offset += len(data)
        self._tail += data.count(b"\n")
        self._written_seq = upto
        if durable:
            self._durable_seq = upto

    def _give_back_room(self) -> None:
        """Cut the room reserved past the log's end: a run let go leaves a log of whole lines (not synced:
        should the cut be lost in a crash, readers stop at the zeros)."""
        if self._reserved > self._offset:
            try:
                os.ftruncate(self._fd, self._offset)  # type: ignore[arg-type]
            except OSError:
                pass
            self._reserved = self._offset

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
            snap = {
                "format": FORMAT,
                "seq": self._durable_seq,
                "offset": self._offset,
                "lines": lines,
                "state": {k: v for k, v in self._state.items() if k != "seq"},
            }
            wal.atomic_write(self.dir / "snapshot.json", wal.checksummed(snap))
            self._snap_lines, self._tail = lines, 0


_SMALL = frozenset({int, float, bool, type(None)})


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _file_safe(key: str) -> str:
    ok = key.replace("-", "").replace("_", "").isalnum() and key.isascii() and len(key) <= 128
    return key if ok else hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
