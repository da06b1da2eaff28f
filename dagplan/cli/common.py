"""What every subcommand shares: the exit-code table, the rule that picks a code, and the common options.

The table (:data:`EXITS`) is the one statement of what each exit code means, for every command; the
README's table is checked against it by the suite. A command never picks a number itself: it calls
:func:`finish` with a member of :class:`Exit`, or :func:`fail` with the error (the rule picks).
"""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import Any, Iterable, NoReturn

from ..dsl.errors import DagplanError, printable


class Exit(IntEnum):
    OK = 0
    FINDING = 1
    USAGE = 2
    WAITING = 3
    INTERRUPTED = 130


# what each code means, for every command (README: "Exit codes")
EXITS: dict[Exit, str] = {
    Exit.OK: "success: every file is valid, every test passed, the run completed without errors, the command did"
    " what was asked",
    Exit.FINDING: "a finding: a plan or test file is invalid (warnings too with `--strict`), a test failed or"
    " coverage is under `--fail-under`, `fmt --check` would reformat, a run failed or completed with errors, a"
    " worker finished a run that failed, a plan that is not the one its `--approved` file approved, plans scored"
    " under `dagplan eval --fail-under`",
    Exit.USAGE: "the command was called wrongly or cannot start: an unknown option or command, a file that cannot"
    " be read, an unknown run or step, a bad configuration or state URL, a run database that went away, tools"
    " that do not import (or a catalog of tools that cannot be read, or only describes a tool a run calls) or a"
    " damaged or hand-edited `dagplan.lock`, inputs or a gate's answer that do not fit"
    " (or an answer through a channel that may not give it), a damaged approval file or task file, no model or"
    " credentials for an LLM step",
    Exit.WAITING: "waiting for a person: the run stopped at an approval gate, or at a side effect whose outcome"
    " nobody knows (answer, adopt or retry it, then resume)",
    Exit.INTERRUPTED: "interrupted (Ctrl-C, SIGTERM): what completed is kept; resume the run",
}

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WAITING, EXIT_INTERRUPTED = (
    Exit.OK,
    Exit.FINDING,
    Exit.USAGE,
    Exit.WAITING,
    Exit.INTERRUPTED,
)

# diagnostics that are the caller's or the environment's fault, not the plan's (the rest are findings)
USAGE_CODES = frozenset(
    {
        "io",
        "not-found",
        "tools-import",
        "bad-catalog",
        "tool-not-runnable",
        "config",
        "unknown-run",
        "ambiguous-run",
        "no-such-step",
        "unknown-event-type",
        "bad-run-id",
        "bad-input",
        "missing-input",
        "extra-input",
        "empty-data",
        "bad-data",
        "bad-cassette",
        "no-model",
        "no-llm-support",
        "no-credentials",
        "rerun-side-effects",
        "run-running",
        "usage",
        "tools-lock",
        "lock-tampered",
        "mcp-none",
        "mcp-server",
        "state-unavailable",
        "bad-approval",
        "eval-tasks",
        "bad-answer",
        "not-waiting",
        "person-only",
        "not-this-clients-run",
    }
)


# errors that leave a run waiting for a person
WAITING_CODES = frozenset({"needs-decision"})


def exit_code(codes: Iterable[str]) -> Exit:
    """The one rule: 2 when any diagnostic is a usage or environment problem, 3 when a run waits for a
    person's decision, else 1."""
    codes = set(codes)
    if codes & USAGE_CODES:
        return Exit.USAGE
    return Exit.WAITING if codes & WAITING_CODES else Exit.FINDING


def finish(code: Exit) -> NoReturn:
    """End the command with ``code`` (a member of the table, never a bare number)."""
    sys.exit(int(Exit(code)))


def say(line: str) -> None:
    """A line for people on standard error (what ``click.echo(..., err=True)`` does, without click)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def fail(exc: DagplanError, code: Exit | None = None) -> NoReturn:
    """Print every diagnostic of ``exc`` and exit with ``code`` or the rule's code."""
    for diag in exc.diagnostics:
        say(diag.format())
    finish(code if code is not None else exit_code(d.code for d in exc.diagnostics))


_VERBOSITY: list[int] = []  # set by the fast path of `check`, which runs before click


