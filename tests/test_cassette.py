"""Cassettes (interpreter/testing/cassette.py): a recorded run's calls replayed with no tool or model, and a
cassette of the wrong shape said at its place."""

from __future__ import annotations

import json
import shutil

import pytest

from as_user import ROOT, run_dagplan, run_dagplan_s, with_example_tools


ONE = 'steps:\n  - id: history\n    tool: checkBillingHistory\n    args: {customerId: "c1"}\n    output: †state.h\n'


def test_a_replay_needs_no_tools_and_a_miss_fails_its_step_once(tmp_path):
    root = with_example_tools(tmp_path)
    weather = str(ROOT / "examples" / "weather.yaml")
    recorded = run_dagplan(root, "run", weather, "--tools", "tools.py", "-i", "city=Rome", "--record", "c.json")
    assert recorded.returncode == 0 and "calls recorded in c.json" in recorded.stderr
    elsewhere = tmp_path / "ci"
    elsewhere.mkdir()
    shutil.move(root / "c.json", elsewhere / "c.json")
    (root / "tools.py").unlink()  # the replay has only the cassette: the catalog it recorded, no code
    again = run_dagplan(elsewhere, "run", weather, "--replay", "c.json", "-i", "city=Rome", "--format", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["result"] == "Today I suggest a walk in the biggest park of Rome."
    miss = run_dagplan(elsewhere, "run", weather, "--replay", "c.json", "-i", "city=Paris")
    assert miss.returncode == 1
    said = miss.stdout + miss.stderr
    assert said.count("--- recorded") == 1, said  # the difference, told once
    rows = {
        line.split()[0]: line.split()[2] for line in miss.stdout.splitlines() if line.startswith(("weather", "park"))
    }
    assert rows == {"weather": "failed", "park": "skipped"}, miss.stdout  # a miss is no handled failure
    assert "[3/4] Find a park: skipped (the run stopped at step weather (CassetteMiss))" in miss.stderr
    again = run_dagplan(elsewhere, "resume", "@last")  # a run that stopped itself is no discarded one
    assert "was aborted (cassette c.json has no recording of tool getWeather" in again.stderr, again.stderr
    assert "discarded" not in again.stderr


def test_a_recording_goes_through_a_gate_and_a_resume(tmp_path):
    root = with_example_tools(tmp_path)
    plan = str(ROOT / "examples" / "approve_refund.yaml")
    args = ("-i", "customerId=c", "-i", "amount=5")
    waiting = run_dagplan(root, "run", plan, "--tools", "tools.py", *args, "--record", "g.json")
    hint = next(line for line in waiting.stderr.splitlines() if line.startswith("waiting for an answer"))
    assert hint.endswith("--record g.json"), hint
    assert run_dagplan(root, "answer", "@last", "approve", "approve").returncode == 0
    resumed = run_dagplan(root, *hint.split("then: dagplan ")[1].split())
    assert resumed.returncode == 0 and "3 calls recorded in g.json" in resumed.stderr, resumed.stderr
    calls = json.loads((root / "g.json").read_text(encoding="utf-8"))["calls"]
    assert [(c["kind"], c["step"]) for c in calls] == [("tool", "history"), ("gate", "approve"), ("tool", "refund")]
    replayed = run_dagplan(root, "run", plan, *args, "--replay", "g.json", "--format", "json")
    assert replayed.returncode == 0 and json.loads(replayed.stdout)["status"] == "completed", replayed.stderr


def test_a_cassette_s_catalog_of_the_wrong_shape_is_a_clear_error(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "c.json").write_text('{"dagplan_cassette": 1, "calls": [],\n "tools": [{"name": "x", "parameters": 3}]}')
    done = run_dagplan(root, "run", str(ROOT / "examples" / "weather.yaml"), "--replay", "c.json", "-i", "city=Rome")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "c.json:2:" in done.stderr and "tools[0].parameters must be a JSON Schema object" in done.stderr


def test_a_replay_miss_in_a_fan_out_item_is_never_caught():
    """A stopping failure (a replay's miss) of a fan-out item is not a failure a `catch:` takes: the run stops."""
    import dagplan

    text = """steps:
  - id: each
    for_each: [a, b]
    max_items: 2
    tool: shout
    args: {x: †item}
    catch:
      - {errors: ["*"], output: †state.broken}
    output: †state.each
"""

    def shout(x: str) -> str:
        return x.upper()

    plan = dagplan.load(text=text, tools={"shout": shout})
    result = dagplan.run(plan, tools={"shout": shout}, cassette={"dagplan_cassette": 1, "calls": []})
    assert result.status == "aborted" and "has no recording of tool shout" in result.message, result
    assert result.steps["each"].status != "completed" and "broken" not in result.state


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
def test_cassettes_of_the_wrong_shape_are_diagnostics(weather_project, change, words):
    assert (
        run_dagplan_s(
            weather_project, "run", "weather.yaml", "--tools", "tools.py", "-i", "city=Rome", "--record", "c.json"
        ).returncode
        == 0
    )
    cassette = json.loads((weather_project / "c.json").read_text())
    change(cassette)
    (weather_project / "c.json").write_text(json.dumps(cassette))
    proc = run_dagplan_s(
        weather_project, "run", "weather.yaml", "--tools", "tools.py", "-i", "city=Rome", "--replay", "c.json"
    )
    assert proc.returncode == 2 and "c.json:1:" in proc.stderr and words in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda c: c.update(kind="model", request={"params": {"response_format": "x"}}), "response_format"),
        (lambda c: c.update(kind="model", request={"params": "x"}), "request.params"),
        (lambda c: c.update(alternative=[1]), "alternative"),
        (lambda c: c.update(duration="slow"), "duration"),
        (lambda c: c.update(name=5), "name"),
    ],
)
def test_a_cassette_call_of_the_wrong_shape_is_a_diagnostic(tools_project, change, words):
    (tools_project / "w.yaml").write_text(ONE)
    assert run_dagplan_s(tools_project, "run", "w.yaml", "--tools", "tools.py", "--record", "c.json").returncode == 0
    cassette = json.loads((tools_project / "c.json").read_text())
    change(cassette["calls"][0])
    (tools_project / "c.json").write_text(json.dumps(cassette))
    proc = run_dagplan_s(tools_project, "run", "w.yaml", "--tools", "tools.py", "--replay", "c.json", "--ephemeral")
    assert proc.returncode in (1, 2) and "c.json" in proc.stdout + proc.stderr and words in proc.stdout + proc.stderr
