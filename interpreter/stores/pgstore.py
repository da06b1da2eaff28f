"""Runs in PostgreSQL: the journal and registry protocols (:mod:`.journal`) on a database, via psycopg 3.

``state = "postgresql://..."`` (the configuration, ``--state-dir``, ``$DAGPLAN_STATE``) puts runs
here instead of files, with the file journal's guarantees:

- each event is a row of ``dagplan_events`` (the same JSON line the file journal writes), numbered
  ``seq`` per run; :meth:`PgRun.commit` inserts every event recorded since the last commit in one
  transaction (completions that land together share it), and returns once it committed: a completion
  is written before any dependent starts (durable if the step may have acted; else its transaction
  commits without waiting for the WAL's flush: the note DURABLE in :mod:`.journal`), a side effect's
  intent is durable before it runs, a completed call
  (its ``memo`` row) before the next is paid for;
- one writer per run: :meth:`PgRun.acquire` takes a session-level advisory lock on its own connection,
  which PostgreSQL releases when that connection dies (a ``kill -9``), so another process can resume;
- the artifact (the plan, inputs, meta) is a row of ``dagplan_runs``, written before the run starts.

Outputs and memo values are kept inline in their event (PostgreSQL compresses large values out of
line, TOAST), so ``output_chunks`` reads a value in one piece. The schema is created and migrated by
:func:`upgrade` (``dagplan db upgrade``), versioned in ``dagplan_schema``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from typing import Any, Iterable, Iterator, Mapping

from ...dsl.errors import RunError, first_line, translating
from ...dsl.files import json_safe
from ..core.redact import masked
from .journal import (
    Artifact,
    FoldedReads,
    GroupCommit,
    not_a_run_id,
    record_dict,
    refuse_finished,
    newest_if_asked,
    unknown_run,
)
from ..core.progress import Progress, RunInfo, empty_state, fold, plan_step_ids, progress_of
from .journal import RUN_ID, new_run_id
from ..core.vocabulary import STOPPED, Event, EventType, RunStatus

# what a worker may take without asking whether anyone holds it: queued or handed back, in the pool. Written as the
# ready index's predicate, literally, so that the planner reads that index (a finished run is in no index a
# claim reads: its cost does not grow with history)
_READY_ROW = "pooled AND queue IN ('queued', 'interrupted')"
SCHEMA_VERSION = 6
MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS dagplan_runs (
            id text PRIMARY KEY,
            plan_name text NOT NULL,
            created double precision NOT NULL,
            artifact jsonb NOT NULL,
            owner text
        )""",
        """CREATE TABLE IF NOT EXISTS dagplan_events (
            run_id text NOT NULL REFERENCES dagplan_runs(id) ON DELETE CASCADE,
            seq bigint NOT NULL,
            line text NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE IF NOT EXISTS dagplan_discarded (run_id text NOT NULL, ts double precision NOT NULL)""",
    ],
    2: [  # the pool: runs submitted to workers, and where each stands
        "ALTER TABLE dagplan_runs ADD COLUMN IF NOT EXISTS pooled boolean NOT NULL DEFAULT false",
        "ALTER TABLE dagplan_runs ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'running'",
        "CREATE INDEX IF NOT EXISTS dagplan_runs_claimable ON dagplan_runs (created) WHERE pooled",
    ],
    3: [  # the pool speaks the run statuses of the vocabulary ('done' was its own word for a finished run)
        "UPDATE dagplan_runs SET queue = 'completed' WHERE queue = 'done'",
    ],
    4: [  # a waiting run whose gate deadline passed is claimable from then: its on_timeout applies
        "ALTER TABLE dagplan_runs ADD COLUMN IF NOT EXISTS wake double precision",
    ],
    5: [  # schedules: each time a schedule fired (run_id NULL: the time a schedule was first seen, from which
        # it counts), one row a (schedule, time): workers firing at once submit one run
        """CREATE TABLE IF NOT EXISTS dagplan_schedule_fires (
            name text NOT NULL,
            fire_at double precision NOT NULL,
            run_id text,
            PRIMARY KEY (name, fire_at)
        )""",
    ],
    6: [  # a claim reads only the rows it can claim, whatever the history (issue 64): an index of each kind
        "DROP INDEX IF EXISTS dagplan_runs_claimable",  # every pooled run, finished ones included
        f"CREATE INDEX IF NOT EXISTS dagplan_runs_ready ON dagplan_runs (created) WHERE {_READY_ROW}",
        "CREATE INDEX IF NOT EXISTS dagplan_runs_running ON dagplan_runs (created) WHERE queue = 'running'",
        "CREATE INDEX IF NOT EXISTS dagplan_runs_wake ON dagplan_runs (wake) WHERE queue = 'waiting'",
    ],
}
LOCK_CLASS = 1684107377  # the first key of every run's advisory lock (the second: hashtext of its id)
# where a run stands for the pool (a RunStatus), from the last lifecycle event committed: the vocabulary's
# table of stopping events, and an answered gate puts the run back in the queue
_QUEUE = {
    EventType.PLAN_STARTED: RunStatus.RUNNING,
    EventType.GATE_ANSWERED: RunStatus.QUEUED,
    EventType.PLAN_COMPLETED: RunStatus.COMPLETED,
    **STOPPED,
}
CLAIMABLE = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.INTERRUPTED)  # with no owner holding the run's lock
# a queued or handed-back run of the pool, or any run waiting at a gate whose deadline passed (like an answer, it
# puts the run in the pool); parameter: now. Each arm is an index's predicate (migration 6).
_READY = f"((r.{_READY_ROW.replace(' AND queue', ' AND r.queue')}) OR (r.queue = 'waiting' AND r.wake <= %s))"
_ORPHANED = "(r.pooled AND r.queue = 'running')"  # running, its owner maybe gone: claimable when nobody holds it
ORPHAN_SWEEP = 2.0  # seconds between a worker's looks for runs whose owner died (the only claim reading pg_locks)
CHANNEL = "dagplan_runs"  # NOTIFY'd when a run becomes claimable: idle workers wait for it instead of polling


