"""A newcomer's path, round six (issue 63): the minors, each as a user meets it through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from as_user import run_dagplan

TOOLS = '''import dagplan

@dagplan.tool(purity="side_effect")
def write(text: str) -> str:
    """Write a text."""
    return text

@dagplan.tool(purity="pure")
def load(rows: list[dict]) -> int:
    """Load rows."""
    return len(rows)
'''


def project(tmp_path: Path, **files: str) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS)
    for name, text in files.items():
        (tmp_path / name.replace("_", ".")).write_text(text)
    return tmp_path


def test_an_unknown_input_lists_the_declared_ones_and_an_invalid_plan_has_no_worst_case(tmp_path):
    plan = 'inputs:\n  city: {type: string}\n  days: {type: integer}\nsteps:\n  - id: a\n    llm: "on $input.zzz"\n' \
           "    output: $state.a\n"  # fmt: skip
    folder = project(tmp_path, plan_yaml=plan)
    done = run_dagplan(folder, "check", "plan.yaml", "--tools", "tools.py")
    assert done.returncode == 1
    assert "hint: the inputs declared: city, days (or declare it under `inputs:`)" in done.stdout
    assert "worst case" not in done.stderr + done.stdout  # an invalid plan: its errors, not its cost


def test_a_missing_list_of_objects_argument_is_hinted_with_a_key(tmp_path):
    plan = "steps:\n  - id: a\n    tool: load\n    args: {}\n    output: $state.n\n"
    folder = project(tmp_path, plan_yaml=plan)
    done = run_dagplan(folder, "check", "plan.yaml", "--tools", "tools.py")
    assert done.returncode == 1 and "needs argument 'rows'" in done.stdout, done.stdout
    assert "[{}]" not in done.stdout and "[{key: value}]" in done.stdout, done.stdout


def test_runs_takes_json_as_the_common_spelling(tmp_path):
    done = run_dagplan(tmp_path, "runs", "--json", state="state")
    assert done.returncode == 0 and json.loads(done.stdout) == [], done.stderr
    shown = run_dagplan(tmp_path, "runs", "--help")
    assert "--json" in shown.stdout


def test_diff_says_a_step_lost_its_approval_gate_in_those_words(tmp_path):
    gated = "steps:\n  - id: ok\n    gate: {question: write?, choices: [yes, no]}\n  - id: write\n    tool: write\n" \
            "    args: {text: hi}\n    deps: [ok]\n    output: $state.w\n"  # fmt: skip
    bare = "steps:\n  - id: write\n    tool: write\n    args: {text: hi}\n    output: $state.w\n"
    folder = project(tmp_path, a_yaml=gated, b_yaml=bare)
    done = run_dagplan(folder, "diff", "a.yaml", "b.yaml", "--tools", "tools.py")
    assert done.returncode == 1
    assert "write lost its approval gate (ok): it acts without asking" in done.stdout, done.stdout
    as_json = run_dagplan(folder, "diff", "a.yaml", "b.yaml", "--tools", "tools.py", "--format", "json")
    assert json.loads(as_json.stdout)["gates_lost"] == {"write": ["ok"]}
    same = run_dagplan(folder, "diff", "b.yaml", "a.yaml", "--tools", "tools.py", "--format", "json")
    assert json.loads(same.stdout)["gates_lost"] == {}  # a gate added is not a gate lost


def test_an_answer_given_ahead_that_the_gate_cannot_take_is_refused_before_the_run_starts(tmp_path):
    import shutil

    from as_user import ROOT

    for name in ("approve_refund.yaml", "tools.py"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    args = ("run", "approve_refund.yaml", "--tools", "tools.py", "-i", "customerId=c", "-i", "amount=5")
    refused = run_dagplan(tmp_path, *args, "--answer", "approve=aprove", state="state")
    assert refused.returncode == 2, refused.stderr
    assert "--answer approve: 'aprove' is not one of approve, reject (did you mean 'approve'?)" in refused.stderr
    assert json.loads(run_dagplan(tmp_path, "runs", "--json", state="state").stdout) == []  # nothing ran
    taken = run_dagplan(tmp_path, *args, "--answer", "approve=approve", state="state")
    assert taken.returncode == 0, taken.stderr


def test_a_fan_out_over_a_string_input_is_caught_by_check(tmp_path):
    plan = "inputs:\n  names: {type: string}\nsteps:\n  - id: each\n    for_each: $input.names\n    max_items: 5\n" \
           "    tool: write\n    args: {text: $item}\n    output: $state.out\n"  # fmt: skip
    folder = project(tmp_path, plan_yaml=plan)
    done = run_dagplan(folder, "check", "plan.yaml", "--tools", "tools.py")
    assert done.returncode == 1
    assert (
        "plan.yaml:5:15: error bad-for-each: step 'each' fans out over $input.names, which is a string" in done.stdout
    )
    listed = plan.replace("{type: string}", "{type: array, items: {type: string}}")
    (folder / "plan.yaml").write_text(listed)
    assert run_dagplan(folder, "check", "plan.yaml", "--tools", "tools.py").returncode == 0


def test_a_step_that_reads_the_path_it_writes_is_told_so(tmp_path):
    plan = "steps:\n  - id: a\n    tool: write\n    args: {text: first}\n    output: $state.x\n" \
           "  - id: b\n    tool: write\n    args: {text: $state.x}\n    output: $state.x\n"  # fmt: skip
    folder = project(tmp_path, plan_yaml=plan)
    done = run_dagplan(folder, "check", "plan.yaml", "--tools", "tools.py")
    assert done.returncode == 1
    assert "error cycle: step 'b' reads $state.x, which it writes itself; 'a' writes it too" in done.stdout
    assert (
        "write it to a path of its own (such as $state.x_2)" in done.stdout and "depends on itself" not in done.stdout
    )


def test_test_paths_scaffolds_the_first_test_file_and_its_refusal_case_passes_once_filled_in(tmp_path):
    import shutil

    import yaml

    from as_user import ROOT

    for name in ("approve_refund.yaml", "tools.py"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    drafted = run_dagplan(tmp_path, "test", "--paths", "approve_refund.yaml")  # no test file yet
    assert drafted.returncode == 0, drafted.stderr
    cases = yaml.safe_load(drafted.stdout.split("\n", 2)[2])["cases"]
    assert [c["mocks"]["gates"]["approve"] for c in cases] == ["approve", "reject"]
    assert cases[1]["expect"].get("had_errors") is True and "had_errors" not in cases[0]["expect"]
    for case in cases:  # filled in as a person would
        case["inputs"] = {"customerId": "c1", "amount": 5}
        case["mocks"]["tools"] = {"checkBillingHistory": {"result": {"orders": 2}}, "issueRefund": {"result": "ok"}}
        case["expect"]["result"] = "ok" if case["mocks"]["gates"]["approve"] == "approve" else None
    (tmp_path / "approve_refund.test.yaml").write_text(yaml.safe_dump({"plan": "approve_refund.yaml", "cases": cases}))
    ran = run_dagplan(tmp_path, "test", "approve_refund.test.yaml")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    covered = run_dagplan(tmp_path, "test", "--paths", "approve_refund.yaml")
    assert "every one of 2 branch combinations is covered" in covered.stdout, covered.stdout


def test_a_queued_runs_plan_is_named_from_the_project_root_whoever_queued_it(tmp_path, monkeypatch):
    """Issue 63: a schedule recorded its plan by absolute path, `submit` by the path as typed, so a
    `[pool.per_plan]` key named one of them only."""
    from dagplan.interpreter.core.config import load_config
    from dagplan.pool import plan_name

    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "nightly.yaml").write_text("steps: []\n")
    (tmp_path / "dagplan.toml").write_text("")
    config = load_config(tmp_path)
    monkeypatch.chdir(tmp_path / "plans")
    as_typed_here = plan_name("nightly.yaml", config)
    absolute = plan_name(str(tmp_path / "plans" / "nightly.yaml"), config)
    monkeypatch.chdir(tmp_path)
    from_root = plan_name("plans/nightly.yaml", config)
    assert as_typed_here == absolute == from_root == "plans/nightly.yaml"
    assert plan_name("<stdin>", config) == "<stdin>"
    outside = tmp_path.parent / "elsewhere.yaml"
    outside.write_text("steps: []\n")
    assert plan_name(str(outside), config) == str(outside)


def test_a_plan_that_calls_no_tool_is_not_told_to_give_tools():
    """`dagplan preview` of a plan of gates and model steps printed `--tools TOOLS.py` in the command to run it."""
    import dagplan

    only_gate = dagplan.load(text='steps:\n  - id: ok\n    gate: {question: "go?"}\n', name="g.yaml")
    assert dagplan.preview(only_gate).command_to_run() == "dagplan run g.yaml"
    with_tool = dagplan.load(text="steps:\n  - {id: a, tool: t, output: $state.a}\n", name="t.yaml")
    assert dagplan.preview(with_tool).command_to_run() == "dagplan run t.yaml --tools TOOLS.py"


def test_a_steps_return_type_flows_into_the_next_steps_argument_check(tmp_path):
    """A `list[str]` a tool returns, passed to a `list[dict]` parameter, passed `check` (and `dagplan plan` said
    argument types were checked): the return annotation is the step's output type now, checked where it is read."""
    tools = (
        TOOLS
        + '''
@dagplan.tool(purity="pure")
def names(query: str) -> list[str]:
    """Names."""
    return [query]

@dagplan.tool(purity="pure")
def rows(query: str) -> list[dict]:
    """Rows."""
    return [{"name": query}]
'''
    )
    wrong = "steps:\n  - {id: a, tool: names, args: {query: x}, output: $state.found}\n" \
            "  - {id: b, tool: load, args: {rows: $state.found}, output: $state.n}\n"  # fmt: skip
    folder = project(tmp_path, wrong_yaml=wrong, right_yaml=wrong.replace("tool: names", "tool: rows"))
    (folder / "tools.py").write_text(tools)
    done = run_dagplan(folder, "check", "wrong.yaml", "--tools", "tools.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrong.yaml:3:" in done.stdout and "argument 'rows' of tool 'load' must be a list of object, not a " \
           "list of string ($state.found is what the step writing it returns)" in done.stdout  # fmt: skip
    assert run_dagplan(folder, "check", "right.yaml", "--tools", "tools.py").returncode == 0
