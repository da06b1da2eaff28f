"""An approval bound to the plan a person approved: what ``dagplan preview PLAN --approve`` writes and
``dagplan run PLAN --approved FILE`` verifies.

An approval holds the plan's canonical document and its hash (the checked document, sub-plans inlined: the
same plan in another dialect, key order or file is the same plan), the hash of the tools it calls (their
catalog entries as a plan sees them, MCP tools from the lock, and the content of the Python files they come
from), the steps that can act on the world, the plan's worst-case cost, who approved it and when. A run
given the approval runs only that plan with those tools; anything else is refused, naming what differs in
``dagplan diff``'s words, and the approval is kept in the run's journal: a resume (CLI, API, a worker)
checks the tools again, and refuses code that changed since. This is how a plan reviewed in a pull
request is the plan CI runs.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping

from ...dsl.errors import PlanInvalid, RunError, Span
from ...dsl.ir import Plan, can_act, walk
from ...dsl.jsontext import loads

FORMAT = 2  # 2: the tools' code identity, and a seal over every field
_HOW = "write it with: dagplan preview PLAN --approve -o FILE"


def _hash(value: Any) -> str:
    from ..core.digest import digest

    return "sha256:" + digest(value)


def _plain(value: Any) -> Any:
    return dict(value) if hasattr(value, "keys") else list(value)


def _document(plan: Plan) -> Any:
    """The plan as data: its checked canonical document (sub-plans inlined), as plain JSON."""
    if plan.document is None:
        raise RunError.make("not-durable", "an approved plan must be loaded from a document",
                            hint="load it with dagplan.load() or give its file")  # fmt: skip
    return json.loads(json.dumps(plan.document, default=_plain))


def tools_used(plan: Plan) -> list[str]:
    """The names of every tool the plan (and the plans it runs) may call, sorted."""
    names = set()
    for _, step in walk(plan):
        if step.tool:
            names.add(step.tool)
        if step.llm is not None:
            names.update(step.llm.tools)
    return sorted(names)


def tools_identity(plan: Plan, tools: Mapping[str, Any]) -> dict[str, Any]:
    """What the plan relies on of its tools: each used tool's catalog entry (parameters, purity, ...) and the
    identity of the code it runs (tools/identity.py: its module's file and the user's modules it uses, a
    tool given by module name alike; an MCP tool's lock entry). A file's path is where it is, not what it does."""
    used = tools_used(plan)
    catalog = {name: _spec(tools[name]).to_json() if name in tools else None for name in used}
    code = {name: getattr(tools[name], "code_identity", None) if name in tools else None for name in used}
    return {"catalog": catalog, "code": code}


def _spec(tool: Any) -> Any:
    return getattr(tool, "spec", tool)  # a Tool, or already its spec


def make(plan: Plan, tools: Mapping[str, Any], *, who: str | None, cost: Any = None) -> dict[str, Any]:
    """The approval of ``plan`` with these tools, by ``who``, now; sealed: every field it carries is under
    one hash (``seal``), so an edit of any of them (who approved it, the steps that act) is refused."""
    document = _document(plan)
    identity = tools_identity(plan, tools)
    specs = {name: _spec(tool) for name, tool in tools.items()}
    approval = {
        "dagplan_approval": FORMAT,
        "plan": os.path.basename(plan.source),
        "plan_hash": _hash(document),
        "tools_hash": _hash(identity),
        "side_effects": [full for full, step in walk(plan) if can_act(step, specs) and not _has_children(step)],
        "worst_case_cost": cost,
        "approved_by": who,
        "approved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "document": document,
        "tools": identity,
    }
    return {**approval, "seal": _hash(approval)}


def _has_children(step: Any) -> bool:
    return step.plan is not None or step.loop is not None


def read(path: str | os.PathLike) -> dict[str, Any]:
    """An approval file, its shape checked; a damaged one is a usage error naming the file."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as handle:
            data = loads(handle.read(16 * 1024 * 1024 + 1))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise RunError.make("bad-approval", f"cannot read the approval {name}: {why}", Span(name), hint=_HOW) from None
    fields = {"dagplan_approval": int, "plan_hash": str, "tools_hash": str, "document": dict, "tools": dict}
    wrong = [k for k, kind in fields.items() if not isinstance(data, dict) or not isinstance(data.get(k), kind)]
    if wrong or data.get("dagplan_approval") != FORMAT:
        raise RunError.make("bad-approval", f"{name} is not a dagplan approval (missing or wrong: {', '.join(wrong)})",
                            Span(name, line=1, col=1), hint=_HOW)  # fmt: skip
    sealed = {k: v for k, v in data.items() if k != "seal"}
    if (_hash(data["document"]) != data["plan_hash"] or _hash(data["tools"]) != data["tools_hash"]
            or data.get("seal") != _hash(sealed)):  # fmt: skip
        raise RunError.make("bad-approval", f"{name} was changed after it was written: its fields (the plan, its "
                            "tools, who approved it, when, the steps that act) do not match its seal",
                            Span(name, line=1, col=1),
                            hint="approve the plan again: dagplan preview PLAN --approve -o FILE")  # fmt: skip
    return data


def differences(approval: Mapping[str, Any], plan: Plan, tools: Mapping[str, Any]) -> list[str]:
    """What differs between the approved plan and tools and these (empty: this is what was approved)."""
    out = []
    if _hash(_document(plan)) != approval["plan_hash"]:
        out += _plan_words(approval, plan, {name: _spec(tool) for name, tool in tools.items()})
    return out + tools_differences(approval, plan, tools)


def tools_differences(approval: Mapping[str, Any], plan: Plan, tools: Mapping[str, Any]) -> list[str]:
    """How these tools differ from the approved ones, tool by tool (empty: the same); what ``run
    --approved`` and the resume of an approved run both say."""
    now = tools_identity(plan, tools)
    if _hash(now) == approval["tools_hash"]:
        return []
    was, out = approval.get("tools") or {}, []
    for name in sorted(set(was.get("catalog", {})) | set(now["catalog"])):
        if was.get("catalog", {}).get(name) != now["catalog"].get(name):
            out.append(f"tool {name} is not the one approved (its parameters, purity or description changed, "
                       "or it is new or gone)")  # fmt: skip
        elif (was.get("code") or {}).get(name) != now["code"].get(name):
            out.append(f"the code of tool {name} changed since the approval (its module, or a module of "
                       "the project it uses)")  # fmt: skip
    return out or ["the tools are not the ones approved"]


def _plan_words(approval: Mapping[str, Any], plan: Plan, specs: Mapping[str, Any]) -> list[str]:
    """The plan's changes in ``dagplan diff``'s terms."""
    from ...dsl import check
    from ...dsl.diff import diff

    approved = check(text=json.dumps(approval["document"]), name=str(approval.get("plan") or "approved plan"),
                     tools=specs or None)  # fmt: skip
    if approved.plan is None:
        return ["the plan is not the one approved"]
    found = diff(approved.plan, plan, specs)
    if found.same:
        return []  # the same plan in another form (dialect, spelling, key order)
    words = [f"a step that acts on the world was added: {s}" for s in found.side_effects_added]
    words += [f"step added: {s}" for s in found.added if s not in found.side_effects_added]
    words += [f"step removed: {s}" for s in found.removed]
    words += [f"step renamed: {a} -> {b}" for a, b in found.renamed]
    words += [f"step {s} changed: {', '.join(fields)}" for s, fields in found.changed.items()]
    words += [f"the plan's {key} changed" for key in found.plan_changed]
    words += [f"new order: {a} before {b}" for a, b in found.edges_added]
    return words or ["the plan is not the one approved"]


# --- a person's gate before what acts -----------------------------------------------------------

ACTING_GATE = "approve_side_effects"


def acting_gated(plan: Plan, tools: Mapping[str, Any]) -> Plan:
    """The plan with a gate only a person answers before every step that can act on the world (the one
    purity rule), or as given when none can: how a plan a client's model wrote runs from ``dagplan mcp``.
    The gate's id is one the plan does not use. A refusal holds every step it guards back, whatever the plan
    says of failures or triggers (engine/world.py). A run started so records it (the ``gate_acting``
    option), so a resume of a streamed run whose plan was not written yet gates it the same way."""
    from ...dsl import check

    specs = {name: getattr(tool, "spec", tool) for name, tool in tools.items()}
    acting = [s.id for s in plan.steps if can_act(s, specs)]
    if not acting:
        return plan
    taken = {s.id for s in plan.steps}
    gate_id = next(g for g in (ACTING_GATE, *(f"{ACTING_GATE}_{n}" for n in range(2, len(taken) + 3)))
                   if g not in taken)  # fmt: skip
    document = _document(plan)
    question = f"This plan acts on the world at {', '.join(acting)}. Let it?"
    gate = {"id": gate_id, "gate": {"question": question, "choices": ["approve", "reject"], "answered_by": "person"}}
    for step in document["steps"]:
        if step.get("id") in acting:
            step["deps"] = [*step.get("deps", []), gate_id]
    document["steps"].insert(0, gate)
    checked = check(text=json.dumps(document), name=plan.source, tools=specs)
    if not checked.ok or checked.plan is None:
        raise PlanInvalid(checked.diagnostics)
    return checked.plan