_INSERT_RUN = "INSERT INTO dagplan_runs (id, plan_name, created, artifact, pooled, queue)"


def _artifact(plan_doc: dict, plan_name: str, inputs: dict, meta: dict) -> dict:
    """A new run's artifact (what it runs, with what), as every new run's row holds it."""
    return {"plan": plan_doc, "plan_name": plan_name, "inputs": inputs, "meta": meta, "created": time.time()}


def nul_at(value: Any) -> str | None:
    """Where ``value`` holds a NUL character (``\\u0000``, in a text or a key), which PostgreSQL's ``jsonb`` cannot
    store, as a path (``name``, ``rows[2].text``); None when nowhere. Walked without recursion."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        path, current = todo.pop()
        if isinstance(current, str):
            if "\0" in current:
                return path or "the value"
        elif isinstance(current, Mapping):
            for key, item in current.items():
                if "\0" in str(key):
                    return f"{path}.{key!r}".lstrip(".")
                todo.append((f"{path}.{key}".lstrip("."), item))
        elif isinstance(current, (list, tuple)):
            todo.extend((f"{path}[{index}]", item) for index, item in enumerate(current))
    return None


def refuse_nul(inputs: Any, where: str = "") -> None:
    """A :class:`RunError` (``bad-input``, at ``where``) when the inputs hold what the run database cannot."""
    found = nul_at(inputs)
    if found is not None:
        raise RunError.make("bad-input", f"{where}input {found} holds a NUL character (\\u0000), which the run "
                            "database cannot store", hint="remove it from the value (it is seldom meant)")  # fmt: skip


def _run_row(run_id: str, artifact: dict, queued: bool) -> tuple:
    """The values of :data:`_INSERT_RUN` for a new run (``queued``: in the pool's queue from its first row)."""
    queue = RunStatus.QUEUED if queued else RunStatus.RUNNING
    text = json.dumps(artifact, ensure_ascii=False, default=str)
    return run_id, artifact["plan_name"], artifact["created"], text, queued, str(queue)


def owner_name() -> str:
    """This process as a run's owner: what ``runs`` and a lock message show."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _wake(line: Mapping[str, Any]) -> float | None:
    """When a waiting run should be taken up again: the earliest deadline of the gates it waits at."""
    deadlines = [w["deadline"] for w in line.get("waiting") or () if isinstance(w, Mapping) and w.get("deadline")]
    return min(deadlines) if deadlines else None


def _connect(url: str, **kwargs: Any) -> Any:
    try:
        import psycopg
    except ImportError:
        raise RunError.make(
            "no-postgresql-support",
            "the state is a PostgreSQL URL but psycopg is not installed",
            hint="pip install 'dagplan[postgres]'",
        ) from None
    try:
        return psycopg.connect(url, autocommit=True, **kwargs)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError.make("state-unavailable", f"cannot reach the run database: {first}",
                            hint="check the URL of `state` and that PostgreSQL runs") from None  # fmt: skip


def _unavailable(exc: BaseException) -> RunError:
    first = first_line(str(exc)) or type(exc).__name__
    return RunError.make("state-unavailable", f"lost the run database: {first}",
                         hint="when PostgreSQL is back: dagplan resume RUN (what was committed is kept)")  # fmt: skip


def _translating(cls: type) -> type:
    """Every public method of ``cls`` (and the journal protocol's ``_write``) says a lost database
    as the ``state-unavailable`` error: the one place psycopg's connection errors become dagplan's (a run
    stops with it, a worker waits and reconnects), never a traceback."""
    import inspect

    try:
        import psycopg
    except ImportError:  # pragma: no cover - this module needs psycopg to do anything
        return cls
    wrap = translating((psycopg.OperationalError, psycopg.InterfaceError), _unavailable)
    for name, value in list(vars(cls).items()):
        if inspect.isfunction(value) and (not name.startswith("_") or name == "_write"):
            setattr(cls, name, wrap(value))
    return cls


def upgrade(url: str) -> tuple[int, int]:
    """Create or migrate the schema; returns (version before, version after)."""
    with _connect(url) as conn:
        # one migrator at a time, from its first statement: two processes meeting a new database (a worker and
        # a submit) would race in CREATE TABLE IF NOT EXISTS itself (a duplicate key in pg_type)
        conn.execute("SELECT pg_advisory_lock(hashtext('dagplan_schema'))")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS dagplan_schema (version integer NOT NULL)")
            row = conn.execute("SELECT version FROM dagplan_schema").fetchone()
            before = row[0] if row else 0
            with conn.transaction():
                for version in range(before + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[version]:
                        conn.execute(statement)
                if row is None:
                    conn.execute("INSERT INTO dagplan_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
                else:
                    conn.execute("UPDATE dagplan_schema SET version = %s", (SCHEMA_VERSION,))
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('dagplan_schema'))")
    return before, SCHEMA_VERSION


_HELD = (
    "(hashtext(r.id)::bigint & 4294967295) IN (SELECT l.objid::bigint FROM pg_locks l WHERE l.locktype = "
    f"'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = {LOCK_CLASS})"
)  # whether a session holds run r's lock (its owner is alive): pg_locks read once per statement, as a hashed set


_NOTIFY = f"NOTIFY {CHANNEL}"


class Listener:
    """A connection of its own that LISTENs on :data:`CHANNEL`: an idle worker waits here, costing the database
    nothing, and looks at the queue when told (or after its slow poll: orphaned runs and gate deadlines are
    not announced)."""

    def __init__(self, url: str):
        self.conn = _connect(url)
        self.conn.execute(f"LISTEN {CHANNEL}")
        self.told = False  # a notification arrived that no look at the queue has answered yet

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for a notification; whether one came (now or before, unanswered)."""
        if not self.told:
            for _ in self.conn.notifies(timeout=seconds, stop_after=1):
                self.told = True
        return self.told

    def looked(self) -> None:
        """The queue was looked at: what was announced until now is answered."""
        self.told = False

    def close(self) -> None:
        self.conn.close()


@_translating
class PgRegistry:
    """All runs of one database (the registry protocol)."""

    def __init__(self, url: str):
        self.url = url
        self.location = masked(url)  # what messages show
        self._conn: Any = None
        self._checked = False
        self._idle: list[Any] = []  # writers' connections given back, their run's lock released
        self._idle_lock = threading.Lock()
        self._sweep_at = 0.0  # when a claim next looks for orphaned runs (time.monotonic)

    def writer_connection(self) -> Any:
        """A connection for a run's writer: an idle one given back by a run that ended, else a new one (a
        worker going from run to run saves a connection's start, 2.5 ms here, on each)."""
        with self._idle_lock:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed and not conn.broken:
                    return conn
        return _connect(self.url)

    def give_back(self, conn: Any) -> None:
        """A writer's connection whose run's lock was released: kept for the next run (a few at most)."""
        if conn.closed or conn.broken or conn.info.transaction_status != 0:  # 0: idle, nothing open
            conn.close()
            return
        with self._idle_lock:
            if len(self._idle) < _IDLE_WRITERS:
                self._idle.append(conn)
                return
        conn.close()

    def forget_connection(self) -> None:
        """Drop the connection (it broke): the next use connects again."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may not even close
                pass

    def connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = _connect(self.url)
        if not self._checked:
            self._check_schema()
            self._checked = True
        return self._conn

    def _check_schema(self) -> None:
        """A fresh database gets the schema; an older one must be upgraded on purpose, a newer one refused."""
        has = self._conn.execute("SELECT to_regclass('dagplan_schema') IS NOT NULL").fetchone()[0]
        version = (self._conn.execute("SELECT max(version) FROM dagplan_schema").fetchone()[0] if has else 0) or 0
        if version == 0:
            upgrade(self.url)
        elif version < SCHEMA_VERSION:
            raise RunError.make("old-schema", f"the run database has schema version {version}, this dagplan needs "
                                f"{SCHEMA_VERSION}", hint="run: dagplan db upgrade")  # fmt: skip
        elif version > SCHEMA_VERSION:
            raise RunError.make("new-schema", f"the run database has schema version {version}, newer than this "
                                f"dagplan's {SCHEMA_VERSION}", hint="upgrade dagplan")  # fmt: skip

    def create(self, *, plan_doc: dict, plan_name: str, inputs: dict, meta: dict | None = None,
               queued: bool = False) -> "PgRun":  # fmt: skip
        """A new run; ``queued``: in the pool's queue from its first row (one statement, so a submit
        interrupted half-way never leaves a run that nobody will take up)."""
        refuse_nul(inputs)  # a checked error, before any row is written
        conn = self.connection()
        artifact = _artifact(plan_doc, plan_name, inputs, meta or {})
        while True:
            run_id = new_run_id()
            inserted = conn.execute(f"{_INSERT_RUN} VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                                    _run_row(run_id, artifact, queued)).rowcount  # fmt: skip
            if inserted:
                if queued:
                    conn.execute(_NOTIFY)  # idle workers are told (committed: the row is there when they look)
                return PgRun(self, run_id, artifact)

    def _newest(self) -> str | None:
        row = self.connection().execute("SELECT id FROM dagplan_runs ORDER BY created DESC, id DESC LIMIT 1").fetchone()
        return row[0] if row else None

    def resolve(self, run_id: str) -> str:
        run_id = newest_if_asked(run_id, self._newest, self.location)
        if not isinstance(run_id, str) or not RUN_ID.match(run_id):
            raise not_a_run_id(run_id)
        exact = self.connection().execute("SELECT id FROM dagplan_runs WHERE id = %s", (run_id,)).fetchone()
        if exact is not None:  # by the primary key: what every open of a whole id costs, whatever the history
            return run_id
        rows = (  # a prefix a person typed: a scan, only then
            self.connection()
            .execute(
                "SELECT id FROM dagplan_runs WHERE id = %s OR starts_with(id, %s) ORDER BY id LIMIT 6", (run_id, run_id)
            )
            .fetchall()
        )
        ids = [r[0] for r in rows]
        if run_id in ids:
            return run_id
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise unknown_run(run_id, self.location)
        raise RunError.make("ambiguous-run", f"{run_id!r} matches several runs: {', '.join(ids[:5])}",
                            hint="give more of the run id")  # fmt: skip

    def open(self, run_id: str) -> "PgRun":
        found = self.resolve(run_id)
        row = self.connection().execute("SELECT artifact FROM dagplan_runs WHERE id = %s", (found,)).fetchone()
        if row is None:
            raise unknown_run(run_id, self.location)
        return PgRun(self, found, row[0])

    def list(self, limit: int | None = None) -> list[RunInfo]:
        conn = self.connection()
        runs = conn.execute("SELECT id, artifact, queue FROM dagplan_runs ORDER BY created DESC, id DESC LIMIT %s",
                            (limit,)).fetchall()  # fmt: skip  # LIMIT NULL: every run
        lines: dict[str, list[str]] = {}
        events = conn.execute("SELECT run_id, line FROM dagplan_events WHERE run_id = ANY(%s) ORDER BY run_id, seq",
                              ([r[0] for r in runs],))  # fmt: skip  # the events of those runs only
        for run_id, line in events:
            lines.setdefault(run_id, []).append(line)
        live = self._live()
        out = []
        for run_id, artifact, queue in runs:
            run = PgRun(self, run_id, artifact, lines=lines.get(run_id, []))
            progress = run._progress(run_id in live)
            final = progress.final or {}
            status = RunStatus.QUEUED if queue == RunStatus.QUEUED and run_id not in live else progress.status
            out.append(RunInfo(run_id, run.plan_name, status, progress.done, len(plan_step_ids(run.plan_doc)),
                               run.created, live.get(run_id), None, progress.waiting, dict(final.get("usage") or {}),
                               final.get("ts"), bool(final.get("had_errors"))))  # fmt: skip
        return out

    def _live(self) -> dict[str, int | None]:
        """Runs whose advisory lock a session holds now, with the pid their owner recorded."""
        rows = self.connection().execute(
            f"SELECT r.id, r.owner FROM dagplan_runs r WHERE r.owner IS NOT NULL AND {_HELD}"
        )
        return {run_id: _pid(owner) for run_id, owner in rows}

    def submit(self, *, plan_doc: dict, plan_name: str, inputs: dict, meta: dict | None = None) -> str:
        """Queue a run for the workers; returns its id."""
        return self.create(plan_doc=plan_doc, plan_name=plan_name, inputs=inputs, meta=meta, queued=True).id

    def schedule_marks(self) -> dict[str, tuple[float, str | None]]:
        """Each schedule's latest mark: (when it last fired, or was first seen; the run it submitted, if any)."""
        rows = (
            self.connection()
            .execute(
                "SELECT DISTINCT ON (name) name, fire_at, run_id FROM dagplan_schedule_fires "
                "ORDER BY name, fire_at DESC"
            )
            .fetchall()
        )
        return {name: (fire_at, run_id) for name, fire_at, run_id in rows}

    def first_seen(self, name: str, at: float) -> None:
        """A schedule counts from ``at`` (it never fires for a time before the workers first saw it)."""
        self.connection().execute(
            "INSERT INTO dagplan_schedule_fires (name, fire_at) SELECT %s, %s WHERE NOT EXISTS "
            "(SELECT 1 FROM dagplan_schedule_fires WHERE name = %s) ON CONFLICT DO NOTHING",
            (name, at, name),
        )

    def fire(
        self, name: str, fire_at: float, *, plan_doc: dict, plan_name: str, inputs: dict, meta: dict
    ) -> str | None:
        """Submit the run of schedule ``name`` for ``fire_at``, once whoever asks: the run and the mark in one
        statement (both or neither); the id of the run submitted, or None when it was already."""
        import psycopg

        artifact = _artifact(plan_doc, plan_name, inputs, {**meta, "schedule": name, "fire_at": fire_at})
        for _ in range(8):
            run_id = new_run_id()
            try:
                row = self.connection().execute(
                    f"WITH run AS ({_INSERT_RUN} SELECT %s, %s, %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM "
                    "dagplan_schedule_fires WHERE name = %s AND fire_at >= %s) ON CONFLICT (id) DO NOTHING "
                    "RETURNING id) INSERT INTO dagplan_schedule_fires (name, fire_at, run_id) SELECT %s, %s, id "
                    "FROM run RETURNING run_id",
                    (*_run_row(run_id, artifact, True), name, fire_at, name, fire_at),
                ).fetchone()  # fmt: skip
            except psycopg.errors.UniqueViolation:  # another worker fired it this very moment
                return None
            if row is not None:
                self.connection().execute(_NOTIFY)
                return row[0]
            fired = (
                self.connection()
                .execute("SELECT 1 FROM dagplan_schedule_fires WHERE name = %s AND fire_at >= %s", (name, fire_at))
                .fetchone()
            )
            if fired is not None:
                return None  # fired already; else the run id was taken: another one
        raise RunError.make("state-unavailable", f"could not give schedule {name}'s run an id")

    def claim(self, limits: Any = None) -> "PgRun | None":
        """A queued or orphaned run of the pool, acquired (its lock held by this process), or None.
        ``FOR UPDATE SKIP LOCKED``: workers asking at once are handed different rows. ``limits``
        (``max_running``, ``per_plan``: the most runs running at once in the whole pool, and of a plan)
        are kept by claiming one at a time (a transaction-scoped lock) and counting the running ones."""
        conn = self.connection()
        max_running = getattr(limits, "max_running", None)
        per_plan: Mapping[str, int] = getattr(limits, "per_plan", None) or {}
        with conn.transaction():
            if max_running is not None or per_plan:
                conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_CLASS,))  # claims one after another
                running = dict(conn.execute(  # a claimed run is 'running' from its claim (below)
                    f"SELECT r.plan_name, count(*) FROM dagplan_runs r WHERE r.queue = 'running' AND {_HELD} "
                    "GROUP BY r.plan_name"
                ).fetchall())  # fmt: skip
                if max_running is not None and sum(running.values()) >= max_running:
                    return None
                full = [plan for plan, cap in per_plan.items() if running.get(plan, 0) >= cap]
            else:
                full = []
            rows = conn.execute(
                f"SELECT r.id FROM dagplan_runs r WHERE {_READY} AND NOT r.plan_name = ANY(%s) "
                "ORDER BY r.created LIMIT 8 FOR UPDATE SKIP LOCKED",
                (time.time(), full),
            ).fetchall()
            if not rows and time.monotonic() >= self._sweep_at:  # now and then: runs whose owner died
                self._sweep_at = time.monotonic() + ORPHAN_SWEEP
                rows = conn.execute(
                    f"SELECT r.id FROM dagplan_runs r WHERE {_ORPHANED} AND NOT {_HELD} AND NOT r.plan_name = "
                    "ANY(%s) ORDER BY r.created LIMIT 8 FOR UPDATE SKIP LOCKED",
                    (full,),
                ).fetchall()  # fmt: skip
            claimed = None
            for (run_id,) in rows:
                run = self.open(run_id)
                try:
                    run.acquire(note_owner=False)  # the row is locked by this transaction: noted by it below
                except RunError:
                    continue  # taken meanwhile by a process not going through the queue
                conn.execute("UPDATE dagplan_runs SET owner = %s, queue = 'running' WHERE id = %s",
                             (owner_name(), run_id))  # fmt: skip
                run._owner_noted = True
                claimed = run  # its owner noted in the claim's transaction: one commit, not two
                break
        return claimed

    def claimable(self) -> int:
        """How many runs a claim could take now (queued, handed back, due, or orphaned)."""
        conn = self.connection()
        query = f"SELECT count(*) FROM dagplan_runs r WHERE ({_READY} OR {_ORPHANED}) AND NOT {_HELD}"
        return int(conn.execute(query, (time.time(),)).fetchone()[0])

    def listen(self) -> "Listener":
        """What an idle worker waits on: told when a run becomes claimable (:data:`CHANNEL`)."""
        return Listener(self.url)

    def owner(self, run_id: str) -> int | None:
        return self._live().get(run_id)

    def discard(self, run_id: str) -> str:
        found = self.resolve(run_id)
        run = self._stopped(found)
        try:
            run.record(Event(EventType.PLAN_ABORTED, run.id, data={"reason": "discarded"}))
            run.commit_sync()
            conn = self.connection()
            with conn.transaction():
                conn.execute("INSERT INTO dagplan_discarded (run_id, ts) VALUES (%s, %s)", (found, time.time()))
                conn.execute("DELETE FROM dagplan_runs WHERE id = %s", (found,))
        finally:
            run.release()
        return found

    def cancel(self, run_id: str) -> str:
        found = self.resolve(run_id)
        refuse_finished(self.open(found))
        run = self._stopped(found)
        try:
            run.record(Event(EventType.PLAN_CANCELLED, run.id, data={"reason": "cancelled"}))
            run.commit_sync()
        finally:
            run.release()
        return found

    def _stopped(self, found: str) -> Any:
        """The run, acquired: its owner on this host is asked to let go (SIGTERM), one elsewhere waited for."""
        run = self.open(found)
        deadline = time.monotonic() + 10
        while True:
            try:
                run.acquire()
                break
            except RunError:
                pid = self.owner(found)
                if pid and _same_host(found, self) and pid != os.getpid():
                    try:
                        os.kill(pid, 15)  # the engine treats SIGTERM as Ctrl-C: it lets the run go
                    except ProcessLookupError:
                        pass
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        return run


