"""The public API: load -> preview / run, the recorded runs, with an async twin of every run function.

Each function is its :class:`dagplan.Project` method for the working directory's project, with the context the
call gave (``state_dir``, ``config``, ``tool_sources``: shorthands for a project's): one line that builds
:meth:`Project.given` and calls it. The bodies are the project's (``dagplan/project.py``); the doors (the CLI,
the viewer, the servers) call their project's methods.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ._pipeline import Approve, ToolsArg, load_plan, settings_names
from ._pipeline import sync as _sync
from .dsl.errors import DagplanError, PlanInvalid  # noqa: F401 - what the doors catch
from .dsl.ir import Plan
from .dsl.files import create_file, write_file  # noqa: F401 - how every file dagplan writes is written (the CLI's too)
from .dsl.load import TEST_SUFFIXES  # noqa: F401 - what a plan test file is called, for the viewer


def load(
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
    return load_plan(source, text=text, name=name, tools=tools, config=config, root=root)


def check_files(paths: Iterable[str | os.PathLike], tool_sources: Iterable[str] = (), config: Any = None) -> list:
    """``dagplan check``: each file checked as ``run`` will load it, with the same configuration
    (its ``tools`` and the given ones, ``max_items``, ``max_steps``); a plan test file
    (``*.test.yaml``) is checked as one (its fields, its plan, the names its mocks use). Raises
    RunError ``tools-import`` when the tools cannot be loaded. (:meth:`Project.check`.)"""
    return _here(config, tool_sources=tool_sources).check(list(paths))


def preview(plan: Plan | str | os.PathLike, tools: ToolsArg = None, config: Any = None):
    """What the plan would run, running nothing: a :class:`Preview` (``.to_json()``); with ``tools`` (or only
    their specs), the steps that act on the world and those whose tool is destructive are marked.
    (:meth:`Project.preview`.)"""
    return _here(config).preview(plan, tools)


def rerun(
    plan: Plan | str | os.PathLike,
    reuse: str | Iterable[str],
    tools: ToolsArg = None,
    *,
    state_dir: Any = None,
    config: Any = None,
    inputs: Mapping[str, Any] | None = None,
    model: str | None = None,
    tool_sources: Iterable[str] = (),
):
    """What ``run(plan, reuse=...)`` would run again and why, calling nothing (a :class:`Rerun`: each step
    ``reuse`` or ``run`` with its reason, and the model calls it would make and save). ``inputs``: the
    first run's unless given; ``tools`` (or the ``tool_sources`` they are loaded from, with the
    configuration's): as the run would have them (their code is part of a step's fingerprint).
    (:meth:`Project.rerun`.)"""
    return _here(config, state_dir, tool_sources).rerun(plan, reuse, tools, inputs=inputs, model=model)


def estimate(plan: Plan | str | os.PathLike, config: Any = None):
    """The worst case of a plan before it runs: steps, model calls, input tokens and dollars
    (:class:`Estimate`; ``.summary()``), priced with litellm's offline cost map. (:meth:`Project.estimate`.)"""
    return _here(config).estimate(plan)


if TYPE_CHECKING:
    from .settings import RunSettings

CONTEXT = ("tool_sources", "state_dir", "config")  # what a Project fills in


def __getattr__(name: str) -> Any:
    """``RUN_SETTINGS`` / ``RESUME_SETTINGS``: the names of :class:`RunSettings`'s fields (a resume's: those it may
    change), what `Project.with_options` keeps for every run and what ``arun``/``aresume`` take as keywords;
    read from the holder when first asked for (``check`` never imports it)."""
    if name in ("RUN_SETTINGS", "RESUME_SETTINGS"):
        return settings_names(resume=name == "RESUME_SETTINGS")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def arun(
    plan: Plan | str | os.PathLike,
    *,
    tools: ToolsArg = None,
    inputs: Mapping[str, Any] | None = None,
    approve: Approve | None = None,
    durable: bool = False,
    run_id: str | None = None,
    reuse: str | Iterable[str] | Any = None,
    cassette: str | os.PathLike | Mapping[str, Any] | None = None,
    approval: Mapping[str, Any] | None = None,
    on_run_created: Callable[[str], None] | None = None,
    settings: RunSettings | None = None,
    **options: Any,
):
    """Run a plan; returns a :class:`RunResult`. See :func:`run`. ``reuse``: a run id (``@last`` the newest
    run of this plan), several, or a :class:`~dagplan.interpreter.engine.reuse.Reuse`: a step whose
    fingerprint (its definition, what it reads, its upstream, its tool's code or its model) equals a completed
    step of those runs takes that result and calls nothing; every other step runs. ``cassette``: replay a
    recorded run's calls (a file or its data): no real tool or model is called. ``approval``: a person's
    approval of this plan (:func:`check_approval` verified it), kept in the run's journal; it is the approval
    of a lazy plan too.

    ``settings``: the run's settings, a :class:`RunSettings` (``model``, ``max_cost``, ``max_concurrency``,
    ``subscribers``, ``ask_gate``...: each field says what it does); each may also be given by name, as a
    keyword (``model="local"``), over ``settings``. ``options``: those, and the run's context, shorthands for
    a :class:`Project`'s (:meth:`Project.arun` is this): ``config``, ``state_dir``, and ``tool_sources`` (the
    files or modules the tools came from, recorded with content hashes so a resume loads the same ones)."""
    context = {key: options.pop(key) for key in CONTEXT if key in options}
    return await _here(**context).arun(
        plan, tools=tools, inputs=inputs, approve=approve, durable=durable, run_id=run_id, reuse=reuse,
        cassette=cassette, approval=approval, on_run_created=on_run_created, settings=settings, **options,
    )  # fmt: skip


