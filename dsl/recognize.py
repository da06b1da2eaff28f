"""Which YAML and JSON files are plans: what ``check --plans-only`` (the pre-commit hook) and the language
server check, and what they leave alone (a GitHub workflow, a compose file, ``package.json``).

A file is a plan when any of these says so, in this order:

1. its name: under a ``plans/`` (or ``plan/``) or ``examples/`` folder, or named ``*.plan.yaml``,
   ``*.plan.yml``, ``*.plan.json`` (the documented places: always checked, whatever is in them);
2. its first lines: the editor modeline ``# yaml-language-server: $schema=...plan.schema.json``, or a
   ``"$schema"`` naming ``plan.schema.json``, or a top-level ``dagplan:`` key;
3. its shape: a mapping whose ``steps`` (or ``calls``) list holds at least one step that names a tool, a
   model call, a gate, a sub-plan, a loop or an agent (any accepted dialect), or a list of ``_tool`` calls.

A file that does not load is judged by its text (a top-level ``steps:`` and a step key at the start of a
line): a broken plan is still a plan, and ``check`` then says where it is broken.
"""

from __future__ import annotations

import re
from typing import Any

NAMED = re.compile(r"(^|[/\\])(plans?|examples)[/\\]|\.plan\.(ya?ml|json)$", re.I)
MODELINE = re.compile(r"\$schema[\"']?\s*[=:]\s*[\"']?[^\s\"']*plan\.schema\.json")
TOP_KEY = re.compile(r"^(dagplan|steps|calls)\s*:", re.M)
STEP_KEY = re.compile(r"^\s*(-\s+)?[\"']?(tool|llm|gate|plan|loop|agent|_tool)[\"']?\s*:", re.M)
HEAD = 2048  # characters a modeline or a `dagplan:` key is looked for in


def is_plan(text: str, name: str = "") -> bool:
    """Whether ``text`` (the file ``name``) is a dagplan plan (see the module doc)."""
    if name and NAMED.search(name.replace("\\", "/")):
        return True
    head = text[:HEAD]
    if MODELINE.search(head) or re.search(r"^dagplan\s*:", head, re.M):
        return True
    if "steps" not in text and "_tool" not in text and "calls" not in text:
        return False  # the common case of a file that is no plan: no parse
    from .errors import DagplanError
    from .load import load_text

    try:
        data = load_text(text, name or "<text>").data
    except DagplanError:
        return bool(TOP_KEY.search(text) and STEP_KEY.search(text))
    return shaped_like_a_plan(data)


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
    marked = ("tool", "llm", "gate", "plan", "loop", "agent", "tools")  # `tools`: the plan-tool dialect
    return any(isinstance(s, dict) and "id" in s and any(k in s for k in marked) for s in steps)
