"""The four defects of the contract issue, each as a user met it: a verdict that depends on a reporting flag,
a depth limit that depends on the installed YAML parser, a traceback on a control character in a quoted key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dagplan
from dagplan.dsl import load
from dagplan.dsl.errors import LoadError

ROOT = Path(__file__).resolve().parent.parent


def _verdicts(report) -> dict[str, list[str]]:
    return {f"{r.suite.path}::{r.name}": [f.message for f in r.failures] for r in report.results}


def test_a_case_has_one_verdict_with_and_without_coverage(monkeypatch):
    monkeypatch.chdir(ROOT)
    plain = dagplan.test(["examples"], coverage=False)
    covered = dagplan.test(["examples"], coverage=True)
    assert _verdicts(plain) == _verdicts(covered)
    assert plain.failed == 0 and plain.passed >= 21, _verdicts(plain)


def test_the_pytest_plugin_passes_the_examples(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "examples"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert proc.stdout.split()[0].count(".") >= 21, proc.stdout  # one dot a case, no F


def test_model_calls_are_counted_at_the_seam_without_events(tmp_path):
    """`calls: {confirm: 1}` counts the model calls the mock answered, whatever events the run keeps."""
    (tmp_path / "p.yaml").write_text("steps:\n  - id: confirm\n    llm: say hi\n    model: openai/x\n")
    (tmp_path / "p.test.yaml").write_text(
        "plan: p.yaml\ncases:\n  - name: one call\n    mocks: {llm: {confirm: {text: hi}}}\n"
        "    expect: {calls: {confirm: 1}, result: hi}\n"
    )
    for coverage in (False, True):
        report = dagplan.test([str(tmp_path)], coverage=coverage)
        assert (report.passed, report.failed) == (1, 0), _verdicts(report)


@pytest.mark.parametrize(
    "parser_error",
    ["exceeded maximum nesting depth", "while parsing a flow sequence: expected ',' or ']'"],
)
def test_too_deep_is_ours_whatever_the_parser_says(monkeypatch, parser_error):
    """A parser with a nesting limit of its own (PyYAML 6.0.4 has one) refuses the text first: still too-deep."""
    from dagplan.dsl import yaml_reader

    def refusing(text):
        raise ValueError(parser_error)

    monkeypatch.setattr(yaml_reader, "_events", refusing)
    with pytest.raises(LoadError) as info:
        load.load_text("steps: " + "[" * 5000, "deep.yaml")
    assert info.value.code == "too-deep"
    assert (info.value.span.line, info.value.span.col) == (1, 8 + 64)
    with pytest.raises(LoadError) as shallow:
        load.load_text("steps: [[a]", "shallow.yaml")
    assert shallow.value.code == "yaml-syntax"


def test_brackets_inside_quotes_and_comments_do_not_count_as_nesting(monkeypatch):
    from dagplan.dsl.yaml_reader import _flow_too_deep

    assert _flow_too_deep("a: '" + "[" * 100 + "'\n# " + "{" * 100 + "\nb: [x]", 64) is None
    assert _flow_too_deep('a: "' + "[" * 100 + '"', 64) is None
    mark = _flow_too_deep("a: " + "[" * 70, 64)
    assert mark is not None and (mark.line, mark.column) == (0, 3 + 64)


@pytest.mark.parametrize(
    "expression, column",
    [
        ('†state["\t"] == 1', 7),  # a raw tab in a quoted key (0-based: the opening quote)
        ('†state["\x01x"] == 1', 7),
        ('†state["\ud800"] == 1', 7),  # a lone surrogate
        ('†state["\\ud800"] == 1', 7),  # an escaped lone surrogate
        ('†state["\\q"] == 1', 7),  # an escape JSON does not have
        ("†state.a == 'x\ty'", 12),  # a raw tab in a string literal
    ],
)
def test_bad_characters_in_quoted_keys_are_diagnostics_at_their_column(expression, column, tmp_path):
    import json

    path = tmp_path / "p.json"
    plan = {"steps": [{"id": "a", "tool": "t", "when": expression}]}
    path.write_text(json.dumps(plan), encoding="utf-8", errors="surrogatepass")
    result = dagplan.check(str(path))
    (diag,) = result.errors
    assert diag.code == "bad-condition", diag
    assert "JSON escapes only" in (diag.hint or "")
    assert diag.span.line == 1 and diag.span.col > 0
    assert diag.span.offset == column, diag.span


@pytest.mark.parametrize("text", ['†state["\t"]', 'x †state["\x07"] y', '†state["\\ud800"] || †state.b'])
def test_bad_characters_in_argument_references_are_syntax_diagnostics(text, tmp_path):
    import json

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"steps": [{"id": "a", "tool": "t", "args": {"x": text}}]}), encoding="utf-8")
    (diag,) = dagplan.check(str(path)).errors
    assert diag.code == "syntax" and "JSON escapes only" in (diag.hint or ""), diag


def test_valid_escapes_and_surrogate_pairs_still_parse(tmp_path):
    import json

    path = tmp_path / "p.json"
    when = '†state["tab\\there"] == "\\ud83d\\ude00" and †state.b == \'it\\\'s\''
    plan = {"steps": [{"id": "a", "tool": "t", "when": when}], "initial_state": {"tab\there": "x", "b": "y"}}
    path.write_text(json.dumps(plan), encoding="utf-8")
    assert dagplan.check(str(path)).errors == ()


def test_dead_step_reads_the_tools_purity_too(tmp_path):
    """A step whose tool is a side effect runs for its effect: not dead, whether the step or the tool says so."""
    (tmp_path / "t.py").write_text(
        "import dagplan\n@dagplan.tool(purity='side_effect')\ndef notify() -> str:\n    return 'sent'\n"
        "@dagplan.tool\ndef compute() -> int:\n    return 1\n"
    )
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - {id: ping, tool: notify}\n  - {id: calc, tool: compute, output: †state.x}\nresult: †state.x\n"
    )
    (result,) = dagplan.check_files([str(tmp_path / "p.yaml")], [str(tmp_path / "t.py")])
    assert [d.code for d in result.warnings] == []
    (bare,) = dagplan.check_files([str(tmp_path / "p.yaml")])
    assert "dead-step" in [d.code for d in bare.warnings] or not bare.ok
