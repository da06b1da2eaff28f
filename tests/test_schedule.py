"""Dependencies, stable topological order, parallel groups, writers."""

from __future__ import annotations

from dagplan.dsl.ir import Ref
from dagplan.dsl.parse import parse_document
from dagplan.dsl.schedule import analyze, natural_key, writers_of
import dagplan
import json


def plan_of(steps, **extra):
    plan, diags = parse_document({"steps": steps, **extra}, "p.yaml")
    assert not diags, diags
    return plan


def test_natural_key_orders_numbers_by_value():
    ids = ["E10", "E2", "E1", "a", "E2b"]
    assert sorted(ids, key=natural_key) == ["E1", "E2", "E2b", "E10", "a"]


def test_order_is_stable_with_natural_ties():
    steps = [{"id": f"E{i}", "tool": "t"} for i in (10, 2, 1, 3)]
    a = analyze(plan_of(steps))
    assert a.order == ("E1", "E2", "E3", "E10")
    assert a.groups == (("E1", "E2", "E3", "E10"),)


def test_deps_combine_explicit_dataflow_and_placeholders():
    steps = [
        {"id": "a", "tool": "t", "output": "†state.x.y"},
        {"id": "b", "tool": "t"},
        {"id": "c", "llm": "see #b", "deps": ["a"]},
        {"id": "d", "tool": "t", "args": {"v": "†state.x", "w": ["#c"]}},
    ]
    a = analyze(plan_of(steps))
    assert a.deps == {"a": (), "b": (), "c": ("a", "b"), "d": ("a", "c")}
    assert a.dependents["a"] == ("c", "d")
    assert a.groups == (("a", "b"), ("c",), ("d",))
    assert a.order == ("a", "b", "c", "d")


def test_groups_place_each_step_after_its_deepest_dependency():
    steps = [
        {"id": "root", "tool": "t", "output": "†state.r"},
        {"id": "mid", "tool": "t", "args": {"x": "†state.r"}, "output": "†state.m"},
        {"id": "late", "tool": "t", "args": {"x": "†state.r", "y": "†state.m"}},
        {"id": "free", "tool": "t"},
    ]
    a = analyze(plan_of(steps))
    assert a.groups == (("free", "root"), ("mid",), ("late",))


def test_writers_index_and_overlap_either_way():
    steps = [
        {"id": "w", "tool": "t", "output": "†state.ok || †state.err"},
        {"id": "deep", "tool": "t", "output": "†state.user.name"},
    ]
    a = analyze(plan_of(steps))
    assert a.writers[("state", "ok")] == (("w", 0),)
    assert a.writers[("state", "err")] == (("w", 1),)
    assert writers_of(a, Ref("state", ("user",))) == (("deep", 0),)
    assert writers_of(a, Ref("state", ("user", "name", "first"))) == (("deep", 0),)
    assert writers_of(a, Ref("state", ("other",))) == ()


def test_large_chain_is_linear_enough():
    steps = [{"id": "s0", "tool": "t", "output": "†state.v0"}]
    steps += [
        {"id": f"s{i}", "tool": "t", "args": {"x": f"†state.v{i - 1}"}, "output": f"†state.v{i}"}
        for i in range(1, 3000)
    ]
    a = analyze(plan_of(steps))
    assert a.order[-1] == "s2999" and len(a.groups) == 3000


def test_a_step_id_with_thousands_of_digits_sorts_without_converting(tmp_path):
    long_id = "E" + "1" * 5000
    doc = {"task_summary": "x", "steps": [{"id": "E1", "agent": "t", "task": "x", "deps": []}],
           "parallel_groups": [["E1", long_id]]}  # fmt: skip
    (tmp_path / "p.json").write_text(json.dumps(doc))
    result = dagplan.check(str(tmp_path / "p.json"))
    assert result.ok and [d.code for d in result.diagnostics] == ["parallel-groups-mismatch"]
    from dagplan.dsl.schedule import natural_key

    ids = ["E10", "E2", long_id, "E1" + "0" * 4400]
    assert sorted(ids, key=natural_key) == ["E2", "E10", "E1" + "0" * 4400, long_id]
