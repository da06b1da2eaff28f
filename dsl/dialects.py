"""The forms LLMs are usually asked to emit -> the canonical document.

Four dialects of JSON or YAML are accepted (issue 2, "Dialects"), and ReWOO's text (:mod:`.rewoo`):

* ``canonical``: ``{steps: [{id, tool | llm, args, output, ...}], ...}``;
* ``calls`` (seed 004): ``[{"_tool", <args>, "_outputPath", "_output"?}]`` or
  ``{"calls": [...], "output": ..., "mode": ...}``; ids ``E1``, ``E2``... in array order
  (or a call's own ``_id``), ``_output`` -> ``precomputed``, the object's non-null
  ``output`` -> ``x-output``;
* ``steps`` (seed 003): ``{"task_summary", "steps": [{"id", "agent", "task", "deps"}],
  "parallel_groups"}``; a step calls the tool ``agent`` names with ``{task: <text>}``;
* ``plan-tool`` (seed 000): ``{"goal", "steps": [{"id", "description", "tools", "depends_on"}]}``;
  a step is an LLM step whose instruction is its description.

Normalizing only renames and moves; it never judges (the schema and the validator
do). Each dialect keeps a path mapping so a diagnostic on a canonical path
(``steps[1].args.task``) is shown at the original place (``steps[1].task``).
"""

from __future__ import annotations

from .record import record
from typing import Any, Callable

from .errors import Diagnostic, DocPath, LoadError, Span, error

DIALECTS = ("canonical", "calls", "steps", "plan-tool", "rewoo")
ACCEPTED = (
    "a canonical plan {steps: [{id, tool|llm, args, output}]}; "
    'a calls list [{"_tool": ..., "_outputPath": ...}] or {"calls": [...]}; '
    'a steps plan {"task_summary", "steps": [{"id", "agent", "task", "deps"}]}; '
    'a plan-tool plan {"goal", "steps": [{"id", "description", "tools", "depends_on"}]}; '
    "ReWOO lines #E1 = Tool[arguments]"
)


_CANONICAL_KEYS = frozenset({"dagplan", "steps", "summary", "mode", "inputs", "initial_state", "on_failure", "result"})


@record(frozen=True)
class Normalized:
    """A document of an accepted dialect as a dagplan plan, with the way back to the original's paths."""

    data: Any
    dialect: str
    to_original: Callable[[DocPath], DocPath]
    warnings: tuple[Diagnostic, ...] = ()


def unknown_dialect(span: Span, found: str | None = None) -> Diagnostic:
    what = f"a {found}" if found else "a document of another shape"
    return error("unknown-dialect", f"this is {what}, not a plan", span, f"accepted forms: {ACCEPTED}")


