"""Hostile input, round two: test files, cassettes, configuration, gate answers and ids that used to end in a
traceback are diagnostics with a position; JUnit output stays well-formed XML."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import dagplan

ROOT = Path(__file__).resolve().parent.parent


def _cli(cwd, *args):
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(Path(cwd) / "s"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc


@pytest.fixture
def weather(tmp_path):
    for name in ("weather.yaml", "tools.py"):
        (tmp_path / name).write_text((ROOT / "examples" / name).read_text())
    return tmp_path


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_in_json_test_files_and_plans_is_a_diagnostic_at_its_place(weather, constant):
    text = '{"plan": "weather.yaml", "cases": [{"name": "x", "inputs": {"city": %s}}]}' % constant
    (weather / "a.test.json").write_text(text)
    proc = _cli(weather, "test", "a.test.json")
    assert proc.returncode == 1 and f"a.test.json:1:{text.index(constant) + 1}: error json-syntax" in proc.stdout
    (weather / "p.json").write_text('{"steps": [{"id": "a", "tool": "t", "args": {"x": %s}}]}' % constant)
    assert "error json-syntax" in _cli(weather, "check", "p.json").stdout


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda c: c.update(calls=[1]), "calls[0] must be an object"),
        (lambda c: c.update(calls="x"), "is not a dagplan cassette"),
        (lambda c: c["calls"][0].update(args="str"), "calls[0].args must be an object"),
        (lambda c: c["calls"][0].update(kind="toool"), "calls[0].kind must be tool, model or gate"),
        (lambda c: c["calls"][0].update(error="boom"), "calls[0].error must be an object"),
    ],
)
def test_cassettes_of_the_wrong_shape_are_diagnostics(weather, change, words):
    assert (
        _cli(weather, "run", "weather.yaml", "--tools", "tools.py", "-i", "city=Rome", "--record", "c.json").returncode
        == 0
    )
    cassette = json.loads((weather / "c.json").read_text())
    change(cassette)
    (weather / "c.json").write_text(json.dumps(cassette))
    proc = _cli(weather, "run", "weather.yaml", "--tools", "tools.py", "-i", "city=Rome", "--replay", "c.json")
    assert proc.returncode == 2 and "c.json:1:" in proc.stderr and words in proc.stderr, proc.stderr


def test_a_configuration_nested_thousands_deep_is_a_config_error(tmp_path):
    (tmp_path / "dagplan.toml").write_text("a = " + "[" * 3000 + "]" * 3000 + "\n")
    (tmp_path / "p.yaml").write_text("steps: [{id: a, tool: t}]\n")
    proc = _cli(tmp_path, "check", "p.yaml")
    assert proc.returncode == 2 and "dagplan.toml:1:1: error config" in proc.stderr


def test_a_gate_answer_nested_thousands_deep_is_refused(tmp_path):
    (tmp_path / "p.yaml").write_text("steps:\n  - id: ok\n    gate: {question: what?, schema: {type: array}}\n")
    waiting = _cli(tmp_path, "run", "p.yaml")
    assert waiting.returncode == 3
    run_id = waiting.stderr.split("run ", 1)[1].split()[0]
    proc = _cli(tmp_path, "answer", run_id, "ok", "[" * 5000 + "]" * 5000)
    assert proc.returncode == 2 and "error bad-answer" in proc.stderr and len(proc.stderr) < 2000, proc.stderr


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


def test_junit_output_is_well_formed_xml_whatever_the_names_and_outputs_hold(weather):
    name = "weird \x01\x1b[31m \ufffe name"
    (weather / "w.test.yaml").write_text(json.dumps({"plan": "weather.yaml", "tools": ["tools.py"], "cases": [
        {"name": name, "inputs": {"city": "Rome"}, "expect": {"result": "\x07 never"}}]}))  # fmt: skip
    proc = _cli(weather, "test", "w.test.yaml", "--format", "junit")
    assert proc.returncode == 1
    tree = ElementTree.fromstring(proc.stdout)
    (case,) = tree.iter("testcase")
    assert case.get("name").startswith("weird \\u0001\\u001b[31m")


def test_a_disk_that_fills_up_during_a_run_stops_it_cleanly_and_the_run_resumes(weather):
    """A write of the journal fails (here RLIMIT_FSIZE stands for a full disk): one clean error saying what
    is kept and how to go on, no traceback; the torn tail is cut; resume completes the run."""
    import resource
    import signal

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1200, 1200))

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    args = [sys.executable, "-m", "dagplan", "run", "weather.yaml", "--tools", "tools.py", "-i", "city=Rome",
            "--state", "fs"]  # fmt: skip
    full = subprocess.run(args, cwd=weather, env=env, capture_output=True, text=True, timeout=60,
                          preexec_fn=small_files)  # fmt: skip
    assert full.returncode == 2 and "Traceback" not in full.stderr, full.stderr
    assert "error io: cannot write the journal" in full.stderr and "everything committed before is kept" in full.stderr
    (run_id,) = os.listdir(weather / "fs" / "runs")
    assert f"dagplan resume {run_id}" in full.stderr
    resumed = _cli(weather, "resume", run_id, "--state", "fs")
    assert resumed.returncode == 0 and "biggest park" in resumed.stdout, resumed.stderr


def test_a_missing_tools_file_of_a_test_file_is_shown_at_its_entry(weather):
    (weather / "m.test.yaml").write_text("plan: weather.yaml\ntools: [tools.py, nope.py]\ncases: [{name: x}]\n")
    proc = _cli(weather, "check", "m.test.yaml")
    assert "m.test.yaml:2:19: error tools-import" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
