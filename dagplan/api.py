"""The public API: load -> preview / run, the recorded runs, with an async twin of every run function.

Each function is a thin layer over the pipeline (:mod:`dagplan.dsl`) and the interpreter
(:mod:`dagplan.interpreter`); the CLI calls only these.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from .dsl import check as _check
from .dsl.errors import DagplanError, PlanInvalid
from .dsl.ir import Plan
from .dsl.files import write_file  # noqa: F401 - how every file dagplan writes is written (the CLI's too)
from .dsl.load import TEST_SUFFIXES  # noqa: F401 - what a plan test file is called, for the viewer

ToolsArg = Iterable[Any] | Mapping[str, Any] | None
Approve = Callable[[Any], "bool | Any"]


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
    from .dsl.compose import Budget

    specs = _specs(tools) if tools is not None else None
    result = _check(source, text=text, name=name, tools=specs, budget=Budget.of(config), root=root)
    if not result.ok or result.plan is None:
        raise PlanInvalid(result.diagnostics)
    return result.plan


def check_files(paths: Iterable[str | os.PathLike], tool_sources: Iterable[str] = (), config: Any = None) -> list:
    """``dagplan check``: each file checked as ``run`` will load it, with the same configuration
    (its ``tools`` and the given ones, ``max_items``, ``max_steps``); a plan test file
    (``*.test.yaml``) is checked as one (its fields, its plan, the names its mocks use). Raises
    RunError ``tools-import`` when the tools cannot be loaded."""
    from .dsl.load import is_test_file

    cfg = config or load_config()
    checking = _checker(cfg, tool_sources)
    return [_check_tests(path, cfg) if is_test_file(path)  # a plan test file: checked as one
            else checking(path, name=os.fspath(path) if os.fspath(path) != "-" else None)
            for path in paths]  # fmt: skip


def _checker(cfg: Any, tool_sources: Iterable[str]) -> Callable[..., Any]:
    """One file's or text's ``check`` with the configuration's tools, budget and rules (the one way)."""
    from .dsl import with_diagnostics
    from .dsl.compose import Budget

    sources = [*cfg.tools, *tool_sources]
    specs = None
    if sources:  # importing user code (and the tool registry) only when there is some
        from .interpreter.tools.sources import load_tool_specs

        specs = load_tool_specs(sources)
    budget = Budget.of(cfg)

    def checking(source: Any = None, **kwargs: Any) -> Any:
        result = _check(source, tools=specs, budget=budget, **kwargs)
        return with_diagnostics(result, _config_rules(result.plan, cfg)) if result.plan is not None else result

    return checking


def _config_rules(plan: Plan, config: Any) -> list:
    """What the configuration lets check know: the preflight as far as it can (an LLM step with no model to
    call), the cost, the gates' notifiers."""
    from .interpreter.llm.preflight import check_warnings

    return [*check_warnings(plan, config.default_model), *_cost_rules(plan, config), *_notifiers(plan, config)]


def check_text(
    text: str,
    name: str = "plan.yaml",
    tool_sources: Iterable[str] = (),
    config: Any = None,
    *,
    test_file: bool = False,
    root: str | os.PathLike | None = None,
):
    """``check`` of a plan given as text (an editor's buffer, an agent's plan): the same rules, tools,
    budget, preflight warnings and cost as :func:`check_files`. ``name`` says where the text belongs: its
    relative sub-plans are read beside it, as ``check`` of the file would. The text is a plan whatever its
    name, unless ``test_file`` (an editor's own files): then a ``*.test.yaml`` name checks it as a plan
    test, which imports the tools it names, so never for text from an untrusted client. ``root``: the
    folder its sub-plan files must lie under."""
    from .dsl.load import is_test_file

    cfg = config or load_config()
    if test_file and is_test_file(name):
        from .interpreter.testing.plantest import check_suite

        return check_suite(name, cfg, text)
    return _checker(cfg, tool_sources)(text=text, name=name, root=root)


def _cost_rules(plan: Plan, config: Any) -> list:
    """``too-expensive``, ``unbounded-cost``, ``context-window``: for plans with LLM steps only."""
    from .interpreter.llm.preflight import llm_steps

    if not llm_steps(plan):
        return []
    from .interpreter.llm.estimate import diagnostics, estimate

    found = estimate(plan, config.default_model, config.max_items, config.step_max_iterations)
    return diagnostics(found, config.max_cost, plan)


def _notifiers(plan: Plan, config: Any) -> list:
    """``unknown-notifier``: a gate's ``notify`` names what the configuration declares."""
    from .interpreter.core.config import unknown_notifier
    from .interpreter.llm.preflight import plan_steps

    return [unknown_notifier(step, name, config.notify) for step in plan_steps(plan) if step.gate is not None
            for name in step.gate.notify if name not in config.notify]  # fmt: skip


def _check_tests(path: str | os.PathLike, config: Any):
    from .interpreter.testing.plantest import check_suite

    return check_suite(path, config)


