"""`dagplan run` and `dagplan preview` as a user runs them: real processes, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from as_user import run_dagplan, run_dagplan_s, with_example_tools

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TOOLS = str(EXAMPLES / "tools.py")

# inputs for every bundled example that needs no model
RUNNABLE = {
    "weather.yaml": ["city=Rome"],
    "payment.yaml": ["amount=50"],
    "translate.yaml": ["text=Bonjour le monde"],
    "pet_hotel.yaml": ["destination=Berlin"],
    "oauth.json": [],
    "profile.json": [],
}


def dagplan(*args: str, state_dir: Path, stdin: str | None = None, check: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(state_dir), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run(
        [sys.executable, "-m", "dagplan", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        input=stdin,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_preview_json_is_stable_and_complete(tmp_path):
    proc = dagplan("preview", "examples/weather.yaml", "--format", "json", state_dir=tmp_path, check=True)
    data = json.loads(proc.stdout)
    assert data["order"] == ["weather", "movie", "park", "present"]
    assert data["parallel_groups"] == [["weather"], ["movie", "park"], ["present"]]
    assert data["branch_points"] == [{"step": "weather", "alternatives": ["†state.sunny", "†state.notSunny"]}]
    step = data["steps"][0]
    assert step["args"] == {"city": "†input.city"} and step["call"] == "getWeather"
    again = dagplan("preview", "examples/weather.yaml", "--format", "json", state_dir=tmp_path, check=True)
    assert again.stdout == proc.stdout  # deterministic
    dry = dagplan("run", "examples/weather.yaml", "--dry-run", "--format", "json", state_dir=tmp_path, check=True)
    assert json.loads(dry.stdout) == data
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_preview_text_shows_the_plan(tmp_path):
    out = dagplan("preview", "examples/refund.yaml", state_dir=tmp_path, check=True).stdout
    assert "Parallel groups:" in out and "[history]" in out and "#refund.head=400" in out
    assert "Branch points:" in out and "nothing was executed" in out
    assert "dagplan run examples/refund.yaml" in out


@pytest.mark.parametrize("name", sorted(RUNNABLE))
def test_every_example_runs(tmp_path, name):
    inputs = [arg for pair in RUNNABLE[name] for arg in ("--input", pair)]
    proc = dagplan("run", f"examples/{name}", "--tools", TOOLS, *inputs, "--format", "json", state_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "completed" and not data["had_errors"]
    assert data["result"] not in (None, "")
    assert proc.stderr.startswith(f"run {data['run_id']}")  # the run id comes first, on stderr


def test_run_json_shape_and_error_branch(tmp_path):
    proc = dagplan(
        "run",
        "examples/payment.yaml",
        "--tools",
        TOOLS,
        "--input",
        "amount=250",
        "--format",
        "json",
        state_dir=tmp_path,
    )
    data = json.loads(proc.stdout)
    assert proc.returncode == 0
    assert set(data) >= {"run_id", "status", "had_errors", "result", "steps"}
    assert data["steps"]["pay"]["status"] == "handled"
    assert data["steps"]["confirm"]["status"] == "skipped"
    assert data["result"] == {"status": "Failed", "reason": "Your card was declined."}
    for step in data["steps"].values():
        assert set(step) >= {"status", "output", "attempts"}


def test_a_failed_run_exits_1_and_reports(tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text("steps:\n  - {id: pay, tool: processPayment, args: {amount: 500}, retry: {limit: 0}}\n")
    proc = dagplan("run", str(plan), "--tools", TOOLS, "--ephemeral", state_dir=tmp_path)
    assert proc.returncode == 1 and "FAILED" in proc.stderr


def test_preflight_runs_nothing_when_an_llm_step_has_no_model(tmp_path):
    proc = dagplan(
        "run",
        "examples/refund.yaml",
        "--tools",
        TOOLS,
        "--input",
        "customerId=c1",
        "--input",
        "amount=5000",
        "--ephemeral",
        state_dir=tmp_path,
    )
    # preflight: the LLM step has no model, so nothing runs (the refund is not issued), a usage error
    assert proc.returncode == 2 and "no-model" in proc.stderr
    assert "issueRefund" not in proc.stderr  # the side effect before the LLM step never started


def test_bad_inputs_are_reported_without_traceback(tmp_path):
    proc = dagplan("run", "examples/payment.yaml", "--tools", TOOLS, "--input", "amount=lots", state_dir=tmp_path)
    assert proc.returncode == 2  # inputs are the caller's to fix: a usage error
    assert "bad-input" in proc.stderr and "Traceback" not in proc.stderr
    proc = dagplan("run", "examples/payment.yaml", "--tools", TOOLS, state_dir=tmp_path)
    assert "missing-input" in proc.stderr and "--input amount=" in proc.stderr


def test_unknown_tool_is_rejected_before_running(tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text("steps:\n  - {id: a, tool: getWether, args: {city: x}}\n")
    proc = dagplan("run", str(plan), "--tools", TOOLS, state_dir=tmp_path)
    assert proc.returncode == 1
    assert "unknown-tool" in proc.stderr and "getWeather" in proc.stderr


def test_events_jsonl(tmp_path):
    proc = dagplan(
        "run",
        "examples/weather.yaml",
        "--tools",
        TOOLS,
        "--input",
        "city=Oslo",
        "--events",
        "jsonl",
        state_dir=tmp_path,
        check=True,
    )
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    types = [e["type"] for e in lines]
    assert types[0] == "plan_started" and types[-1] == "plan_completed"
    assert {"plan_step_skipped", "plan_step_completed"} <= set(types)
    assert all("run_id" in e and "ts" in e for e in lines)


LAZY = "mode: lazy\nsteps:\n  - {id: a, description: Say hello, tool: presentSuggestion, args: {suggestion: tea}}\n"


def test_lazy_plan_without_approval_does_not_run(tmp_path):
    plan = tmp_path / "lazy.yaml"
    plan.write_text(LAZY)
    proc = dagplan("run", str(plan), "--tools", TOOLS, state_dir=tmp_path)
    assert proc.returncode == 1
    assert "approve it with --yes" in proc.stderr and "not-approved" in proc.stderr
    yes = dagplan("run", str(plan), "--tools", TOOLS, "--yes", "--format", "json", state_dir=tmp_path, check=True)
    assert json.loads(yes.stdout)["result"] == "Today I suggest tea."


@pytest.mark.parametrize("answer, code", [("y", 0), ("n", 1)])
def test_lazy_plan_approval_prompt_on_a_terminal(tmp_path, answer, code):
    plan = tmp_path / "lazy.yaml"
    plan.write_text(LAZY)
    out, status = run_in_pty(["run", str(plan), "--tools", TOOLS], tmp_path, answer)
    assert "Run this plan?" in out
    assert status == code
    assert ("Today I suggest tea." in out) == (answer == "y")


def run_in_pty(args: list[str], state_dir: Path, answer: str) -> tuple[str, int]:
    """Run dagplan with a pseudo-terminal as stdin/stdout/stderr; answer its approval prompt."""
    from terminal import run_on_terminal

    env = {**os.environ, "DAGPLAN_STATE_DIR": str(state_dir), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TERM": "dumb"}
    out, code, _ = run_on_terminal(
        [sys.executable, "-m", "dagplan", *args], cwd=ROOT, env=env, prompt=b"Run this plan?", answer=answer.encode()
    )
    return out, code


def test_missing_files_are_usage_errors(tmp_path):
    assert dagplan("run", "nothere.yaml", state_dir=tmp_path).returncode == 2
    proc = dagplan("run", "examples/weather.yaml", "--tools", "nothere.py", state_dir=tmp_path)
    assert proc.returncode == 2 and "tools-import" in proc.stderr
    assert dagplan("preview", "nothere.yaml", state_dir=tmp_path).returncode == 2


ONE = 'steps:\n  - id: history\n    tool: checkBillingHistory\n    args: {customerId: "c1"}\n    output: †state.h\n'


def test_runs_by_status(tmp_path):
    root = with_example_tools(tmp_path)
    assert (
        run_dagplan(
            root, "run", str(ROOT / "examples" / "weather.yaml"), "--tools", "tools.py", "-i", "city=Rome"
        ).returncode
        == 0
    )
    assert run_dagplan(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py", "-i", "customerId=c",
               "-i", "amount=5", "--no-input").returncode == 3  # fmt: skip
    waiting = json.loads(run_dagplan(root, "runs", "--status", "waiting", "--format", "json").stdout)
    assert [r["status"] for r in waiting] == ["waiting"]
    both = json.loads(
        run_dagplan(root, "runs", "--status", "waiting", "--status", "completed", "--format", "json").stdout
    )
    assert sorted(r["status"] for r in both) == ["completed", "waiting"]
    wrong = run_dagplan(root, "runs", "--status", "complete")
    assert wrong.returncode == 2 and "did you mean 'completed'?" in wrong.stderr


def test_at_last_and_dash_name_the_newest_run(tmp_path):
    root = with_example_tools(tmp_path)
    assert run_dagplan(root, "runs", "show", "@last").returncode == 2  # no runs yet: said, exit 2
    first = run_dagplan(root, "run", str(ROOT / "examples" / "weather.yaml"), "--tools", "tools.py", "-i", "city=Rome")
    waiting = run_dagplan(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py",
                  "-i", "customerId=c", "-i", "amount=5")  # fmt: skip
    assert (first.returncode, waiting.returncode) == (0, 3)
    newest = json.loads(run_dagplan(root, "runs", "--format", "json").stdout)[0]["id"]
    shown = run_dagplan(root, "runs", "show", "@last")
    assert f"Run {newest}: waiting" in shown.stdout, shown.stdout + shown.stderr
    assert "plan_started" in run_dagplan(root, "events", "-").stdout
    step = json.loads(run_dagplan(root, "runs", "--format", "json").stdout)[0]["waiting"][0]["step"]
    assert run_dagplan(root, "answer", "@last", step, "approve").returncode == 0
    assert run_dagplan(root, "resume", "@last", "--tools", "tools.py").returncode == 0


def test_runs_prune_removes_old_finished_runs_and_never_a_waiting_one(tmp_path):
    root = with_example_tools(tmp_path)
    run_dagplan(root, "run", str(ROOT / "examples" / "weather.yaml"), "--tools", "tools.py", "-i", "city=Rome")
    run_dagplan(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py", "-i", "customerId=c",
        "-i", "amount=5")  # fmt: skip
    assert "0 runs pruned" in run_dagplan(root, "runs", "prune", "--older-than", "30d").stderr  # none that old
    listed = run_dagplan(root, "runs", "prune", "--older-than", "0s", "--dry-run")
    assert listed.returncode == 0 and "1 run would be pruned" in listed.stderr and "completed" in listed.stdout
    assert len(json.loads(run_dagplan(root, "runs", "--format", "json").stdout)) == 2  # a dry run removes nothing
    assert "1 run pruned" in run_dagplan(root, "runs", "prune", "--older-than", "0s").stderr
    left = json.loads(run_dagplan(root, "runs", "--format", "json").stdout)
    assert [r["status"] for r in left] == ["waiting"]
    asked = run_dagplan(root, "runs", "prune", "--older-than", "0s", "--status", "waiting")
    assert "1 run pruned" in asked.stderr and json.loads(run_dagplan(root, "runs", "--format", "json").stdout) == []


def test_a_lazy_plan_not_approved_says_how_to_run_it_with_the_flags_given(tmp_path):
    root = with_example_tools(tmp_path)
    shown = run_dagplan(
        root, "run", str(ROOT / "examples" / "payment_lazy.yaml"), "--tools", "tools.py", "-i", "amount=50"
    )
    assert shown.returncode == 1 and "nothing ran" in shown.stderr
    line = next(x for x in shown.stderr.splitlines() if x.startswith("To run it: "))
    assert line.endswith("--tools tools.py -i amount=50 --yes"), line
    approved = run_dagplan(root, *line.removeprefix("To run it: dagplan ").split())
    assert approved.returncode == 0, approved.stderr


def test_progress_counts_each_step_once_when_steps_start_together(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "p.yaml").write_text("steps:\n" + "".join(
        f"  - {{id: s{i}, tool: presentSuggestion, args: {{suggestion: C{i}}}, output: †state.s{i}}}\n" for i in range(4)
    ) + "result: †state.s0 †state.s1 †state.s2 †state.s3\n")  # fmt: skip
    done = run_dagplan(root, "run", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 0, done.stderr
    counters = [line.split("]")[0] + "]" for line in done.stderr.splitlines() if line.startswith("[")]
    assert counters and len(counters) == len(set(counters)), done.stderr
    started = [line for line in done.stderr.splitlines() if line.endswith(" ...")]
    assert started and not any(line.lstrip().startswith("[") for line in started)


def test_runs_say_when_a_completed_run_had_errors(tmp_path):
    root = with_example_tools(tmp_path)
    refused = run_dagplan(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py",
                  "-i", "customerId=c", "-i", "amount=5", "--answer", "approve=reject")  # fmt: skip
    assert refused.returncode == 1
    listed = run_dagplan(root, "runs")
    assert "completed with errors" in listed.stdout, listed.stdout
    assert json.loads(run_dagplan(root, "runs", "--format", "json").stdout)[0]["had_errors"] is True


def test_preview_marks_the_steps_that_act_on_the_world(tmp_path):
    shown = run_dagplan(ROOT, "preview", "examples/approve_refund.yaml", "--tools", "examples/tools.py")
    assert "3. [refund] tool=issueRefund (acts on the world)" in shown.stdout, shown.stdout
    assert "[history] tool=checkBillingHistory\n" in shown.stdout  # pure: no mark
    as_json = json.loads(run_dagplan(ROOT, "preview", "examples/approve_refund.yaml", "--tools", "examples/tools.py",
                                 "--format", "json").stdout)  # fmt: skip
    assert [s["id"] for s in as_json["steps"] if s.get("acts")] == ["refund"]


def test_preview_of_a_plan_file_speaks_of_the_user_s_tools_and_not_of_streaming(tmp_path):
    """Items of round five: "To run it" repeats the --tools given (none when the configuration names them);
    a hand-written plan's preview says nothing of streamed plans; the local model is free, said once."""
    import shutil
    import subprocess
    import sys

    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "tools.py")
    (tmp_path / ".git").mkdir()
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: w, tool: detectLanguage, args: {text: Bonjour}, output: $state.w}\n"
                                     "  - {id: s, llm: 'Say #w', model: local, output: $state.s}\n")  # fmt: skip
    run = lambda *a: subprocess.run([sys.executable, "-m", "dagplan", *a], cwd=tmp_path, capture_output=True,
                                    text=True, timeout=60)  # noqa: E731  # fmt: skip
    shown = run("preview", "p.yaml", "--tools", "tools.py").stdout
    assert "To run it: dagplan run p.yaml --tools tools.py" in shown, shown
    assert "Streamed" not in shown
    assert shown.count("free (the local model, on this machine)") == 1 and "price unknown" not in shown, shown
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    assert "To run it: dagplan run p.yaml\n" in run("preview", "p.yaml").stdout + "\n"


