"""``dagplan runs [show]``, ``resume``, ``discard``, ``events``: managing durable runs.

Exit codes: 0 success; 1 a failed run or a run that cannot be resumed (missing or
corrupt artifact, corrupt log, locked); 2 usage (unknown run id, unknown step id).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence

import click

from .. import DagplanError
from ..dsl.errors import counted, error, printable
from ..settings import options_of
from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    OUTPUT_FILE,
    die,
    fail,
    project_of,
    raw_stream,
    state_dir_option,
    tools_option,
)
from .run import output_options, record_option


def format_option(*choices: str):
    """``--format text|...``; with json among the choices, ``--json`` too (the common spelling of
    ``--format json``)."""
    chosen = click.option("--format", "fmt", type=click.Choice(["text", *choices]), default="text")
    if "json" not in choices:
        return chosen

    def as_json(ctx: click.Context, param: Any, given: bool) -> None:
        if given:
            ctx.meta["dagplan.json"] = True

    def both(f: Any) -> Any:
        import functools

        @functools.wraps(f)
        def call(*args: Any, **kwargs: Any) -> Any:
            if click.get_current_context().meta.pop("dagplan.json", False):
                kwargs["fmt"] = "json"
            return f(*args, **kwargs)

        flag = click.option("--json", "as_json_", is_flag=True, expose_value=False, callback=as_json,
                            help="The same as --format json.")  # fmt: skip
        return chosen(flag(call))

    return both


reject = fail


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _table(rows: Sequence[tuple[str, ...]]) -> str:
    from ..views import table

    return "\n".join(table(rows))


def _rich_table(rows: Sequence[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for i, header in enumerate(rows[0]):
        if i == 0:  # ids are what people copy: never cut or wrapped; a narrow terminal wraps the others
            table.add_column(header, no_wrap=True, min_width=max(len(r[0]) for r in rows))
        else:
            table.add_column(header, overflow="fold")
    for row in rows[1:]:
        table.add_row(*(printable(cell) for cell in row))
    Console(file=raw_stream(sys.stdout)).print(table)


def _print_table(rows: Sequence[tuple[str, ...]]) -> None:
    if sys.stdout.isatty():
        _rich_table(rows)
    else:
        click.echo(_table(rows))


def _known_statuses(statuses: Sequence[str]) -> None:
    """Exit 2, with did-you-mean, for a --status that is not a run status."""
    from .. import RunStatus
    from ..dsl.errors import did_you_mean

    known = [str(s) for s in RunStatus]
    for status in statuses:
        if status not in known:
            hint = did_you_mean(status, known, "one of: " + ", ".join(known))
            fail(DagplanError([error("usage", f"--status {status!r} is not a run status", hint=hint)]))


def _cut(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# --- dagplan runs [show] ---------------------------------------------------------------------


LIMIT = 50  # runs a plain `dagplan runs` lists: a big history is paged, never read whole


@click.group(invoke_without_command=True)
@state_dir_option
@format_option("json")
@click.option("--status", "statuses", multiple=True, metavar="STATUS",
              help="Only runs in this status (repeatable): running, waiting, failed, completed...")  # fmt: skip
@click.option("--limit", "limit", type=click.IntRange(min=1), default=LIMIT, show_default=True,
              help="The newest so many runs (only those are read).")  # fmt: skip
@click.option("--all", "every", is_flag=True, help="Every run, however many.")
@click.pass_context
def runs(ctx: click.Context, state_dir: str | None, fmt: str, statuses: tuple[str, ...], limit: int = LIMIT,
         every: bool = False) -> None:  # fmt: skip
    """List active, interrupted and recent runs (newest first; the newest 50 unless --limit or --all)."""

    ctx.obj = {"state_dir": state_dir}
    if ctx.invoked_subcommand is not None:
        return
    _known_statuses(statuses)
    try:
        infos = project_of(state_dir).runs(limit=None if every else limit + 1, statuses=statuses)
    except DagplanError as exc:
        reject(exc)
    if not every and len(infos) > limit:
        infos = infos[:limit]
        click.echo(f"the newest {limit} runs shown; more with --limit N, or --all", err=True)
    if fmt == "json":
        click.echo(_dump([i.to_json() for i in infos]))
    elif not infos:
        click.echo("no runs", err=True)
    else:
        rows = [("id", "plan", "status", "done/total", "started")]
        rows += [(i.id, i.plan_name, i.shown_status, f"{i.done}/{i.total}", i.to_json()["started"]) for i in infos]
        _print_table(rows)
        for info in infos:
            if info.notice:
                click.echo(f"{info.id}: {info.notice}", err=True)
            for request in info.waiting:
                _show_waiting(info.id, request)


def _show_waiting(run_id: str, request: Any) -> None:
    """What a waiting run waits for (an approval gate), and how to answer."""
    allowed = f" [{'/'.join(request['choices'])}]" if request.get("choices") else ""
    if request.get("deadline"):
        from datetime import datetime

        try:
            when = datetime.fromtimestamp(request["deadline"]).isoformat(timespec="seconds")
        except (OverflowError, ValueError, OSError, TypeError):  # a record written before durations were bounded
            when = "a date past any calendar"
        allowed += f" (until {when}; then {request.get('on_timeout', 'fail')})"
    click.echo(
        f"{run_id} waits at {request['step']}: {request['question']}{allowed}"
        f" -- dagplan answer {run_id} {request['step']} VALUE",
        err=True,
    )


@runs.command()
@click.argument("run_id", metavar="RUN")
@state_dir_option
@format_option("json")
@click.option("--step", "step", metavar="STEP", default=None, help="Only this step (with --prompt: its prompt).")
@click.option("--prompt", "prompt", is_flag=True,
              help="The step's prompt as it was sent, each part a reference or placeholder produced marked with "
              "where it came from.")  # fmt: skip
@click.pass_context
def show(ctx: click.Context, run_id: str, state_dir: str | None, fmt: str, step: str | None = None,
         prompt: bool = False) -> None:  # fmt: skip
    """The final report and per-step status of RUN."""

    state_dir = state_dir or (ctx.obj or {}).get("state_dir")
    if prompt and step is None:
        die("--prompt shows one step's prompt: give --step STEP", EXIT_USAGE)
    try:
        report = project_of(state_dir).run_report(run_id)
    except DagplanError as exc:
        reject(exc)
    if step is not None:
        _show_step(report, step, prompt, fmt)
        return
    click.echo(_dump(report.to_json()) if fmt == "json" else report_text(report))


def _show_step(report: Any, step: str, prompt: bool, fmt: str) -> None:
    """One step of a run; with ``prompt``, its prompt with the parts marked (colour on a terminal)."""
    from ..dsl.errors import did_you_mean

    rows = {**report.steps, **report.children}
    if step not in rows:
        hint = did_you_mean(step, list(rows)) or f"its steps: dagplan runs show {report.run_id}"
        die(f"run {report.run_id} has no step {step!r}; {hint}", EXIT_USAGE)
    found = report.prompts.get(step)
    if prompt and found is None:
        die(f"step {step} of run {report.run_id} sent no prompt with references or placeholders to show "
            "(not an LLM step, not reached yet, or its prompt is plain text)", EXIT_FAILED)  # fmt: skip
    if fmt == "json":
        extra = {**({"prompt": found} if found else {}), **({"printed": report.printed[step]}
                                                           if report.printed.get(step) else {})}  # fmt: skip
        click.echo(_dump({"step": step, **rows[step].to_json(), **extra}))
        return
    if not prompt:
        click.echo(report_text(report).split("\n")[0])
        row = rows[step]
        click.echo(_table([("step", "status", "attempts", "output"),
                           (step, str(row.status), str(row.attempts), _step_detail(row))]))  # fmt: skip
        if row.trace:
            click.echo(f"Traceback of {step} (its frames in your code, innermost last):")
            click.echo(printable("\n".join(trace_lines(row.trace))))
        if report.printed.get(step):
            click.echo(f"What {step}'s tool printed:")
            click.echo(printable(report.printed[step].rstrip("\n")))
        return
    colour = sys.stdout.isatty()
    # every piece of its text went through printable(); on a terminal its own colour codes are written as
    # they are (through Printable they would read as `\u001b[35m`)
    click.echo(prompt_text(found, step, report.run_id, colour=colour), file=raw_stream(sys.stdout) if colour else None)


def prompt_text(found: Any, step: str, run_id: str, colour: bool = False) -> str:
    """The prompt with each span marked ``[n: text]`` (coloured on a terminal), then what each came from."""
    text, spans = found["prompt"], sorted(found["spans"], key=lambda s: s["start"])
    out, at = [], 0
    for number, span in enumerate(spans, 1):
        out.append(printable(text[at : span["start"]]))
        piece = printable(text[span["start"] : span["end"]])
        out.append(click.style(f"[{number}: {piece}]", fg=_COLOURS[number % len(_COLOURS)]) if colour
                   else f"[{number}: {piece}]")  # fmt: skip
        at = span["end"]
    out.append(printable(text[at:]))
    lines = [f"prompt of {step} (run {run_id}):", "".join(out), ""]
    for number, span in enumerate(spans, 1):
        lines.append(f"  [{number}] {printable(span['source'])}" + _came_from(span))
    return "\n".join(lines)


def _came_from(span: Any) -> str:
    read = f", read as {span['read']}" if span.get("read") and span["read"] != span["source"] else ""
    if span.get("default"):
        return f"{read}: the plan's default (nothing was written)"
    if span.get("step"):
        event = f" (journal event {span['event']})" if "event" in span else ""
        return f"{read}: step {span['step']}'s output{event}"
    return f"{read}: " + (f"input {span['input']}" if span.get("input") else "the plan's initial state")


_COLOURS = ("cyan", "magenta", "yellow", "green", "blue")


@runs.command("prune")
@click.option("--older-than", "older_than", required=True, metavar="DURATION",
              help="Runs that ended more than this long ago: 30d, 12h, 90m.")  # fmt: skip
@click.option("--status", "statuses", multiple=True, metavar="STATUS",
              help="Only runs in this status (repeatable); default: every finished status.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="List what would be pruned; remove nothing.")
@state_dir_option
@click.pass_context
def prune(ctx: click.Context, older_than: str, statuses: tuple[str, ...], dry_run: bool, state_dir: str | None) -> None:
    """Discard old runs (never one that a process is running now)."""

    _known_statuses(statuses)
    try:
        gone = project_of(state_dir or ctx.obj["state_dir"]).prune(older_than, statuses, dry_run=dry_run)
    except DagplanError as exc:
        reject(exc)
    for info in gone:
        click.echo(f"{info.id}  {info.plan_name}  {info.status}")
    click.echo(f"{counted(len(gone), 'run')} {'would be ' if dry_run else ''}pruned", err=True)


@runs.command("export")
@click.argument("run_id", metavar="RUN")
@click.option("-o", "--output", type=OUTPUT_FILE, default=None, help="The cassette file (default: stdout).")
@state_dir_option
@click.pass_context
def export(ctx: click.Context, run_id: str, output: str | None, state_dir: str | None) -> None:
    """Write RUN's tool and model calls as a cassette (secrets redacted), to replay offline with
    `dagplan run --replay FILE` or `cassette: FILE` in a test case."""
    from .. import plantests

    state_dir = state_dir or (ctx.obj or {}).get("state_dir")
    try:
        found = plantests.export_cassette(run_id, output, state_dir)
    except DagplanError as exc:
        reject(exc)
    if output is None:
        click.echo(_dump(found))
    else:
        click.echo(f"{len(found['calls'])} calls of run {found['run_id']} written to {output}", err=True)


def report_text(report: Any) -> str:
    final = report.final or {}
    errors = " (with errors)" if final.get("had_errors") else ""
    started = report.to_json()["started"]
    lines = [
        f"Run {report.run_id}: {report.status}{errors}",
        f"plan {report.plan}, started {started}, {report.done}/{report.total} steps settled",
    ]
    rows = [("step", "status", "attempts", "duration", "output")]
    for sid, s in report.steps.items():
        duration = f"{s.duration:.2f}s" if isinstance(s.duration, (int, float)) else "-"
        status = f"{s.status} ({reused_text(s.reused)})" if s.reused else str(s.status)
        rows.append((sid, status, str(s.attempts), duration, _step_detail(s)))
    lines.append(_table(rows))
    for request in report.waiting:
        lines.append(
            f"waiting at {request['step']}: {request['question']}"
            f" -- dagplan answer {report.run_id} {request['step']} VALUE"
        )
    if "result" in final:
        result = shown(final["result"])
        lines += ["Result:", result if isinstance(result, str) else _dump(result)]
    return "\n".join(lines)


def _step_detail(s: Any) -> str:
    if s.request is not None:
        return _cut(str(s.request.get("question", "")))
    if s.error:
        at = f" (at {where(s.trace)})" if getattr(s, "trace", None) else ""
        return _cut(f"{s.error.get('type')}: {s.error.get('message')}") + at
    if s.output is None:
        return ""
    output = shown(s.output)  # secrets masked on the way to a person (the journal keeps the value)
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
    return _cut(text) + (" (spilled)" if s.spilled else "")


# --- dagplan resume --------------------------------------------------------------------------


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option(
    "--from",
    "from_step",
    metavar="STEP",
    help="Clear recorded results from STEP onward (topological order) and run them again.",
)
@click.option(
    "--on-interrupted",
    type=click.Choice(["ask", "adopt", "retry"]),
    default=None,
    help="A side-effecting step that was running when the run stopped: ask (default on a terminal), "
    "adopt it as done, or retry it.",
)
@click.option(
    "--output",
    "adopted_output",
    metavar="JSON",
    default=None,
    help="With --on-interrupted adopt: the adopted step's output (JSON; what the side effect returned).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="With --from: show what would run again (side effects marked), running nothing.",
)
@click.option(
    "--rerun-side-effects",
    is_flag=True,
    help="With --from: run side-effecting steps that already ran again (refused without it).",
)
@record_option
@tools_option
@options_of("resume")
@output_options
def resume(
    run_id,
    from_step,
    on_interrupted,
    adopted_output,
    dry_run,
    rerun_side_effects,
    record,
    tool_sources,
    fmt,
    events,
    yes,
    no_input,
    state_dir,
    settings,
) -> None:
    """Resume RUN: completed steps replay from the record, the rest run (with the tools it started with)."""
    from .run import Session, check_record

    check_record(record)
    try:
        # the project the run belongs to (here, else where it started), its tools as it started with them
        here, tools, changed = project_of(state_dir, tool_sources).resume_context(run_id)
        for path in changed:
            click.echo(f"warning: {path} changed since the run started; its tools are loaded as they are now",
                       err=True)  # fmt: skip
        adopted = _adopted(adopted_output, on_interrupted)
        if dry_run:
            _show_rerun(run_id, from_step, tools, here, fmt)
            return
        plan = here.stored_plan(run_id, tools, from_step=from_step, resumable=True)
    except DagplanError as exc:
        reject(exc)
    from .plan import approver

    session = Session(plan, fmt=fmt, events=events, yes=yes, no_input=no_input, record=record)
    # a streamed run stopped before its plan was whole: its plan is approved as `plan --run --stream` asks
    streaming: dict[str, Any] = {"approve": approver(yes, no_input)} if plan is None else {}
    session.execute(
        here.aresume,
        run_id,
        state_dir=here.state,
        tools=tools,
        from_step=from_step,
        on_interrupted=Interrupted(yes=yes, no_input=no_input, policy=on_interrupted),
        rerun_side_effects=rerun_side_effects or _confirm_rerun(run_id, from_step, tools, here, no_input),
        adopted_output=adopted,
        settings=settings,
        **streaming,
    )


def _show_rerun(run_id: str, from_step: str | None, tools: Any, here: Any, fmt: str) -> None:
    """``resume --from STEP --dry-run``: what would run again, the side effects among it marked."""
    if from_step is None:
        raise DagplanError(
            error("usage", "--dry-run goes with --from STEP", hint=f"dagplan resume {run_id} --from STEP --dry-run")
        )
    found = here.rerun_preview(run_id, from_step, tools)
    if fmt == "json":
        click.echo(_dump(found))
        return
    click.echo(f"resuming {run_id} from {from_step} would run again ({len(found['again'])}):")
    for unit in found["again"]:
        mark = "  side effect: it already ran and would run again" if unit in found["side_effects"] else ""
        click.echo(f"  {unit}{mark}")
    if found["side_effects"]:
        click.echo(f"refused without --rerun-side-effects ({', '.join(found['side_effects'])})")


def _adopted(text: str | None, on_interrupted: str | None):
    """``--output JSON``: the adopted step's output (a usage error without --on-interrupted adopt, or not JSON)."""
    if text is None:
        return None
    if on_interrupted != "adopt":
        raise DagplanError(error("usage", "--output goes with --on-interrupted adopt", hint="add it, or drop --output"))
    from .._doors import read_json

    try:
        return read_json(text)
    except ValueError as exc:
        raise DagplanError(error("usage", f"--output is not JSON: {exc}", hint="e.g. --output '{\"id\": 42}'"))