def preview(plan: Plan | str | os.PathLike, tools: ToolsArg = None, config: Any = None):
    """What the plan would run, running nothing: a :class:`Preview` (``.to_json()``); with ``tools`` (or only
    their specs), the steps that act on the world and those whose tool is destructive are marked."""
    from .dsl.schedule import analysis_of
    from .interpreter.engine.preview import build_preview
    from .interpreter.tools.catalog import registry

    from .dsl.ir import ToolSpec

    cfg = config or load_config()
    plan = _as_plan(plan, tools, cfg)
    if isinstance(tools, Mapping) and tools and all(isinstance(t, ToolSpec) for t in tools.values()):
        return build_preview(plan, analysis_of(plan), cfg, tools)  # specs (a planner's catalog) say enough
    return build_preview(plan, analysis_of(plan), cfg, registry(tools))


def is_plan_file(path: str | os.PathLike) -> bool:
    """Whether the file at ``path`` is a plan or a plan test file (:mod:`dagplan.dsl.recognize`: its folder
    or name, the ``$schema`` modeline, or its shape); a file that cannot be read counts as one (``check``
    says why)."""
    from .dsl.errors import DagplanError
    from .dsl.load import read_file
    from .dsl.recognize import is_ours

    try:
        text = read_file(path).decode("utf-8", "replace")
    except (DagplanError, OSError):
        return True
    return is_ours(text, str(path))


def is_ours(text: str, name: str = "") -> bool:
    """Whether a document is a plan or a plan test file (``*.test.yaml``): what the language server checks;
    any other YAML or JSON it leaves alone."""
    from .dsl.recognize import is_ours as recognised

    return recognised(text, name)


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
    configuration's): as the run would have them (their code is part of a step's fingerprint)."""
    from .interpreter.engine.scope import Options
    from .interpreter.ops.rerun import would_rerun
    from .interpreter.stores.registry import open_registry
    from .interpreter.tools.catalog import registry

    cfg = config or load_config()
    if tools is None:
        tools, tool_sources = _configured_tools(tool_sources, cfg)
    plan = _as_plan(plan, tools, cfg)
    runs = open_registry(_state(state_dir, cfg))
    journals = [runs.open(run_id) for run_id in runs_of_plan(runs, reuse, plan)]
    try:
        before: Plan | None = stored_plan(journals[0].id, None, state_dir, config=cfg) if journals else None
    except DagplanError:  # an agent's run, a streamed run that never got its plan: no fields to compare
        before = None
    options = Options.from_config(cfg, model=model)
    return _sync(would_rerun(plan, registry(tools), journals, options, inputs, before, cfg))


def estimate(plan: Plan | str | os.PathLike, config: Any = None):
    """The worst case of a plan before it runs: steps, model calls, input tokens and dollars
    (:class:`Estimate`; ``.summary()``), priced with litellm's offline cost map."""
    from .interpreter.llm.estimate import estimate as worst

    cfg = config or load_config()
    return worst(_as_plan(plan, config=cfg), cfg.default_model, cfg.max_items, cfg.step_max_iterations)


async def arun(
    plan: Plan | str | os.PathLike,
    *,
    tools: ToolsArg = None,
    inputs: Mapping[str, Any] | None = None,
    approve: Approve | None = None,
    subscribers: Iterable[Callable] = (),
    max_concurrency: int | None = None,
    on_limit_exceeded: Callable | None = None,
    durable: bool = False,
    state_dir: Any = None,
    run_id: str | None = None,
    model: str | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    max_cost: float | None = None,
    max_tokens: int | None = None,
    config: Any = None,
    on_run_created: Callable[[str], None] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
    tool_sources: Iterable[str] = (),
    cassette: str | os.PathLike | Mapping[str, Any] | None = None,
    executor: str | None = None,
    person_gates: bool | None = None,
    approval: Mapping[str, Any] | None = None,
    reuse: str | Iterable[str] | Any = None,
):
    """Run a plan; returns a :class:`RunResult`. See :func:`run`. ``reuse``: a run id (``@last`` the newest),
    several, or a :class:`~dagplan.interpreter.engine.reuse.Reuse`: a step whose fingerprint (its definition,
    what it reads, its upstream, its tool's code or its model) equals a completed step of those runs takes
    that result and calls nothing; every other step runs. ``tool_sources``: the files or
    modules the tools came from, recorded (with content hashes) so a resume loads the same ones.
    ``cassette``: replay a recorded run's calls (a file or its data): no real tool or model is called.
    ``executor``: ``"ray"`` runs the tool calls as Ray tasks (a plan's or a tool's own executor wins).
    ``person_gates``: every gate of the run (and of its resumes) is one only a person may answer, as for a
    plan a model wrote (MCP, the planner): a model's channel cannot answer it. ``approval``: a person's
    approval of this plan (:func:`check_approval` verified it), kept in the run's journal; it is the
    approval of a lazy plan too."""
    from .interpreter.ops.driver import RunRequest, start
    from .interpreter.engine.scope import Options
    from .interpreter.tools.catalog import registry

    cfg = config or load_config()
    recorded = _cassette(cassette)
    if tools is None and recorded is not None and not isinstance(plan, Plan):
        from .interpreter.testing.cassette import replay_tools

        tools = replay_tools(recorded[0]) or None  # a replay checks the plan against the recorded catalog
    elif tools is None:
        tools, tool_sources = _configured_tools(tool_sources, cfg)
    plan = _as_plan(plan, tools, cfg)
    replay = _replaying(recorded, ask_gate, model or cfg.default_model, cfg)
    options = Options.from_config(
        cfg,
        max_concurrency=max_concurrency,
        on_limit_exceeded=on_limit_exceeded,
        subscribers=subscribers,
        model=replay.pop("model", model),
        completion_kwargs=completion_kwargs,
        max_cost=max_cost,
        max_tokens=max_tokens,
        ask_gate=replay.pop("ask_gate", ask_gate),
        executor=executor,
        person_gates=person_gates,
        reuse=reuse_of(reuse, state_dir, cfg, plan),
        **replay,
    )
    from .interpreter.tools.sources import source_record

    return await start(
        RunRequest(
            plan,
            registry(tools),
            options,
            inputs=inputs,
            approve=approve if approval is None else (lambda preview: True),  # approved ahead, by a person
            durable=durable,
            state=_state(state_dir, cfg),
            run_id=run_id,
            meta={
                "tool_sources": source_record(tool_sources),
                "config": str(cfg.path) if cfg.path else None,
                **({"approval": {k: approval.get(k) for k in _APPROVAL_KEPT}} if approval else {}),
            },  # fmt: skip
            on_run_created=on_run_created,
        )
    )


