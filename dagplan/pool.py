"""Runs for the workers of a run database: ``submit`` (one queued run, checked first), ``submit_each`` (one
a line of a JSON Lines file), ``worker_pool`` / ``awork`` (a worker), ``schedules`` (the configuration's
cron schedules) and ``db_upgrade`` (the database's schema). The state is a ``postgresql://`` URL. Each is
:class:`dagplan.Project`'s method of the same name, for the working directory's project (``state_dir``,
``config``, ``tool_sources``: shorthands for a project's); what a queued run is made of is written here once.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from .api import ToolsArg, _here
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


def _each_inputs(plan: Plan, each: str | os.PathLike, inputs: Mapping[str, Any] | None, state: Any) -> list[dict]:
    """The inputs of every line of ``each`` over ``inputs``, each checked against the plan and what the run
    database ``state`` can store; a :class:`RunError` naming every bad line (``FILE:LINE``), or an empty file."""
    from .dsl.errors import LoadError, RunError, error
    from .dsl.load import read_json_lines
    from .interpreter.engine.inputs import prepare_inputs

    name = os.fspath(each)
    holds = _database_holds(state)
    rows, problems = [], []
    for number, given in read_json_lines(each):
        if isinstance(given, LoadError):
            problems += [error(d.code, f"{name}:{number}: {d.message}", hint=d.hint) for d in given.diagnostics]
            continue
        if not isinstance(given, dict):
            problems.append(error("bad-input", f"{name}:{number}: a line is one JSON object of inputs"))
            continue
        values = {**(inputs or {}), **given}
        try:
            prepare_inputs(plan, values, strict=True)
            holds(values)  # what the run database can store (PostgreSQL: no NUL character)
        except RunError as exc:
            problems += [error(d.code, f"{name}:{number}: {d.message}", hint=d.hint) for d in exc.diagnostics]
            continue
        rows.append(values)
    if problems:
        raise RunError(problems)
    if not rows:
        raise RunError.make("bad-input", f"{name} has no line of inputs", hint="one JSON object of inputs a line")
    return rows


def _database_holds(state: Any) -> Any:
    """The check of what the run database ``state`` can store (a :class:`RunError` when it cannot)."""
    from .interpreter.core.state import is_url

    if is_url(state):  # the one test of a run database's state
        from .interpreter.stores.pgstore import refuse_nul

        return refuse_nul
    return lambda values: None


def _submission(plan: Plan, sources: Iterable[str], inputs: Any, config: Any) -> dict[str, Any]:
    """What a queued run is made of (``submit``, ``submit --each``, a schedule's runs): the plan (loaded, so
    checked against its project's tools), its inputs checked, and where its tools come from (what a worker
    loads)."""
    from .interpreter.engine.inputs import prepare_inputs
    from .interpreter.tools.sources import source_record

    values = prepare_inputs(plan, inputs, strict=True)
    if plan.document is None:
        from .dsl.errors import RunError

        raise RunError.make("not-durable", "a submitted plan must be loaded from a document", hint="use dagplan.load()")
    meta = {"dialect": plan.dialect, "tool_sources": source_record(sources),
            "config": str(config.path) if config.path else None}  # fmt: skip
    return {"plan_doc": plan.document, "plan_name": plan_name(plan.source, config), "inputs": dict(values),
            "meta": meta}  # fmt: skip


def plan_name(source: str, config: Any) -> str:
    """A queued run's plan, named one way whoever queued it (``submit`` from any folder, a schedule): its path
    relative to the project's root (where dagplan.toml is), so that ``[pool.per_plan]`` keys name it once; a plan
    outside the project, or not from a file, keeps its name."""
    from .interpreter.core.config import project_root

    if not source or source.startswith("<") or not os.path.isfile(source):
        return source
    root = os.path.dirname(os.path.abspath(config.path)) if getattr(config, "path", None) else str(project_root())
    relative = os.path.relpath(os.path.abspath(source), root)
    return source if relative.startswith(os.pardir) else relative.replace(os.sep, "/")


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