def set_verbosity(level: int) -> None:
    _VERBOSITY[:] = [level]


def verbosity() -> int:
    """-q / -v of the top command: below 0 quiet, 0 normal, above 0 verbose."""
    if _VERBOSITY:
        return _VERBOSITY[0]
    click = sys.modules.get("click")
    ctx = click.get_current_context(silent=True) if click is not None else None
    obj = ctx.find_root().obj if ctx is not None else None
    return int((obj or {}).get("verbosity", 0))


def die(message: str, code: Exit) -> NoReturn:
    say(f"error: {message}")
    finish(code)


def _group() -> dict:
    """What the group was given (``dagplan --state X --tools Y CMD``): every command's defaults (none in the fast
    path of ``check``, which runs before click is imported)."""
    click = sys.modules.get("click")
    ctx = click.get_current_context(silent=True) if click is not None else None
    return (ctx.find_root().obj or {}) if ctx is not None else {}


def group_tools(given: Iterable[str] = ()) -> tuple[str, ...]:
    """The tool sources of this command: the group's ``--tools``, then the command's own."""
    return (*_group().get("tools", ()), *given)


def _merged(ctx: Any, param: Any, value: Any) -> Any:
    """A command's ``--tools`` / ``--state`` over the group's: the tools add up; the state given to the command
    wins, else the group's (over the environment: a flag on the command line beats a variable)."""
    import click

    if param.name == "tool_sources":
        return group_tools(value)
    given = _group().get("state")
    if given is not None and ctx.get_parameter_source(param.name) != click.core.ParameterSource.COMMANDLINE:
        return given
    return value


def tools_option(f, help: str = "Python file or module defining @dagplan.tool functions, or a catalog of tools "
                 "(.json/.yaml: checked and planned against, not run) (repeatable; also `tools` in the config, and "
                 "`dagplan --tools`).") -> Any:  # fmt: skip
    import click

    return click.option("--tools", "tool_sources", multiple=True, metavar="FILE_OR_MODULE", callback=_merged,
                        help=help, hidden=True)(f)  # fmt: skip


STATE_HELP = (
    "Where runs are kept: a directory or a postgresql:// URL (default: $DAGPLAN_STATE, "
    "$DAGPLAN_STATE_DIR, `state` in the configuration, else .dagplan at the project's root)."
)


PROJECT_OPTIONS = ("state_dir", "tool_sources")  # declared once, on the group; a command's own spelling is hidden


def state_dir_option(f):
    """``--state`` / ``--state-dir``: a directory, or a ``postgresql://`` URL. Declared on the group (``dagplan
    --state X CMD``); a command takes it after its name too (``dagplan runs --state X``), not shown in its help
    (the group's says it once)."""
    import click

    return click.option("--state", "--state-dir", "state_dir", envvar=["DAGPLAN_STATE", "DAGPLAN_STATE_DIR"],
                        default=None, metavar="DIR|URL", callback=_merged, help=STATE_HELP,
                        hidden=True)(f)  # fmt: skip


def project_of(state_dir: Any = None, tool_sources: Iterable[str] = ()) -> Any:
    """This command's project (:class:`dagplan.Project`), built the one way every door builds it: the working
    directory's project with the command's ``--state`` and ``--tools`` (the options already merged the group's,
    :func:`_merged`); a tool file given is relative to where the command stands."""

    from ..project import Project, placed_here

    sources = tuple(dict.fromkeys(placed_here(s) for s in tool_sources))
    group = _group()
    built = group.setdefault("projects", {}) if group else {}  # built once per command line
    if (state_dir, sources) not in built:
        built[(state_dir, sources)] = Project(state=state_dir, tool_sources=sources)
    return built[(state_dir, sources)]


def exit_table() -> str:
    """The table as the README shows it (the suite checks that it does)."""
    rows = [f"| **{int(code)}** | {meaning} |" for code, meaning in EXITS.items()]
    return "\n".join(["| code | meaning (every command) |", "| --- | --- |", *rows]) + "\n"