_APPROVAL_KEPT = ("plan_hash", "tools_hash", "tools", "side_effects", "approved_by", "approved_at")


async def aplan(
    task: str,
    *,
    tools: ToolsArg = None,
    model: str | None = None,
    run: bool = False,
    stream: bool = False,
    inputs: Mapping[str, Any] | None = None,
    approve: Approve | None = None,
    durable: bool = True,
    state_dir: Any = None,
    config: Any = None,
    subscribers: Iterable[Callable] = (),
    on_run_created: Callable[[str], None] | None = None,
    on_event: Callable[[Mapping[str, Any]], None] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    on_limit_exceeded: Callable | None = None,
    tool_sources: Iterable[str] = (),
    gate_acting: bool = False,
    **planner: Any,
):
    """A model's plan for ``task`` using only ``tools`` (validated, repaired): a :class:`PlanResult`.

    ``run=True`` also runs it (``result.run`` is the :class:`RunResult`; ``approve(preview)`` is asked for
    the whole plan first when given, as ``dagplan plan --run`` asks a person). ``stream=True`` (with
    ``run``): the plan is read as the model writes it, and each ``pure`` / ``idempotent`` tool step whose
    text is complete and checked starts at once; a side effect, a gate, a model step and what follows them
    wait for the whole plan to pass check and be approved (``interpreter/ops/streamed.py``); ``tool_sources``
    (the files or modules the tools came from) are recorded, so ``resume`` loads the same; ``gate_acting``
    (streamed; recorded with the run) puts a person's gate before the steps that act. ``on_event``
    sees the streaming: ``started_early``, ``early_done``, ``prefix_failed``, ``plan_complete``. Other
    keywords go to the planner (``repair``, ``guide``, ``structured_output``, ``on_attempt``...)."""
    from .interpreter.llm import planner as planning

    cfg = config or load_config()
    chosen = model or cfg.default_model
    kwargs = {**cfg.llm, **(completion_kwargs or {})}
    planner.setdefault("structured_output", cfg.structured_output)
    if not run:
        return await planning.aplan(task, tools=tools, model=chosen, completion_kwargs=kwargs, **planner)  # type: ignore[arg-type]
    from .interpreter.engine.scope import Options
    from .interpreter.tools.catalog import registry

    found = registry(tools)
    if not stream:
        result = await planning.aplan(task, tools={n: t.spec for n, t in found.items()}, model=chosen,
                                      completion_kwargs=kwargs, **planner)  # fmt: skip
        done = await arun(result.plan, tools=found, inputs=inputs, approve=approve, durable=durable,
                          state_dir=state_dir, config=cfg, subscribers=subscribers, on_run_created=on_run_created,
                          ask_gate=ask_gate, model=chosen, completion_kwargs=completion_kwargs,
                          on_limit_exceeded=on_limit_exceeded, tool_sources=tool_sources)  # fmt: skip
        from dataclasses import replace

        return replace(result, run=done)
    from .interpreter.ops.streamed import StreamRequest, plan_and_run

    options = Options.from_config(cfg, subscribers=subscribers, model=chosen, completion_kwargs=completion_kwargs,
                                  ask_gate=ask_gate, person_gates=True, gate_acting=gate_acting or None,
                                  on_limit_exceeded=on_limit_exceeded)  # fmt: skip
    on_attempt = planner.pop("on_attempt", None)
    from .interpreter.tools.sources import source_record

    meta = {"tool_sources": source_record(tool_sources), "config": str(cfg.path) if cfg.path else None}
    return await plan_and_run(
        StreamRequest(
            task,
            found,
            options,
            chosen,
            planner,
            kwargs,
            inputs=inputs,
            approve=approve,
            durable=durable,
            state=_state(state_dir, cfg),
            on_run_created=on_run_created,
            on_event=on_event,
            on_attempt=on_attempt,
            meta=meta,
        )  # fmt: skip
    )