@pytest.mark.parametrize("deadline", [1e300, float("inf"), -1e300, 253402300800.0])
def test_a_waiting_run_whose_old_record_holds_a_deadline_past_any_calendar_is_listed(capsys, deadline):
    from dagplan.cli.runs import _show_waiting  # what `dagplan runs` prints for each waiting gate

    _show_waiting("r1", {"step": "approve", "question": "ok?", "deadline": deadline, "on_timeout": "fail"})
    assert "r1 waits at approve: ok? (until a date past any calendar; then fail)" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["[" * 3000 + "]" * 3000, "1e999", "-1e999", "NaN", "Infinity"])
def test_answers_and_inputs_are_bounded_like_every_json_word(tools_project, value):
    (tools_project / "p.yaml").write_text(
        "inputs: {n: {type: number}}\nsteps:\n  - id: val\n    gate: {question: a number?, schema: {type: number}}\n"
        "  - id: use\n    tool: checkBillingHistory\n    args: {customerId: '#val'}\n"
    )
    answered = run_dagplan_s(
        tools_project, "run", "p.yaml", "--tools", "tools.py", "-i", "n=1", "--answer", f"val={value}"
    )
    assert answered.returncode == 2 and "--answer val" in answered.stderr, answered.stderr
    given = run_dagplan_s(tools_project, "run", "p.yaml", "--tools", "tools.py", "-i", f"n={value}")
    assert given.returncode == 2 and "bad-input" in given.stdout + given.stderr, given.stderr