def detect(data: Any) -> str | None:
    """The dialect of parsed data, or None when it is none of them."""
    if isinstance(data, list):
        return "calls" if data and all(isinstance(c, dict) and "_tool" in c for c in data) else None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("calls"), list) and "steps" not in data:
        return "calls"
    steps = data.get("steps")
    items = [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []
    canonical_steps = any("tool" in s or "llm" in s for s in items)
    if "task_summary" in data or (items and not canonical_steps and any("agent" in s for s in items)):
        return "steps"
    if "goal" in data or (items and not canonical_steps and any("depends_on" in s for s in items)):
        return "plan-tool"
    if not _CANONICAL_KEYS.isdisjoint(data):
        return "canonical"  # the schema says what is missing
    return None


def normalize(data: Any, name: str = "<string>") -> Normalized:
    """Parsed data -> canonical data. Raises ``LoadError`` (``unknown-dialect``)."""
    dialect = detect(data)
    if dialect is None:
        kinds: dict[type, str] = {dict: "mapping without `steps`", list: "list that is not a list of calls"}
        found = kinds.get(type(data))
        raise LoadError(unknown_dialect(Span(name), found or type(data).__name__))
    return _NORMALIZERS[dialect](data)


def _canonical(data: dict) -> Normalized:
    return Normalized(data, "canonical", _same)


def _same(path: DocPath) -> DocPath:
    return path


# --- path mapping ---------------------------------------------------------------------


def _mapper(
    top: dict[str, DocPath], step_base: DocPath, step_rules: dict[DocPath, DocPath]
) -> Callable[[DocPath], DocPath]:
    """canonical path -> original path: a rule for the top-level key, the longest
    matching rule inside a step; the rest of the path is kept."""

    def to_original(path: DocPath) -> DocPath:
        if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
            rest = path[2:]
            for n in range(len(rest), 0, -1):
                if rest[:n] in step_rules:
                    return step_base + (path[1],) + step_rules[rest[:n]] + rest[n:]
            return step_base + path[1:]
        head = path[0] if path else None
        if isinstance(head, str) and head in top:
            return top[head] + path[1:]
        return path

    return to_original


def _steps_of(data: dict, key: str = "steps") -> list:
    steps = data.get(key)
    return steps if isinstance(steps, list) else []


def _rest(item: dict, taken: set[str]) -> dict:
    return {k: v for k, v in item.items() if k not in taken}


# --- calls (seed 004) -----------------------------------------------------------------------

_CALL_META = {
    "_id": "id",
    "_tool": "tool",
    "_description": "description",
    "_deps": "deps",
    "_outputPath": "output",
    "_output": "precomputed",
    "_retry": "retry",
    "_timeout": "timeout",
    "_purity": "purity",
}
_CALL_RULES: dict[DocPath, DocPath] = {(canon,): (meta,) for meta, canon in _CALL_META.items()}
_CALL_RULES[("args",)] = ()


def _calls(data: Any) -> Normalized:
    is_list = isinstance(data, list)
    calls = data if is_list else data["calls"]
    out: dict[str, Any] = {} if is_list else _calls_top(data)
    out["steps"] = [_call_step(call, i) for i, call in enumerate(calls)]
    base: DocPath = () if is_list else ("calls",)
    top = {"steps": base, "x-output": ("output",)}
    return Normalized(out, "calls", _mapper(top, base, _CALL_RULES))


def _calls_top(data: dict) -> dict:
    out = {k: v for k, v in data.items() if k not in ("calls", "output")}
    if data.get("output") is not None:
        out["x-output"] = data["output"]
    return out


def _call_step(call: Any, i: int) -> Any:
    if not isinstance(call, dict):
        return call  # the schema reports it where it is
    step: dict[str, Any] = {"id": f"E{i + 1}"}
    args = {}
    for key, value in call.items():
        if key in _CALL_META:
            step[_CALL_META[key]] = value
        else:
            args[key] = value
    step["args"] = args
    return step


# --- steps (seed 003) -------------------------------------------------------------------------


def _steps(data: dict) -> Normalized:
    out: dict[str, Any] = {}
    if "task_summary" in data:
        out["summary"] = data["task_summary"]
    out.update(_rest(data, {"task_summary", "steps"}))
    out["steps"] = [_steps_step(s) for s in _steps_of(data)]
    rules: dict[DocPath, DocPath] = {("tool",): ("agent",), ("args", "task"): ("task",), ("args",): ("task",)}
    return Normalized(_ordered(out), "steps", _mapper({"summary": ("task_summary",)}, ("steps",), rules))


def _steps_step(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    step: dict[str, Any] = {"id": item.get("id")} if "id" in item else {}
    if "agent" in item:
        step["tool"] = item["agent"]
    if "task" in item:
        step["args"] = {"task": item["task"]}
    step.update(_rest(item, {"id", "agent", "task"}))
    return step


# --- plan-tool (seed 000) ---------------------------------------------------------------------


def _plan_tool(data: dict) -> Normalized:
    out: dict[str, Any] = {}
    if "goal" in data:
        out["summary"] = data["goal"]
    out.update(_rest(data, {"goal", "steps"}))
    out["steps"] = [_plan_tool_step(s) for s in _steps_of(data)]
    rules: dict[DocPath, DocPath] = {("llm",): ("description",), ("deps",): ("depends_on",)}
    return Normalized(_ordered(out), "plan-tool", _mapper({"summary": ("goal",)}, ("steps",), rules))


def _plan_tool_step(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    step: dict[str, Any] = {"id": item.get("id")} if "id" in item else {}
    if "description" in item:
        step["description"] = item["description"]
        step["llm"] = item["description"]
    if "tools" in item:
        step["tools"] = item["tools"]
    if "depends_on" in item:
        step["deps"] = item["depends_on"]
    step.update(_rest(item, {"id", "description", "tools", "depends_on"}))
    return step


def _ordered(out: dict) -> dict:
    """summary first, steps next, the rest after (only cosmetic: fmt orders anyway)."""
    head = {k: out[k] for k in ("summary", "steps") if k in out}
    return head | {k: v for k, v in out.items() if k not in head}


_NORMALIZERS: dict[str, Callable[[Any], Normalized]] = {
    "canonical": _canonical,
    "calls": _calls,
    "steps": _steps,
    "plan-tool": _plan_tool,
}