async def aagent(
    task: str,
    *,
    tools: ToolsArg = None,
    model: str | None = None,
    approve: Approve | None = None,
    max_turns: int = 5,
    state_dir: Any = None,
    config: Any = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    on_run_created: Callable[[str], None] | None = None,
    on_turn: Callable[[Any], Any] | None = None,
):
    """The agent loop on ``task`` (``dagplan agent``): the model plans, a batch runs, the model re-plans from
    the live state, until it answers; a durable run (each model call memoized, each turn logged). A batch
    that can act on the world runs only once ``approve(preview)`` said yes (a person; without ``approve``
    such a batch is refused): the model never approves its own side effects. Every gate is a person's."""
    from .interpreter.llm.agent import durable_agent_loop
    from .interpreter.tools.catalog import registry
    from .dsl.ir import can_act
    from .dsl.errors import RunError

    cfg = config or load_config()
    found = registry(tools)
    chosen = model or cfg.default_model

    async def run_plan(batch: Plan) -> Mapping[str, Any]:
        acting = [s.id for s in batch.steps if can_act(s, found)]
        if acting:
            if approve is None:
                said = f"the agent's next steps act on the world ({', '.join(acting)})"
                raise RunError.make("approval-required", said,
                                    hint="a person approves them: dagplan agent on a terminal, or --yes")  # fmt: skip
            answer = approve(preview(batch, found))
            if hasattr(answer, "__await__"):
                answer = await answer
            if not answer:
                raise RunError.make("not-approved", f"the agent's next steps were not approved ({', '.join(acting)})")
        done = await arun(batch, tools=found, config=cfg, model=chosen, completion_kwargs=completion_kwargs,
                          person_gates=True)  # fmt: skip
        return done.state

    return await durable_agent_loop(task, tools={n: t.spec for n, t in found.items()}, run_plan=run_plan,
                                    model=chosen, state_dir=_state(state_dir, cfg), on_run_created=on_run_created,
                                    max_turns=max_turns, checkpoint=on_turn,
                                    completion_kwargs={**cfg.llm, **(completion_kwargs or {})})  # fmt: skip


def plan(task: str, **kwargs: Any):
    """Sync twin of :func:`aplan`."""
    return _sync(aplan(task, **kwargs))


def reuse_of(runs: Any, state_dir: Any = None, config: Any = None, plan: Plan | None = None) -> Any:
    """The completed results of ``runs`` (ids, ``@last``: the newest run of ``plan``, or a Reuse already) by
    step fingerprint; None for none. An id that names no run is the usual unknown-run error."""
    from .interpreter.engine.reuse import Reuse

    if runs is None or isinstance(runs, Reuse):
        return runs
    from .interpreter.stores.registry import open_registry

    registry = open_registry(_state(state_dir, config or load_config()))
    return Reuse.of(registry.open(run_id) for run_id in runs_of_plan(registry, runs, plan))


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


def run(plan: Plan | str | os.PathLike, **kwargs: Any):
    """Run a plan to the end and return its :class:`RunResult`.

    ``tools``: decorated functions, :class:`Tool` objects, or a ``{name: callable}``
    mapping; the plan may call only these. ``inputs``: values of ``†input``.
    ``approve(preview) -> bool`` is asked before a ``mode: lazy`` plan runs.
    ``ask_gate(request) -> answer`` answers approval gates (``gate:`` steps); without it a
    durable run stops in the ``waiting`` state (answer later: :func:`answer`).
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
    state_dir: Any = None,
    on_interrupted: Callable[[str, str], str] | None = None,
    subscribers: Iterable[Callable] = (),
    on_limit_exceeded: Callable | None = None,
    on_run_created: Callable[[str], None] | None = None,
    config: Any = None,
    max_concurrency: int | None = None,
    model: str | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
    rerun_side_effects: bool = False,
    adopted_output: Any = None,
    approve: Approve | None = None,
):
    """Resume a durable run. See :func:`resume`. ``approve(preview)``: a streamed run stopped before its
    plan was whole is planned on (its model answers memoized), and its plan approved with it."""
    from .interpreter.ops.driver import ResumeRequest, resume as _resume
    from .interpreter.engine.scope import Options
    from .interpreter.tools.catalog import registry

    cfg = config or load_config()
    options = Options.from_config(
        cfg,
        max_concurrency=max_concurrency,
        on_limit_exceeded=on_limit_exceeded,
        subscribers=subscribers,
        model=model,
        completion_kwargs=completion_kwargs,
        ask_gate=ask_gate,
    )
    return await _resume(
        ResumeRequest(
            run_id,
            registry(tools),
            options,
            cfg,
            state=_state(state_dir, cfg),
            from_step=from_step,
            on_interrupted=on_interrupted,
            on_run_created=on_run_created,
            rerun_side_effects=rerun_side_effects,
            adopted_output=adopted_output,
            approve=approve,
        )
    )


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


def runs(state_dir: Any = None):
    """Every recorded run, newest first: a list of :class:`RunInfo`."""
    from .interpreter.ops.runs import list_runs

    return list_runs(_state(state_dir))


def run_report(run_id: str, state_dir: Any = None):
    """One run's :class:`RunReport`: status, each step's status, attempts, output and error."""
    from .interpreter.ops.runs import run_report as report

    return report(run_id, _state(state_dir))


def events(run_id: str, state_dir: Any = None, types: Iterable[str] | None = None):
    """A run's journaled :class:`Event` values, oldest first (``types``: only those)."""
    from .interpreter.ops.runs import run_events

    return run_events(run_id, _state(state_dir), types)


