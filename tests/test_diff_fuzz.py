"""``dagplan diff`` held to its two promises over the whole language: plans that differ only in form (dialect,
key order, quoting, the spelling of references) are the same plan, and a change of any key the plan schema
has shows. The table of changes below must name every key of the schema: a key added to the language
without a way to see it change fails here."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from dagplan import api

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "schemas" / "plan.schema.json").read_text())
TOOLS = str(ROOT / "examples" / "tools.py")

BASE_STEP = {"id": "s", "tool": "checkBillingHistory", "args": {"customerId": "c"}, "output": "†state.h"}
LLM_STEP = {"id": "s", "llm": "Say hi", "output": "†state.h"}
GATE_STEP = {"id": "s", "gate": {"question": "ok?"}}
SUB = {"steps": [{"id": "in", "tool": "checkBillingHistory", "args": {"customerId": "c"}, "output": "†state.x"}],
       "result": "†state.x"}  # fmt: skip
PLAN_STEP = {"id": "s", "plan": SUB, "output": "†state.h"}
FAN_STEP = {**BASE_STEP, "args": {"customerId": "†item"}, "for_each": ["a", "b"]}
LOOP_STEP = {"id": "s", "loop": {"plan": SUB, "until": "†result.orders", "max_iterations": 3}, "output": "†state.h"}

# key -> (the step before, the step after): each pair differs in that key only
STEP_CHANGES = {
    "description": (BASE_STEP, {**BASE_STEP, "description": "look it up"}),
    "when": (BASE_STEP, {**BASE_STEP, "when": "†input.go == true"}),
    "tool": (BASE_STEP, {**BASE_STEP, "tool": "ciStatus", "args": {"commit": "c"}}),
    "llm": (LLM_STEP, {**LLM_STEP, "llm": "Say bye"}),
    "system": (LLM_STEP, {**LLM_STEP, "system": "Be brief."}),
    "model": (LLM_STEP, {**LLM_STEP, "model": "openai/gpt-4o"}),
    "params": (LLM_STEP, {**LLM_STEP, "params": {"temperature": 0.5}}),
    "tools": (LLM_STEP, {**LLM_STEP, "tools": ["issueRefund"]}),
    "output_schema": (LLM_STEP, {**LLM_STEP, "output_schema": {"type": "object"}}),
    "max_iterations": ({**LLM_STEP, "tools": ["notify"]}, {**LLM_STEP, "tools": ["notify"], "max_iterations": 9}),
    "args": (BASE_STEP, {**BASE_STEP, "args": {"customerId": "d"}}),
    "deps": ([BASE_STEP, {"id": "t", "tool": "notify", "args": {"message": "x"}}],
             [BASE_STEP, {"id": "t", "tool": "notify", "args": {"message": "x"}, "deps": ["s"]}]),
    "output": (BASE_STEP, {**BASE_STEP, "output": "†state.other"}),
    "retry": (BASE_STEP, {**BASE_STEP, "retry": {"limit": 5}}),
    "catch": (BASE_STEP, {**BASE_STEP, "output": "†state.h || †state.e",
                          "catch": [{"errors": ["ValueError"], "output": "†state.e"}]}),
    "timeout": (BASE_STEP, {**BASE_STEP, "timeout": "30s"}),
    "trigger": (BASE_STEP, {**BASE_STEP, "trigger": "all_done"}),
    "purity": (BASE_STEP, {**BASE_STEP, "purity": "side_effect"}),
    "precomputed": (BASE_STEP, {**BASE_STEP, "precomputed": {"orders": 1}}),
    "plan": (PLAN_STEP, {**PLAN_STEP, "plan": {**SUB, "steps": [{**SUB["steps"][0], "args": {"customerId": "z"}}]}}),
    "loop": (LOOP_STEP, {**LOOP_STEP, "loop": {**LOOP_STEP["loop"], "max_iterations": 5}}),
    "gate": (GATE_STEP, {"id": "s", "gate": {"question": "really?"}}),
    "for_each": (FAN_STEP, {**FAN_STEP, "for_each": ["a", "b", "c"]}),
    "as": (FAN_STEP, {**FAN_STEP, "as": "who"}),
    "max_items": (FAN_STEP, {**FAN_STEP, "max_items": 1}),
    "max_concurrency": (FAN_STEP, {**FAN_STEP, "max_concurrency": 1}),
}  # fmt: skip
STEP_FORM = {"id"}  # a step's id is how steps are matched: a changed id is a rename, tested in test_diff

PLAN_CHANGES = {
    "summary": ("a", "b"),
    "mode": ("eager", "lazy"),
    "inputs": ({"go": {"type": "boolean", "default": True}}, {"go": {"type": "boolean", "default": False}}),
    "state": ({"type": "object"}, {"type": "object", "properties": {"h": {"type": "object"}}}),
    "initial_state": ({"n": 1}, {"n": 2}),
    "on_failure": ("abort", "continue"),
    "timeout": ("1m", "1h"),
    "max_cost": (0.1, 500),
    "max_tokens": (1000, 900000),
    "executor": ("local", "ray"),
    "result": ("†state.h", "†state.h.orders"),
}
PLAN_FORM = {"dagplan", "steps", "parallel_groups"}  # the format version (one value); steps: above; groups: a dialect


def _diff(tmp_path: Path, before: dict, after: dict) -> dict:
    (tmp_path / "a.json").write_text(json.dumps(before))
    (tmp_path / "b.json").write_text(json.dumps(after))
    return api.diff(tmp_path / "a.json", tmp_path / "b.json", [TOOLS]).to_json()


def _plan(steps, **keys) -> dict:
    listed = steps if isinstance(steps, list) else [steps]
    return {"inputs": {"go": {"type": "boolean", "default": True}}, **keys, "steps": listed}


def test_the_tables_name_every_key_of_the_schema():
    assert set(SCHEMA["$defs"]["step"]["properties"]) == set(STEP_CHANGES) | STEP_FORM
    assert set(SCHEMA["properties"]) == set(PLAN_CHANGES) | PLAN_FORM


@pytest.mark.parametrize("key", sorted(STEP_CHANGES))
def test_a_change_of_any_step_key_shows(tmp_path, key):
    before, after = STEP_CHANGES[key]
    found = _diff(tmp_path, _plan(before), _plan(after))
    assert not found["same"], (key, found)
    assert found["changed"] or found["edges_added"] or found["edges_removed"] or found["added"], (key, found)


@pytest.mark.parametrize("key", sorted(PLAN_CHANGES))
def test_a_change_of_any_plan_key_shows(tmp_path, key):
    before, after = PLAN_CHANGES[key]
    extra = {"inputs": before} if key == "inputs" else {key: before}
    changed = {"inputs": after} if key == "inputs" else {key: after}
    found = _diff(tmp_path, _plan(BASE_STEP, **extra), _plan(BASE_STEP, **changed))
    assert not found["same"] and key in found["plan"], (key, found)


def _shuffled(value, rng: random.Random):
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def _respelled(value):
    """References in the other sigil (`$state` for `†state`): the same reference."""
    if isinstance(value, dict):
        return {k: _respelled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_respelled(v) for v in value]
    if isinstance(value, str):
        return value.replace("\u2020state.", "$state.").replace("\u2020input.", "$input.")
    return value


EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if not p.name.endswith(".test.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_plans_that_differ_only_in_form_are_the_same_plan(tmp_path, path):
    """Each example against its own JSON form with every mapping's keys shuffled (seeded), and with its
    references spelled with the other sigil: the same plan, every time."""
    rng = random.Random(path.name)
    data = yaml.safe_load(path.read_text())
    for name in ("parts", "tools.py"):
        source = ROOT / "examples" / name
        if source.exists():
            target = tmp_path / name
            if source.is_dir():
                import shutil

                shutil.copytree(source, target)
    (tmp_path / path.name).write_text(path.read_text())
    for number in range(4):
        form = _shuffled(data, rng) if number % 2 == 0 else _respelled(_shuffled(data, rng))
        (tmp_path / f"form{number}.json").write_text(json.dumps(form, ensure_ascii=bool(number % 3)))
        found = api.diff(tmp_path / path.name, tmp_path / f"form{number}.json", [TOOLS]).to_json()
        assert found["same"], (path.name, number, found)
