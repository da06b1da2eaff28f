"""A person's approval of a plan (interpreter/ops/approval.py): bound to the exact plan and tools approved;
anything changed since, or an approval damaged, is refused naming what."""

from __future__ import annotations

import json

import pytest

from as_user import ROOT, run_dagplan_s

TOOLS = (ROOT / "examples" / "tools.py").read_text()  # the examples' tools, as the project has them


def yaml_load(text: str):
    import yaml

    return yaml.safe_load(text)


REFUND = """summary: Refund a customer
inputs:
  customerId: {type: string}
steps:
  - id: history
    tool: checkBillingHistory
    args: {customerId: †input.customerId}
    output: †state.history
  - id: refund
    tool: issueRefund
    args: {customerId: †input.customerId, amount: 20}
    output: †state.receipt
result: †state.receipt
"""


def test_a_plan_approved_in_review_is_the_plan_that_runs(tools_project):
    (tools_project / "refund.yaml").write_text(REFUND)
    shown = run_dagplan_s(
        tools_project, "preview", "refund.yaml", "--tools", "tools.py", "--approve", "-o", "refund.approval.json"
    )
    assert shown.returncode == 0 and "--approved refund.approval.json" in shown.stderr, shown.stderr
    approval = json.loads((tools_project / "refund.approval.json").read_text())
    assert approval["side_effects"] == ["refund"] and approval["approved_by"] and approval["plan_hash"].startswith(
        "sha256:")  # fmt: skip
    run = ("run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1", "--approved", "refund.approval.json")
    done = run_dagplan_s(tools_project, *run, "--format", "json")
    assert done.returncode == 0, done.stderr
    (record,) = (tools_project / "s").rglob(f"{json.loads(done.stdout)['run_id']}/plan.json")
    assert approval["plan_hash"] in record.read_text()  # the approval is kept in the run's record
    # the same plan in JSON and another key order is the same plan
    (tools_project / "same.json").write_text(json.dumps(yaml_load(REFUND), sort_keys=True))
    same = run_dagplan_s(tools_project, "run", "same.json", *run[2:])
    assert same.returncode == 0, same.stderr


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda t: t.replace("amount: 20", "amount: 2000"), "step refund changed: args"),
        (lambda t: t.replace("result:", "  - id: again\n    tool: issueRefund\n    args: {customerId: x, amount: 1}\nresult:"),
         "a step that acts on the world was added: again"),
        (lambda t: t.replace("summary: Refund a customer", "summary: Refund\nmax_cost: 500"), "max_cost"),
    ],
)  # fmt: skip
def test_a_plan_changed_after_its_approval_is_refused_naming_what_changed(tools_project, edit, words):
    (tools_project / "refund.yaml").write_text(REFUND)
    assert run_dagplan_s(tools_project, "preview", "refund.yaml", "--tools", "tools.py", "--approve").returncode == 0
    (tools_project / "refund.yaml").write_text(edit(REFUND))
    proc = run_dagplan_s(tools_project, "run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1",
                "--approved", "refund.approval.json")  # fmt: skip
    assert proc.returncode == 1 and "not-approved" in proc.stderr and words in proc.stderr, proc.stderr
    assert not list((tools_project / "s").rglob("*.jsonl"))  # nothing ran


def test_tools_changed_after_the_approval_are_refused(tools_project):
    (tools_project / "refund.yaml").write_text(REFUND)
    assert run_dagplan_s(tools_project, "preview", "refund.yaml", "--tools", "tools.py", "--approve").returncode == 0
    (tools_project / "tools.py").write_text(TOOLS.replace('"""Refund an amount', '"""Refund any amount'))
    proc = run_dagplan_s(tools_project, "run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1",
                "--approved", "refund.approval.json")  # fmt: skip
    assert proc.returncode == 1 and "tool issueRefund is not the one approved" in proc.stderr, proc.stderr
    (tools_project / "tools.py").write_text(TOOLS + "\n# a comment: the code changed\n")
    proc = run_dagplan_s(tools_project, "run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1",
                "--approved", "refund.approval.json")  # fmt: skip
    assert proc.returncode == 1 and "the code of tool issueRefund changed since the approval" in proc.stderr, (
        proc.stderr
    )


@pytest.mark.parametrize("damage", ["{}", "not json", '{"dagplan_approval": 1}', "EDITED"])
def test_a_damaged_or_edited_approval_is_refused(tools_project, damage):
    (tools_project / "refund.yaml").write_text(REFUND)
    assert run_dagplan_s(tools_project, "preview", "refund.yaml", "--tools", "tools.py", "--approve").returncode == 0
    path = tools_project / "refund.approval.json"
    if damage == "EDITED":  # the plan inside widened by hand, the hashes left
        data = json.loads(path.read_text())
        data["document"]["steps"][1]["args"]["amount"] = 2000
        path.write_text(json.dumps(data))
    else:
        path.write_text(damage)
    proc = run_dagplan_s(
        tools_project, "run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1", "--approved", str(path)
    )
    assert proc.returncode == 2 and "bad-approval" in proc.stderr, proc.stderr