def _confirm_rerun(run_id, from_step, tools, here, no_input) -> bool:
    """On a terminal, ``--from`` that would repeat side effects asks first (elsewhere it is refused)."""
    if from_step is None or no_input or not sys.stdin.isatty():
        return False
    again = here.rerun_preview(run_id, from_step, tools)["side_effects"]
    if not again:
        return False
    return click.confirm(f"These side effects already ran and would run again: {', '.join(again)}. Go on?",
                         default=False, err=True)  # fmt: skip


class Interrupted:
    """Asks what to do with an interrupted side-effecting step: ``retry`` | ``adopt`` | ``fail``.

    ``--yes`` runs it again; without a terminal (or with ``--no-input``) nothing is
    guessed: ``decide``, the run stops in ``needs_decision`` and the message says how to decide.
    """

    def __init__(self, *, yes: bool, no_input: bool, policy: str | None = None):
        self.yes, self.interactive, self.policy = yes, not no_input and sys.stdin.isatty(), policy

    def __call__(self, step_id: str, purity: str) -> str:
        if self.policy in ("adopt", "retry"):
            return self.policy
        if self.yes:
            return "retry"
        if not self.interactive:
            return "decide"
        question = f"Step {step_id} ({purity}) was interrupted: it may or may not have happened. Run it again?"
        if click.confirm(question, default=False, err=True):
            return "retry"
        return "adopt" if click.confirm("Keep it as done (adopt)?", default=True, err=True) else "fail"