def watch(run_id: str, state_dir: Any = None):
    """Follow a run another process (or this one) writes: ``watch(run).poll()`` returns the events
    recorded since the last poll (the viewer's live updates)."""
    from .interpreter.ops.runs import Watch

    return Watch(run_id, _state(state_dir))


def output_chunks(run_id: str, step: str, state_dir: Any = None):
    """A step's recorded output as bytes, in chunks (a spilled output streams from its file), secrets masked."""
    from .interpreter.ops.runs import output_chunks as chunks

    return chunks(run_id, step, _state(state_dir))


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
    from .interpreter.core.vocabulary import os_user
    from .interpreter.ops.runs import answer_gate

    return answer_gate(run_id, step, value, _state(state_dir), text=text, channel=channel,
                       who=who if who is not None else os_user())  # fmt: skip


async def ask_at_terminal(run_id: str, request: Mapping[str, Any], prompt: Callable[[Any], Any],
                          state_dir: Any = None) -> Any:  # fmt: skip
    """A gate of the live run ``run_id`` asked at this terminal (``prompt(cancelled)``), answerable meanwhile
    by :func:`answer` from elsewhere: the first answer, as an :class:`Answered` (interpreter/ops/asking.py)."""
    from .interpreter.ops.asking import ask_here_or_elsewhere
    from .interpreter.stores.registry import open_registry

    journal = open_registry(_state(state_dir)).open(run_id)
    return await ask_here_or_elsewhere(journal, request, prompt)


def outline(text: str, name: str = "plan.yaml") -> list[dict] | None:
    """Where a plan's steps are written, from the loader's own positions (any dialect, block or flow
    style): per step its ``id``, ``line``/``col`` of the id's value (1-based, code points, as diagnostics
    give them), ``tool``, ``output`` (as written) and ``output_line``. None when the text does not load
    (a half-written plan: an editor scans it instead)."""
    from .dsl.errors import LoadError, Span
    from .dsl.load import load_text

    try:
        document = load_text(text, name)
    except (LoadError, RecursionError, ValueError):
        return None
    steps = document.data.get("steps") if isinstance(document.data, dict) else None
    if not isinstance(steps, list):
        return None
    out = []
    for index, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("id"), str):
            continue
        at = document.source_map.locate(Span(name, ("steps", index, "id")))
        output = step.get("output")
        written = document.source_map.locate(Span(name, ("steps", index, "output"))) if output is not None else None
        out.append({"id": step["id"], "line": at.line, "col": at.col,
                    "tool": step.get("tool") if isinstance(step.get("tool"), str) else None,
                    "output": output if isinstance(output, str) else None,
                    "output_line": written.line if written is not None else None})  # fmt: skip
    return out


def what_valid_means() -> str:
    """What ``check`` holds a planned plan to, and what it cannot know (``dagplan plan`` says it)."""
    from .interpreter.llm.planner import CHECKED

    return CHECKED


def step_id_problem(step_id: str) -> str | None:
    """Why ``step_id`` cannot be a step's id (the rule ``check`` applies: ``unsafe-id``), or None."""
    from .dsl.validate import ID_PATTERN, MAX_ID_LENGTH

    if len(step_id) > MAX_ID_LENGTH:
        return f"a step id is at most {MAX_ID_LENGTH} characters"
    if not ID_PATTERN.match(step_id):
        return (f"{step_id!r} is not a step id: letters, digits and `_`, in parts joined by single `-` "
                "(no spaces, `/`, `\\` or `..`)")  # fmt: skip
    return None


def word_value(raw: str) -> Any:
    """A value typed as one word (an input, an answer): JSON when it is JSON, else the text; ValueError for
    NaN, Infinity, ``1e999`` or deep nesting (the one parse the CLI, the viewer and the API share)."""
    from .interpreter.core.values import word_value as parse

    return parse(raw)


def discard(run_id: str, state_dir: Any = None, *, force: bool = False) -> str:
    """Record ``plan_aborted`` and remove a run; returns its full id. A running run is refused unless
    ``force`` (then it is stopped first); :func:`cancel` stops a run and keeps its record."""
    from .interpreter.ops.runs import discard_run

    return discard_run(run_id, _state(state_dir), force)


def shown_state(state_dir: Any = None) -> str:
    """Where runs are, as pages and messages show it: a directory, or a database URL with its password masked."""
    from .interpreter.core.redact import masked

    return masked(_state(state_dir) or ".dagplan")


def in_database(state_dir: Any = None) -> bool:
    """Whether runs are kept in a run database (a ``postgresql://`` state), where workers take them."""
    from .interpreter.core.state import is_url

    return is_url(_state(state_dir))


