"""`dagplan diff`: a reviewer's diff of two plans. The same plan in another dialect, key order or step
order is no change; an added side effect is reported first; renames, field changes, edges and the plan's
own keys are named; text, JSON and Markdown; a run's stored plan against a file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import dagplan
from as_user import run_dagplan_s

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PLANS = sorted(p for p in EXAMPLES.glob("*") if p.suffix in (".yaml", ".json") and ".test." not in p.name)


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _rekeyed(value):
    if isinstance(value, dict):
        return {k: _rekeyed(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_rekeyed(v) for v in value]
    return value


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("diff") / "examples"
    shutil.copytree(EXAMPLES, home)
    return home


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.name)
def test_the_same_plan_rekeyed_reordered_in_json_is_no_change(examples, path):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    copy = _rekeyed(data)
    dialect = dagplan.load(path, tools=dagplan.load_tools([EXAMPLES / "tools.py"])).dialect
    if isinstance(copy, dict) and isinstance(copy.get("steps"), list) and dialect != "steps":
        copy["steps"] = list(reversed(copy["steps"]))  # order does not matter (the steps form wants it kept)
    (examples / f"copy-{path.stem}.json").write_text(json.dumps(copy, ensure_ascii=False), encoding="utf-8")
    done = cli(examples, "diff", path.name, f"copy-{path.stem}.json", "--tools", "tools.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the same plan" in done.stdout


def test_an_added_side_effect_is_reported_first(examples):
    plan = (examples / "weather.yaml").read_text(encoding="utf-8")
    more = plan.replace("steps:\n", "steps:\n  - id: charge\n    tool: processPayment\n    args: {amount: 5}\n"
                                    "    output: †state.charged\n", 1)  # fmt: skip
    (examples / "charged.yaml").write_text(more, encoding="utf-8")
    done = cli(examples, "diff", "weather.yaml", "charged.yaml", "--tools", "tools.py")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[1:3] == ["side effects added:", "  charge"], done.stdout
    assert "steps added:" in lines and "  charge" in lines[lines.index("steps added:") :]
    data = json.loads(cli(examples, "diff", "weather.yaml", "charged.yaml", "--tools", "tools.py",
                          "--format", "json").stdout)  # fmt: skip
    assert data["side_effects_added"] == ["charge"] and data["added"] == ["charge"] and not data["same"]
    markdown = cli(examples, "diff", "weather.yaml", "charged.yaml", "--tools", "tools.py", "--format", "markdown")
    assert markdown.stdout.startswith("### weather.yaml -> charged.yaml\n**side effects added**\n- charge")


def test_a_renamed_step_a_changed_argument_and_the_edges(examples):
    plan = (examples / "refund.yaml").read_text(encoding="utf-8")
    changed = plan.replace("id: history", "id: billing").replace("#history", "#billing")
    changed = changed.replace("amount: †input.amount", "amount: 10")
    (examples / "changed.yaml").write_text(changed, encoding="utf-8")
    found = dagplan.diff(examples / "refund.yaml", examples / "changed.yaml", [str(EXAMPLES / "tools.py")])
    assert found.renamed == [("history", "billing")] and not found.added and not found.removed
    assert found.changed["refund"] == {"args.amount": ("†input.amount", 10)}  # the key that changed, not all args
    assert found.side_effects_changed == ["refund"]  # said with the side effects: it acts on the world
    shown = cli(examples, "diff", "refund.yaml", "changed.yaml", "--tools", "tools.py").stdout
    assert (
        "side effects changed:\n  refund (args.amount)" in shown
        and 'refund.args.amount: "†input.amount" -> 10' in shown
    )
    assert not found.edges_added and not found.edges_removed  # the rename carries its edges


def test_a_runs_stored_plan_against_a_file(examples):
    started = cli(examples, "run", "weather.yaml", "--tools", "tools.py", "-i", "city=Rome")
    assert started.returncode == 0, started.stderr
    run_id = json.loads(cli(examples, "runs", "--format", "json").stdout)[0]["id"]
    assert cli(examples, "diff", f"run:{run_id}", "weather.yaml", "--tools", "tools.py").returncode == 0
    assert cli(examples, "diff", f"run:{run_id}", "charged.yaml", "--tools", "tools.py").returncode == 1


def test_a_missing_file_is_a_usage_error(examples):
    done = cli(examples, "diff", "weather.yaml", "no-such.yaml")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_without_tools_diff_and_preview_say_whether_a_step_acts_is_unknown(tmp_path):
    """No tools known: the side-effect section is not dropped without a word; each changed step whose purity
    only its tool knows is listed as unknown, and preview marks it so (with --tools, it is a side effect)."""
    (tmp_path / ".git").mkdir()
    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "tools.py")
    before = "steps:\n  - id: pay\n    tool: issueRefund\n    args: {customerId: c1, amount: 5}\n    output: $state.r\n"
    (tmp_path / "a.yaml").write_text(before)
    (tmp_path / "b.yaml").write_text(before.replace("amount: 5", "amount: 500"))
    bare = cli(tmp_path, "diff", "a.yaml", "b.yaml")
    assert (
        "whether these act on the world is unknown (no tools known here: give --tools FILE):\n  pay (args.amount)"
        in bare.stdout
    ), bare.stdout
    assert "side effects changed" not in bare.stdout
    tooled = cli(tmp_path, "diff", "a.yaml", "b.yaml", "--tools", "tools.py")
    assert "side effects changed:\n  pay (args.amount)" in tooled.stdout and "unknown" not in tooled.stdout
    shown = cli(tmp_path, "preview", "a.yaml")
    assert "[pay] tool=issueRefund (acts on the world? unknown: no tools known)" in shown.stdout, shown.stdout
    as_json = json.loads(cli(tmp_path, "diff", "a.yaml", "b.yaml", "--format", "json").stdout)
    assert as_json["purity_unknown"] == ["pay"] and as_json["side_effects_changed"] == []


def test_a_prompt_edit_is_shown_as_a_word_diff(tmp_path):
    """An edited prompt reads as the edit (git's --word-diff), not as two truncated JSON strings."""
    prompt = ("Summarize the following report for a busy executive, in three bullet points, keeping every "
              "number exact and naming every owner of an action item: #r")  # fmt: skip
    plan = {"steps": [{"id": "r", "tool": "lookup", "args": {"x": 1}, "output": "$state.r"},
                      {"id": "s", "llm": prompt, "output": "$state.s"}], "result": "$state.s"}  # fmt: skip
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(plan))
    plan["steps"][1]["llm"] = prompt.replace("three bullet", "five short bullet")
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(plan))
    done = cli(tmp_path, "diff", "a.yaml", "b.yaml")
    assert done.returncode == 1, done.stderr
    assert "s.llm.prompt: ... a busy executive, in [-three-] {+five short+} bullet points, keeping every ..." in (
        done.stdout
    ), done.stdout