def _pid(owner: str | None) -> int | None:
    try:
        return int(str(owner).rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


def _same_host(run_id: str, registry: PgRegistry) -> bool:
    row = registry.connection().execute("SELECT owner FROM dagplan_runs WHERE id = %s", (run_id,)).fetchone()
    return bool(row and row[0] and str(row[0]).rsplit(":", 1)[0] == socket.gethostname())


@_translating
class PgRun(Artifact, FoldedReads, GroupCommit):
    """One run in the database: its artifact, its progress folded from its events, and (acquired) its writer."""

    def __init__(self, registry: PgRegistry, run_id: str, artifact: dict, lines: list[str] | None = None):
        self.registry, self.id = registry, run_id
        self._take_artifact(artifact)
        self.notice: str | None = None
        self._state = empty_state()
        self._seq = 0
        self._buf: list[tuple[int, str]] = []
        self._queue: RunStatus | None = None  # where the run stands for the pool, once the buffer commits
        self._wake: float | None = None  # when a waiting run's first gate deadline passes
        self._io = threading.Lock()
        self._writer: Any = None  # the connection holding the run's lock
        self._owner_noted = False  # this process is written as its owner (cleared by release, or its last commit)
        self._inflight: asyncio.Future | None = None
        self._durable_seq = 0
        for line in lines if lines is not None else self._lines_after(0):
            self._fold_line(line)
        self._durable_seq = self._written_seq = self._seq

    def _lines_after(self, seq: int) -> list[str]:
        rows = (
            self.registry.connection()
            .execute("SELECT line FROM dagplan_events WHERE run_id = %s AND seq > %s ORDER BY seq", (self.id, seq))
            .fetchall()
        )
        return [r[0] for r in rows]

    def _fold_line(self, line: str) -> dict:
        event = json.loads(line)
        fold(self._state, event)
        self._seq = max(self._seq, int(event.get("seq", 0)))
        return event

    # -- reading (the journal protocol) --

    def progress(self) -> Progress:
        return self._progress(self._writer is not None or self.registry.owner(self.id) is not None)

    def _progress(self, live: bool) -> Progress:
        return progress_of(self.id, self._state, plan_step_ids(self.plan_doc), live, self.step_output)

    def events(self, types: Iterable[EventType] | None = None) -> Iterator[Event]:
        wanted = set(types) if types is not None else None
        for line in self._lines_after(0):
            record = json.loads(line)
            if wanted is None or record.get("type") in wanted:
                yield Event.from_json(record, self.id)

    def follow(self, cursor: Any = None) -> tuple[list[Event], Any]:
        after = int(cursor or 0)
        found = [json.loads(line) for line in self._lines_after(after)]
        return [Event.from_json(r, self.id) for r in found], (found[-1]["seq"] if found else after)

    # -- the lock --

    def acquire(self, note_owner: bool = True) -> None:
        if self._writer is not None:
            return
        conn = self.registry.writer_connection()
        got = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOCK_CLASS, self.id)).fetchone()[0]
        if not got:
            self.registry.give_back(conn)
            pid = self.registry.owner(self.id)
            raise RunError.make("run-locked", f"run {self.id} is in use by process {pid or '?'}",
                                hint=f"wait for it, or cancel it with: dagplan discard {self.id}")  # fmt: skip
        self._writer = conn
        if note_owner:
            self.note_owner()
        for line in self._lines_after(self._seq):  # what the previous owner wrote since we read
            self._fold_line(line)
        self._durable_seq = self._seq

    def note_owner(self) -> None:
        """Record this process as the run's owner (what ``runs`` and a lock message show)."""
        self._writer.execute("UPDATE dagplan_runs SET owner = %s WHERE id = %s", (owner_name(), self.id))
        self._owner_noted = True

    def release(self) -> None:
        if self._writer is None:
            return
        try:
            self.commit_sync()
        finally:
            conn, self._writer = self._writer, None
            released = False
            try:
                if self._owner_noted:  # not cleared by the run's last commit (it stopped mid-way)
                    conn.execute("UPDATE dagplan_runs SET owner = NULL WHERE id = %s", (self.id,))
                    self._owner_noted = False
                released = bool(
                    conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOCK_CLASS, self.id)).fetchone()[0]
                )
            finally:
                if released:  # nothing of this run is held by it any more: the next run may use it
                    self.registry.give_back(conn)
                else:
                    conn.close()

    def close(self) -> None:
        self.release()

    # -- writing --

    def record(self, event: Event) -> dict:
        if self._writer is None:
            raise RunError.make("run-not-acquired", f"run {self.id}: record before acquire()")
        line = record_dict(event)
        with self._io:
            self._seq += 1
            line["seq"] = self._seq
            line.setdefault("ts", round(time.time(), 6))
            text = json_safe(json.dumps(line, ensure_ascii=False, default=str, separators=(",", ":")))
            self._buf.append((self._seq, text))
            self._queue = _QUEUE.get(event.type, self._queue)
            if event.type in _QUEUE:
                self._wake = _wake(line) if event.type is EventType.PLAN_WAITING else None
        fold(self._state, line)
        return line

    def commit_sync(self, durable: bool = True) -> None:
        with self._io:
            rows, self._buf, queue, self._queue = self._buf, [], self._queue, None
        conn = self._writer
        if not rows:
            if durable and self._durable_seq < self._written_seq:  # written lazily before: make it durable
                conn.execute("SELECT pg_current_xact_id()")  # a transaction with an id commits synchronously,
                self._durable_seq = self._written_seq  # flushing the WAL up to it (the lazy commits before)
            return
        if queue is None:  # one statement: in autocommit one statement is one transaction, one WAL flush
            self._insert(conn, rows, durable)
        else:  # a lifecycle event: where the run stands for the pool changes with it, atomically
            with conn.transaction():
                self._insert(conn, rows)
                # an answered gate puts any run in the pool, however it started: a worker goes on with it
                # a run that ended lets its owner go in the same transaction (release then only unlocks it)
                ended = queue not in (RunStatus.RUNNING, RunStatus.QUEUED)
                conn.execute("UPDATE dagplan_runs SET queue = %s, pooled = pooled OR %s, wake = %s, owner = CASE "
                             "WHEN %s THEN NULL ELSE owner END WHERE id = %s",
                             (str(queue), queue == RunStatus.QUEUED, self._wake, ended, self.id))  # fmt: skip
                if queue in (RunStatus.QUEUED, RunStatus.INTERRUPTED):
                    conn.execute(_NOTIFY)  # claimable from this commit: delivered with it
                self._owner_noted = not ended
        self._written_seq = max(self._written_seq, rows[-1][0])
        if durable or queue is not None:
            self._durable_seq = self._written_seq

    def _insert(self, conn: Any, rows: list[tuple[int, str]], durable: bool = True) -> None:
        """The rows of one commit: a few (a step's events) in one INSERT, one round trip, the statement
        prepared by psycopg once it repeats; many (a fan-out's completions) by COPY, two round trips,
        any number of rows (an INSERT takes at most 65,535 parameters). Not ``durable``: its transaction
        commits without waiting for the WAL's flush (``synchronous_commit`` off for it alone, set by the
        INSERT itself, so still one round trip; the next synchronous commit flushes it)."""
        if len(rows) <= _INSERT_MAX:
            conn.execute(_insert_sql(len(rows), durable), [v for seq, line in rows for v in (self.id, seq, line)])
            return
        with conn.transaction():
            if not durable:
                conn.execute("SET LOCAL synchronous_commit TO off")
            with conn.cursor() as cur, cur.copy("COPY dagplan_events (run_id, seq, line) FROM STDIN") as copy:
                for seq, line in rows:
                    copy.write_row((self.id, seq, line))

    def _write(self, durable: bool) -> None:  # GroupCommit: one statement (one transaction) of the recorded events
        self.commit_sync(durable)


_IDLE_WRITERS = 8  # idle writer connections a registry keeps
# Rows a commit inserts with one INSERT rather than a COPY. One round trip instead of two: a worker's
# 100 queued 20-step runs (one at a time, alternated) 8.4-9.4 -> 6.6-7.5 ms of commits a run.
_INSERT_MAX = 32
_INSERTS: dict[tuple[int, bool], str] = {}
# A transaction-local setting an INSERT makes for its own (autocommit) transaction, read when it commits.
_LAZY = " RETURNING set_config('synchronous_commit', 'off', true)"


def _insert_sql(rows: int, durable: bool = True) -> str:
    found = _INSERTS.get((rows, durable))
    if found is None:
        values = ",".join(["(%s,%s,%s)"] * rows)
        found = f"INSERT INTO dagplan_events (run_id, seq, line) VALUES {values}" + ("" if durable else _LAZY)
        _INSERTS[rows, durable] = found
    return found


__all__ = ["PgRegistry", "PgRun", "upgrade", "SCHEMA_VERSION", "RunStatus"]
