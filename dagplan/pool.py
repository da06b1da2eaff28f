"""Runs for the workers of a run database: ``submit`` (one queued run, checked first), ``submit_each`` (one
a line of a JSON Lines file), ``worker_pool`` / ``awork`` (a worker), ``schedules`` (the configuration's
cron schedules) and ``db_upgrade`` (the database's schema). The state is a ``postgresql://`` URL. Each is
:class:`dagplan.Project`'s method of the same name, for the working directory's project (``state_dir``,
``config``, ``tool_sources``: shorthands for a project's); what a queued run is made of is written here once.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from ._pipeline import ToolsArg, plan_name  # noqa: F401 - plan_name: how a queued run's plan is named
from .api import _here
from .dsl.ir import Plan


def submit_each(
    plan: Plan | str | os.PathLike,
    each: str | os.PathLike,
    *,
    tools: ToolsArg = None,
    tool_sources: Iterable[str] = (),
    inputs: Mapping[str, Any] | None = None,
    state_dir: Any = None,
    config: Any = None,
) -> list[str]:
    """Queue one run per line of the JSON Lines file ``each`` (each line an object of inputs, over
    ``inputs``); returns their ids, in the file's order. Every line is checked first: one bad line
    (``FILE:LINE``) queues nothing."""
    return _here(config, state_dir, tool_sources, tools).submit_each(plan, each, inputs)


def submit(
    plan: Plan | str | os.PathLike,
    *,
    tools: ToolsArg = None,
    tool_sources: Iterable[str] = (),
    inputs: Mapping[str, Any] | None = None,
    state_dir: Any = None,
    config: Any = None,
) -> str:
    """Queue a run for the workers of a run database (``dagplan worker``); returns its id. The plan is
    checked (against ``tools``) and the inputs too, now: a worker never gets a run that cannot start."""
    return _here(config, state_dir, tool_sources, tools).submit(plan, inputs)


def worker_pool(
    state: Any = None,
    *,
    concurrency: int = 1,
    on_interrupted: str | None = None,
    on_event: Callable[[str, str], None] | None = None,
    config: Any = None,
):
    """A worker of the run database ``state`` (a ``postgresql://`` URL): ``await pool.run(drain=...)``
    claims queued and orphaned runs and runs them, up to ``concurrency`` at once, until ``pool.stop()``
    (``drain``: until none is left); returns (run id, status) of the runs it finished. ValueError when
    the state is not a database. See :mod:`dagplan.interpreter.ops.workers`."""
    return _here(config, state).worker_pool(concurrency=concurrency, on_interrupted=on_interrupted, on_event=on_event)


def schedules(state: Any = None, *, config: Any = None) -> list[dict[str, Any]]:
    """The configuration's schedules (``[schedule.NAME]``): name, cron, time zone, plan, next time, and, when
    the state is a run database, when each last fired and the run it submitted."""
    return _here(config, state).schedules()


async def awork(state: Any = None, *, drain: bool = False, **kwargs: Any) -> list[tuple[str, str]]:
    """Be a worker until stopped (``drain``: until no run is left): see :func:`worker_pool`."""
    return await worker_pool(state, **kwargs).run(drain=drain)


def db_upgrade(url: Any = None) -> tuple[int, int]:
    """Create or migrate the PostgreSQL schema of ``url`` (default: the configured state); returns
    (version before, version after). ValueError when the state is not a PostgreSQL URL."""
    return _here(state_dir=url).db_upgrade()
