"""Lone surrogates (a file name os.fsdecode made of bytes that are not UTF-8, a gate answered with one) never
make a run unusable: record, export, resume, runs show, events and the viewer's page all work, and the
value comes back exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

TOOLS = """\
import os
import dagplan


@dagplan.tool
def report() -> str:
    return os.fsdecode(b"report-\\xff.txt")


@dagplan.tool
def echo(value: list) -> list:
    return value
"""
PLAN = """\
steps:
  - {id: name, tool: report, output: †state.name}
  - id: ok
    gate: {question: "Which?", schema: {type: array}}
    output: †state.answer
  - {id: last, tool: echo, args: {value: †state.answer}, deps: [ok, name], output: †state.last}
result: †state.last
"""


def test_a_run_with_lone_surrogates_stays_usable(tmp_path):
    (tmp_path / "t.py").write_text(TOOLS)
    (tmp_path / "p.yaml").write_text(PLAN)
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "s"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    first = cli("run", "p.yaml", "--tools", "t.py", "--record", "first.json")
    assert first.returncode == 3, first.stderr
    run_id = first.stderr.split("run ", 1)[1].split()[0]
    assert cli("answer", run_id, "ok", '["\\ud800"]').returncode == 0
    resumed = cli("resume", run_id, "--format", "json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["result"] == ["\ud800"]
    for args in (("runs", "show", run_id), ("events", run_id), ("runs",), ("runs", "export", run_id, "-o", "c.json")):
        assert cli(*args).returncode == 0, args
    cassette = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    values = [c.get("result") or c.get("value") for c in cassette["calls"]]
    assert "report-\udcff.txt" in values and ["\ud800"] in values
    replayed = cli("run", "p.yaml", "--tools", "t.py", "--replay", "c.json", "--format", "json")
    assert replayed.returncode == 0 and json.loads(replayed.stdout)["result"] == ["\ud800"], replayed.stderr

    from starlette.testclient import TestClient

    from dagplan.web.app import Viewer

    page = TestClient(Viewer(tmp_path / "s", root=tmp_path, token="t").app, base_url="http://127.0.0.1").get(
        f"/runs/{run_id}", params={"token": "t"}
    )
    assert page.status_code == 200


BRANCH_TOOLS = """\
import dagplan


@dagplan.tool
def pick(which: object) -> object:
    return dagplan.Branch(which, "v")
"""


def test_a_branch_alternative_of_any_shape_is_a_step_outcome_not_a_crash(tmp_path):
    import dagplan

    (tmp_path / "t.py").write_text(BRANCH_TOOLS)
    tools = dagplan.load_tools([str(tmp_path / "t.py")])
    for which, status, path in [(1.0, "completed", "b"), (0, "completed", "a"), ([1], "failed", None),
                                (True, "failed", None), (None, "failed", None), (2.5, "failed", None)]:  # fmt: skip
        plan = dagplan.load(text=json.dumps({"steps": [{"id": "s", "tool": "pick", "args": {"which": which},
                                                         "output": "†state.a || †state.b"}]}))  # fmt: skip
        result = dagplan.run(plan, tools=tools, state_dir=tmp_path / "state", durable=True)
        shown = str(result.steps["s"].status)
        assert shown == status or (status == "failed" and shown == "handled"), (which, result.steps["s"])
        assert str(result.status) == "completed"  # the run ended; it is not left interrupted
        if path:
            assert result.state.get(path) == "v"
