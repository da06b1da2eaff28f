"""Schedules: ``[schedule.NAME]`` in dagplan.toml (a plan, a cron line, its inputs, a time zone), fired by the
workers of the run database (``dagplan worker``), and listed by ``dagplan schedule``.

A schedule counts from when a worker first saw it: it never fires for a time before that. At each of its
times the workers submit one run (the run and the mark that it fired are one statement: workers asking at
once submit it once, and a worker killed half-way submitted it or did not). When workers were all stopped
over several of its times, the latest one fires when they are back, not every one it missed (a cron
daemon's rule: the backlog of a weekend is not a Monday's burst). Times come from the engine's clock
(``core/clock.py``): tests move it instead of waiting.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from ..core import clock
from ..core.config import Config

LOOKAHEAD = 100_000  # times walked at most to find the latest due one (a line firing every minute: 69 days)


@dataclass(frozen=True)
class Schedule:
    name: str
    plan: Path  # absolute: relative to the configuration file
    cron: str
    inputs: Mapping[str, Any]
    zone: str = "UTC"

    def times(self, after: float) -> Any:
        """Its times after ``after`` (seconds since the epoch), as seconds, in order."""
        from zoneinfo import ZoneInfo

        from cronsim import CronSim

        start = datetime.fromtimestamp(after, ZoneInfo(self.zone))
        for when in CronSim(self.cron, start):
            yield when.timestamp()

    def next_after(self, after: float) -> float:
        return next(iter(self.times(after)))

    def due(self, since: float, now: float) -> float | None:
        """The latest of its times in (``since``, ``now``], or None."""
        latest = None
        for count, when in enumerate(self.times(since)):
            if when > now:
                break
            latest = when
            if count >= LOOKAHEAD:  # a long outage of a frequent schedule: take up from just before now
                return self.due(now - 86400, now) or latest
        return latest


def schedules_of(config: Config) -> list[Schedule]:
    """The configuration's schedules (checked when it was loaded: config.py's schedule_problems)."""
    base = config.path.parent if config.path is not None else Path(os.getcwd())
    return [Schedule(name, base / table["plan"], table["cron"].strip(), dict(table.get("inputs") or {}),
                     table.get("timezone", "UTC")) for name, table in sorted(config.schedule.items())]  # fmt: skip


@dataclass
class Fired:
    schedule: str
    at: float
    run_id: str | None = None  # None: it was submitted already (by another worker)
    problem: str | None = None  # why it could not be submitted (the plan is invalid, an input does not fit)


class Scheduler:
    """What a worker does for the schedules between claims: mark new schedules, fire the due ones. The next
    time of each is kept here, so an idle pool asks the database nothing until one is due."""

    def __init__(self, config: Config, registry: Any, submission: Callable[[Schedule], dict]):
        self.schedules = schedules_of(config)
        self.registry, self.submission = registry, submission  # submission: the run's plan, inputs and meta
        self._next: dict[str, float] | None = None

    def wants(self, now: float) -> bool:
        """Whether :meth:`tick` has anything to do at ``now`` (asked on the loop: no thread, no database)."""
        return bool(self.schedules) and (self._next is None or min(self._next.values(), default=0.0) <= now)

    def tick(self, now: float | None = None) -> list[Fired]:
        """Fire what is due at ``now`` (the engine's clock): a list of what fired (or failed to)."""
        if not self.schedules:
            return []
        now = clock.now() if now is None else now
        if self._next is None:
            for schedule in self.schedules:
                self.registry.first_seen(schedule.name, now)
            self._next = {}
        due = [s for s in self.schedules if self._next.get(s.name, 0.0) <= now]
        if not due:
            return []
        marks = self.registry.schedule_marks()
        fired = []
        for schedule in due:
            since = marks[schedule.name][0] if schedule.name in marks else now
            at = schedule.due(since, now)
            if at is not None:
                fired.append(self._fire(schedule, at))
                since = at
            self._next[schedule.name] = schedule.next_after(max(since, now))
        return fired

    def _fire(self, schedule: Schedule, at: float) -> Fired:
        from ...dsl.errors import DagplanError

        try:
            run = self.submission(schedule)
        except DagplanError as exc:
            return Fired(schedule.name, at, problem=f"{exc.headline.code}: {exc.headline.message}")
        return Fired(schedule.name, at, self.registry.fire(schedule.name, at, **run))


def listing(config: Config, marks: Mapping[str, tuple[float, str | None]] | None, now: float | None = None) -> list:
    """What ``dagplan schedule`` shows of each: name, cron, zone, plan, next time, last fired and its run."""
    now = clock.now() if now is None else now
    rows = []
    for schedule in schedules_of(config):
        mark = (marks or {}).get(schedule.name)
        rows.append({
            "name": schedule.name, "cron": schedule.cron, "timezone": schedule.zone,
            "plan": os.path.relpath(schedule.plan), "next": iso(schedule.next_after(now), schedule.zone),
            "last": iso(mark[0], schedule.zone) if mark and mark[1] else None,
            "last_run": mark[1] if mark else None,
        })  # fmt: skip
    return rows


def iso(seconds: float, zone: str = "UTC") -> str:
    from zoneinfo import ZoneInfo

    when = datetime.fromtimestamp(seconds, ZoneInfo(zone) if zone != "UTC" else timezone.utc)
    return when.isoformat(timespec="seconds")
