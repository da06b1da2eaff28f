"""``dagplan plan`` (ask a model for a plan, validate, repair, write) and ``dagplan score``.

Exit codes: 0 success, 1 no valid plan / refused / failed run, 2 usage or I/O error.
litellm is imported only once ``plan`` calls the model.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import click

from ..dsl.errors import DagplanError
from ..settings import options_of
from .common import EXIT_FAILED, EXIT_USAGE, OUTPUT_FILE, Exit, finish, project_of, tools_as_given, tools_option
from .common import die as _die


def _show_failure(exc: DagplanError, code: Exit | None = None) -> None:
    """Every diagnostic, the model's last answer when there was one, and the exit code of the table
    (a missing key or model is the caller's to fix: 2; a plan the model could not get right: 1)."""
    from .common import exit_code

    code = code if code is not None else exit_code(d.code for d in exc.diagnostics)
    for diag in exc.diagnostics:
        click.echo(diag.format(), err=True)
    attempts = getattr(exc, "attempts", ())
    if attempts:  # never silent: show what the model last said
        click.echo("\nthe model's last answer was:\n" + attempts[-1].text, err=True)
    finish(code)


def planning_options(command: str) -> Any:
    """``--tools`` and the run settings ``command`` takes (``--model``: what `plan` and `agent` plan with)."""

    def decorate(f: Any) -> Any:
        return tools_option(options_of(command)(f))

    return decorate


@click.command()
@click.argument("task")
@planning_options("plan")
@click.option(
    "-o",
    "--output",
    type=OUTPUT_FILE,
    default=None,
    help="Write the plan here (default: print it on stdout).",
)
@click.option(
    "--repair",
    type=click.IntRange(0),
    default=2,
    show_default=True,
    help="How many times the model may fix its plan from our diagnostics.",
)
@click.option("--api-base", default=None, help="OpenAI-compatible endpoint (e.g. a local server).")
@click.option("--input", "-i", "pairs", multiple=True, metavar="KEY=VALUE", help="A run input for --run (repeatable).")
@click.option("--run", "run_after", is_flag=True, help="Run the plan after approval.")
@click.option(
    "--stream",
    is_flag=True,
    help="With --run: read the plan as the model writes it, and start each step that changes nothing (a pure or "
    "idempotent tool) once its text is checked; everything else waits for the whole plan and its approval.",
)
@click.option("--yes", "-y", is_flag=True, help="Approve the run without asking.")
@click.option("--no-input", is_flag=True, help="Never prompt; an unanswered approval is a refusal.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def plan(
    task: str,
    tool_sources: tuple[str, ...],
    settings: Any,
    output: str | None,
    repair: int,
    api_base: str | None,
    pairs: tuple[str, ...],
    run_after: bool,
    stream: bool,
    yes: bool,
    no_input: bool,
    fmt: str,
) -> None:
    """Ask a model for a plan for TASK, validate and repair it, write canonical YAML."""
    from .. import plan as make_plan

    config = project_of(None, tool_sources).config
    model = settings.model or config.default_model
    if not model:
        _die("no model: pass --model, set DAGPLAN_MODEL, or `model` in dagplan.toml", EXIT_USAGE)
    specs = _tool_specs(tool_sources)
    kwargs = {**config.llm, **({"api_base": api_base} if api_base else {})}
    click.echo(f"planning with {model} ({len(specs)} tools)...", err=True)
    if not specs:
        click.echo("note: no tools known here (--tools FILE, or `tools` in dagplan.toml): tool names and arguments "
                   "will not be checked", err=True)  # fmt: skip
    if model == "local" or model.startswith("local:"):
        note = (
            "note: the local model (SmolLM2-135M by default) is for trying dagplan out, not for work: its plans "
            "pass check yet often call the wrong tools; point --model at a real model"
        )
        click.echo(note, err=True)
    if stream:
        if not run_after:
            _die("--stream starts steps while the plan is written: it needs --run", EXIT_USAGE)
        _streamed(task, tool_sources, pairs, model, kwargs, config, yes, no_input, fmt, repair, output)
        return
    try:
        result = make_plan(
            task, tools=specs, model=model, repair=repair, completion_kwargs=kwargs, on_attempt=_report_attempt,
            structured_output=config.structured_output,
        )  # fmt: skip
    except DagplanError as exc:
        _show_failure(exc)
    written = _lazy_when_acting(result, specs) if output and not run_after else result.document_yaml
    path = _write(written, output) if output or run_after else None
    _render(result, path, fmt, specs, tools_as_given(tool_sources, config))
    if run_after:
        _run(result.plan, path, tool_sources, pairs, model, kwargs, config, yes, no_input, fmt)


def _tool_specs(sources: tuple[str, ...]) -> dict:
    """The specs of this command's project's tools (none known: {})."""
    try:
        return {spec.name: spec for spec in project_of(None, sources).catalog()}
    except DagplanError as exc:
        _show_failure(exc, EXIT_USAGE)
    return {}


def _report_attempt(attempt: Any) -> None:
    errors = [d for d in attempt.diagnostics if d.severity == "error"]
    if not errors:  # what passed, in words: not "valid", which reads as "does the task" (see `valid:` below)
        click.echo("  the plan checks (its shape, tools, argument types, references and order)", err=True)
        return
    codes = ", ".join(dict.fromkeys(d.code for d in errors))
    click.echo(f"  {len(errors)} error(s) ({codes}); asking the model to repair", err=True)


def _lazy_when_acting(result: Any, specs: Any) -> str:
    """What ``plan -o FILE`` writes: the model's plan, ``mode: lazy`` when a step of it may act (its tool, or no
    tool known to say otherwise): ``dagplan run FILE`` then shows its preview and asks a person before anything
    runs (``--yes`` to skip), as for any plan a model wrote that acts."""
    from .. import _doors

    return _doors.lazy_when_acting(result.plan, result.document_yaml, specs)


def _write(text: str, output: str | None) -> Path:
    """Write atomically (a half-written plan file must never exist); a temp file for --run alone."""
    if output is None:
        handle, name = tempfile.mkstemp(prefix="dagplan-", suffix=".yaml")
        os.close(handle)
        output = name
    from ..api import write_file

    try:
        write_file(output, text.encode("utf-8"), what="plan")
    except DagplanError as exc:
        _show_failure(exc, EXIT_USAGE)
    return Path(output)


def _render(result: Any, path: Path | None, fmt: str, specs: Any = None, given: Any = None) -> None:
    if fmt == "json":
        click.echo(json.dumps(_as_json(result, path), indent=2, ensure_ascii=False))
        return
    if path is None:
        click.echo(result.document_yaml, nl=False)
    else:
        lazy = "mode: lazy" in path.read_text(encoding="utf-8") and result.plan.mode != "lazy"
        click.echo(f"wrote {path}" + (" (mode: lazy: a step of it acts; `dagplan run` shows its preview and asks "
                                       "before anything runs)" if lazy else ""), err=True)  # fmt: skip
    for warning in result.warnings:
        click.echo(warning.format(), err=True)
    from .._doors import what_valid_means

    click.echo(f"valid: {what_valid_means()}", err=True)
    click.echo(_preview(result.plan, path, specs, given), err=path is None)
    click.echo(
        f"{result.calls} model call(s), {result.prompt_tokens + result.completion_tokens} tokens, ${result.cost:.6f}",
        err=True,
    )


def _preview(plan: Any, path: Path | None, specs: Any = None, given: Any = None) -> str:
    """The plan's preview (with the catalog's word on what acts); its run command names the file written (not
    the model's attempt) and the tools as they were given (none where the configuration names them: ``given``
    is then empty; None: not known, a placeholder)."""
    from dataclasses import replace

    from ..api import preview
    from ..views import preview_text

    shown = replace(preview(plan, specs or None), source=str(path) if path is not None else "PLAN.yaml")
    return preview_text(shown, shown.command_to_run(given))


def _as_json(result: Any, path: Path | None) -> dict:
    return {
        "file": str(path) if path else None,
        "plan": result.document_yaml,
        "attempts": [{"valid": a.ok, "diagnostics": [d.to_json() for d in a.diagnostics]} for a in result.attempts],
        "usage": {
            "calls": result.calls,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "cost": result.cost,
            "model": result.model,
        },
    }


def _run(plan: Any, path: Path | None, tool_sources, pairs, model, kwargs, config, yes: bool, no_input: bool, fmt: str):
    from .common import project_of
    from .run import Session, read_inputs

    if not _approved(yes, no_input):
        _die("not approved: nothing was run (pass --yes to run without asking)", EXIT_FAILED)
    project = project_of(None, tool_sources)
    try:
        project.tools  # noqa: B018 - loaded now: a tools file that cannot load is said before anything runs
        inputs = read_inputs(pairs, None, plan)
    except DagplanError as exc:
        _show_failure(exc, EXIT_USAGE)
    session = Session(plan, fmt=fmt, events=None, yes=yes, no_input=no_input)
    session.execute(
        project.arun,  # its tools, whose sources the run records: `dagplan resume RUN` loads the same
        str(path),
        inputs=inputs,
        durable=True,
        model=model,
        completion_kwargs=kwargs,
    )


def _streamed(task: str, tool_sources, pairs, model: str, kwargs: dict, config: Any, yes: bool, no_input: bool,
              fmt: str, repair: int, output: str | None) -> None:  # fmt: skip
    """``plan --run --stream``: one run from the model's first word; the plan is shown whole and approved
    before anything that changes something runs; the run's report and exit code as ``dagplan run``'s."""
    from .common import project_of
    from .run import Session, read_inputs

    project = project_of(None, tool_sources)
    try:
        tools = project.tools or {}
        inputs = read_inputs(pairs, None, None) if pairs else None
    except DagplanError as exc:
        _show_failure(exc, EXIT_USAGE)
    written: dict[str, Any] = {}

    async def planned(target: str, **given: Any) -> Any:
        result = await project.aplan(target, **given)
        written["result"] = result
        return result.run

    session = Session(None, fmt=fmt, events=None, yes=yes, no_input=no_input, approve=approver(yes, no_input))
    try:
        session.execute(planned, task, tools=tools, model=model, run=True, stream=True, inputs=inputs,
                        completion_kwargs=kwargs, repair=repair, on_event=_said,
                        on_attempt=_report_attempt)  # fmt: skip
    finally:
        if output and "result" in written:
            _write(written["result"].document_yaml, output)


def approver(yes: bool, no_input: bool) -> Any:
    """How a person approves a streamed plan once it is whole (``plan --run --stream``, and its resume)."""

    def approve(shown: Any) -> bool:
        from ..views import preview_text

        click.echo("the plan is complete and passed check:", err=True)
        click.echo(preview_text(shown, streamed=True), err=True)
        return _approved(yes, no_input)

    return approve


def _said(event: Any) -> None:
    """What the streaming does, one line each (the steps' own progress follows once the plan is whole)."""
    kind = event.get("type")
    if kind == "started_early":
        click.echo(f"  started {event['step']} ({event.get('tool')}) while the plan is being written", err=True)
    elif kind == "prefix_failed":
        click.echo(f"  a step failed check as it was written, nothing after it starts early: {event['diagnostic']}",
                   err=True)  # fmt: skip
    elif kind == "plan_complete" and event.get("started_early"):
        click.echo(f"  {len(event['started_early'])} step(s) started before the plan was complete", err=True)


def _approved(yes: bool, no_input: bool) -> bool:
    if yes:
        return True
    if no_input or not sys.stdin.isatty():
        return False
    return click.confirm("Run this plan?", default=False, err=True)


@click.command()
@click.argument("task")
@click.option(
    "--mode",
    type=click.Choice(["off", "auto", "always"]),
    default=None,
    help="Plan-first mode (default: `plan_first.mode` in the config, else auto).",
)
@click.option(
    "--threshold",
    type=click.IntRange(0, 10),
    default=None,
    help="Minimum score for auto (default: `plan_first.threshold` in the config, else 6).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def score(task: str, mode: str | None, threshold: int | None, fmt: str) -> None:
    """Complexity score 0-10 of TASK and whether plan-first would fire."""
    from .. import should_plan_first
    from .._doors import DEFAULT_THRESHOLD
    from .._doors import score as parts

    settings = project_of().config.plan_first
    mode = mode or settings.get("mode", "auto")
    threshold = threshold if threshold is not None else int(settings.get("threshold", DEFAULT_THRESHOLD))
    found = parts(task)
    try:
        fires = should_plan_first(task, mode, threshold)
    except ValueError as exc:  # a bad mode in the config file
        _die(str(exc), EXIT_USAGE)
    if fmt == "json":
        click.echo(
            json.dumps(
                {**found.to_json(), "mode": mode, "threshold": threshold, "plan_first": fires}, ensure_ascii=False
            )
        )
        return
    click.echo(f"score {found.total}/10 -> plan first: {'yes' if fires else 'no'} (mode {mode}, threshold {threshold})")
    for name, value, cap, matched in (
        ("verbs", found.verbs, 5, found.matched_verbs),
        ("files", found.files, 3, found.matched_files),
        ("sequencers", found.sequencers, 2, found.matched_sequencers),
    ):
        click.echo(f"  {name:<10} {value}/{cap}  {', '.join(matched)}".rstrip())


@click.command("eval")
@click.argument("tasks", type=click.Path(dir_okay=False))
@partial(tools_option, help="The catalog the plans may use (repeatable; also `tools` in the config).")
@click.option(
    "--model",
    default=None,
    help="litellm model name, or `local` (SmolLM2-135M on this machine, the `local` "
    "extra); default: $DAGPLAN_MODEL, else `model` in the config.",
)
@click.option("--repair", type=click.IntRange(0), default=2, show_default=True, help="Repairs a plan may get.")
@click.option("--api-base", default=None, help="OpenAI-compatible endpoint (e.g. a local server).")
@click.option("--fail-under", type=click.FloatRange(0, 100), default=None, metavar="F1",
              help="Exit 1 when the node F1 or the edge F1 is under this (0-100).")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def evaluate(tasks: str, tool_sources: tuple[str, ...], model: str | None, repair: int, api_base: str | None,
             fail_under: float | None, fmt: str) -> None:  # fmt: skip
    """Plan every task of TASKS with a model and score the plans against what each task expects: node and
    edge F1 (which tools, in which order), argument values, plans that run to the end with the tools
    faked; misses by kind; tokens, seconds and cost a plan."""
    from .. import planning
    from ..dsl.errors import printable as safe_text

    config = project_of(None, tool_sources).config
    model = model or config.default_model
    if not model:
        _die("no model: pass --model, set DAGPLAN_MODEL, or `model` in dagplan.toml", EXIT_USAGE)
    specs = _tool_specs(tool_sources)
    if not specs:
        _die("no tools: pass --tools (the catalog the plans may use), or `tools` in dagplan.toml", EXIT_USAGE)
    kwargs = {"api_base": api_base} if api_base else {}

    def said(graded: Any) -> None:
        if fmt == "text":
            shown = "; ".join(f"{k}: {', '.join(v)}" for k, v in graded.misses.items()) or "right"
            click.echo(safe_text(f"{graded.task}: {shown}"), err=True)

    try:
        report = planning.evaluate(tasks, tools=specs, model=model, repair=repair, completion_kwargs=kwargs,
                              config=config, on_graded=said)  # fmt: skip
    except DagplanError as exc:
        _show_failure(exc)
    if fmt == "json":
        click.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        per = report.per_plan()
        misses = ", ".join(f"{k} {v}" for k, v in report.misses().items() if v) or "none"
        click.echo(f"{len(report.graded)} tasks, {model}: node F1 {report.node_f1:.1f}, edge F1 {report.edge_f1:.1f}, "
                   f"values {report.value_accuracy:.1f}%, ran to the end {report.ran:.1f}%\n"
                   f"misses: {misses}\nper plan (median): {per['tokens']:.0f} tokens, {per['seconds']:.2f} s, "
                   f"${per['cost']:.4f}")  # fmt: skip
    if fail_under is not None and min(report.node_f1, report.edge_f1) < fail_under:
        finish(EXIT_FAILED)


@click.command()
@click.argument("task")
@planning_options("agent")
@click.option("--max-turns", type=click.IntRange(1), default=5, show_default=True, help="Model turns at most.")
@click.option("--yes", "-y", is_flag=True, help="Approve every batch that acts on the world without asking.")
@click.option("--no-input", is_flag=True, help="Never prompt; a batch that acts on the world is refused.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def agent(task: str, tool_sources: tuple[str, ...], settings: Any, max_turns: int, yes: bool, no_input: bool,
          fmt: str) -> None:  # fmt: skip
    """Run the agent loop on TASK: the model plans, a batch runs, it re-plans from the live state, until it
    answers. A batch that acts on the world runs only once a person approves it (or --yes)."""
    import asyncio

    from .. import planning

    project = project_of(None, tool_sources)
    config = project.config
    model = settings.model or config.default_model
    if not model:
        _die("no model: pass --model, set DAGPLAN_MODEL, or `model` in dagplan.toml", EXIT_USAGE)
    try:
        tools = project.tools or {}
    except DagplanError as exc:
        _show_failure(exc, EXIT_USAGE)

    def approve(shown: Any) -> bool:
        from ..views import preview_text

        click.echo("the agent's next steps act on the world:", err=True)
        click.echo(preview_text(shown), err=True)
        return _approved(yes, no_input)

    def turn(done: Any) -> None:
        ran = ", ".join(s.tool or s.id for s in done.plan.steps) if done.plan is not None else "nothing"
        click.echo(f"  turn {done.number}: ran {ran}" + (" and answered" if done.output is not None else ""),
                   err=True)  # fmt: skip
        if done.output is None and done.number < max_turns:
            click.echo(f"  turn {done.number + 1}: asking {model} for the next steps...", err=True)

    click.echo(f"  turn 1: asking {model} for the first steps (at most {max_turns} turns)...", err=True)

    try:
        result = asyncio.run(planning.aagent(task, tools=tools, model=model, approve=approve, max_turns=max_turns,
                                        config=config, on_run_created=lambda run_id: click.echo(f"run {run_id}",
                                                                                                err=True),
                                        on_turn=turn))  # fmt: skip
    except DagplanError as exc:
        _show_failure(exc)
    if fmt == "json":
        click.echo(json.dumps({"run_id": result.run_id, "output": result.output, "turns": len(result.turns),
                               "usage": {"prompt_tokens": result.prompt_tokens,
                                         "completion_tokens": result.completion_tokens, "cost": result.cost}},
                              indent=2, ensure_ascii=False, default=str))  # fmt: skip
        return
    from ..dsl.errors import printable

    output = result.output if isinstance(result.output, str) else json.dumps(result.output, ensure_ascii=False)
    click.echo(printable(output))
