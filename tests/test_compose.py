"""Composition (issue 6): fan-out over lists, sub-plans, bounded loops, approval gates, static bounds."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import dagplan
from dagplan.dsl import check
from dagplan.dsl.compose import Budget, worst_case
from dagplan.interpreter.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def codes(result) -> list[str]:
    return [d.code for d in result.errors]


class Peak:
    """Counts concurrent calls; ``peak`` is the most seen at once."""

    def __init__(self):
        self.now = self.peak = 0
        self.lock = threading.Lock()

    async def call(self, x):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.002)
        with self.lock:
            self.now -= 1
        return x * 2


FAN_OUT = """\
inputs:
  items: {type: array}
steps:
  - id: double
    for_each: †input.items
    max_items: %(max_items)s
    max_concurrency: 3
    tool: double
    args: {x: †item, at: †index}
    output: †state.doubled
result: †state.doubled
"""


# --- fan-out ----------------------------------------------------------------------------------------


def test_fan_out_of_50_respects_its_concurrency_limit(tmp_path):
    peak = Peak()

    async def double(x: int, at: int) -> int:
        assert at == x  # †index is the item's position
        return await peak.call(x)

    plan = write(tmp_path, "p.yaml", FAN_OUT % {"max_items": 50})
    seen = []
    result = dagplan.run(str(plan), tools={"double": double}, inputs={"items": list(range(50))},
                         subscribers=[seen.append])
    assert result.status == "completed"
    assert result.result == [2 * i for i in range(50)]  # item order, whatever the finishing order
    assert 1 < peak.peak <= 3
    progress = [e for e in seen if e.type == "plan_step_progress"]
    assert len(progress) == 50 and {e.data["total"] for e in progress} == {50}
    assert sorted(e.data["item"] for e in progress) == list(range(1, 51))


def test_more_items_than_max_items_fails_the_step_and_runs_nothing(tmp_path):
    calls = []

    def double(x: int, at: int) -> int:
        calls.append(x)
        return x

    plan = write(tmp_path, "p.yaml", FAN_OUT % {"max_items": 3})
    result = dagplan.run(str(plan), tools={"double": double}, inputs={"items": [1, 2, 3, 4]})
    report = result.steps["double"]
    assert report.status == "failed"
    assert "4 items, more than max_items (3)" in report.error["message"]
    assert calls == []


def test_one_item_failure_fills_its_slot_and_the_others_still_run(tmp_path):
    def double(x: int, at: int) -> int:
        if x == 2:
            raise ValueError("two is bad")
        return x * 2

    plan = write(tmp_path, "p.yaml", FAN_OUT % {"max_items": 10})
    result = dagplan.run(str(plan), tools={"double": double}, inputs={"items": [0, 1, 2, 3]})
    assert result.result[:2] == [0, 2] and result.result[3] == 6
    assert result.result[2] == "(FAILED: ValueError: two is bad)"


def test_item_failure_under_abort_fails_the_step(tmp_path):
    def double(x: int, at: int) -> int:
        if x == 2:
            raise ValueError("two is bad")
        return x

    text = FAN_OUT % {"max_items": 10} + "on_failure: abort\n"
    result = dagplan.run(str(write(tmp_path, "p.yaml", text)), tools={"double": double}, inputs={"items": [1, 2, 3]})
    assert result.status == "aborted"
    assert "item 2 failed: two is bad" in result.steps["double"].error["message"]


def test_for_each_needs_max_items_unless_a_default_cap_is_configured(tmp_path):
    plan = write(tmp_path, "p.yaml", (FAN_OUT % {"max_items": 1}).replace("    max_items: 1\n", ""))
    assert codes(check(plan)) == ["missing-max-items"]
    assert check(plan, budget=Budget(default_max_items=5)).ok


def test_item_reference_outside_for_each_is_an_error(tmp_path):
    plan = write(tmp_path, "p.yaml", """\
        steps:
          - id: a
            tool: t
            args: {x: †item.name}
          - id: b
            for_each: †state.x
            max_items: 2
            tool: t
            args: {}
        """)
    assert "item-outside-for-each" in codes(check(plan))


def test_item_references_parse_in_templates_and_ascii():
    from dagplan.dsl.expr import classify
    from dagplan.dsl.ir import Ref, Template

    assert classify("$item.name") == Ref("item", ("name",))
    assert classify("#†index: †item[0]") == Template(("#", Ref("index", ()), ": ", Ref("item", (0,))))
    assert classify("$items") == "$items"
