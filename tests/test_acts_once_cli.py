"""Round five's reproductions, as a user runs them (`python -m dagplan`, a folder of files, no terminal): a step
that acts runs once, never on a failure, never after a refusal, however the value came to it (issues 59, 60),
and what init, answers and submissions do with hostile files (issue 61's h-cases)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from as_user import run_dagplan

TOOLS = '''import dagplan

@dagplan.tool(purity="pure")
def lookup(account: str = "acme") -> str:
    """Look up the supplier's account."""
    raise RuntimeError("account service down")

@dagplan.tool(purity="pure")
def fetch() -> str:
    """Read the account."""
    return "acct-1"

@dagplan.tool(purity="pure")
def tidy(text: str) -> str:
    """Tidy a text."""
    return str(text).strip()

@dagplan.tool(purity="pure")
def item(n: str) -> str:
    """One item."""
    if n == "bad":
        raise ValueError("this item failed")
    return n

@dagplan.tool(purity="side_effect")
def pay(account: object, amount: int = 10) -> str:
    """Pay an account."""
    with open("PAID", "a") as f:
        f.write(f"{account}\\n")
    return "paid"

@dagplan.tool
def pay_plain(account: object) -> str:
    """Pay, declaring nothing (it counts as acting)."""
    with open("PAID", "a") as f:
        f.write(f"{account}\\n")
    return "paid"

@dagplan.tool(purity="side_effect")
def pay_flaky(account: object) -> str:
    """Pays, then the answer is lost on the way back."""
    with open("PAID", "a") as f:
        f.write(f"{account}\\n")
    raise ConnectionError("connection reset")
