"""Matchers of plan tests on hostile test files: $regex matches in linear time, a matcher's argument that
cannot work is a diagnostic of `check` at its line, never a silent pass or a traceback."""

from __future__ import annotations

import pytest

import dagplan
from dagplan.interpreter.testing.expect import argument_problem, mismatches

PLAN = "steps:\n  - {id: a, tool: echo, args: {x: †input.x}, output: †state.a}\nresult: †state.a\ninputs: {x: {type: string}}\n"
TOOLS = "import dagplan\n@dagplan.tool\ndef echo(x: str) -> str:\n    return x\n"


def test_a_backtracking_pattern_is_matched_in_linear_time():
    text = "a" * 54 + "!"
    assert mismatches({"$regex": "^(a+)+$"}, text)  # a mismatch, found at once (re would take hours)
    assert mismatches({"$regex": "^(a+)+!$"}, text) == []


@pytest.mark.parametrize(
    "name, arg, words",
    [
        ("$regex", "(", "invalid regular expression"),
        ("$regex", "a{99999999999}", "invalid regular expression"),
        ("$regex", r"(a)\1", "linear time"),
        ("$regex", "(?=a)a", "linear time"),
        ("$regex", 3, "takes a string"),
        ("$len", "3", "whole number"),
        ("$len", True, "whole number"),
        ("$len", -1, "whole number"),
        ("$any", False, "takes true"),
        ("$type", "strng", "unknown $type"),
    ],
)
def test_arguments_that_cannot_work_are_problems(name, arg, words):
    problem = argument_problem(name, arg)
    assert problem is not None and words in problem[0], problem
    assert mismatches({name: arg}, "abc")  # and never a silent pass at run time


def test_they_are_diagnostics_of_check_and_test_at_their_line(tmp_path):
    (tmp_path / "p.yaml").write_text(PLAN)
    (tmp_path / "t.py").write_text(TOOLS)
    (tmp_path / "p.test.yaml").write_text(
        "plan: p.yaml\ntools: [t.py]\ncases:\n  - name: x\n    inputs: {x: hi}\n    mocks: {tools: {echo: {result: hi}}}\n"
        '    expect:\n      result: {$type: strng}\n      state: {a: {$len: "2"}}\n'
    )
    (result,) = dagplan.check_files([str(tmp_path / "p.test.yaml")])
    found = sorted((d.span.line, d.message) for d in result.errors)
    assert [line for line, _ in found] == [8, 9], found
    assert "did you mean 'string'?" in {d.hint for d in result.errors}


ERRORS = """\
import dagplan


@dagplan.tool
def decode() -> str:
    return b"\\xff".decode("utf-8")


@dagplan.tool
def lookup() -> str:
    return {}["zz"]


@dagplan.tool
def pair(a: dict, b: dict) -> list:
    return [a, b]
"""
ROUTED = """\
steps:
  - id: d
    tool: decode
    retry: {limit: 1}
    output: †state.text || †state.bad
    catch: [{errors: [UnicodeDecodeError], output: †state.bad}]
  - id: k
    tool: lookup
    retry: {limit: 1}
    output: †state.key || †state.missing
    catch: [{errors: [KeyError], output: †state.missing}]
  - {id: both, tool: pair, args: {a: †state.bad, b: †state.missing}, output: †state.both}
result: †state.both
"""


def test_a_replayed_error_has_its_own_type_and_message(tmp_path):
    """UnicodeDecodeError replays as UnicodeDecodeError (the same catch route), KeyError's message unchanged."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "t.py").write_text(ERRORS)
    (tmp_path / "p.yaml").write_text(ROUTED)
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "s"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def run(*more):
        proc = subprocess.run([sys.executable, "-m", "dagplan", "run", "p.yaml", "--tools", "t.py", "--format", "json",
                               *more], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        return json.loads(proc.stdout)["result"]

    recorded = run("--record", "c.json")
    replayed = run("--replay", "c.json")
    assert recorded is not None
    assert recorded == replayed
    assert [r["type"] for r in replayed] == ["UnicodeDecodeError", "KeyError"] and replayed[1]["message"] == "'zz'"
