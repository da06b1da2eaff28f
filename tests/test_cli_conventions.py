"""The CLI follows its ecosystem's conventions (issue "check promises what run does", conventions part)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from as_user import run_dagplan

ROOT = Path(__file__).resolve().parent.parent


def dagplan(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_a_mistyped_subcommand_suggests_the_right_one():
    proc = dagplan("chek", "x.yaml")
    assert proc.returncode == 2 and "No such command 'chek'. Did you mean 'check'?" in proc.stderr


def test_dash_capital_v_prints_the_version():
    proc = dagplan("-V")
    assert proc.returncode == 0 and proc.stdout.startswith("dagplan, version ")


def test_graph_draws_every_kind_of_step_as_what_it_is():
    out = dagplan("graph", "examples/approve_refund.yaml").stdout
    assert '"approve: gate"' in out
    out = dagplan("graph", "examples/review_prs.yaml").stdout
    assert "(for each)" in out and ": llm" not in out.split("reviews")[1].splitlines()[0]


def test_events_go_to_the_target_as_pure_json_lines(tmp_path):
    (tmp_path / "tools.py").write_text("import dagplan\n@dagplan.tool\ndef t() -> int:\n    return 1\n")
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: t, output: \u2020state.a}\n")
    proc = dagplan("run", "p.yaml", "--tools", "tools.py", "--ephemeral", "--events", "-", cwd=tmp_path)
    events = [json.loads(line) for line in proc.stdout.splitlines()]  # every line is JSON
    assert events[0]["type"] == "plan_started" and all(e["run_id"] == events[0]["run_id"] for e in events)
    assert events[-1]["type"] == "plan_completed"
    assert f"run {events[0]['run_id']}" in proc.stderr  # the human line stays on stderr
    proc = dagplan("run", "p.yaml", "--tools", "tools.py", "--ephemeral", "--events", "ev.jsonl", cwd=tmp_path)
    lines = (tmp_path / "ev.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines][0] == "plan_started" and "Run " in proc.stdout


def test_a_jinja_or_shell_reference_gets_a_hint(tmp_path):
    (tmp_path / "p.yaml").write_text(
        textwrap.dedent("""\
        inputs: {topic: {type: string}}
        steps:
          - {id: a, llm: "Write about {{ input.topic }}", output: \u2020state.a}
        result: \u2020state.a
        """)
    )
    out = dagplan("check", "p.yaml", cwd=tmp_path).stdout
    assert "warning foreign-template: step 'a': '{{ input.topic }}' is not a reference here" in out
    assert "hint: write \u2020input.topic (or $input.topic)" in out


def test_runs_never_cuts_a_run_id(tmp_path):
    from dagplan.cli import runs

    rows = [("id", "plan", "status"), ("20261124-020531-f1c0", "x" * 200, "interrupted")]
    from rich.console import Console

    console = Console(width=30, record=True, force_terminal=False)
    import rich.console

    original = rich.console.Console
    rich.console.Console = lambda *a, **k: console  # the table's console, narrow
    try:
        runs._rich_table(rows)
    finally:
        rich.console.Console = original
    assert "20261124-020531-f1c0" in console.export_text()


def test_quiet_and_verbose(tmp_path):
    (tmp_path / "tools.py").write_text("import dagplan\n@dagplan.tool\ndef t() -> int:\n    return 1\n")
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: t, output: \u2020state.a}\n")
    quiet = dagplan("-q", "check", "p.yaml", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stdout == quiet.stderr == ""
    assert "p.yaml: valid" in dagplan("-v", "check", "p.yaml", cwd=tmp_path).stderr
    run = dagplan("-q", "run", "p.yaml", "--tools", "tools.py", "--ephemeral", cwd=tmp_path)
    assert run.returncode == 0 and "[1/1]" not in run.stderr and "Plan with" not in run.stderr
    assert "[1/1]" in dagplan("run", "p.yaml", "--tools", "tools.py", "--ephemeral", cwd=tmp_path).stderr


def test_counts_are_written_in_the_singular_when_there_is_one():
    out = run_dagplan(ROOT, "check", "examples/refund.yaml")
    assert "worst case 3 steps, 1 LLM step, 1 model call, <= " in out.stderr, out.stderr