def prune(
    older_than: float | str, statuses: Iterable[str] = (), state_dir: Any = None, *, dry_run: bool = False
) -> list:
    """``dagplan runs prune``: discard runs finished more than ``older_than`` ago (seconds, or a duration:
    ``30d``), in the given statuses (default: every finished one); never a run a process owns now. Returns
    their RunInfo; RunError ``usage`` for a duration that is not one."""
    from .dsl.errors import RunError
    from .dsl.ir import parse_duration
    from .interpreter.ops.runs import prune_runs

    seconds = parse_duration(older_than)
    if seconds is None:
        raise RunError.make(
            "usage", f"--older-than {older_than!r} is not a duration", hint="for example 30d, 12h or 90m"
        )
    return prune_runs(seconds, statuses, _state(state_dir), dry_run=dry_run)


def cancel(run_id: str, state_dir: Any = None) -> str:
    """Stop a running or waiting run for good, keeping its record (status ``cancelled``); its full id."""
    from .interpreter.ops.runs import cancel_run

    return cancel_run(run_id, _state(state_dir))


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
    from .interpreter.ops.driver import refuse_finished, stored_plan as plan_of
    from .interpreter.ops.streamed import is_streamed_unwritten
    from .interpreter.stores.registry import open_registry
    from .interpreter.tools.catalog import registry

    cfg = config or load_config()
    journal = open_registry(_state(state_dir, cfg)).open(run_id)
    if resumable:
        refuse_finished(journal)
        if is_streamed_unwritten(journal):
            return None  # type: ignore[return-value]
    return plan_of(journal, registry(tools) if tools is not None else None, cfg, from_step)


def side_effects_again(run_id: str, from_step: str, tools: ToolsArg = None, state_dir: Any = None, *,
                       config: Any = None) -> list[str]:  # fmt: skip
    """The side-effecting steps ``resume(run_id, from_step=...)`` would run again although they already ran
    (what ``resume --from`` and a preview of it show, and refuse without ``rerun_side_effects``)."""
    return rerun_preview(run_id, from_step, tools, state_dir, config=config)["side_effects"]


def rerun_preview(run_id: str, from_step: str, tools: ToolsArg = None, state_dir: Any = None, *,
                  config: Any = None) -> dict[str, list[str]]:  # fmt: skip
    """What ``resume(run_id, from_step=...)`` would do, running nothing: ``again``, the units whose recorded
    results it clears and runs again; ``side_effects``, those among them that already touched the world."""
    from .dsl.schedule import analysis_of
    from .interpreter.engine.resume import side_effects_again as again
    from .interpreter.stores.journal import cleared_ids
    from .interpreter.stores.registry import open_registry
    from .interpreter.tools.catalog import registry

    cfg = config or load_config()
    journal = open_registry(_state(state_dir, cfg)).open(run_id)
    plan = stored_plan(run_id, tools, state_dir, config=cfg, from_step=from_step)
    progress = journal.progress()
    cleared = [u for u in cleared_ids(progress, from_step, list(analysis_of(plan).order)) if u in progress.steps]
    return {"again": cleared, "side_effects": again(progress, plan, registry(tools) if tools is not None else {},
                                                    from_step)}  # fmt: skip


def run_config(run_id: str, state_dir: Any = None):
    """The configuration to resume a run with: the working directory's, else the one the run started
    with (so ``dagplan resume RUN`` works from anywhere)."""
    from .interpreter.stores.registry import open_registry

    here = load_config()
    if here.path is not None:
        return here
    started = open_registry(_state(state_dir, here)).open(run_id).meta.get("config")
    return load_config(os.path.dirname(started)) if started and os.path.isfile(started) else here


def resume_tools(run_id: str, state_dir: Any = None) -> tuple[list[str], list[str]]:
    """(the tool sources a run was started with, those of them whose file changed since)."""
    from .interpreter.stores.registry import open_registry
    from .interpreter.tools.sources import changed_sources, recorded_sources

    record = open_registry(_state(state_dir)).open(run_id).meta.get("tool_sources") or []
    return recorded_sources(record), changed_sources(record)


# --- plan tests and cassettes ------------------------------------------------------------------


async def atest(
    paths: Iterable[str | os.PathLike] = (".",), *, config: Any = None, select: str | None = None, coverage: bool = True
):
    """Run every case of the plan test files among ``paths`` (``*.test.yaml``; directories searched,
    globs expanded) offline; returns a :class:`TestReport` (``.coverage()`` per plan unless
    ``coverage=False``, which spares each case the events coverage is read from)."""
    from .interpreter.testing.plantest import run_tests

    return await run_tests([os.fspath(p) for p in paths], config or load_config(), select, coverage)


def test(paths: Iterable[str | os.PathLike] = (".",), **kwargs: Any):
    """``dagplan test``: see :func:`atest`."""
    return _sync(atest(paths, **kwargs))


test.__test__ = False  # type: ignore[attr-defined]  # a library function, not a pytest test


def find_tests(paths: Iterable[str | os.PathLike]) -> list[str]:
    """The plan test files among ``paths`` (files, directories searched, globs)."""
    from .interpreter.testing.plantest import find_tests as found

    return found(paths)


def load_tests(path: str | os.PathLike, config: Any = None):
    """One test file, checked and its plan loaded: a :class:`Suite` whose cases :func:`run_test_case` runs."""
    from .interpreter.testing.plantest import load_suite

    return load_suite(path, config or load_config())