'''


def project(tmp_path: Path, plan: str, tools: str = TOOLS) -> Path:
    (tmp_path / "tools.py").write_text(tools)
    (tmp_path / "plan.yaml").write_text(plan)
    return tmp_path


def paid(folder: Path) -> list[str]:
    found = folder / "PAID"
    return found.read_text().splitlines() if found.exists() else []


def run(folder: Path, *args: str):
    return run_dagplan(folder, "run", "plan.yaml", "--tools", "tools.py", "--no-input", *args, state="state",
                       env={"NO_COLOR": "1"})  # fmt: skip


def test_a_failure_through_a_pure_step_holds_back_what_acts(tmp_path):
    """h05: a pure step passes the failure's text on; the payment after it is skipped, naming where it came from."""
    folder = project(
        tmp_path,
        """steps:
  - {id: look, tool: lookup, output: †state.account}
  - {id: clean, tool: tidy, args: {text: †state.account}, output: †state.clean}
  - {id: p, tool: pay, args: {account: †state.clean}, output: †state.paid}
""",
    )
    done = run(folder)
    assert done.returncode == 1 and paid(folder) == [], done.stdout + done.stderr
    assert "carries the failure of look" in done.stdout + done.stderr


def test_a_sub_plan_whose_step_failed_fails(tmp_path):
    """h12: the sub-plan does not complete with the failure's text as its result."""
    folder = project(
        tmp_path,
        """steps:
  - id: s
    plan:
      steps:
        - {id: look, tool: lookup, output: †state.acct}
      result: †state.acct
    output: †state.acct
  - {id: p, tool: pay, args: {account: †state.acct}, output: †state.paid}
""",
    )
    done = run(folder)
    assert done.returncode == 1 and paid(folder) == [], done.stdout + done.stderr
    assert "s.look failed" in done.stdout + done.stderr


def test_a_fan_out_with_a_failed_item_does_not_reach_what_acts(tmp_path):
    """h13: the list holds a failure value: the step that acts on the list is skipped."""
    folder = project(
        tmp_path,
        """steps:
  - {id: each, tool: item, for_each: [a, bad, c], args: {n: †item}, output: †state.items}
  - {id: p, tool: pay, args: {account: †state.items}, output: †state.paid}
""",
    )
    done = run(folder)
    assert done.returncode == 1 and paid(folder) == [], done.stdout + done.stderr


def test_a_refusal_inside_a_sub_plan_or_a_loop_holds_back_what_follows(tmp_path):
    """h14: the gate sits inside the sub-plan (the loop); a person refuses; the payment after it is skipped."""
    inner = """{steps: [{id: ok, gate: {question: Pay?, choices: [approve, reject]}},
                   {id: n, tool: tidy, deps: [ok], args: {text: approved}, output: †state.n}], result: †state.n}"""
    for kind, answer, body in (
        ("plan", "s.ok=reject", f"  - id: s\n    plan: {inner}\n    output: †state.approved\n"),
        ("loop", "s[0].ok=reject", f"  - id: s\n    loop: {{max_iterations: 1, plan: {inner}}}\n    output: †state.approved\n"),
    ):  # fmt: skip
        folder = tmp_path / kind
        folder.mkdir()
        project(
            folder,
            "steps:\n" + body + "  - {id: p, tool: pay, args: {account: †state.approved}, output: †state.paid}\n",
        )
        done = run(folder, "--answer", answer)
        assert done.returncode == 1 and paid(folder) == [], (kind, done.stdout + done.stderr)
        assert "refused" in done.stdout + done.stderr, done.stdout


def test_a_decision_quoted_as_text_is_not_a_route(tmp_path):
    """g08: a `when:` elsewhere compares the decision; the payment only quotes it in its memo: held back."""
    folder = project(
        tmp_path,
        """steps:
  - id: ok
    gate: {question: Pay 10?, choices: [approve, reject]}
    output: †state.decision
  - {id: tell, when: '†state.decision == "reject"', tool: tidy, args: {text: refused}, output: †state.told}
  - {id: p, tool: pay, args: {account: "decision: †state.decision"}, output: †state.paid}
""",
    )
    done = run(folder, "--answer", "ok=reject")
    assert done.returncode == 1 and paid(folder) == [], done.stdout + done.stderr
    approved = tmp_path / "yes"
    approved.mkdir()
    project(approved, (folder / "plan.yaml").read_text())
    assert run(approved, "--answer", "ok=approve").returncode == 0 and paid(approved) == ["decision: approve"]


def test_resume_from_refuses_to_run_an_undeclared_tool_again(tmp_path):
    """h01: a tool that declares nothing acts: `resume --from` names it and runs nothing (exit 2)."""
    folder = project(
        tmp_path,
        """steps:
  - {id: a, tool: fetch, output: †state.acct}
  - {id: p, tool: pay_plain, args: {account: †state.acct}, output: †state.paid}
""",
    )
    assert run(folder).returncode == 0 and paid(folder) == ["acct-1"]
    dry = run_dagplan(folder, "resume", "@last", "--from", "a", "--dry-run", "--tools", "tools.py", state="state")
    again = run_dagplan(folder, "resume", "@last", "--from", "a", "--no-input", "--tools", "tools.py", state="state")
    assert again.returncode == 2 and "rerun-side-effects" in again.stderr and " p" in again.stderr, again.stderr
    assert paid(folder) == ["acct-1"], dry.stdout


def test_a_side_effect_is_not_retried_unless_its_plan_says_so(tmp_path):
    """h06: no `retry:` written: the payment whose answer was lost is called once, and the run says it failed."""
    folder = project(
        tmp_path,
        """steps:
  - {id: p, tool: pay_flaky, args: {account: acct-1}, output: †state.paid}
""",
    )
    done = run(folder)
    assert done.returncode == 1 and paid(folder) == ["acct-1"], done.stdout + done.stderr
    # a person says it did pay: the call is taken as done, and said so (issue 63: it said "done (replayed)")
    adopted = run_dagplan(folder, "resume", "@last", "--on-interrupted", "adopt", "--tools", "tools.py",
                          state="state", env={"NO_COLOR": "1"})  # fmt: skip
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    assert "adopted (a person took the interrupted call as done; nothing was called)" in adopted.stderr, adopted.stderr
    assert "done (replayed)" not in adopted.stderr and paid(folder) == ["acct-1"]
    written = tmp_path / "written"
    written.mkdir()
    project(
        written,
        """steps:
  - {id: p, tool: pay_flaky, args: {account: acct-1}, output: †state.paid, retry: {limit: 2, backoff: 0}}
""",
    )
    assert run(written).returncode == 1 and paid(written) == ["acct-1"] * 3  # the author asked for it


def test_a_side_effect_that_timed_out_is_not_tried_again_and_resume_asks(tmp_path):
    """h06: an attempt past its timeout may still be acting: no second attempt, whatever `retry:` says; the
    outcome is unknown, so `resume` stops in needs_decision (exit 3) instead of paying again."""
    tools = (
        TOOLS
        + '''