@pytest.mark.parametrize("args", ["{message: \"v: †input.nope || 'dflt'\"}", '{message: †input.nope || "dflt"}',
                                  '{message: †input.nope || †input.other || "dflt"}'])  # fmt: skip
def test_an_input_never_given_takes_its_literal_default(tools_project, args):
    (tools_project / "p.yaml").write_text(
        f"steps:\n  - id: a\n    tool: notify\n    args: {args}\n    output: †state.a\n"
    )
    assert run_dagplan_s(tools_project, "check", "p.yaml", "--tools", "tools.py").returncode == 0
    run = run_dagplan_s(tools_project, "run", "p.yaml", "--tools", "tools.py", "--format", "json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["steps"]["a"]["output"] in ("v: dflt", "dflt")
    (tools_project / "q.yaml").write_text("steps:\n  - id: a\n    tool: notify\n    args: {message: †input.nope}\n")
    assert (
        run_dagplan_s(tools_project, "run", "q.yaml", "--tools", "tools.py").returncode != 0
    )  # without a default: an error


@pytest.mark.parametrize("value", ["", "\x00x"])
def test_an_empty_output_path_is_a_usage_error(tools_project, value):
    (tools_project / "w.yaml").write_text(ONE)
    (tools_project / "w.test.yaml").write_text("plan: w.yaml\ntools: [tools.py]\ncases:\n  - name: x\n")
    for command in (("run", "w.yaml", "--tools", "tools.py", "--record", value), ("test", "w.test.yaml", "-o", value),
                    ("plan", "do it", "-o", value)):  # fmt: skip
        if "\x00" in value:
            continue  # a NUL cannot be passed on a command line; the rule is tested by the empty path
        proc = run_dagplan_s(tools_project, *command)
        assert proc.returncode == 2 and "cannot name a file" in proc.stderr, (command, proc.stderr)