def run_test_case(suite: Any, index: int, config: Any = None):
    """Run case ``index`` of a loaded test file; a :class:`CaseResult` (``.passed``, ``.failures``)."""
    from .interpreter.testing.plantest import run_case

    return _sync(run_case(suite, index, config or load_config(), coverage=False))


def untested_paths(report: Any, plan_path: str, limit: int = 64):
    """The branch combinations of a plan no case of ``report`` covered (at most ``limit`` enumerated),
    each with a starting test case to fill in: a :class:`PathsReport`."""
    from .interpreter.testing.paths import untested

    suites = [s for s in report.suites if os.path.abspath(s.plan_path) == os.path.abspath(plan_path)]
    plan = suites[0].plan if suites else load(plan_path)
    return untested(plan, plan_path, report.runs_of(plan_path), limit)


def export_cassette(
    run_id: str, path: str | os.PathLike | None = None, state_dir: Any = None, config: Any = None,
    tools: ToolsArg = None,
) -> dict:  # fmt: skip
    """The cassette of a recorded run (every tool and model call, secrets redacted, and the catalog of
    its tools: ``tools``, else those of the sources the run recorded); written to ``path`` when given.
    Replay it with ``run(..., cassette=...)`` or ``cassette:`` in a test case (no tools needed)."""
    from .interpreter.testing import cassette
    from .interpreter.stores.registry import open_registry
    from .interpreter.tools.sources import load_tool_specs, recorded_sources

    cfg = config or load_config()
    journal = open_registry(_state(state_dir, cfg)).open(run_id)
    found = cassette.from_journal(journal, cfg.redact)
    if tools is not None:
        found = cassette.with_tools(found, _specs(tools).values())
    elif journal.meta.get("tool_sources"):
        try:
            found = cassette.with_tools(found, load_tool_specs(recorded_sources(journal.meta["tool_sources"])).values())
        except DagplanError:  # the run's tool files moved or broke since: the calls are still worth having
            pass
    if path is not None:
        cassette.write(found, path)
    return found


def read_cassette(path: str | os.PathLike) -> dict:
    from .interpreter.testing.cassette import read

    return read(path)


def cassette_tools(path: str | os.PathLike) -> dict:
    """The tools a replay of the cassette at ``path`` checks its plan against (the catalog it recorded;
    none is ever called)."""
    from .interpreter.testing.cassette import replay_tools

    return replay_tools(read_cassette(path))


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
    return {"plan_doc": plan.document, "plan_name": plan.source, "inputs": dict(values), "meta": meta}


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


def load_config(start: str | os.PathLike | None = None):
    """The project configuration that applies in ``start`` (default: the working directory)."""
    from .interpreter.core.config import load_config as read

    return read(start)


def diff(before: Plan | str | os.PathLike, after: Plan | str | os.PathLike, tool_sources: Iterable[str] = (),
         config: Any = None, state_dir: Any = None):  # fmt: skip
    """``dagplan diff``: the semantic difference of two plans (:class:`dagplan.dsl.diff.PlanDiff`). A plan
    is a file, a loaded :class:`Plan`, or ``run:RUN_ID`` (the plan a recorded run runs). With LLM steps on
    either side, the worst-case cost before and after is priced."""
    from .dsl.diff import diff as semantic

    cfg = config or load_config()
    tools, _ = _configured_tools(tool_sources, cfg)

    def side(plan: Plan | str | os.PathLike) -> Plan:
        if isinstance(plan, str) and plan.startswith("run:"):
            return stored_plan(plan[4:], None, state_dir, config=cfg)
        return _as_plan(plan, tools, cfg)

    old, new = side(before), side(after)
    found = semantic(old, new, {name: tool.spec for name, tool in tools.items()} if tools is not None else None)
    if found.same:
        return found
    from .interpreter.llm.preflight import llm_steps

    if llm_steps(old) or llm_steps(new):
        found.cost = tuple(estimate(p, cfg).summary(steps=False) or "no model calls" for p in (old, new))  # type: ignore[assignment]
    return found


async def aevaluate(
    tasks: str | os.PathLike,
    *,
    tools: ToolsArg = None,
    model: str,
    repair: int = 2,
    completion_kwargs: Mapping[str, Any] | None = None,
    config: Any = None,
    on_graded: Callable[[Any], None] | None = None,
):
    """``dagplan eval``: plan every task of a task file with ``model`` over ``tools`` (tools, or their
    :class:`ToolSpec`: a catalog needs no code) and score the plans
    (node and edge F1, argument values, runs to the end with the tools faked; misses by kind). Returns a
    :class:`~dagplan.interpreter.testing.evaluate.Report`."""
    from .interpreter.testing.evaluate import aevaluate as evaluate, read_tasks

    from .dsl.ir import ToolSpec

    cfg = config or load_config()
    given = dict(tools) if isinstance(tools, Mapping) else None
    specs = given if given is not None and all(isinstance(v, ToolSpec) for v in given.values()) else _specs(tools)
    return await evaluate(read_tasks(os.fspath(tasks)), specs, model,
                          repair=repair, completion_kwargs={**cfg.llm, **(completion_kwargs or {})},
                          structured_output=cfg.structured_output, on_graded=on_graded)  # fmt: skip


