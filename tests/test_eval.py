"""``dagplan eval``: plans scored against what each task expects, through the CLI as a team would run it in CI
(the stub model answers what a planner would; the scores are computed by hand here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from llm_stub import json_reply, text

REPO = Path(__file__).resolve().parents[1]
TOOLS = str(REPO / "examples" / "tools.py")
MODEL = "openai/gpt-4o-mini"

TASKS = """tasks:
  - id: weather
    request: "Check the weather in Rome, then find a park, then present it"
    tools: [getWeather, findPark, presentSuggestion]
    order: [[getWeather, findPark], [findPark, presentSuggestion]]
    values: {getWeather: {city: Rome}}
  - id: refund
    request: "Look up the billing history of c7, then refund 20 to c7"
    tools: [checkBillingHistory, issueRefund]
    order: [[checkBillingHistory, issueRefund]]
    values: {issueRefund: {customerId: c7, amount: 20}}
  - id: ci
    request: "Get the CI status of commit abc"
    tools: [ciStatus]
    values: {ciStatus: {commit: abc}}
"""

RIGHT_WEATHER = {"steps": [
    {"id": "w", "tool": "getWeather", "args": {"city": "rome"}, "output": "$state.sunny || $state.rainy"},
    {"id": "p", "tool": "findPark", "args": {"weather": "$state.sunny"}, "output": "$state.park"},
    {"id": "s", "tool": "presentSuggestion", "args": {"suggestion": "$state.park"}, "output": "$state.told"}],
    "result": "$state.told"}  # fmt: skip
# both tools, but no order between them (they run at once) and the wrong amount
UNORDERED_REFUND = {"steps": [
    {"id": "h", "tool": "checkBillingHistory", "args": {"customerId": "c7"}, "output": "$state.h"},
    {"id": "r", "tool": "issueRefund", "args": {"customerId": "c7", "amount": 200}, "output": "$state.r"}],
    "result": "$state.r"}  # fmt: skip
WRONG_TOOL = {"steps": [{"id": "t", "tool": "triageFailure", "args": {"log": "abc"}, "output": "$state.t"}],
              "result": "$state.t"}  # fmt: skip


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-test"}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)  # fmt: skip


def test_eval_scores_plans_as_documented(stub, tmp_path):
    (tmp_path / "tasks.yaml").write_text(TASKS)
    stub.script(json_reply(RIGHT_WEATHER), json_reply(UNORDERED_REFUND), json_reply(WRONG_TOOL))
    done = _cli(tmp_path, "eval", "tasks.yaml", "--tools", TOOLS, "--model", MODEL, "--api-base", stub.url,
                "--format", "json", "--repair", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # nodes: weather 3/3; refund 2/2; ci: 0 right, 1 wrong, 1 missing -> tp 5, fp 1, fn 1
    assert report["node_f1"] == round(100 * 2 * 5 / (2 * 5 + 1 + 1), 1)
    # edges: weather 2/2; refund 0 of 1 (no order) -> tp 2, fp 0, fn 1
    assert report["edge_f1"] == round(100 * 2 * 2 / (2 * 2 + 0 + 1), 1)
    # values: city rome == Rome; customerId right, amount wrong; commit missing -> 2 of 4
    assert report["value_accuracy"] == 50.0
    assert report["misses"]["wrong_tool"] == 1 and report["misses"]["missing_step"] == 1
    assert report["misses"]["wrong_order"] == 1 and report["misses"]["wrong_value"] == 1
    assert report["ran_to_end"] == 100.0 and report["tasks"] == 3
    assert report["per_plan"]["tokens"] == 18  # the stub's 11 + 7 a call
    # a miss says what the plan wrote beside what the task wants
    assert report["graded"][1]["misses"]["wrong_value"] == ["issueRefund.amount = 200 (want 20)"]


def test_eval_fails_under_a_threshold_and_says_why_in_text(stub, tmp_path):
    (tmp_path / "tasks.yaml").write_text(TASKS)
    stub.script(json_reply(RIGHT_WEATHER), json_reply(UNORDERED_REFUND), json_reply(WRONG_TOOL))
    done = _cli(tmp_path, "eval", "tasks.yaml", "--tools", TOOLS, "--model", MODEL, "--api-base", stub.url,
                "--fail-under", "90", "--repair", "0")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 tasks, openai/gpt-4o-mini: node F1 83.3, edge F1 80.0, values 50.0%" in done.stdout, done.stdout
    assert "refund: wrong_order: checkBillingHistory before issueRefund; wrong_value" in done.stderr, done.stderr


def test_a_task_without_a_valid_plan_counts_as_missing_everything(stub, tmp_path):
    (tmp_path / "tasks.yaml").write_text(TASKS.split("  - id: refund")[0])
    stub.script(text("I cannot plan this."))
    done = _cli(tmp_path, "eval", "tasks.yaml", "--tools", TOOLS, "--model", MODEL, "--api-base", stub.url,
                "--format", "json", "--repair", "0")  # fmt: skip
    report = json.loads(done.stdout)
    assert report["node_f1"] == 0.0 and report["misses"]["no_plan"] == 1 and not report["graded"][0]["planned"]


@pytest.mark.parametrize(
    "tasks, where",
    [
        ("tasks: []\n", "tasks.yaml:1:8"),
        ("tasks:\n  - request: hi\n    tools: getWeather\n", "tasks.yaml:3:12"),
        ("tasks:\n  - request: hi\n    tools: [getWeather]\n    order: [[getWeather, findPark]]\n", "tasks.yaml:4:13"),
        ("tasks:\n  - request: hi\n    tools: [a]\n    vaules: {}\n", "tasks.yaml:4:5"),
    ],
)
def test_a_task_file_with_a_mistake_is_an_error_at_its_line(tmp_path, tasks, where):
    (tmp_path / "tasks.yaml").write_text(tasks)
    done = _cli(tmp_path, "eval", "tasks.yaml", "--tools", TOOLS, "--model", MODEL)
    assert done.returncode == 2 and f"{where}: error eval-tasks" in done.stderr, done.stderr


def test_the_reference_tasks_are_well_formed_and_name_catalog_tools_only():
    """benchmarks/planning/reference.yaml: at least 100 tasks over the two catalogs, each naming tools its
    catalog has, with chains whose order the request states."""
    import yaml

    from dagplan.interpreter.testing.evaluate import read_tasks

    sys.path.insert(0, str(REPO))
    from benchmarks.bench_planning import catalogs

    found = catalogs()
    data = yaml.safe_load((REPO / "benchmarks" / "planning" / "reference.yaml").read_text())
    total = 0
    for catalog, path in data["files"].items():
        tasks = read_tasks(str(REPO / "benchmarks" / "planning" / path))
        total += len(tasks)
        for task in tasks:
            assert task.tools <= set(found[catalog]), (catalog, task.id, task.tools - set(found[catalog]))
        chains = [t for t in tasks if len(t.order) >= 2 and any(w in t.request for w in ("then", "after", "once"))]
        assert len(chains) >= 10, catalog
    assert total >= 100


def test_plan_says_what_valid_means_and_warns_when_the_plan_ignores_the_request(stub, tmp_path):
    lonely = {"steps": [{"id": "w", "tool": "getWeather", "args": {"city": "Oslo"}, "output": "$state.w || $state.r"}],
              "result": "$state.w"}  # fmt: skip
    stub.script(json_reply(lonely))
    done = _cli(tmp_path, "plan", "Check the weather in Rome, then find a park, then present it", "--tools", TOOLS,
                "--model", MODEL, "--api-base", stub.url, "--repair", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        "warning fewer-steps-than-clauses: the request states 3 things to do in order, and the plan has 1"
        in done.stderr
    )
    assert "warning request-values-unused: no step uses a value the request gives (Rome)" in done.stderr
    assert "valid: checked: its shape, the tool and argument names" in done.stderr and "dagplan eval" in done.stderr
    assert "the plan checks (its shape, tools, argument types" in done.stderr and "plan is valid" not in done.stderr
    assert "no tools known" not in done.stdout + done.stderr  # the preview knows what acts: the catalog says
    stub.script(json_reply(lonely))
    bare = _cli(tmp_path, "plan", "Check the weather in Rome", "--model", MODEL, "--api-base", stub.url,
                "--repair", "0")  # fmt: skip
    assert "no tools known here" in bare.stderr and "will not be checked" in bare.stderr, bare.stderr
    stub.script(json_reply(RIGHT_WEATHER))
    right = _cli(tmp_path, "plan", "Check the weather in Rome, then find a park, then present it", "--tools", TOOLS,
                 "--model", MODEL, "--api-base", stub.url, "--repair", "0")  # fmt: skip
    assert "fewer-steps" not in right.stderr and "values-unused" not in right.stderr, right.stderr


def test_plan_o_prints_the_run_command_with_the_tools_as_the_project_gives_them(stub, tmp_path):
    """Issue 63: with `tools` in dagplan.toml, `plan -o FILE` said `--tools TOOLS.py`; the command to run the
    written plan needs no --tools there, and repeats the ones given on the command line."""
    import shutil

    shutil.copy(TOOLS, tmp_path / "tools.py")
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    stub.script(json_reply(RIGHT_WEATHER))
    done = _cli(tmp_path, "plan", "Check the weather in Rome, then find a park, then present it", "-o", "p.yaml",
                "--model", MODEL, "--api-base", stub.url, "--repair", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr  # with -o, the preview goes to stdout
    assert "To run it: dagplan run p.yaml" in said and "TOOLS.py" not in said, said
    (tmp_path / "dagplan.toml").unlink()
    stub.script(json_reply(RIGHT_WEATHER))
    given = _cli(tmp_path, "plan", "Check the weather in Rome, then find a park, then present it", "-o", "q.yaml",
                 "--tools", "tools.py", "--model", MODEL, "--api-base", stub.url, "--repair", "0")  # fmt: skip
    assert "To run it: dagplan run q.yaml --tools tools.py" in given.stdout, given.stdout + given.stderr


def test_a_plan_a_model_wrote_that_acts_is_written_lazy_and_run_asks_first(stub, tmp_path):
    """Issue 63: a model's plan that acts ran at once with `dagplan run`; `plan -o` now writes it `mode: lazy`,
    so the run shows its preview and asks a person (refused without one); a plan that only reads stays eager."""
    import shutil

    shutil.copy(TOOLS, tmp_path / "tools.py")
    refund = {"steps": [
        {"id": "h", "tool": "checkBillingHistory", "args": {"customerId": "c7"}, "output": "$state.h"},
        {"id": "r", "tool": "issueRefund", "args": {"customerId": "c7", "amount": 20}, "deps": ["h"],
         "output": "$state.r"}], "result": "$state.r"}  # fmt: skip
    stub.script(json_reply(refund))
    done = _cli(tmp_path, "plan", "Check the billing history of c7, then refund 20", "-o", "refund.yaml", "--tools",
                "tools.py", "--model", MODEL, "--api-base", stub.url, "--repair", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "mode: lazy" in (tmp_path / "refund.yaml").read_text() and "asks before anything runs" in done.stderr
    ran = _cli(tmp_path, "run", "refund.yaml", "--tools", "tools.py", "--no-input")
    assert ran.returncode == 1 and "error not-approved: the plan was not approved; nothing ran" in ran.stderr
    assert "tool=issueRefund (acts on the world)" in ran.stderr, ran.stderr  # its preview, by the tools given
    stub.script(json_reply(RIGHT_WEATHER))
    reads = _cli(tmp_path, "plan", "Check the weather in Rome, then find a park, then present it", "-o", "w.yaml",
                 "--tools", "tools.py", "--model", MODEL, "--api-base", stub.url, "--repair", "0")  # fmt: skip
    assert reads.returncode == 0 and "mode: lazy" not in (tmp_path / "w.yaml").read_text(), reads.stderr