import threading

@dagplan.tool(purity="side_effect")
def pay_slowly(account: object) -> str:
    """Pays once the bank answers (it never does here)."""
    threading.Event().wait(30)
    return "paid"
'''
    )
    folder = project(
        tmp_path,
        """steps:
  - {id: p, tool: pay_slowly, args: {account: acct-1}, output: †state.paid, timeout: 1s, retry: {limit: 3, backoff: 0}}
""",
        tools,
    )
    done = run(folder)
    assert done.returncode == 1, done.stdout + done.stderr
    events = run_dagplan(folder, "events", "@last", "--format", "json", state="state").stdout
    assert len(re.findall(r'"type": "plan_step_started"', events)) == 1 and "may or may not have acted" in events, (
        events
    )
    again = run_dagplan(folder, "resume", "@last", "--no-input", "--tools", "tools.py", state="state")
    assert again.returncode == 3 and "needs a decision" in again.stderr, again.stderr


def test_an_approval_binds_a_value_the_tool_file_imports(tmp_path):
    """g06/g07: `from rates import FACTOR` (a number), and a module imported inside the tool's body: an edit of
    either after the approval is refused (not-approved, exit 1)."""
    (tmp_path / "rates.py").write_text("FACTOR = 1\n")
    (tmp_path / "bank.py").write_text("def send(n):\n    return n\n")
    tools = '''import dagplan
from rates import FACTOR

@dagplan.tool(purity="side_effect")
def pay(amount: int) -> str:
    """Pay."""
    from bank import send
    return f"paid {send(amount * FACTOR)}"