class Printable:
    """A text stream that shows the characters a terminal would act on as escapes (:func:`printable`):
    what the CLI writes (tool results, model text, error messages, gate questions) cannot set the title,
    clear the screen or write the clipboard. ``raw`` is the stream itself, for rich's own drawing."""

    def __init__(self, raw: Any):
        self.raw = raw
        self.guarded = False  # its file descriptor's other writers (subprocesses) escaped too: guard_descriptors

    def write(self, text: str) -> int:
        self.raw.write(printable(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def raw_stream(stream: Any) -> Any:
    """The stream under a :class:`Printable` (rich draws its live table with escape codes of its own)."""
    return getattr(stream, "raw", stream)


def guard_descriptors() -> None:
    """While tools run here on a terminal: what reaches file descriptors 1 and 2 without going through
    Python's streams (a subprocess a tool starts, a C library's printf) goes through a pipe and on to the
    terminal escaped (:func:`printable`), never raw; dagplan's own output (the progress table) goes straight
    to the terminal as before. Only where a stream is a terminal (a pipe or a file is left as it is)."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if isinstance(stream, Printable) and not stream.guarded and _is_terminal(fd):
            stream.raw = _piped(stream.raw, fd)
            stream.guarded = True


def _is_terminal(fd: int) -> bool:
    import os

    try:
        return os.isatty(fd)
    except OSError:
        return False


def _piped(raw: Any, fd: int) -> Any:
    """``raw``'s own writes to a copy of ``fd``; ``fd`` itself a pipe whose bytes are shown escaped."""
    import atexit
    import io
    import os
    import threading

    raw.flush()
    saved = os.dup(fd)
    read_end, write_end = os.pipe()
    os.dup2(write_end, fd)
    os.close(write_end)
    own = io.TextIOWrapper(io.FileIO(saved, "w"), encoding=getattr(raw, "encoding", None) or "utf-8",
                           errors="backslashreplace", line_buffering=True, write_through=True)  # fmt: skip
    pump = threading.Thread(target=_pump, args=(read_end, own), name=f"dagplan-fd{fd}", daemon=True)
    pump.start()

    def finish() -> None:  # at exit: the pipe's writers gone, what is left in it still shown
        try:
            os.dup2(saved, fd)
        except OSError:
            return
        pump.join(timeout=2)

    atexit.register(finish)
    return own


def _pump(read_end: int, out: Any) -> None:
    import codecs
    import os

    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while True:
        try:
            chunk = os.read(read_end, 65536)
        except OSError:
            return
        if not chunk:
            break
        out.write(printable(decoder.decode(chunk)))
    out.write(printable(decoder.decode(b"", final=True)))


def guard_streams() -> None:
    """Every human-readable line the CLI prints goes through :class:`Printable` (JSON stays the same JSON)."""
    if not isinstance(sys.stdout, Printable):
        sys.stdout = Printable(sys.stdout)
    if not isinstance(sys.stderr, Printable):
        sys.stderr = Printable(sys.stderr)


def __getattr__(name: str) -> Any:
    """``OUTPUT_FILE`` / ``OutputFile``: built on first use, so that this module does not import click."""
    if name in ("OUTPUT_FILE", "OutputFile"):
        output_file = _output_file_type()
        globals().update(OutputFile=output_file, OUTPUT_FILE=output_file())
        return globals()[name]
    raise AttributeError(name)


def _output_file_type() -> type:
    import click

    class OutputFile(click.Path):
        """A file an option writes (a report, a cassette, a plan): the one rule for such paths. An empty path,
        a NUL or an existing directory is a usage error (exit 2) before anything runs."""

        def __init__(self) -> None:
            super().__init__(dir_okay=False, writable=False)

        def convert(self, value: Any, param: Any, ctx: Any) -> Any:
            if not isinstance(value, str) or not value or "\0" in value:
                self.fail(f"{value!r} cannot name a file: give a file path", param, ctx)
            return super().convert(value, param, ctx)

    return OutputFile


def tools_as_given(tool_sources: Any, config: Any) -> Any:
    """The ``--tools`` a printed command repeats: the ones given (none where the configuration names the tools:
    an empty tuple), or None when no tools are known (the command then shows a ``--tools TOOLS.py`` placeholder)."""
    return tuple(tool_sources) if tool_sources or config.tools else None