def run(plan: Plan | str | os.PathLike, **kwargs: Any):
    """Run a plan to the end and return its :class:`RunResult`.

    ``tools``: decorated functions, :class:`Tool` objects, or a ``{name: callable}``
    mapping; the plan may call only these. ``inputs``: values of ``†input``.
    ``approve(preview) -> bool`` is asked before a ``mode: lazy`` plan runs.
    ``ask_gate(request) -> answer`` answers approval gates (``gate:`` steps); without it a run
    that has a gate is durable whatever ``durable`` says (its work is never lost at a gate) and stops in
    the ``waiting`` state: answer it later (:func:`answer`, ``dagplan answer``), then :func:`resume`.
    ``subscribers``: callables receiving every :class:`Event`. ``durable=True``
    checkpoints the run under ``state_dir`` (a directory, or a registry such as
    ``MemoryRegistry()``) so it can be resumed.
    """
    return _sync(arun(plan, **kwargs))


async def aresume(
    run_id: str,
    *,
    tools: ToolsArg = None,
    from_step: str | None = None,
    on_interrupted: Callable[[str, str], str] | None = None,
    rerun_side_effects: bool = False,
    adopted_output: Any = None,
    approve: Approve | None = None,
    on_run_created: Callable[[str], None] | None = None,
    settings: RunSettings | None = None,
    **options: Any,
):
    """Resume a durable run. See :func:`resume`. ``approve(preview)``: a streamed run stopped before its
    plan was whole is planned on (its model answers memoized), and its plan approved with it. ``settings`` (a
    :class:`RunSettings`, or its fields by name): those a resume can change (``model``, ``completion_kwargs``,
    ``max_concurrency``, ``on_limit_exceeded``, ``subscribers``, ``ask_gate``; the rest are the run's, kept from
    its start). ``options``: those, and ``config`` and ``state_dir`` (shorthands for a :class:`Project`'s:
    :meth:`Project.aresume` is this)."""
    context = {key: options.pop(key) for key in ("config", "state_dir") if key in options}
    return await _here(**context).aresume(
        run_id, tools=tools, from_step=from_step, on_interrupted=on_interrupted,
        rerun_side_effects=rerun_side_effects, adopted_output=adopted_output, approve=approve,
        on_run_created=on_run_created, settings=settings, **options,
    )  # fmt: skip


def resume(run_id: str, **kwargs: Any):
    """Resume an interrupted (or waiting) durable run: completed steps replay, the rest runs.

    ``on_interrupted(step, purity) -> "retry" | "adopt" | "fail"`` decides about steps with a
    side effect that were running when the run stopped (without it the run stops in ``needs_decision``:
    a side effect is never silently repeated). ``from_step`` runs that step and every later one again; it
    refuses when that would repeat a side effect that already ran, unless ``rerun_side_effects=True``.
    ``adopted_output``: the output of an adopted step (what the side effect returned, as the operator knows it).
    """
    return _sync(aresume(run_id, **kwargs))


# --- recorded runs ---------------------------------------------------------------------------


def runs(state_dir: Any = None, *, limit: int | None = None, statuses: Iterable[str] = ()):
    """The recorded runs, newest first: a list of :class:`RunInfo`; ``limit``: only the newest so many (only
    those are read), ``statuses``: only runs in one of these. (:meth:`Project.runs`.)"""
    return _here(state_dir=state_dir).runs(limit=limit, statuses=statuses)


def run_report(run_id: str, state_dir: Any = None):
    """One run's :class:`RunReport`: status, each step's status, attempts, output and error."""
    return _here(state_dir=state_dir).run_report(run_id)


def events(run_id: str, state_dir: Any = None, types: Iterable[str] | None = None):
    """A run's journaled :class:`Event` values, oldest first (``types``: only those)."""
    return _here(state_dir=state_dir).events(run_id, types)


def watch(run_id: str, state_dir: Any = None):
    """Follow a run another process (or this one) writes: ``watch(run).poll()`` returns the events
    recorded since the last poll (the viewer's live updates)."""
    return _here(state_dir=state_dir).watch(run_id)