'''
    folder = project(tmp_path, "steps:\n  - {id: p, tool: pay, args: {amount: 10}, output: †state.paid}\n", tools)
    approve = run_dagplan(folder, "preview", "plan.yaml", "--tools", "tools.py", "--approve", "-o", "approval.json")
    assert approve.returncode == 0, approve.stderr
    for module, edit in (("rates.py", "FACTOR = 100\n"), ("bank.py", "def send(n):\n    return n * 100\n")):
        before = (folder / module).read_text()
        (folder / module).write_text(edit)
        done = run(folder, "--approved", "approval.json")
        assert done.returncode == 1 and "not-approved" in done.stderr + done.stdout, (module, done.stderr)
        (folder / module).write_text(before)
    assert run(folder, "--approved", "approval.json").returncode == 0


def test_init_never_writes_through_a_dangling_link(tmp_path):
    """h11: a dangling `tools.py` link is something there: nothing is written, outside the folder least of all."""
    folder = tmp_path / "proj"
    folder.mkdir()
    os.symlink(tmp_path / "outside" / "planted.py", folder / "tools.py")
    (tmp_path / "outside").mkdir()
    done = run_dagplan(folder, "init")
    assert done.returncode == 2 and "tools.py already in" in done.stderr, done.stderr
    assert not (tmp_path / "outside" / "planted.py").exists() and not (folder / "plan.yaml").exists()


def test_an_answer_file_that_holds_no_valid_answer_is_ignored(tmp_path):
    """h09/h10: a FIFO, or an answer naming a channel this dagplan does not know, at the gate's answer file: the
    reader neither blocks nor fails the gate."""
    from dagplan.interpreter.ops.asking import _read

    fifo = tmp_path / "x.answer.json"
    os.mkfifo(fifo)
    assert _read(fifo) is None  # no writer: it would block a plain open()
    odd = tmp_path / "odd.answer.json"
    odd.write_text(json.dumps({"value": "approve", "channel": "phone", "who": "ada"}))
    assert _read(odd) is None
    odd.write_text(json.dumps({"value": "approve", "channel": "answer", "who": "ada"}))
    assert _read(odd) is not None and _read(odd).value == "approve"


def test_check_knows_a_gates_choices(tmp_path):
    """Issue 59: `when: †state.decision == "aprove"` never holds: check says so at its column, with a
    did-you-mean (a warning), and an error when no choice is close; the plan with the right word is clean."""
    plan = """steps:
  - id: ok
    gate: {question: Pay?, choices: [approve, reject]}
    output: †state.decision
  - id: p
    when: †state.decision == "WORD"
    tool: pay
    args: {account: acct-1}
    output: †state.paid
result: †state.paid
"""
    folder = project(tmp_path, plan.replace("WORD", "aprove"))
    done = run_dagplan(folder, "check", "plan.yaml", "--tools", "tools.py")
    assert "plan.yaml:6:30: warning misspelt-choice" in done.stdout and "did you mean 'approve'?" in done.stdout
    (folder / "plan.yaml").write_text(plan.replace("WORD", "maybe"))
    done = run_dagplan(folder, "check", "plan.yaml", "--tools", "tools.py")
    assert done.returncode == 1 and "error unknown-choice" in done.stdout, done.stdout
    (folder / "plan.yaml").write_text(plan.replace("WORD", "approve"))
    done = run_dagplan(folder, "check", "plan.yaml", "--tools", "tools.py")
    assert done.returncode == 0 and "choice" not in done.stdout, done.stdout


def test_a_run_through_the_api_never_loses_its_work_at_a_gate(tmp_path, monkeypatch):
    """Issue 60: `dagplan.run(plan)` (no `durable=`, no `ask_gate`) stops at a gate with a run id that
    `dagplan.answer` and `dagplan.resume` find, and `dagplan runs` (the CLI) lists; the step before the gate is
    not run again."""
    import dagplan

    monkeypatch.chdir(tmp_path)
    reads: list[str] = []

    @dagplan.tool(purity="pure")
    def read() -> str:
        reads.append("read")
        return "acct-1"

    @dagplan.tool(purity="side_effect")
    def pay(v: str) -> str:
        reads.append(f"paid {v}")
        return "paid"

    text = """steps:
  - {id: r, tool: read, output: †state.r}
  - id: ok
    gate: {question: Pay?, choices: [approve, reject]}
  - {id: p, tool: pay, deps: [ok], args: {v: †state.r}, output: †state.p}
"""
    plan = dagplan.load(text=text, name="g.yaml", tools=[read, pay])
    first = dagplan.run(plan, tools=[read, pay])
    assert str(first.status) == "waiting" and first.run_id
    listed = run_dagplan(tmp_path, "runs", "--format", "json")
    assert first.run_id in listed.stdout, listed.stdout + listed.stderr
    dagplan.answer(first.run_id, "ok", "approve")
    done = dagplan.resume(first.run_id, tools=[read, pay])
    assert str(done.status) == "completed" and reads == ["read", "paid acct-1"]


def test_every_gate_of_a_fan_out_waits_at_once_and_one_pattern_answers_them(tmp_path):
    """Issue 60: a fan-out over a sub-plan (a read, a gate, a payment): the run waits at each item's gate, not
    the first item's only; `dagplan answer RUN 'each[*].ok' approve` settles all three; nothing pays before."""
    tools = (
        TOOLS
        + '''

@dagplan.tool(purity="pure")
def look(x: str) -> str:
    """Look an item up."""
    return f"looked {x}"
