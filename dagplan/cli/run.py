"""``dagplan run`` and ``dagplan preview``: parse options, call the API, render."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from typing import Any, Callable, Coroutine

import click

from ..dsl.errors import DagplanError
from ..settings import options_of
from .common import (
    finish,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WAITING,
    OUTPUT_FILE,
    die,
    fail,
    guard_descriptors,
    project_of,
    state_dir_option,
    tools_as_given,
    tools_option,
    verbosity,
)


def output_options(f):
    f = click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json"]),
        default="text",
        help="json: the run result as one JSON object on stdout.",
    )(f)
    f = click.option(
        "--events",
        "events",
        metavar="FILE|-",
        default=None,
        help="Write every event as one JSON line to FILE (- for stdout; `jsonl` for stderr). "
        "Each line carries the run id; nothing else is written there.",
    )(f)
    f = click.option("--yes", "-y", is_flag=True, help="Approve lazy plans and retry extensions without asking.")(f)
    f = click.option("--no-input", is_flag=True, help="Never prompt; unanswered questions are refusals.")(f)
    return state_dir_option(f)


record_option = click.option(
    "--record",
    type=OUTPUT_FILE,
    default=None,
    metavar="FILE",
    help="Write every tool and model call of this run to a cassette FILE (from its journal; secrets redacted;"
    " a resume with --record writes the whole run's, gate answers included).",
)


def load_plan(path: str, tools: dict):
    from ..api import load

    return load(path, tools=tools)


def read_inputs(pairs: tuple[str, ...], input_file: str | None, plan: Any) -> dict:
    from .._doors import parse_assignments, read_data

    values: dict = {}
    if input_file:
        values.update(read_data(input_file))
    values.update(parse_assignments(pairs, plan))
    return values


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@tools_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--approve", is_flag=True, help="Approve this plan with these tools, as shown: write the approval file.")
@click.option("-o", "--output", type=OUTPUT_FILE, default=None,
              help="Where --approve writes the approval (default: FILE.approval.json beside the plan).")  # fmt: skip
@click.option("--reuse", "reuse", multiple=True, metavar="RUN",
              help="Also say which steps `run --reuse RUN` would run again, and why (nothing is called).")  # fmt: skip
@state_dir_option
def preview(
    file: str, tool_sources: tuple[str, ...], fmt: str, approve: bool = False, output: str | None = None,
    reuse: tuple[str, ...] = (), state_dir: str | None = None,
) -> None:  # fmt: skip
    """Show what FILE would run (steps, arguments, parallel groups, branch points), running nothing. With
    --approve, a person approves it: `dagplan run FILE --approved APPROVAL` then runs only this plan."""
    from .. import api
    from ..views import preview_text, rerun_text

    if output is not None and not approve:
        die("-o is where --approve writes the approval: give --approve too", EXIT_USAGE)
    try:
        project = project_of(state_dir, tool_sources)
        config = project.config
        tools = project.tools if project.tools_known else None
        plan = load_plan(file, tools) if tools is not None else project.load(file)
        shown = project.preview(plan, tools)
        again = project.rerun(plan, list(reuse), tools) if reuse else None
        approval = project.approve(plan) if approve else None
    except DagplanError as exc:
        fail(exc)
    if fmt == "json":
        found = {**shown.to_json(), **({"rerun": again.to_json()} if again is not None else {})}
        click.echo(json.dumps(found, indent=2, ensure_ascii=False))
    else:
        how = shown.command_to_run(tools_as_given(tool_sources, config))
        click.echo(preview_text(shown, how) + (("\n\n" + rerun_text(again, file)) if again is not None else ""))
    if approval is not None:
        target = output or os.path.splitext(file)[0] + ".approval.json"
        api.write_file(target, (json.dumps(approval, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        acts = ", ".join(approval["side_effects"]) or "none"
        tools_given = "".join(f" --tools {t}" for t in tool_sources)
        click.echo(f"approved by {approval['approved_by']}: wrote {target} (steps that act on the world: {acts}); "
                   f"run it with: dagplan run {file}{tools_given} --approved {target}", err=True)  # fmt: skip


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@tools_option
@click.option("--input", "-i", "pairs", multiple=True, metavar="KEY=VALUE", help="A run input (repeatable).")
@click.option("--input-file", type=click.Path(dir_okay=False, exists=True), help="Run inputs from a JSON/YAML file.")
@click.option("--dry-run", is_flag=True, help="Preview only (same as `dagplan preview`).")
@click.option("--ephemeral", is_flag=True, help="Do not checkpoint this run (it cannot be resumed).")
@record_option
@click.option(
    "--replay",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Replay a cassette: no real tool or model is called.",
)
@click.option(
    "--answer",
    "answers",
    multiple=True,
    metavar="STEP=VALUE",
    help="Answer a gate ahead (repeatable; VALUE as JSON, else text): the run does not stop there (for CI).",
)
@click.option(
    "--approved",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="APPROVAL",
    help="Run only the plan and tools this approval file (dagplan preview --approve) approved; refuse anything else.",
)
@options_of("run")
@click.option(
    "--reuse",
    "reuse",
    multiple=True,
    metavar="RUN",
    help="Take the result of each step whose fingerprint equals a completed step of RUN (repeatable; @last the "
    "newest run): only what an edit changed runs again.",
)
@output_options
def run(
    file: str,
    tool_sources,
    pairs,
    input_file,
    dry_run,
    ephemeral,
    record,
    replay,
    answers,
    approved,
    settings,
    reuse,
    fmt,
    events,
    yes,
    no_input,
    state_dir,
) -> None:
    """Run the plan in FILE."""

    check_record(record)
    if record and ephemeral:
        die("--record writes the cassette from the run's journal: it cannot be combined with --ephemeral", EXIT_USAGE)
    if dry_run:
        ctx = click.get_current_context()
        ctx.invoke(preview, file=file, tool_sources=tool_sources, fmt=fmt)
        return
    config, tools, plan, inputs = prepare(file, tool_sources, pairs, input_file, replay)
    project = project_of(state_dir, tool_sources)
    approval = None
    if approved is not None:
        try:
            approval = project.check_approval(approved, plan)
        except DagplanError as exc:
            fail(exc)
    reused = None
    if reuse:
        try:  # read before this run exists: @last is the run before it
            reused = project.reuse_of(list(reuse), plan)
        except DagplanError as exc:
            fail(exc, EXIT_USAGE)
    session = Session(plan, fmt=fmt, events=events, yes=yes, no_input=no_input, record=record,
                      answers=_answers(answers, plan))  # fmt: skip
    kwargs = dict(
        # a replay given no tools checks against its cassette's; else the project's, whose sources the run records
        tools=tools if replay and not project.sources else None,
        inputs=inputs,
        durable=not ephemeral,
        settings=settings,
        cassette=replay,
        approval=approval,
        reuse=reused,
    )
    session.execute(project.arun, plan, state_dir=state_dir, **kwargs)


def prepare(
    file: str, tool_sources: tuple[str, ...], pairs: tuple[str, ...], input_file: str | None, replay: str | None = None
) -> tuple:
    """What `run` and `submit` start from: the configuration, the tools (a replay given none: the catalog its
    cassette recorded), the plan checked against them, and the inputs (a plan problem exits by the usual
    rule; an input problem is always the caller's: exit 2)."""
    from .. import api
    from .. import _doors

    try:
        project = project_of(None, tool_sources)
        config = project.config
        tools = _doors.cassette_tools(replay) if replay and not project.sources else (project.tools or {})
        plan = api.load(file, tools=tools, config=config)
    except DagplanError as exc:
        fail(exc)
    try:
        inputs = read_inputs(pairs, input_file, plan)
    except DagplanError as exc:
        fail(exc, EXIT_USAGE)  # inputs are the caller's to fix, whatever is wrong with them
    return config, tools, plan, inputs


def _answers(given: tuple[str, ...], plan: Any) -> dict[str, Any]:
    """``--answer STEP=VALUE`` pairs: each a gate of the plan, of a sub-plan or of a fan-out's items
    (``each[0].approve_close``, or ``each[*].approve_close`` for all; else exit 2, with did-you-mean), the
    value read as JSON, else as text."""
    import re

    from .. import _doors
    from ..dsl.errors import did_you_mean

    gates = [full for full, s in _doors.walk(plan) if s.gate is not None]
    out: dict[str, Any] = {}
    for pair in given:
        step, sep, raw = pair.partition("=")
        if (
            not sep
            or re.sub(r"\[[^\[\]]*\]", "", step) not in gates
            and not any(_doors.matches(step, g) for g in gates)
        ):
            known = ", ".join(gates) or "none"
            hint = did_you_mean(step, gates, f"the plan's gates: {known}") if sep else "write STEP=VALUE"
            die(f"--answer {pair!r}: {'no gate ' + repr(step) if sep else 'not STEP=VALUE'} ({hint})", EXIT_USAGE)
        try:
            out[step] = _doors.word_value(raw)
        except ValueError as exc:
            die(f"--answer {step}: {exc} (an answer is a small JSON value, or text)", EXIT_USAGE)
        _answerable(plan, step, out[step])
    return out


def _answerable(plan: Any, step: str, value: Any) -> None:
    """An answer given ahead is refused before the run starts when its gate could not take it (not one of its
    choices, off its schema): the rule the gate applies when it is answered (engine/runners.answer_problem)."""
    import re

    from .. import _doors
    from ..dsl.errors import did_you_mean

    bare = re.sub(r"\[[^\[\]]*\]", "", step)
    for full, s in _doors.walk(plan):
        if s.gate is None or not (full == bare or _doors.matches(step, full)):
            continue
        problem = _doors.answer_problem({"choices": s.gate.choices, "schema": s.gate.schema}, value)
        if problem:
            hint = did_you_mean(str(value), s.gate.choices or (), "") if s.gate.choices else ""
            die(f"--answer {step}: {problem}" + (f" ({hint})" if hint else ""), EXIT_USAGE)


def ask_gate_on_terminal(request: dict, cancelled: Any = None) -> Any:
    """Prompt for a gate's answer: one of its choices, or JSON (else text) for a schema. ``cancelled`` (a
    ``threading.Event``): the prompt stops once it is set (the gate was answered elsewhere)."""
    from .. import _doors

    question = f"{request['step']}: {request['question']}"
    choices = request.get("choices")
    while True:
        raw = _line(f"{question} ({', '.join(choices)}): " if choices else f"{question} (JSON or text): ", cancelled)
        if raw is None:
            return None
        if choices:
            if raw in choices:
                return raw
            click.echo(f"Error: {raw!r} is not one of {', '.join(map(repr, choices))}.", err=True)
            continue
        try:
            return _doors.word_value(raw)
        except ValueError as exc:
            click.echo(f"not an answer: {exc}", err=True)


def _line(prompt: str, cancelled: Any) -> str | None:
    """A line typed at the terminal (without its end), None once ``cancelled`` is set or input ends; the
    wait looks at ``cancelled`` between keystrokes, so a prompt answered elsewhere ends at once."""
    import select

    click.echo(prompt, nl=False, err=True)
    while cancelled is not None and not cancelled.is_set():
        try:
            ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        except (OSError, ValueError):  # no selectable stdin (another platform): read as usual
            break
        if ready:
            break
    if cancelled is not None and cancelled.is_set():
        click.echo("", err=True)
        return None
    line = sys.stdin.readline()
    return line.rstrip("\r\n").strip() if line else None


def check_record(record: str | None) -> None:
    """--record given to the API (the CLI's option is an OUTPUT_FILE already): the same rule."""
    if record is not None:
        try:
            OUTPUT_FILE.convert(record, None, None)
        except click.BadParameter as exc:
            die(f"--record: {exc.message}", EXIT_USAGE)


def _waiting_hint(result: Any, record: str | None) -> None:
    then = f"dagplan resume {result.run_id}" + (f" --record {shlex.quote(record)}" if record else "")
    for request in result.waiting:
        step_id = request["step"]
        click.echo(
            f"waiting for an answer at {step_id}; answer with: dagplan answer {result.run_id} {step_id} VALUE"
            f", then: {then}",
            err=True,
        )


class Session:
    """What `run` and `resume` share: approval, prompts, progress, rendering, exit code."""

    def __init__(
        self, plan: Any, *, fmt: str, events: str | None, yes: bool, no_input: bool, record: str | None = None,
        answers: dict[str, Any] | None = None, approve: Any = None,
    ):  # fmt: skip
        """``plan`` None: the plan is still being written (a streamed run): the progress starts with it."""
        self.plan, self.fmt, self.events, self.yes, self.no_input = plan, fmt, events, yes, no_input
        self.approve = approve or self._approve
        self.record = record
        self.answers = dict(answers or {})  # --answer: gates answered ahead
        self.interactive = sys.stdin.isatty() and not no_input and not yes
        self.progress: Any = None

    state_dir: Any = None

    def execute(self, function: Callable[..., Coroutine[Any, Any, Any]], target: Any, state_dir: Any = None,
                **kwargs: Any) -> None:  # fmt: skip
        """Call ``function`` (a project's ``arun`` or ``aresume``, or ``aplan``) with this session's hooks added;
        ``state_dir``: where the session finds the run (a gate asked at this terminal, ``--record``)."""
        from .. import RunStatus

        self.state_dir = state_dir
        guard_descriptors()  # a subprocess a tool starts writes to the terminal escaped, never raw
        kwargs.update(self._hooks(starting="on_interrupted" not in kwargs))
        if kwargs.get("on_interrupted") is not None:  # its question is asked with the live table paused
            kwargs["on_interrupted"] = self._paused(kwargs["on_interrupted"])
        try:
            result = asyncio.run(function(target, **kwargs))
        except DagplanError as exc:
            self._stop_progress()
            fail(exc)
        except KeyboardInterrupt:
            self._stop_progress()
            click.echo(
                f"interrupted; resume with: dagplan resume {self.run_id}" if self.run_id else "interrupted", err=True
            )
            finish(EXIT_INTERRUPTED)
        self._stop_progress()
        self._render(result)
        if self.record:
            self._write_cassette(result.run_id, state_dir)
        if result.waiting:
            _waiting_hint(result, self.record)
            finish(EXIT_WAITING)
        finish(EXIT_FAILED if result.had_errors or result.status is not RunStatus.COMPLETED else EXIT_OK)

    run_id: str | None = None

    def _hooks(self, starting: bool) -> dict:
        """The callbacks a run takes from the terminal (``approve`` only for a run starting: a resumed
        run was approved when it started)."""
        from ..views import JsonlEvents, progress_for

        subscribers: list[Any] = []
        if self.events is not None:
            subscribers.append(JsonlEvents.to(self.events))
        quiet = verbosity() < 0
        if self.fmt == "text" and self.events not in ("jsonl", "-") and not quiet:  # never on an event stream
            if self.plan is None:
                subscribers.append(self._once_written)
            else:
                self.progress = progress_for(self.plan)
                subscribers.append(self.progress)
        hooks = {
            "subscribers": subscribers,
            "on_limit_exceeded": self._extend_retries,
            "on_run_created": self._announce,
            "ask_gate": self._ask_gate if self.interactive or self.answers else None,
        }
        return {**hooks, "approve": self.approve} if starting else hooks

    def _once_written(self, event: Any) -> None:
        """A streamed run's progress: from the moment its plan is written, as for any run."""
        from .. import EventType, api
        from ..views import progress_for

        if self.progress is not None:
            self.progress(event)
        elif event.type is EventType.PLAN_WRITTEN:
            self.plan = api.load(text=json.dumps(event.data["plan"]), name="plan")
            self.progress = progress_for(self.plan)
            self.progress.start()

    def _ask_gate(self, request: dict) -> Any:
        """An approval gate: its --answer when given, else (interactive) ask on the terminal, else the
        run stops waiting for it."""
        from .. import api
        from .. import _doors

        given = next((k for k in self.answers if _doors.matches(k, request["step"])), None)
        if given is not None:
            return api.answered(self.answers[given], "--answer")
        if not self.interactive:
            raise api.waiting(request)
        if self.run_id is None:  # not durable: nobody else can answer it
            return api.answered(self._paused(ask_gate_on_terminal)(request), "terminal")
        # durable: `dagplan answer` from another terminal (or the viewer) may answer it meanwhile
        return self._answered_here_or_elsewhere(request)

    async def _answered_here_or_elsewhere(self, request: dict) -> Any:
        from .. import _doors

        asking = self._paused(ask_gate_on_terminal)
        assert self.run_id is not None  # _ask_gate asks here only once the run has its id
        found = await _doors.ask_at_terminal(self.run_id, request, lambda cancelled: asking(request, cancelled),
                                          self.state_dir)  # fmt: skip
        if str(found.channel) != "terminal":
            self._paused(click.echo)(f"{request['step']}: answered elsewhere ({found.channel}, by "
                                     f"{found.who or 'someone'}): {found.value}", err=True)  # fmt: skip
        return found

    def _paused(self, ask: Any) -> Any:
        """``ask``, called with the live progress table stopped, so a question is never drawn into it."""

        def asking(*args: Any, **kwargs: Any) -> Any:
            pause = getattr(self.progress, "pause", None)
            if pause:
                pause()
            try:
                return ask(*args, **kwargs)
            finally:
                if pause:
                    self.progress.resume()

        return asking

    def _announce(self, run_id: str) -> None:
        self.run_id = run_id
        click.echo(f"run {run_id}", err=True)  # first, so a person can resume it
        if self.progress is not None and self.plan is not None:
            self.progress.start()

    def _approve(self, shown: Any) -> bool:
        from ..views import preview_text

        click.echo(preview_text(shown, _again_with("--yes")), err=True)
        if self.yes:
            return True
        if not self.interactive:
            click.echo("this plan is lazy: approve it with --yes", err=True)
            return False
        return click.confirm("Run this plan?", default=False, err=True)

    def _extend_retries(self, step_id: str, error: BaseException, attempts: int) -> bool:
        if self.yes:
            return True
        if not self.interactive:
            return False
        question = f"Step {step_id} failed {attempts} times ({error}). Retry more?"
        return bool(self._paused(lambda: click.confirm(question, default=False, err=True))())

    def _write_cassette(self, run_id: str, state_dir: Any) -> None:
        from .. import plantests

        try:
            found = plantests.export_cassette(run_id, self.record, state_dir)
        except DagplanError as exc:
            fail(exc)
        if verbosity() >= 0:
            click.echo(f"{len(found['calls'])} calls recorded in {self.record}", err=True)

    def _stop_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def _render(self, result: Any) -> None:
        from ..views import report_text

        on_stderr = self.events == "-"  # stdout is the event stream: keep it pure JSONL
        if self.fmt == "json":
            click.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False, default=str), err=on_stderr)
        else:
            click.echo(report_text(result, verbose=verbosity() > 0), err=on_stderr)


def _again_with(flag: str) -> str:
    """The command this process was started with, as the user typed it, with ``flag`` added."""
    import shlex

    args = sys.argv[1:]
    return "dagplan " + shlex.join([*args, *([] if flag in args else [flag])])
