"""What the API's implementation (:class:`dagplan.Project`) is made of that is no project's context: the pipeline's
entry (a plan loaded and checked with the tools and budget given), the checks a configuration adds, run settings'
names, cassettes, queued runs' contents. Below the project and the modules of module-level functions (``api``,
``pool``, ``planning``, ``plantests``), which import it: nothing here imports them.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from .dsl import check as _check
from .dsl.errors import DagplanError, PlanInvalid  # noqa: F401 - DagplanError: what the doors catch
from .dsl.files import write_file  # noqa: F401 - how every file dagplan writes is written
from .dsl.ir import Plan

ToolsArg = Iterable[Any] | Mapping[str, Any] | None
Approve = Callable[[Any], "bool | Any"]
APPROVAL_KEPT = ("plan_hash", "tools_hash", "tools", "side_effects", "approved_by", "approved_at")


def load_plan(
    source: str | os.PathLike | None = None,
    *,
    text: str | bytes | None = None,
    name: str | None = None,
    tools: ToolsArg = None,
    config: Any = None,
    root: str | os.PathLike | None = None,
) -> Plan:
    """Load, check and parse a plan (any dialect); raises :class:`PlanInvalid` listing every problem.

    With ``tools``, tool names and argument types are checked too; with ``config``, its
    ``max_items`` (default cap of for_each steps) and ``max_steps`` budget apply. The plan
    carries its analysis (graph, order, groups): running it again costs no re-analysis.
    ``root``: a folder the plan's sub-plan files must lie under (a plan from an untrusted client).
    """
    from .dsl.compose import Budget

    specs = specs_of(tools) if tools is not None else None
    result = _check(source, text=text, name=name, tools=specs, budget=Budget.of(config), root=root)
    if not result.ok or result.plan is None:
        raise PlanInvalid(result.diagnostics)
    return result.plan


def checker(cfg: Any, specs: Mapping[str, Any] | None) -> Callable[..., Any]:
    """One file's or text's ``check`` with these tool specs and the configuration's budget and rules (the one
    way; :meth:`Project.check` gives it the project's)."""
    from .dsl import with_diagnostics
    from .dsl.compose import Budget

    budget = Budget.of(cfg)

    def checking(source: Any = None, **kwargs: Any) -> Any:
        result = _check(source, tools=specs, budget=budget, **kwargs)
        return with_diagnostics(result, config_rules(result.plan, cfg)) if result.plan is not None else result

    return checking


def config_rules(plan: Plan, config: Any) -> list:
    """What the configuration lets check know: the preflight as far as it can (an LLM step with no model to
    call), the cost, the gates' notifiers."""
    from .interpreter.llm.preflight import check_warnings

    return [*check_warnings(plan, config.default_model), *cost_rules(plan, config), *notifiers(plan, config)]


def cost_rules(plan: Plan, config: Any) -> list:
    """``too-expensive``, ``unbounded-cost``, ``context-window``: for plans with LLM steps only."""
    from .interpreter.llm.preflight import llm_steps

    if not llm_steps(plan):
        return []
    from .interpreter.llm.estimate import diagnostics, estimate

    found = estimate(plan, config.default_model, config.max_items, config.step_max_iterations)
    return diagnostics(found, config.max_cost, plan)


def notifiers(plan: Plan, config: Any) -> list:
    """``unknown-notifier``: a gate's ``notify`` names what the configuration declares."""
    from .interpreter.core.config import unknown_notifier
    from .interpreter.llm.preflight import plan_steps

    return [unknown_notifier(step, name, config.notify) for step in plan_steps(plan) if step.gate is not None
            for name in step.gate.notify if name not in config.notify]  # fmt: skip


def check_tests(path: str | os.PathLike, config: Any):
    from .interpreter.testing.plantest import check_suite

    return check_suite(path, config)


def settings_names(resume: bool = False) -> tuple[str, ...]:
    """The run settings' names (:class:`RunSettings`'s fields), or those a resume may change."""
    from . import settings

    return settings.ON_RESUME_NAMES if resume else settings.NAMES


