"""Which YAML and JSON files are plans: what ``check --plans-only`` (the pre-commit hook) and the language
server check, and what they leave alone (a GitHub workflow, a compose file, ``package.json``).

A file is a plan when any of these says so, in this order:

1. its name: ``*.plan.yaml``, ``*.plan.yml``, ``*.plan.json`` (it says so: always checked);
2. its first lines: the editor modeline ``# yaml-language-server: $schema=...plan.schema.json``, or a
   ``"$schema"`` naming ``plan.schema.json``, or a top-level ``dagplan:`` key;
3. its shape: a mapping whose ``steps`` (or ``calls``) list holds at least one step that names a tool, a
   model call, a gate, a sub-plan, a loop or an agent (any accepted dialect), or a list of ``_tool`` calls.

Content decides everywhere else. A ``plans/`` (or ``plan/``) or ``examples/`` folder only makes the
recognizer readier to call a *broken* plan one (a top-level ``steps:`` / ``calls:`` whose items name no step
yet, or a text that does not load but has such a key): a ``docker-compose.yml`` or a Kubernetes manifest
there is left alone, never turned into an error.

A plan test file (``*.test.yaml``, ``*.test.json``) is ours too (:func:`is_ours`): ``check`` checks it.

A file that does not load is judged by its text, document by document (a ``---`` starts the next one): a
YAML document with a top-level ``steps:`` (or ``calls:``) whose items carry a step key at a step's own
indentation (``- tool: x``, or ``tool:`` beside the item's first key), or a JSON text with a quoted
``"steps"`` / ``"calls"`` / ``"dagplan"`` key and a quoted step key (``"tool":``). A broken plan is still
a plan, and ``check`` then says where it is broken; a CI file whose pipeline step has a ``plan:`` setting
further in is not one.
"""

from __future__ import annotations

import re
from typing import Any

NAMED = re.compile(r"\.plan\.(ya?ml|json)$|\.rewoo$", re.I)  # a file that says it is a plan (a ReWOO text: .rewoo)
FOLDER = re.compile(r"(^|[/\\])(plans?|examples)[/\\]", re.I)  # where plans live: readier for a broken one
# a line's own blanks only, taken whole (possessive): `\s*` here spanned lines, and two of them around `{?` split
# a run of blank lines every way, at every line's start (5,000 blank lines: 72 s; issue 61)
_TOP_STEPS = re.compile(r'^(steps|calls)[ \t]*+:|^[ \t]*+\{?[ \t]*+"(steps|calls)"[ \t]*+:', re.M)
MODELINE = re.compile(r"\$schema[\"']?\s*[=:]\s*[\"']?[^\s\"']*plan\.schema\.json")
STEP_KEYS = ("tool", "llm", "gate", "plan", "loop", "agent", "_tool")
_JSON_TOP = re.compile(r'"(dagplan|steps|calls)"\s*:')
_JSON_STEP = re.compile(r'"(%s)"\s*:' % "|".join(STEP_KEYS))
_YAML_TOP = re.compile(r"(steps|calls)\s*:\s*(#.*)?$")
_YAML_ITEM = re.compile(r"( *)-( +)(.*)$")
_YAML_KEY = re.compile(r"([ \t]*)(?:-[ \t]+)?([\"']?)(%s)\2\s*:" % "|".join(STEP_KEYS))
_DOCUMENT_START = re.compile(r"^---(?=\s|$).*$", re.M)
HEAD = 2048  # characters a modeline or a `dagplan:` key is looked for in


def is_ours(text: str, name: str = "") -> bool:
    """Whether a file is dagplan's to check: a plan, or a plan test file (``*.test.yaml``). What
    ``check --plans-only`` keeps and the language server answers for; any other YAML or JSON is left alone."""
    from .load import is_test_file

    return bool(name and is_test_file(name)) or is_plan(text, name)


def is_plan(text: str, name: str = "") -> bool:
    """Whether ``text`` (the file ``name``) is a dagplan plan (see the module doc)."""
    if name and NAMED.search(name.replace("\\", "/")):
        return True
    head = text[:HEAD]
    if MODELINE.search(head) or re.search(r"^dagplan\s*:", head, re.M):
        return True
    if "steps" not in text and "_tool" not in text and "calls" not in text:
        return False  # the common case of a file that is no plan: no parse
    ready = bool(name and FOLDER.search(name.replace("\\", "/")))
    if text.lstrip().startswith(("{", "[")):
        return _judged(text, name, _json_text_says_plan, ready)
    return any(_judged(document, name, _yaml_text_says_plan, ready) for document in _documents(text))


def _judged(text: str, name: str, by_text: Any, ready: bool = False) -> bool:
    """By the loader's reading of ``text`` when it loads, else by its text; ``ready`` (a plans folder): a
    top-level ``steps`` / ``calls`` is enough, whatever its items hold (a plan being written)."""
    from .errors import DagplanError
    from .load import load_text

    try:
        data = load_text(text, name or "<text>").data
    except DagplanError:
        return by_text(text) or (ready and _TOP_STEPS.search(text) is not None)
    if ready and isinstance(data, dict) and isinstance(data.get("steps", data.get("calls")), list):
        return True
    return shaped_like_a_plan(data)


def _documents(text: str) -> list[str]:
    """The YAML documents of a file (one unless a ``---`` line follows content), each with the lines
    before it kept blank, so that positions stay the file's."""
    starts = [m.start() for m in _DOCUMENT_START.finditer(text) if text[: m.start()].strip()]
    if not starts:
        return [text]
    bounds = [0, *starts, len(text)]
    return ["\n" * text.count("\n", 0, a) + text[a:b] for a, b in zip(bounds, bounds[1:])]


def _json_text_says_plan(text: str) -> bool:
    return bool(_JSON_TOP.search(text) and _JSON_STEP.search(text))


def _yaml_text_says_plan(text: str) -> bool:
    """A top-level ``steps:`` / ``calls:`` whose items carry a step key at their own keys' column."""
    lines = text.split("\n")
    for at, line in enumerate(lines):
        if _YAML_TOP.match(line) and _step_key_in_items(lines[at + 1 :]):
            return True
    return False


def _step_key_in_items(lines: list[str]) -> bool:
    column = None  # where an item's keys stand: the column after its `- `
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace() and not line.startswith("-"):
            return False  # the next top-level key: the list ended
        item = _YAML_ITEM.match(line)
        if column is None:
            if item is None:
                return False
            column = len(item.group(1)) + 1 + len(item.group(2))
        key = _YAML_KEY.match(line)
        if key is not None and ("\t" in key.group(1) or _key_column(line, key) == column):
            return True  # a tab in its indentation (YAML refuses it): the author meant the step's key
    return False


def _key_column(line: str, key: Any) -> int:
    return key.start(2) if key.group(2) else key.start(3)


def shaped_like_a_plan(data: Any) -> bool:
    if isinstance(data, list):
        return bool(data) and all(isinstance(c, dict) and "_tool" in c for c in data)
    if not isinstance(data, dict):
        return False
    if "dagplan" in data:
        return True
    steps = data.get("steps") if isinstance(data.get("steps"), list) else data.get("calls")
    if not isinstance(steps, list):
        return False
    if steps and all(isinstance(s, dict) and "_tool" in s for s in steps):
        return True
    # a step names what it does (an id is required, but a missing one is an error to report, not a reason
    # to look away); `tools` (the plan-tool dialect) with an id or a description beside it
    return any(isinstance(s, dict) and (any(k in s for k in STEP_KEYS)
                                        or ("tools" in s and ("id" in s or "description" in s)))
               for s in steps)  # fmt: skip
