"""Conformance as data: every example passes `check`; every invalid one fails as its comment says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dagplan.dsl import check

ROOT = Path(__file__).resolve().parent.parent / "examples"
VALID = sorted(p for p in ROOT.glob("*") if p.suffix in (".yaml", ".yml", ".json", ".rewoo") and ".test." not in p.name)
INVALID = sorted(p for p in (ROOT / "invalid").glob("*") if p.suffix in (".yaml", ".yml", ".json"))
EXPECT = re.compile(r"expect: (\d+):(\d+) (error|warning) ([a-z-]+)")


def test_there_are_enough_examples():
    names = {p.name for p in VALID}
    assert {
        "refund.yaml",
        "pet_hotel.yaml",
        "payment.yaml",
        "translate.yaml",
        "weather.yaml",
        "oauth.json",
        "translate.rewoo",
    } <= names
    assert len(INVALID) >= 10


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_example_is_valid(path):
    result = check(path)
    assert result.ok, [d.format() for d in result.diagnostics]
    assert result.analysis is not None


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_example_is_valid_against_its_tools(path):
    tools_py = ROOT / "tools.py"
    from dagplan.interpreter.tools.sources import load_tool_specs

    result = check(path, tools=load_tool_specs([tools_py]))
    assert result.ok, [d.format() for d in result.diagnostics]


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_example_fails_as_written(path):
    head = "\n".join(path.read_text(encoding="utf-8").splitlines()[:3])
    expected = EXPECT.search(head)
    assert expected, f"{path.name} has no `expect:` comment"
    line, col, severity, code = int(expected[1]), int(expected[2]), expected[3], expected[4]
    result = check(path)
    found = [(d.span.line, d.span.col, d.severity, d.code) for d in result.diagnostics]
    assert (line, col, severity, code) in found
    if severity == "error":
        assert not result.ok
        assert found[0] == (line, col, severity, code), "the expected diagnostic must be the headline"