# --- dagplan discard -------------------------------------------------------------------------


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--force", is_flag=True, help="Discard a run that is running now (it is stopped first).")
@state_dir_option
def discard(run_id: str, force: bool, state_dir: str | None) -> None:
    """Remove RUN and its state (a running run only with --force; `cancel` keeps the record)."""

    try:
        full_id = project_of(state_dir).discard(run_id, force=force)
    except DagplanError as exc:
        reject(exc)
    click.echo(f"run {full_id} discarded", err=True)


@click.command()
@click.argument("run_id", metavar="RUN")
@state_dir_option
def cancel(run_id: str, state_dir: str | None) -> None:
    """Stop RUN (running or waiting) for good; its record is kept, with status cancelled."""

    try:
        full_id = project_of(state_dir).cancel(run_id)
    except DagplanError as exc:
        reject(exc)
    click.echo(f"run {full_id} cancelled", err=True)


# --- dagplan events --------------------------------------------------------------------------


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--filter", "types", multiple=True, metavar="TYPE", help="Only events of this type (repeatable).")
@state_dir_option
@format_option("json", "jsonl")
def events(run_id: str, types: tuple[str, ...], state_dir: str | None, fmt: str) -> None:
    """Print RUN's event log; each plan_step_completed says replayed or fresh, and its duration."""

    try:  # a view: every value masked (the journal keeps outputs whole for a resume; the API returns them so)
        found = [shown(e.to_json()) for e in project_of(state_dir).events(run_id, types or None)]
    except DagplanError as exc:
        reject(exc)
    if fmt == "json":
        click.echo(_dump(found))
    elif fmt == "jsonl":
        for event in found:
            click.echo(json.dumps(event, ensure_ascii=False, default=str))
    else:
        for event in found:
            click.echo(event_line(event))


from ..views import event_line, reused_text, shown, trace_lines, where  # noqa: E402 - shared with the viewer
