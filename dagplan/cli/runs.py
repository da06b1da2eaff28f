"""``dagplan runs [show]``, ``resume``, ``discard``, ``events``: managing durable runs.

Exit codes: 0 success; 1 a failed run or a run that cannot be resumed (missing or
corrupt artifact, corrupt log, locked); 2 usage (unknown run id, unknown step id).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

import click

from ..dsl.errors import DagplanError
from .run import EXIT_FAILED, EXIT_USAGE, fail, output_options, tools_option

USAGE_CODES = {"unknown-run", "ambiguous-run", "unknown-step"}


def state_dir_option(f):
    return click.option("--state-dir", type=click.Path(file_okay=False), envvar="DAGPLAN_STATE_DIR", default=None,
                        help="Where runs are kept (default: $DAGPLAN_STATE_DIR or ./.dagplan).")(f)


def format_option(*choices: str):
    return click.option("--format", "fmt", type=click.Choice(["text", *choices]), default="text")


def reject(exc: DagplanError) -> None:
    fail(exc, EXIT_USAGE if exc.code in USAGE_CODES else EXIT_FAILED)


def open_store(state_dir: str | None):
    from ..interpreter.store import RunStore

    return RunStore(state_dir)


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _table(rows: list[tuple[str, ...]]) -> str:
    """Plain aligned columns (the last column is not padded)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in rows)