def answer(
    run_id: str,
    step: str,
    value: Any,
    state_dir: Any = None,
    *,
    text: bool = False,
    channel: str = "answer",
    who: str | None = None,
) -> str:
    """Answer the approval gate ``step`` a waiting run stopped at; :func:`resume` then continues it.
    ``channel`` (``answer``, ``viewer``, ``mcp``, ...; see :class:`Channel`) and ``who`` (by default the
    OS user) are recorded with the answer; a gate only a person may answer refuses a model's channel."""
    return _here(state_dir=state_dir).answer(run_id, step, value, text=text, channel=channel, who=who)


def discard(run_id: str, state_dir: Any = None, *, force: bool = False) -> str:
    """Record ``plan_aborted`` and remove a run; returns its full id. A running run is refused unless
    ``force`` (then it is stopped first); :func:`cancel` stops a run and keeps its record."""
    return _here(state_dir=state_dir).discard(run_id, force=force)


def prune(
    older_than: float | str, statuses: Iterable[str] = (), state_dir: Any = None, *, dry_run: bool = False
) -> list:
    """``dagplan runs prune``: discard runs finished more than ``older_than`` ago (seconds, or a duration:
    ``30d``), in the given statuses (default: every finished one); never a run a process owns now. Returns
    their RunInfo; RunError ``usage`` for a duration that is not one."""
    return _here(state_dir=state_dir).prune(older_than, statuses, dry_run=dry_run)


def cancel(run_id: str, state_dir: Any = None) -> str:
    """Stop a running or waiting run for good, keeping its record (status ``cancelled``); its full id."""
    return _here(state_dir=state_dir).cancel(run_id)


def stored_plan(
    run_id: str,
    tools: ToolsArg = None,
    state_dir: Any = None,
    *,
    config: Any = None,
    from_step: str | None = None,
    resumable: bool = False,
) -> Plan:
    """The plan a recorded run runs (from its artifact, never re-derived), checked against ``tools``
    (None: against none, to show it) and ``from_step`` (a ``resume --from`` step, checked first).
    ``resumable``: refuse first a run that ended for good (``run-finished``), as resuming it would; None for
    a streamed run stopped before its plan was written (resuming it plans again)."""
    return _here(config, state_dir).stored_plan(run_id, tools, from_step=from_step, resumable=resumable)


def load_config(start: str | os.PathLike | None = None):
    """The project configuration that applies in ``start`` (default: the working directory): its
    :class:`Project`'s."""
    from .project import Project

    return Project(start).config


def diff(before: Plan | str | os.PathLike, after: Plan | str | os.PathLike, tool_sources: Iterable[str] = (),
         config: Any = None, state_dir: Any = None):  # fmt: skip
    """``dagplan diff``: the semantic difference of two plans (:class:`dagplan.dsl.diff.PlanDiff`). A plan
    is a file, a loaded :class:`Plan`, or ``run:RUN_ID`` (the plan a recorded run runs). With LLM steps on
    either side, the worst-case cost before and after is priced. (:meth:`Project.diff`.)"""
    return _here(config, state_dir, tool_sources).diff(before, after)


def approve(
    plan: Plan | str | os.PathLike,
    *,
    tools: ToolsArg = None,
    tool_sources: Iterable[str] = (),
    config: Any = None,
    who: str | None = None,
) -> dict:
    """A person's approval of ``plan`` with these tools (``dagplan preview PLAN --approve``): its canonical
    hash, the tools' hash, the steps that can act, the worst-case cost, who approved it (by default the OS
    user) and when. :func:`run` with ``approval=`` runs only this plan with these tools."""
    return _here(config, tool_sources=tool_sources, tools=tools).approve(plan, who)


def check_approval(
    approval: Mapping[str, Any] | str | os.PathLike,
    plan: Plan | str | os.PathLike,
    *,
    tools: ToolsArg = None,
    tool_sources: Iterable[str] = (),
    config: Any = None,
) -> dict:
    """The approval (a file, or its data) when ``plan`` with these tools is what it approved; else the error
    ``not-approved``, each difference in ``dagplan diff``'s words."""
    return _here(config, tool_sources=tool_sources, tools=tools).check_approval(approval, plan)


def answered(value: Any, channel: str, who: str | None = None) -> Any:
    """What an ``ask_gate`` callable returns to say how the answer came (recorded with it; by default
    the OS user); a bare value is recorded as the ``api`` channel's."""
    from .interpreter.core.vocabulary import Answered, Channel, os_user

    return Answered(value, Channel(channel), who if who is not None else os_user())


def waiting(request: Mapping[str, Any]) -> Exception:
    """What an ``ask_gate`` callback raises to leave a gate unanswered: the run stops waiting for it (as with
    no ``ask_gate`` at all), to be answered later with :func:`answer`."""
    from .interpreter.engine.attempts import Waiting

    return Waiting(request)


# --- helpers ------------------------------------------------------------------------------


def _here(config: Any = None, state_dir: Any = None, tool_sources: Iterable[str] = (), tools: ToolsArg = None) -> Any:
    """The project a module-level function means (:meth:`Project.given`): the working directory's, with the
    context the call gave."""
    from .project import Project

    return Project.given(config, state_dir, tool_sources, tools)
