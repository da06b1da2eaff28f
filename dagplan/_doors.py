"""What the doors share that is not the API (the CLI, the viewer, the language server, MCP): how a file is
recognised, where an editor's steps are written, how a typed word or an id is read, how a state or a
rerun is shown. Not for users: the names here may change with any release; ``dagplan`` and
:class:`dagplan.Project` are the interface.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from . import _lazy
from .api import _here
from .dsl.errors import DagplanError
from .dsl.ir import Plan

# What the CLI and the viewer read with, from the pipeline's own modules (the doors import only the facade),
# each imported when first asked for: `dagplan check` never imports the planner's score.
_PIPELINE = {
    "worst_case": "dagplan.dsl.compose",
    "load_file": "dagplan.dsl.load",
    "load_text": "dagplan.dsl.load",
    "read_data": "dagplan.dsl.load",
    "parse_assignments": "dagplan.interpreter.engine.inputs",
    "DEFAULT_THRESHOLD": "dagplan.interpreter.llm.score",
    "score": "dagplan.interpreter.llm.score",
}

__getattr__ = _lazy("dagplan._doors", _PIPELINE)


def is_plan_file(path: str | os.PathLike) -> bool:
    """Whether the file at ``path`` is a plan or a plan test file (:mod:`dagplan.dsl.recognize`: its folder
    or name, the ``$schema`` modeline, or its shape); a file that cannot be read counts as one (``check``
    says why)."""
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


async def ask_at_terminal(run_id: str, request: Mapping[str, Any], prompt: Callable[[Any], Any],
                          state_dir: Any = None) -> Any:  # fmt: skip
    """A gate of the live run ``run_id`` asked at this terminal (``prompt(cancelled)``), answerable meanwhile
    by :func:`answer` from elsewhere: the first answer, as an :class:`Answered` (interpreter/ops/asking.py)."""
    from .interpreter.ops.asking import ask_here_or_elsewhere

    journal = _here(state_dir=state_dir)._registry().open(run_id)
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


def shown_state(state: Any) -> str:
    """Where runs are, as pages and messages show it: a directory, or a database URL with its password masked."""
    from .interpreter.core.redact import masked

    return masked(state or ".dagplan")


def is_database(state: Any) -> bool:
    """Whether runs are kept in a run database (a ``postgresql://`` state), where workers take them."""
    from .interpreter.core.state import is_url

    return is_url(state)


def walk(plan: Plan) -> Any:
    """Every step of a plan and of the plans it runs, with its full id (``sub.fetch``)."""
    from .dsl.ir import walk as steps

    return steps(plan)


def lazy_when_acting(plan: Any, text: str, specs: Any) -> str:
    """A model's plan as ``plan -o FILE`` writes it: ``text`` (its canonical YAML) with ``mode: lazy`` when a step
    of it may act by these tools' word (or no tool is known to say it does not)."""
    from .dsl.fmt import format_document
    from .dsl.ir import acts_as_known
    from .dsl.load import load_text

    if plan.mode == "lazy" or not any(acts_as_known(step, specs or None) is not False for _, step in walk(plan)):
        return text
    first, _, rest = text.partition("\n")
    lazy = f"{first}\nmode: lazy\n{rest}" if first.startswith("dagplan:") else f"mode: lazy\n{text}"
    return format_document(load_text(lazy, "plan.yaml"), refs=True)


def answer_problem(request: Any, answer: Any) -> str | None:
    """Why a gate could not take ``answer`` (the gate's own rule: not one of its choices, off its schema)."""
    from .interpreter.engine.runners import answer_problem as rule

    return rule(request, answer)


def matches(pattern: str, unit_id: str) -> bool:
    """Whether a gate's full id (``each[2].approve_close``) matches ``pattern`` (``*``: any characters)."""
    from .interpreter.core.calls import matches as rule

    return rule(pattern, unit_id)


def cassette_tools(path: str | os.PathLike) -> dict:
    """The tools a replay of the cassette at ``path`` checks its plan against (the catalog it recorded;
    none is ever called)."""
    from .interpreter.testing.cassette import read, replay_tools

    return replay_tools(read(path))


def run_config(run_id: str, state_dir: Any = None):
    """The configuration to resume a run with: the working directory's, else the one the run started
    with (so ``dagplan resume RUN`` works from anywhere): :meth:`Project.for_run`."""
    return _here(state_dir=state_dir).for_run(run_id).config


def read_json(text: str) -> Any:
    """JSON a person typed (``resume --output``), read by the one reader of JSON from outside (its depth limit)."""
    from .dsl.jsontext import loads

    return loads(text)


def resume_tools(run_id: str, state_dir: Any = None) -> tuple[list[str], list[str]]:
    """(the tool sources a run was started with, those of them whose file changed since)."""
    from .interpreter.tools.sources import changed_sources, recorded_sources

    record = _here(state_dir=state_dir)._registry().open(run_id).meta.get("tool_sources") or []
    return recorded_sources(record), changed_sources(record)
