"""A pool of workers sharing a run database: ``dagplan submit`` queues, ``dagplan worker`` runs.

A worker claims queued runs, and orphaned ones (started by a worker that died: nobody holds their
lock any more), through :meth:`.pgstore.PgRegistry.claim` (``FOR UPDATE SKIP LOCKED``, then the run's
advisory lock, held for as long as the worker runs it: PostgreSQL drops it with a dead worker's
connection, which is the lease). A claimed run is resumed from its journal (:func:`.driver.resume`):
a fresh one runs from the start, an orphaned one with the same rules as a local resume (completed
steps replay, a side effect that was running follows the resume policy; where it says ``ask``, the
worker's ``on_interrupted`` answers, and without one the run stops in ``needs_decision``: nobody can be
asked, and a side effect is never repeated silently; an operator decides with ``dagplan resume``).
A run stopping at a gate is ``waiting`` until someone answers it (``dagplan answer``, from anywhere):
the answer queues it again, for whichever worker claims it.

Limits across the pool (``[pool] max_running``, ``[pool.per_plan]``) are kept at claim time: claims
happen one at a time and count the runs whose lock is held.

SIGTERM (or :meth:`Pool.stop`) stops claiming and hands the running runs back: they are recorded
interrupted and their locks released, so another worker resumes them; nothing is lost.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ...dsl.errors import DagplanError, first_line
from ..core import clock
from .schedules import Scheduler, iso


@dataclass(frozen=True)
class Limits:
    """How many runs may run at once across every worker of the pool, in all and per plan (its name as
    submitted): the configuration's ``[pool]`` table, ``max_running = 50`` and ``[pool.per_plan]``."""

    max_running: int | None = None
    per_plan: Any = None

    @classmethod
    def of(cls, config: Any) -> "Limits":
        table = dict(getattr(config, "pool", None) or {})
        return cls(table.get("max_running"), dict(table.get("per_plan") or {}))


def _lost_connection() -> tuple[type[BaseException], ...]:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - a pool needs psycopg
        return (ConnectionError,)
    return (psycopg.OperationalError, psycopg.InterfaceError, ConnectionError)