ONE = 'steps:\n  - id: history\n    tool: checkBillingHistory\n    args: {customerId: "c1"}\n    output: †state.h\n'


INLINE = """steps:
  - id: child
    plan:
      steps:
        - id: look
          tool: {tool}
          args: {args}
          output: †state.h
      result: †state.h
    output: †state.out
"""


@pytest.mark.parametrize(
    "key, before, after",
    [("max_cost", "0.1", "500"), ("max_tokens", "1000", "900000"), ("executor", "local", "ray"),
     ("timeout", "10s", "1h"), ("mode", "eager", "lazy"), ("on_failure", "abort", "continue")],
)  # fmt: skip
def test_diff_reports_every_plan_key(tools_project, key, before, after):
    (tools_project / "a.yaml").write_text(f"{key}: {before}\n{ONE}")
    (tools_project / "b.yaml").write_text(f"{key}: {after}\n{ONE}")
    proc = run_dagplan_s(tools_project, "diff", "a.yaml", "b.yaml", "--tools", "tools.py", "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert key in json.loads(proc.stdout)["plan"], proc.stdout


def test_diff_sees_a_changed_or_removed_precomputed_output(tools_project):
    call = {"_tool": "checkBillingHistory", "customerId": "c1", "_outputPath": "†state.h"}
    (tools_project / "c1.json").write_text(json.dumps([{**call, "_output": {"orders": 1}}]))
    (tools_project / "c2.json").write_text(json.dumps([{**call, "_output": {"orders": 999}}]))
    (tools_project / "c3.json").write_text(json.dumps([call]))
    (tools_project / "c1copy.json").write_text(json.dumps([{**call, "_output": {"orders": 1}}]))
    assert run_dagplan_s(tools_project, "diff", "c1.json", "c2.json", "--tools", "tools.py").returncode == 1
    assert run_dagplan_s(tools_project, "diff", "c1.json", "c3.json", "--tools", "tools.py").returncode == 1
    assert run_dagplan_s(tools_project, "diff", "c1.json", "c1copy.json", "--tools", "tools.py").returncode == 0


def test_diff_compares_sub_plans_by_content_not_by_file(tools_project):
    looked = INLINE.format(tool="checkBillingHistory", args='{customerId: "c1"}')
    (tools_project / "i1.yaml").write_text(looked)
    (tools_project / "i1copy.yaml").write_text(looked)
    (tools_project / "i2.yaml").write_text(INLINE.format(tool="issueRefund", args='{customerId: "c1", amount: 999}'))
    same = run_dagplan_s(tools_project, "diff", "i1.yaml", "i1copy.yaml", "--tools", "tools.py")
    assert same.returncode == 0, same.stdout
    changed = run_dagplan_s(tools_project, "diff", "i1.yaml", "i2.yaml", "--tools", "tools.py", "--format", "json")
    found = json.loads(changed.stdout)
    assert changed.returncode == 1 and found["side_effects_added"] == ["child.look"], found
    assert found["changed"]["child.look"]["tool"] == {"before": "checkBillingHistory", "after": "issueRefund"}
    assert found["changed"]["child.look"]["args.amount"] == {"before": None, "after": 999}  # the key that changed
    sub = "steps:\n  - id: look\n    tool: {}\n    args: {}\n    output: †state.h\nresult: †state.h\n"
    for folder, child in (("old", sub.format("checkBillingHistory", '{customerId: "c1"}')),
                          ("new", sub.format("checkBillingHistory", '{customerId: "c1"}')),
                          ("new2", sub.format("issueRefund", '{customerId: "c1", amount: 1}'))):  # fmt: skip
        (tools_project / folder).mkdir()
        (tools_project / folder / "p.yaml").write_text(
            "steps:\n  - id: child\n    plan: sub.yaml\n    output: †state.o\n"
        )
        (tools_project / folder / "sub.yaml").write_text(child)
    assert run_dagplan_s(tools_project, "diff", "old/p.yaml", "new/p.yaml", "--tools", "tools.py").returncode == 0
    moved = run_dagplan_s(tools_project, "diff", "old/p.yaml", "new2/p.yaml", "--tools", "tools.py", "--format", "json")
    assert moved.returncode == 1 and json.loads(moved.stdout)["side_effects_added"] == ["child.look"], moved.stdout
