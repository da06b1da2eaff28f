"""``dagplan check`` without click: its whole body, and the fast path that runs it before click is imported.

``check`` is what pre-commit starts for every commit, in a fresh process: click alone costs 13 ms of a
start that must be no slower than yamllint's (issue 43). :func:`fast_check` reads the command lines that
``check``'s options allow (:data:`FLAGS`, :data:`VALUED`, the group's ``-q`` / ``-v``) and runs
:func:`run_check`; anything else -- ``--help``, an unknown option, a bad ``--format`` -- goes to click,
whose ``check`` command (``check.py``) is declared from the same tables and calls the same
:func:`run_check`. The suite holds the two to the same options and the same output.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Iterable, NoReturn

from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Exit, exit_code, fail, finish, say, set_verbosity, verbosity

PLAN_SUFFIXES = (".yaml", ".yml", ".json", ".rewoo")  # .rewoo: a ReWOO text (docs/guide/plans.md)
FORMATS = ("text", "json", "github", "sarif")
FLAGS = {"--strict": "strict", "--plans-only": "plans_only"}  # check's flags -> its parameters
VALUED = {"--format": "fmt", "--tools": "tool_paths", "--exclude": "exclude"}  # check's valued options
QUIET, VERBOSE = ("-q", "--quiet"), ("-v", "--verbose")  # the group's options (cli/group.py)


class UsageFailure(Exception):
    """A problem with the command line or the files named on it (exit 2)."""


def fast_check(argv: list[str]) -> dict | None:
    """``check``'s arguments when ``argv`` is a check command line this parser reads exactly as click
    would, else None (click then parses it, errors and help included)."""
    level, i = 0, 0
    while i < len(argv) and argv[i].startswith("-"):
        arg = argv[i]
        if arg in QUIET or arg in VERBOSE:
            level += -1 if arg in QUIET else 1
        elif len(arg) > 2 and arg[1:] == arg[1] * (len(arg) - 1) and arg[1] in "qv":  # -qq, -vvv
            level += (len(arg) - 1) * (-1 if arg[1] == "q" else 1)
        else:
            return None
        i += 1
    if argv[i : i + 1] != ["check"]:
        return None
    found: dict = {"files": [], "fmt": "text", "strict": False, "tool_paths": [], "plans_only": False, "exclude": []}
    rest, i = argv[i + 1 :], 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            found["files"] += rest[i + 1 :]
            break
        name, eq, value = arg.partition("=")
        if arg in FLAGS:
            found[FLAGS[arg]] = True
        elif name in VALUED:
            if not eq:
                if i + 1 >= len(rest):
                    return None
                i, value = i + 1, rest[i + 1]
            if name == "--format":
                if value not in FORMATS:
                    return None
                found["fmt"] = value
            else:
                found[VALUED[name]].append(value)
        elif arg.startswith("-") and arg != "-":
            return None
        else:
            found["files"].append(arg)
        i += 1
    if not found["files"]:
        return None
    found["verbosity"] = level
    return found


def expand(patterns: Iterable[str], walked: set[str] | None = None, exclude: Iterable[str] = ()) -> list[str]:
    """Files named by the arguments: a path that exists is that file (``[draft].yaml`` too), ``-`` is
    standard input, globs are expanded (quoted ones too), directories walked for plan files (those are
    added to ``walked``: a folder holds other YAML and JSON too). A selection that names no plan file is a
    usage error (exit 2), whatever produced it. ``exclude``: regular expressions (searched in the path, as
    pre-commit's ``exclude``) of the files a folder or a glob gives that are skipped; a file named is kept."""
    import re

    try:
        skipped = [re.compile(e) for e in exclude]
    except re.error as exc:
        raise UsageFailure(f"--exclude {exc.pattern!r} is not a regular expression: {exc}") from None

    def kept(found: list[str]) -> list[str]:
        return [f for f in found if not any(e.search(f) for e in skipped)]

    files: list[str] = []
    for pattern in patterns:
        if pattern == "-" or (os.path.exists(pattern) and not os.path.isdir(pattern)):
            files.append(pattern)
        elif os.path.isdir(pattern):
            found = kept(sorted(_walk(pattern)))
            if not found:
                raise UsageFailure(f"no plan files ({', '.join(PLAN_SUFFIXES)}) in {pattern!r}")
            files += found
            if walked is not None:
                walked.update(found)
        elif glob.has_magic(pattern):
            matches = kept([m for m in sorted(glob.glob(pattern, recursive=True)) if os.path.isfile(m)])
            if not matches:
                raise UsageFailure(f"no files match {pattern!r}")
            files += matches
        else:
            files.append(pattern)  # a missing file: the loader says so (io)
    return list(dict.fromkeys(files))


SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env"})


def _walk(folder: str) -> list[str]:
    """The plan-like files below ``folder``: not inside a hidden folder (``.git``, ``.venv``, ``.dagplan``) or
    one that holds installed code (``node_modules``, ``site-packages``, ``venv``)."""
    found = []
    for where, folders, names in os.walk(folder):
        folders[:] = [f for f in folders if not f.startswith(".") and f not in SKIPPED_FOLDERS]
        found += [os.path.join(where, n) for n in names if n.endswith(PLAN_SUFFIXES)]
    return [f[2:] if f.startswith("./") else f for f in found]


def run_check(
    files: Iterable[str],
    fmt: str,
    strict: bool,
    tool_paths: Iterable[str],
    plans_only: bool,
    verbosity_: int | None = None,
    exclude: Iterable[str] = (),
) -> NoReturn:
    """The whole of ``dagplan check``: validate the files, print the diagnostics, exit with the table's code."""
    from .. import _doors
    from .common import project_of
    from ..dsl.errors import DagplanError, counted
    from ..render import DIAGNOSTIC_RENDERERS, render_json, summary_line

    if verbosity_ is not None:
        set_verbosity(verbosity_)
    tool_paths = tuple(tool_paths)
    walked: set[str] = set()
    try:
        paths = expand(files, walked, exclude)
    except UsageFailure as exc:
        say(f"dagplan check: {exc}")
        finish(EXIT_USAGE)
    # what a folder holds besides plans (a CI workflow, a compose file, package.json) is left alone, as the
    # hook leaves it (--plans-only: every file); a file named on its own is checked as a plan, strictly
    judged = paths if plans_only else [p for p in paths if p in walked]
    left = {p for p in judged if p != "-" and not _doors.is_plan_file(p)}
    paths, others = [p for p in paths if p not in left], len(left)
    if not paths:  # the hook passes on a commit without plans; a folder named without any is a usage error
        say(f"dagplan check: no plan among {counted(others, 'YAML/JSON file')}: nothing to check (a plan "
            "is under plans/ or examples/, named *.plan.yaml, has the plan $schema modeline, or has "
            "steps that name a tool, an llm or a gate)")  # fmt: skip
        finish(EXIT_OK if plans_only else EXIT_USAGE)
    try:
        project = project_of(None, tool_paths)
        config = project.config
        results = project.check(paths)  # the configuration run uses, tools included
    except DagplanError as exc:
        fail(exc)
    untooled = not project.tools_known and any(r.plan is not None and r.plan.tool_names for r in results)
    worst = _worst_cases(results, config.max_items)
    if fmt == "json":
        sys.stdout.write(render_json(results, worst))
    else:
        sys.stdout.write(DIAGNOSTIC_RENDERERS[fmt](results))
    sys.stdout.flush()  # before the summary on stderr: a terminal (2>&1) shows them in order
    if fmt == "text" and verbosity() >= 0:
        if verbosity() > 0:
            for r in results:
                if r.ok and not r.diagnostics:
                    say(f"{r.name}: valid")
        for name, bounds in worst.items():
            text = (
                bounds.summary()
                if hasattr(bounds, "summary")
                else (f"worst case {counted(bounds.steps, 'step')}, {counted(bounds.llm_steps, 'LLM step')}")
            )
            say(f"{name}: {text}")
        if untooled:
            say("note: tool names and arguments were not checked (no tools known here): give --tools FILE, "
                "or `tools = [...]` in dagplan.toml")  # fmt: skip
        line = summary_line(results, strict)
        say(line + (f"; {counted(others, 'other YAML/JSON file')} left alone (not plans)" if others else ""))
    finish(_exit_code(results, strict))


def _exit_code(results, strict: bool) -> Exit:
    if exit_code(d.code for r in results for d in r.errors) == EXIT_USAGE:
        return EXIT_USAGE
    from ..render import passes

    if not all(passes(r, strict) for r in results):
        return EXIT_FAILED
    return EXIT_OK


def _worst_cases(results, max_items: int | None) -> dict:
    """For plans with fan-out, sub-plans, loops or model calls: the most steps they can execute, and
    what their model calls can cost (``worst case 61 steps, 12 model calls, <= 38k input tokens, <= $0.19``)."""
    from .._doors import worst_case

    out = {}
    for r in results:
        if r.plan is None or r.errors:  # an invalid plan has no worst case to tell: its errors come first
            continue
        if any(s.llm for s in r.plan.steps) or any(s.plan or s.loop for s in r.plan.steps):
            from .. import api

            found = api.estimate(r.plan)
            if found.llm:
                out[r.name] = found
                continue
        if any(s.for_each or s.plan or s.loop for s in r.plan.steps):
            out[r.name] = worst_case(r.plan, max_items)
    return out