_LOST = _lost_connection()


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the run database cannot be reached now (a dropped or refused connection)."""
    if isinstance(exc, DagplanError):
        return exc.headline.code == "state-unavailable"
    return isinstance(exc, _LOST)


def _first_line(exc: BaseException) -> str:
    return first_line(str(exc)) or type(exc).__name__


@dataclass
class Backoff:
    """Waits between reconnections: the retry rule of steps (:func:`.attempts.backoff`: doubling from 0.5 s,
    capped at 10 s, with jitter); reset once connected."""

    failures: int = 0

    def next(self) -> float:
        from ...dsl.ir import Retry
        from ..engine.attempts import backoff

        self.failures += 1
        return backoff(Retry(backoff=0.5, max_backoff=10.0), self.failures)

    def reset(self) -> None:
        self.failures = 0


@dataclass
class Pool:
    """One worker process: up to ``concurrency`` runs at once from the database at ``url``."""

    url: str
    config: Any
    concurrency: int = 1
    poll: float = 0.2  # seconds between looks at the queue when it is empty and nobody tells (no LISTEN, schedules)
    idle_poll: float = 2.0  # ... when idle workers are told of new work (LISTEN): a look for orphans and deadlines
    load_tools: Callable[[list[str]], Any] | None = None
    on_interrupted: str | None = None  # retry | adopt | fail: an interrupted side effect where the policy says ask
    on_event: Callable[[str, str], None] | None = None  # (run id, what happened): for the CLI's lines
    finished: list[tuple[str, str]] = field(default_factory=list)  # (run id, status)
    submission: Callable[[Any], dict] | None = None  # a schedule's run as `submit` makes one (ops/schedules.py)
    _stopping: bool = False

    def stop(self) -> None:
        self._stopping = True

    async def run(self, drain: bool = False) -> list[tuple[str, str]]:
        """Claim and run until stopped (``drain``: until nothing is claimable and nothing runs)."""
        from ..stores.pgstore import PgRegistry

        registry = PgRegistry(self.url)
        running: set[asyncio.Task] = set()
        backoff = Backoff()
        scheduler = Scheduler(self.config, registry, self.submission) if self.submission is not None else None
        listener = None
        try:
            while not self._stopping:
                try:
                    if listener is None:
                        listener = await asyncio.to_thread(_listener, registry)
                    if scheduler is not None and scheduler.wants(clock.now()):
                        for fired in await asyncio.to_thread(scheduler.tick):
                            self._said_fired(fired)
                    if listener is not None:
                        listener.looked()  # what was announced until now, this look answers
                    while len(running) < self.concurrency and not self._stopping:
                        journal = await asyncio.to_thread(registry.claim, Limits.of(self.config))
                        if journal is None:
                            break
                        self._say(journal.id, "claimed")
                        running.add(asyncio.create_task(self._one(journal)))
                    idle = drain and not running and not await asyncio.to_thread(registry.claimable)
                    backoff.reset()
                except Exception as exc:  # the database went away: nothing is lost (runs are handed back by
                    if not _lost(exc):  # their connections' end); wait and connect again
                        raise
                    delay = backoff.next()
                    self._say("-", f"the run database is unreachable ({_first_line(exc)}); again in {delay:.1f}s")
                    registry.forget_connection()
                    _closed(listener)
                    listener = None
                    await asyncio.sleep(delay)
                    continue
                if idle:
                    break
                # wait for a run to end, or to be told of a claimable one (LISTEN: an idle worker costs the
                # database nothing), or the slow poll's time (orphans and gate deadlines are not announced)
                timed = scheduler is not None and bool(scheduler.schedules)  # its times are the clock's: looked at
                slow = self.poll if listener is None or timed else max(self.poll, self.idle_poll)
                waiter = asyncio.ensure_future(self._told(listener, slow))
                await asyncio.wait({*running, waiter}, timeout=slow, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                running = {task for task in running if not task.done()}
        finally:
            _closed(listener)
            if running:
                self._say("-", f"stopping: handing back {len(running)} run(s)")
            for task in running:
                task.cancel()  # handed back: the engine records the run interrupted and lets it go
            if running:
                await asyncio.gather(*running, return_exceptions=True)
        return self.finished

    async def _told(self, listener: Any, seconds: float) -> None:
        """Until ``listener`` is told of a claimable run, or ``seconds`` pass, or the pool stops (looked at in
        slices, so that a stop is seen soon); without a listener, the plain wait."""
        if listener is None:
            await asyncio.sleep(seconds)
            return
        end = time.monotonic() + seconds
        while not self._stopping and time.monotonic() < end:
            if await asyncio.to_thread(listener.wait, min(0.25, max(0.0, end - time.monotonic()))):
                return

    async def _one(self, journal: Any) -> None:
        from .driver import ResumeRequest, resume
        from ..engine.scope import Options
        from ..tools.sources import recorded_sources

        sources = recorded_sources(journal.meta.get("tool_sources") or [])
        tools = self.load_tools(sources) if (self.load_tools and sources) else {}
        answer = self.on_interrupted or "decide"  # nobody to ask: the run waits for an operator
        try:
            options = Options.from_config(self.config)
            asked = ResumeRequest(journal.id, tools, options, self.config, state=self.url, journal=journal,
                                  on_interrupted=lambda _unit, _purity: answer)  # fmt: skip
            result = await resume(asked)
            status = said = str(result.status)
        except DagplanError as exc:
            decide = exc.headline.code == "needs-decision"  # stopped durably for an operator: not a failure
            status = "needs_decision" if decide else f"error: {exc.headline.code}: {exc.headline.message}"
            said = f"needs_decision: {exc.headline.message}; {exc.headline.hint}" if decide else status  # why, how
            journal.release()
        except Exception as exc:  # its connection (and with it the run's lock) is gone: another claim goes on
            if not _lost(exc):
                raise
            status = said = f"handed back: the run database connection was lost ({_first_line(exc)})"
            try:
                journal.release()
            except Exception:  # noqa: BLE001 - nothing more to let go of: the lock went with the connection
                pass
        self.finished.append((journal.id, status))
        self._say(journal.id, said)

    def _said_fired(self, fired: Any) -> None:
        at = iso(fired.at)
        if fired.problem is not None:
            self._say("-", f"schedule {fired.schedule} could not submit its run of {at}: {fired.problem}")
        elif fired.run_id is not None:
            self._say(fired.run_id, f"submitted by schedule {fired.schedule} for {at}")

    def _say(self, run_id: str, what: str) -> None:
        if self.on_event is not None:
            self.on_event(run_id, what)


def _listener(registry: Any) -> Any:
    """A LISTEN connection for an idle worker, or None where the database cannot (a pooler in transaction
    mode): the worker then polls every ``poll`` seconds, as before."""
    try:
        return registry.listen()
    except Exception:  # noqa: BLE001 - any refusal falls back to polling
        return None


def _closed(listener: Any) -> None:
    if listener is not None:
        try:
            listener.close()
        except Exception:  # noqa: BLE001 - a connection already gone
            pass
