"""Runs for the workers of a run database: ``submit`` (one queued run, checked first), ``submit_each`` (one
a line of a JSON Lines file), ``worker_pool`` / ``awork`` (a worker), ``schedules`` (the configuration's
cron schedules) and ``db_upgrade`` (the database's schema). The state is a ``postgresql://`` URL.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from .api import (
    ToolsArg,
    _as_plan,
    _state,
    load_config,
)
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
    from .dsl.errors import LoadError, RunError, error
    from .dsl.load import read_json_lines
    from .interpreter.engine.inputs import prepare_inputs

    cfg = config or load_config()
    plan = _as_plan(plan, tools, cfg)
    name = os.fspath(each)
    holds = _database_holds(state_dir, cfg)
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
    return [submit(plan, tools=tools, tool_sources=tool_sources, inputs=row, state_dir=state_dir, config=cfg)
            for row in rows]  # fmt: skip


def _database_holds(state_dir: Any, config: Any) -> Any:
    """The check of what the configured run database can store (a :class:`RunError` when it cannot)."""
    from .interpreter.core.state import is_url

    if is_url(_state(state_dir, config)):  # the one test of a run database's state
        from .interpreter.stores.pgstore import refuse_nul

        return refuse_nul
    return lambda values: None


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
    from .interpreter.stores.registry import open_registry

    cfg = config or load_config()
    run = _submission(plan, tools=tools, tool_sources=tool_sources, inputs=inputs, config=cfg)
    registry = open_registry(_state(state_dir, cfg))
    if not hasattr(registry, "submit"):
        from .dsl.errors import RunError

        hint = 'set state = "postgresql://..." (or --state URL), then start: dagplan worker'
        raise RunError.make("no-pool", "runs are submitted to the workers of a run database", hint=hint)
    return registry.submit(**run)


def _submission(
    plan: Plan | str | os.PathLike, *, tools: ToolsArg, tool_sources: Iterable[str], inputs: Any, config: Any
) -> dict[str, Any]:
    """What a queued run is made of (``submit``, ``submit --each``, a schedule's runs): the plan checked
    against its tools, its inputs checked, and where its tools come from (what a worker loads)."""
    from .interpreter.engine.inputs import prepare_inputs
    from .interpreter.tools.sources import source_record

    plan = _as_plan(plan, tools, config)
    values = prepare_inputs(plan, inputs, strict=True)
    if plan.document is None:
        from .dsl.errors import RunError

        raise RunError.make("not-durable", "a submitted plan must be loaded from a document", hint="use dagplan.load()")
    meta = {"dialect": plan.dialect, "tool_sources": source_record(tool_sources),
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
    from . import load_tools as tools_of
    from .interpreter.core.state import is_url
    from .interpreter.ops.workers import Pool

    cfg = config or load_config()
    url = _state(state, cfg)
    if not is_url(url):
        raise ValueError(f"workers share a run database: the state ({url or './.dagplan'}) is not a postgresql:// URL")

    def scheduled(schedule: Any) -> dict[str, Any]:  # a schedule's run, made as `submit` makes one
        sources = list(cfg.tools)
        return _submission(schedule.plan, tools=tools_of(sources) if sources else None, tool_sources=sources,
                           inputs=schedule.inputs, config=cfg)  # fmt: skip

    return Pool(url, cfg, concurrency, load_tools=tools_of, on_interrupted=on_interrupted, on_event=on_event,
                submission=scheduled)  # fmt: skip


def schedules(state: Any = None, *, config: Any = None) -> list[dict[str, Any]]:
    """The configuration's schedules (``[schedule.NAME]``): name, cron, time zone, plan, next time, and, when
    the state is a run database, when each last fired and the run it submitted."""
    from .interpreter.core.state import is_url
    from .interpreter.ops.schedules import listing

    cfg = config or load_config()
    url = _state(state, cfg)
    marks = None
    if cfg.schedule and is_url(url):
        from .interpreter.stores.pgstore import PgRegistry

        marks = PgRegistry(url).schedule_marks()
    return listing(cfg, marks)


async def awork(state: Any = None, *, drain: bool = False, **kwargs: Any) -> list[tuple[str, str]]:
    """Be a worker until stopped (``drain``: until no run is left): see :func:`worker_pool`."""
    return await worker_pool(state, **kwargs).run(drain=drain)


def db_upgrade(url: Any = None) -> tuple[int, int]:
    """Create or migrate the PostgreSQL schema of ``url`` (default: the configured state); returns
    (version before, version after). ValueError when the state is not a PostgreSQL URL."""
    from .interpreter.stores.pgstore import upgrade
    from .interpreter.core.state import is_url

    url = _state(url)
    if not is_url(url):
        raise ValueError(
            f"the state ({url or './.dagplan'}) is a directory, not a postgresql:// URL: nothing to upgrade"
        )
    return upgrade(url)