def evaluate(tasks: str | os.PathLike, **kwargs: Any):
    """See :func:`aevaluate`."""
    return _sync(aevaluate(tasks, **kwargs))


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
    from .interpreter.core.vocabulary import os_user
    from .interpreter.ops.approval import make

    cfg = config or load_config()
    plan = _as_plan(plan, tools, cfg)
    cost = estimate(plan, cfg).to_json()
    return make(plan, _tools(tools) if tools is not None else {}, who=who if who is not None else os_user(),
                cost=cost)  # fmt: skip


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
    from .dsl.errors import RunError
    from .interpreter.ops.approval import differences, read

    given = read(approval) if not isinstance(approval, Mapping) else dict(approval)
    cfg = config or load_config()
    plan = _as_plan(plan, tools, cfg)
    found = differences(given, plan, _tools(tools) if tools is not None else {})
    if found:
        raise RunError.make("not-approved", "this is not the plan that was approved: " + "; ".join(found),
                            hint="run the approved plan, or have a person approve this one: "
                                 "dagplan preview PLAN --approve -o FILE")  # fmt: skip
    return given


def walk(plan: Plan) -> Any:
    """Every step of a plan and of the plans it runs, with its full id (``sub.fetch``)."""
    from .dsl.ir import walk as steps

    return steps(plan)


def matches(pattern: str, unit_id: str) -> bool:
    """Whether a gate's full id (``each[2].approve_close``) matches ``pattern`` (``*``: any characters)."""
    from .interpreter.core.calls import matches as rule

    return rule(pattern, unit_id)


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


def lock_tools(config: Any = None) -> tuple[str, dict[str, int]]:
    """``dagplan tools lock``: connect to every MCP server the configuration declares and write the lock
    (``dagplan.lock`` beside the configuration) that offline checks read. Returns the lock's path and
    the number of tools of each server. RunError ``mcp-none`` when no server is declared."""
    import json

    from .dsl.errors import RunError
    from .interpreter.tools.mcp import alock, declared, lock_path

    cfg = config or load_config()
    if not cfg.mcp:
        raise RunError.make("mcp-none", "no MCP server is declared: nothing to lock",
                            hint='declare one in dagplan.toml: [mcp.NAME] command = "..." or url = "..."')  # fmt: skip
    base = cfg.path.parent if cfg.path else None
    servers = {name: declared(name, table, base) for name, table in cfg.mcp.items()}
    lock = _sync(alock(servers))
    path = lock_path(cfg)
    write_file(path, (json.dumps(lock, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    return str(path), {name: len(server["tools"]) for name, server in lock["servers"].items()}


def tool_catalog(tool_sources: Iterable[str] = (), config: Any = None) -> list:
    """The tools a plan may call here (the configuration's, MCP servers' from the lock, and the given
    sources), as :class:`ToolSpec` values sorted by name."""
    from .interpreter.tools.sources import load_tool_specs

    cfg = config or load_config()
    specs = load_tool_specs([*cfg.tools, *tool_sources])
    return [specs[name] for name in sorted(specs)]


def new_run_id() -> str:
    from .interpreter.stores.journal import new_run_id as new

    return new()


# --- helpers ------------------------------------------------------------------------------


def _sync(coroutine: Any) -> Any:
    """The sync twin of an async function: its coroutine run to the end (asyncio is imported here,
    not for every command: ``check`` never needs it)."""
    import asyncio

    return asyncio.run(coroutine)


def _as_plan(plan: Plan | str | os.PathLike, tools: ToolsArg = None, config: Any = None) -> Plan:
    return plan if isinstance(plan, Plan) else load(plan, tools=tools, config=config)


def _cassette(cassette: Any) -> tuple[Mapping[str, Any], str] | None:
    """A cassette given as a file or as its data: (its data, how messages name it)."""
    if cassette is None:
        return None
    if isinstance(cassette, Mapping):
        return cassette, "the cassette"
    from .interpreter.testing.cassette import read

    return read(cassette), f"cassette {os.fspath(cassette)}"


def _replaying(cassette: tuple[Mapping[str, Any], str] | None, ask_gate: Any, model: str | None,
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


def _state(state_dir: Any, config: Any = None) -> Any:
    """Where runs are: the one rule of every door (``interpreter/core/config.state_of``)."""
    from .interpreter.core.config import state_of

    return state_of(state_dir, config or load_config())


def _configured_tools(tool_sources: Iterable[str], config: Any) -> tuple[Any, list[str]]:
    """The tools of a call that gives none, as the CLI loads them: the configuration's ``tools`` and the
    sources given (None when there are none); and those sources, recorded with a durable run."""
    sources = [*config.tools, *tool_sources]
    if not sources:
        return None, []
    from .interpreter.tools.sources import load_tools

    return load_tools(sources), sources


def _specs(tools: ToolsArg):
    return {name: t.spec for name, t in _tools(tools).items()}


def _tools(tools: ToolsArg):
    from .interpreter.tools.catalog import registry

    return registry(tools)