def _rich_table(rows: list[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*rows[0], box=None, header_style="bold")
    for row in rows[1:]:
        table.add_row(*row)
    Console().print(table)


def _print_table(rows: list[tuple[str, ...]]) -> None:
    if sys.stdout.isatty():
        _rich_table(rows)
    else:
        click.echo(_table(rows))


def _cut(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# --- dagplan runs [show] ---------------------------------------------------------------------


@click.group(invoke_without_command=True)
@state_dir_option
@format_option("json")
@click.pass_context
def runs(ctx: click.Context, state_dir: str | None, fmt: str) -> None:
    """List active, interrupted and recent runs (newest first)."""
    ctx.obj = {"state_dir": state_dir}
    if ctx.invoked_subcommand is not None:
        return
    infos = open_store(state_dir).list()
    if fmt == "json":
        click.echo(_dump([i.to_json() for i in infos]))
    elif not infos:
        click.echo("no runs", err=True)
    else:
        rows = [("id", "plan", "status", "done/total", "started")]
        rows += [(i.id, i.plan_name, i.status, f"{i.done}/{i.total}", i.started) for i in infos]
        _print_table(rows)
        for info in infos:
            if info.notice:
                click.echo(f"{info.id}: {info.notice}", err=True)
            if info.status == "waiting":
                _show_waiting(open_store(state_dir), info.id)


def _show_waiting(store: Any, run_id: str) -> None:
    """What a waiting run waits for (approval gates), and how to answer."""
    from ..interpreter.compose import waiting_requests

    for request in waiting_requests(store.open(run_id)):
        allowed = f" [{'/'.join(request['choices'])}]" if request.get("choices") else ""
        click.echo(f"{run_id} waits at {request['step']}: {request['question']}{allowed}"
                   f" -- dagplan answer {run_id} {request['step']} VALUE", err=True)


@runs.command()
@click.argument("run_id", metavar="RUN")
@state_dir_option
@format_option("json")
@click.pass_context
def show(ctx: click.Context, run_id: str, state_dir: str | None, fmt: str) -> None:
    """The final report and per-step status of RUN."""
    state_dir = state_dir or (ctx.obj or {}).get("state_dir")
    try:
        run = open_store(state_dir).open(run_id)
        report = run_report(run)
    except DagplanError as exc:
        reject(exc)
    click.echo(_dump(report) if fmt == "json" else report_text(report))


def run_report(run: Any) -> dict:
    """What ``runs show`` prints: the run, its final event, and each step in plan order."""
    from ..interpreter.store import plan_step_ids

    progress = run.progress()
    steps = {}
    for sid in plan_step_ids(run.plan_doc):
        s = progress.steps[sid]
        status = "handled" if s.status == "failed" and s.handled else s.status
        steps[sid] = {"status": status, "attempts": s.attempts, "duration": s.duration, "replayed": s.replayed,
                      "error": s.error, "spilled": s.spilled, "output": s.output}
    return {"run_id": run.id, "plan": run.plan_name, "status": progress.status,
            "started": datetime.fromtimestamp(run.created).isoformat(timespec="seconds"),
            "inputs": run.inputs, "done": progress.done, "total": len(steps),
            "final": progress.final, "steps": steps}


def report_text(report: dict) -> str:
    final = report["final"] or {}
    errors = " (with errors)" if final.get("had_errors") else ""
    lines = [f"Run {report['run_id']}: {report['status']}{errors}",
             f"plan {report['plan']}, started {report['started']}, {report['done']}/{report['total']} steps settled"]
    rows = [("step", "status", "attempts", "duration", "output")]
    for sid, s in report["steps"].items():
        duration = f"{s['duration']:.2f}s" if isinstance(s["duration"], (int, float)) else "-"
        rows.append((sid, s["status"], str(s["attempts"]), duration, _step_detail(s)))
    lines.append(_table(rows))
    if "result" in final:
        lines += ["Result:", final["result"] if isinstance(final["result"], str) else _dump(final["result"])]
    return "\n".join(lines)


def _step_detail(s: dict) -> str:
    if s["error"]:
        return _cut(f"{s['error'].get('type')}: {s['error'].get('message')}")
    if s["output"] is None:
        return ""
    text = s["output"] if isinstance(s["output"], str) else json.dumps(s["output"], ensure_ascii=False, default=str)
    return _cut(text) + (" (spilled)" if s["spilled"] else "")


# --- dagplan resume --------------------------------------------------------------------------


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--from", "from_step", metavar="STEP",
              help="Clear recorded results from STEP onward (topological order) and run them again.")
@tools_option
@output_options
def resume(run_id, from_step, tool_sources, fmt, events, yes, no_input, state_dir, max_concurrency, model) -> None:
    """Resume RUN: completed steps replay from the record, the rest run."""
    from ..interpreter.config import load_config
    from ..interpreter.store import prepare_resume
    from .run import Session, load_tools

    try:
        config = load_config()
        store = open_store(state_dir or config.state_dir)
        run = prepare_resume(store, run_id, from_step)
        tools = load_tools(tool_sources, config)
        plan = _artifact_plan(run, tools, config)
    except DagplanError as exc:
        reject(exc)
    session = Session(plan, fmt=fmt, events=events, yes=yes, no_input=no_input)
    session.execute("aresume", run.id, tools=tools, from_step=from_step, state_dir=store.state_dir, config=config,
                    on_interrupted=Interrupted(yes=yes, no_input=no_input), max_concurrency=max_concurrency,
                    model=model)


def _artifact_plan(run: Any, tools: dict, config: Any = None):
    """The run's own plan, from its artifact (never re-derived)."""
    from ..api import load

    return load(text=json.dumps(run.plan_doc), name=run.plan_name or run.id, tools=tools, config=config)


class Interrupted:
    """Asks what to do with an interrupted side-effecting step: ``retry`` | ``adopt`` | ``fail``.

    ``--yes`` runs it again; without a terminal (or with ``--no-input``) nothing is
    guessed: the step fails, and the message says how to decide.
    """

    def __init__(self, *, yes: bool, no_input: bool):
        self.yes, self.interactive = yes, not no_input and sys.stdin.isatty()

    def __call__(self, step_id: str, purity: str) -> str:
        if self.yes:
            return "retry"
        if not self.interactive:
            click.echo(f"step {step_id} ({purity}) was interrupted and may or may not have happened; not run again "
                       "(resume with --yes to run it, or set resume.side_effect in dagplan.toml)", err=True)
            return "fail"
        question = f"Step {step_id} ({purity}) was interrupted: it may or may not have happened. Run it again?"
        if click.confirm(question, default=False, err=True):
            return "retry"
        return "adopt" if click.confirm("Keep it as done (adopt)?", default=True, err=True) else "fail"


# --- dagplan discard -------------------------------------------------------------------------


@click.command()
@click.argument("run_id", metavar="RUN")
@state_dir_option
def discard(run_id: str, state_dir: str | None) -> None:
    """Cancel RUN if it is running, record plan_aborted, remove its state."""
    try:
        store = open_store(state_dir)
        run_dir = store.resolve(run_id)
        store.discard(run_dir.name)
    except DagplanError as exc:
        reject(exc)
    click.echo(f"run {run_dir.name} discarded", err=True)


# --- dagplan events --------------------------------------------------------------------------


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--filter", "types", multiple=True, metavar="TYPE", help="Only events of this type (repeatable).")
@state_dir_option
@format_option("json", "jsonl")
def events(run_id: str, types: tuple[str, ...], state_dir: str | None, fmt: str) -> None:
    """Print RUN's event log; each plan_step_completed says replayed or fresh, and its duration."""
    try:
        run = open_store(state_dir).open(run_id)
        found = list(run.events(set(types) if types else None))
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


HIDDEN = {"seq", "ts", "type", "step", "run_id", "duration", "replayed", "output", "crc"}


def event_line(event: dict) -> str:
    """``seq  time  type  step  details``: one line per event, outputs cut."""
    when = datetime.fromtimestamp(event.get("ts", 0)).strftime("%H:%M:%S.%f")[:-3]
    parts = [f"{event.get('seq', ''):>5}", when, event.get("type", "?")]
    if event.get("step"):
        parts.append(event["step"])
    if event.get("type") == "plan_step_completed":
        parts.append("replayed" if event.get("replayed") else "fresh")
    if isinstance(event.get("duration"), (int, float)):
        parts.append(f"{event['duration'] * 1000:.1f}ms")
    extra = {k: v for k, v in event.items() if k not in HIDDEN and v not in (None, False, {}, [])}
    if extra:
        parts.append(_cut(json.dumps(extra, ensure_ascii=False, default=str), 100))
    if "output" in event:
        parts.append("output=" + _cut(json.dumps(event["output"], ensure_ascii=False, default=str), 60))
    return "  ".join(parts)