'''
    )
    folder = project(
        tmp_path,
        """steps:
  - id: each
    for_each: [a, b, c]
    max_items: 3
    plan:
      inputs: {x: {}}
      steps:
        - {id: r, tool: look, args: {x: †input.x}, output: †state.r}
        - id: ok
          gate: {question: "Pay for †state.r?", choices: [approve, reject]}
        - {id: p, tool: pay, deps: [ok], args: {account: †state.r}, output: †state.p}
      result: †state.p
    args: {x: †item}
    output: †state.all
""",
        tools,
    )
    first = run(folder)
    assert first.returncode == 3 and paid(folder) == [], first.stdout + first.stderr
    listed = json.loads(run_dagplan(folder, "runs", "--format", "json", state="state").stdout)
    assert sorted(w["step"] for w in listed[0]["waiting"]) == ["each[0].ok", "each[1].ok", "each[2].ok"]
    answered = run_dagplan(folder, "answer", "@last", "each[*].ok", "approve", state="state")
    assert answered.returncode == 0, answered.stderr
    done = run_dagplan(folder, "resume", "@last", "--tools", "tools.py", "--no-input", state="state")
    assert done.returncode == 0 and sorted(paid(folder)) == ["looked a", "looked b", "looked c"], done.stderr


def test_a_preview_with_reuse_never_says_an_acting_step_is_skipped_when_the_run_runs_it(tmp_path):
    """The newcomer's major: after an edit, `preview --reuse RUN` said the acting step `log` would be skipped
    (`†state.summary.words was never written (branch not taken)`: the preview's stand-in answer has no such
    field; the plan has no branch), and the run then executed it."""
    tools = (
        TOOLS
        + '''
@dagplan.tool(purity="pure")
def summarize(text: str) -> dict:
    """Count a text's words."""
    return {"words": len(str(text).split()), "text": str(text)}
'''
    )
    plan = """steps:
  - id: summary
    tool: summarize
    args: {text: "one two three"}
    output: $state.summary
  - id: log
    tool: pay_plain
    args: {account: $state.summary.words}
    output: $state.logged
  - id: done
    tool: tidy
    args: {text: " Done. "}
    output: $state.done
result: $state.done
"""
    folder = project(tmp_path, plan, tools)
    first = run(folder, "--format", "json")
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    (folder / "plan.yaml").write_text(plan.replace("one two three", "one two three four"))
    shown = run_dagplan(folder, "preview", "plan.yaml", "--tools", "tools.py", "--reuse", run_id, "--format",
                        "json", state="state")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    rows = {row["id"]: row for row in json.loads(shown.stdout)["rerun"]["steps"]}
    assert rows["log"]["action"] == "run", rows["log"]
    assert rows["done"]["action"] == "reuse", rows["done"]
    text = run_dagplan(folder, "preview", "plan.yaml", "--tools", "tools.py", "--reuse", run_id, state="state")
    assert "never written" not in text.stdout, text.stdout
    again = run(folder, "--reuse", run_id, "--format", "json")
    assert again.returncode == 0, again.stderr
    assert paid(folder) == ["3", "4"]  # it ran, as the preview said: once per run


def test_a_gate_is_not_asked_about_a_failures_text(tmp_path):
    """Issue 63: a gate after a failure asked its question with the failure text inside ("Pay (FAILED: ...)?");
    under its default trigger it is held back as what acts is, and nothing after it runs; a gate whose author
    wrote `trigger: all_done` asks anyway (the author chose)."""
    plan = """steps:
  - {id: look, tool: lookup, output: †state.account}
  - {id: clean, tool: tidy, args: {text: †state.account}, output: †state.clean}
  - {id: ok, gate: {question: "Pay †state.clean?", choices: [approve, reject]}, deps: [clean]}
  - {id: p, tool: pay, args: {account: †state.clean}, deps: [ok], output: †state.paid}
"""
    folder = project(tmp_path, plan)
    done = run(folder, "--format", "json")
    assert done.returncode == 1 and paid(folder) == [], done.stdout + done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert steps["ok"]["status"] == "skipped" and "would ask a person about a failure" in steps["ok"]["reason"]
    assert "carries the failure of look" in steps["ok"]["reason"] and steps["p"]["status"] == "skipped"
    chosen = plan.replace("deps: [clean]}", "deps: [clean], trigger: all_done}")
    (folder / "plan.yaml").write_text(chosen)
    asked = run(folder, "--format", "json")
    assert json.loads(asked.stdout)["status"] == "waiting", asked.stdout + asked.stderr  # it asks: the author chose
