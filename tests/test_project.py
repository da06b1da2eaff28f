"""One front door: `dagplan.Project`, and every door answering the same for one project.

Each divergence users met is a test here: the state location (the configuration against the environment),
the configured tools through the API, a stray configuration above the project, the configured secrets at
every sink, `--reuse @last` meaning this plan's newest run; and one project driven through the CLI, the
API and `Project`, asserting the same state location, the same tools, the same check and the same masking.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dagplan

TOOLS = """import dagplan

@dagplan.tool(purity="pure")
def lookup(account: str) -> str:
    print("looking up " + account)
    return "balance of " + account
"""
PLAN = (
    "steps:\n  - id: a\n    tool: lookup\n    args: {account: $input.account}\n    output: $state.a\nresult: $state.a\n"
)
SECRET = "acct_31415"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".git").mkdir()  # the project's root: configuration above it is never read
    (root / "tools.py").write_text(TOOLS)
    (root / "plan.yaml").write_text(PLAN)
    (root / "other.yaml").write_text(PLAN.replace("id: a", "id: b").replace("state.a", "state.b"))
    (root / "dagplan.toml").write_text('tools = ["tools.py"]\nstate = "configured-state"\nredact = ["acct_[0-9]+"]\n')
    (tmp_path / "dagplan.toml").write_text('tools = ["missing.py"]\nmax_items = "not a number"\n')  # stray, above
    return root


def cli(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("DAGPLAN_STATE")}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=root, capture_output=True, text=True,
                          timeout=120, env={**full, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env})  # fmt: skip


@pytest.fixture
def inside(project: Path, monkeypatch):
    monkeypatch.chdir(project)
    for name in ("DAGPLAN_STATE", "DAGPLAN_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_stray_configuration_above_the_project_is_never_read(project):
    done = cli(project, "check", "plan.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not checked" not in done.stdout  # the project's own tools were


def test_the_environment_state_wins_over_the_configuration_for_the_cli_and_the_api_alike(project, inside, tmp_path):
    elsewhere = tmp_path / "env-state"
    done = cli(project, "run", "plan.yaml", "-i", f"account={SECRET}", DAGPLAN_STATE_DIR=str(elsewhere))
    assert done.returncode == 0, done.stderr
    run_id = re.search(r"Run (\S+):", done.stdout).group(1)
    assert (elsewhere / "runs" / run_id).is_dir() and not (project / "configured-state").exists()
    inside.setenv("DAGPLAN_STATE_DIR", str(elsewhere))
    assert [r.id for r in dagplan.runs()] == [run_id]  # the API looks where the CLI wrote
    assert [r.id for r in dagplan.Project(project).runs()] == [run_id]
    assert dagplan.Project(project).state == str(elsewhere)


def test_the_api_runs_with_the_configured_tools_as_the_cli_does(project, inside):
    result = dagplan.run("plan.yaml", inputs={"account": "x1"})
    assert str(result.status) == "completed" and result.result == "balance of x1", result.steps
    assert dagplan.Project(project).run("plan.yaml", inputs={"account": "x2"}).result == "balance of x2"
    assert [r.ok for r in dagplan.check_files(["plan.yaml"])] == [True]


def test_configured_secrets_are_masked_at_every_sink(project, inside):
    done = cli(project, "run", "plan.yaml", "-i", f"account={SECRET}")
    assert done.returncode == 0 and SECRET not in done.stdout, done.stdout
    shown = cli(project, "runs", "show", "@last", "--step", "a")
    events = cli(project, "events", "@last", "--format", "json")
    assert "looking up [REDACTED]" in shown.stdout, shown.stdout
    assert SECRET not in shown.stdout + events.stdout
    journal = "".join(p.read_text() for p in (project / "configured-state").rglob("wal.jsonl"))
    assert '"tool_called"' in journal and SECRET not in journal.split('"plan_step_completed"')[0]
    found = dagplan.Project(project).events(json.loads(events.stdout)[0]["run_id"])  # the API: outputs whole
    records = [e.to_json() for e in found if str(e.type) in ("tool_called", "plan_step_printed")]
    assert len(records) == 2 and SECRET not in json.dumps(records)  # a call's record and what it printed: masked


def test_reuse_at_last_is_the_newest_run_of_this_plan(project):
    first = cli(project, "run", "plan.yaml", "-i", "account=x1")
    mine = re.search(r"Run (\S+):", first.stdout).group(1)
    assert cli(project, "run", "other.yaml", "-i", "account=x1").returncode == 0  # another plan's run, newer
    again = cli(project, "run", "plan.yaml", "-i", "account=x1", "--reuse", "@last")
    assert again.returncode == 0 and f"reused from {mine}" in again.stdout, again.stdout
    none = cli(project, "run", "plan.yaml", "-i", "account=x1", "--reuse", "@last",
               DAGPLAN_STATE_DIR=str(project / "empty"))  # fmt: skip
    assert none.returncode == 2 and "@last: no earlier run of plan.yaml" in none.stderr, none.stderr


def test_every_door_sees_the_same_project(project, inside):
    """The CLI, the API and `Project`: the same state location, tools, check result and masking."""
    door = dagplan.Project(project)
    assert sorted(door.tools) == ["lookup"] and door.tools_known
    api_check = dagplan.check_files(["plan.yaml"])[0]
    cli_check = json.loads(cli(project, "check", "plan.yaml", "--format", "json").stdout)
    project_check = door.check(["plan.yaml"])[0]
    assert api_check.ok and project_check.ok and cli_check["files"][0]["valid"]
    assert (
        [d.code for d in api_check.diagnostics]
        == [d.code for d in project_check.diagnostics]
        == [d["code"] for d in cli_check["files"][0]["diagnostics"]]
    )
    run = door.run("plan.yaml", inputs={"account": SECRET}, durable=True)
    assert (project / "configured-state" / "runs" / run.run_id).is_dir()  # the configured state, for both
    listed = cli(project, "runs", "--format", "json")
    assert run.run_id in listed.stdout and SECRET not in cli(project, "runs", "show", run.run_id, "--step", "a").stdout


def test_the_guides_project_example_runs_as_written(tmp_path, monkeypatch):
    """The user's first try: the guide's block, in a copy of the examples (its runs kept inside)."""
    import shutil

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for name in ("DAGPLAN_STATE", "DAGPLAN_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    readme = (root / "docs" / "guide" / "running.md").read_text(encoding="utf-8")
    block = re.search(r"\*\*One project, one context\.\*\*.*?```python\n(.*?)```", readme, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stdout + out.stderr
    assert (tmp_path / "examples" / ".dagplan" / "runs").is_dir()  # the project's own state


# --- a project's settings, and a surface that stays small --------------------------------------------------


def test_a_projects_settings_are_every_runs_and_a_run_may_override_one(project):
    seen: list[str] = []
    base = dagplan.Project(project, subscribers=[lambda event: seen.append(str(event.type))])
    done = base.run("plan.yaml", inputs={"account": "x"})
    assert done.status == "completed" and "plan_started" in seen
    capped = base.with_options(max_concurrency=1)  # a new project: the settings add up, the old one is unchanged
    assert capped.settings.keys() == {"subscribers", "max_concurrency"} and base.settings.keys() == {"subscribers"}
    seen.clear()
    assert capped.run("plan.yaml", inputs={"account": "y"}, subscribers=[]).status == "completed"
    assert seen == []  # this run's own subscribers replaced the project's


def test_an_unknown_option_is_refused_as_python_refuses_a_keyword(project):
    with pytest.raises(TypeError, match="unexpected keyword argument 'modle'"):
        dagplan.Project(project, modle="local")
    with pytest.raises(TypeError, match="unexpected keyword argument 'modle'"):
        dagplan.Project(project).with_options(modle="local")
    with pytest.raises(TypeError, match=r"arun\(\) got an unexpected keyword argument 'modle'"):
        dagplan.run(str(project / "plan.yaml"), inputs={"account": "x"}, modle="local")
    with pytest.raises(TypeError, match=r"aresume\(\) got an unexpected keyword argument 'max_cost'"):
        dagplan.resume("nothing", max_cost=1.0)  # a resume cannot change what the run may cost


def test_names_that_moved_still_work_and_say_where_they_are():
    from dagplan.dsl.load import load_text

    with pytest.warns(DeprecationWarning, match=r"dagplan.load_text is dagplan.dsl.load.load_text now"):
        moved = dagplan.load_text
    assert moved is load_text and "load_text" not in dagplan.__all__
    with pytest.raises(AttributeError):
        dagplan.no_such_name  # noqa: B018


def test_the_front_door_stays_small():
    """The sizes issue 49 set: the API module at most ~800 lines, `arun` at most 12 parameters, the names a
    user sees (exported, plus public functions of the API's modules not exported) at most ~80."""
    import ast
    import inspect

    root = Path(dagplan.__file__).parent
    assert len((root / "api.py").read_text(encoding="utf-8").splitlines()) <= 800
    for function in (dagplan.arun, dagplan.aresume, dagplan.Project.arun):
        assert len(inspect.signature(function).parameters) <= 12, function
    public = set(dagplan.__all__)
    for module in ("api", "planning", "pool", "plantests"):
        tree = ast.parse((root / f"{module}.py").read_text(encoding="utf-8"))
        public |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and not n.name.startswith("_")}  # fmt: skip
    assert len(public) <= 85, sorted(public)