def options_of(function: str, given: Mapping[str, Any], allowed: Iterable[str]) -> dict[str, Any]:
    """The keyword options of ``function``, each one of ``allowed``: an unknown one is refused as Python refuses
    an unknown keyword argument, with the names it takes (``arun``, ``aresume``, ``Project``)."""
    allowed = tuple(allowed)
    for name in given:
        if name not in allowed:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r} (it takes: "
                            f"{', '.join(allowed)})")  # fmt: skip
    return dict(given)


def runs_of_plan(registry: Any, runs: str | Iterable[str], plan: Plan | None) -> list[str]:
    """Run ids as given, with ``@last`` (``-``) the newest run of ``plan`` (its file, the same path however
    it was written): another plan's run, newer, is never taken in its place. Without a plan: the newest run."""
    from .dsl.errors import RunError
    from .interpreter.stores.journal import LATEST

    given = [runs] if isinstance(runs, str) else list(runs)
    if plan is None or not any(r in LATEST for r in given):
        return given
    mine = os.path.realpath(plan.source)
    ran = sorted((info for info in registry.list() if os.path.realpath(info.plan_name or "?") == mine),
                 key=lambda info: info.started)  # fmt: skip
    if not ran:
        raise RunError.make("unknown-run", f"@last: no earlier run of {plan.source}",
                            hint="run it once first, or name the run to reuse: --reuse RUN_ID")  # fmt: skip
    return [ran[-1].id if r in LATEST else r for r in given]


def sync(coroutine: Any) -> Any:
    """The sync twin of an async function: its coroutine run to the end (asyncio is imported here,
    not for every command: ``check`` never needs it)."""
    import asyncio

    return asyncio.run(coroutine)


def as_plan(plan: Plan | str | os.PathLike, tools: ToolsArg = None, config: Any = None) -> Plan:
    return plan if isinstance(plan, Plan) else load_plan(plan, tools=tools, config=config)


def cassette_of(cassette: Any) -> tuple[Mapping[str, Any], str] | None:
    """A cassette given as a file or as its data: (its data, how messages name it)."""
    if cassette is None:
        return None
    if isinstance(cassette, Mapping):
        return cassette, "the cassette"
    from .interpreter.testing.cassette import read

    return read(cassette), f"cassette {os.fspath(cassette)}"


def replaying(cassette: tuple[Mapping[str, Any], str] | None, ask_gate: Any, model: str | None,
               config: Any) -> dict[str, Any]:  # fmt: skip
    """The options of a run replaying ``cassette`` (its calls, its gate answers, the model it
    recorded when none is given; retries do not wait), or none."""
    if cassette is None:
        return {}
    from .interpreter.testing.cassette import CassetteCalls

    data, name = cassette
    calls = CassetteCalls(data, name=name, patterns=tuple(config.redact))
    return {
        "calls": calls,
        "ask_gate": ask_gate or calls.answer_gate,
        "model": model or calls.recorded_model(),
        "backoff_scale": 0.0,
    }


def specs_of(tools: ToolsArg):
    return {name: t.spec for name, t in tools_of(tools).items()}


def tools_of(tools: ToolsArg):
    from .interpreter.tools.catalog import registry

    return registry(tools)


def each_inputs(plan: Plan, each: str | os.PathLike, inputs: Mapping[str, Any] | None, state: Any) -> list[dict]:
    """The inputs of every line of ``each`` over ``inputs``, each checked against the plan and what the run
    database ``state`` can store; a :class:`RunError` naming every bad line (``FILE:LINE``), or an empty file."""
    from .dsl.errors import LoadError, RunError, error
    from .dsl.load import read_json_lines
    from .interpreter.engine.inputs import prepare_inputs

    name = os.fspath(each)
    holds = database_holds(state)
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


def database_holds(state: Any) -> Any:
    """The check of what the run database ``state`` can store (a :class:`RunError` when it cannot)."""
    from .interpreter.core.state import is_url

    if is_url(state):  # the one test of a run database's state
        from .interpreter.stores.pgstore import refuse_nul

        return refuse_nul
    return lambda values: None


def submission(plan: Plan, sources: Iterable[str], inputs: Any, config: Any) -> dict[str, Any]:
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
