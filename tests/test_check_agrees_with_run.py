"""`check` promises what `run` does: one configuration, validated; preflight before the first step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TOOLS = """\
    import dagplan

    @dagplan.tool(purity="side_effect")
    def greet(name: str) -> str:
        open("greeted.log", "a").write(name + "\\n")
        return "hi " + name
    """


def dagplan(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    for key in ("DAGPLAN_MODEL", "OPENAI_API_KEY"):
        if env is None or key not in env:
            full.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "dagplan", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tools.py").write_text(textwrap.dedent(TOOLS))
    (tmp_path / "dagplan.toml").write_text('tools = ["sub/tools.py"]\n')
    return tmp_path


def write(folder: Path, name: str, text: str) -> Path:
    (folder / name).write_text(textwrap.dedent(text))
    return folder / name


def test_check_uses_the_configured_tools_as_run_does(project):
    write(project, "p.yaml", "steps:\n  - {id: a, tool: greet, args: {nam: x}}\n")
    checked = dagplan("check", "p.yaml", cwd=project)
    assert checked.returncode == 1
    assert "tool 'greet' has no argument 'nam'" in checked.stdout and "did you mean 'name'?" in checked.stdout
    write(project, "ok.yaml", "steps:\n  - {id: a, tool: greet, args: {name: x}, output: †state.a}\n")
    assert dagplan("check", "ok.yaml", cwd=project).returncode == 0
    assert dagplan("run", "ok.yaml", "--ephemeral", cwd=project).returncode == 0


@pytest.mark.parametrize(
    "toml, message",
    [
        ('tools = "sub/tools.py"\n', 'dagplan.toml:1:1: error config: tools must be a list of tool files or modules'),
        ('max_concurrency = "lots"\n', "dagplan.toml:1:1: error config: max_concurrency must be an integer of at least 1"),
        ("\n\nmax_itmes = 3\n", "dagplan.toml:3:1: error config: unknown key 'max_itmes'\n    hint: did you mean 'max_items'?"),
        ('[resume]\nside_effect = "sometimes"\n', "dagplan.toml:2:1: error config: resume.side_effect = 'sometimes'"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", [["check", "p.yaml"], ["run", "p.yaml", "--ephemeral"], ["runs"]])
def test_a_bad_configuration_is_a_positioned_error_for_every_command(project, toml, message, command):
    (project / "dagplan.toml").write_text(toml)
    write(project, "p.yaml", "steps:\n  - {id: a, tool: t}\n")
    proc = dagplan(*command, cwd=project)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in said
    assert message in said.replace(str(project) + "/", "")


LLM_AFTER_SIDE_EFFECT = """\
    steps:
      - {id: first, tool: greet, args: {name: ada}, output: †state.greeting}
      - {id: confirm, llm: "Confirm: #first", output: †state.confirmation}
    result: †state.confirmation
    """


def test_preflight_stops_a_run_before_any_side_effect_when_no_model_is_configured(project):
    write(project, "p.yaml", LLM_AFTER_SIDE_EFFECT)
    proc = dagplan("run", "p.yaml", "--ephemeral", cwd=project)
    assert proc.returncode == 2 and "error no-model: LLM step 'confirm' has no model to call" in proc.stderr
    assert not (project / "greeted.log").exists()  # the side effect never ran


def test_preflight_names_a_missing_api_key(project):
    write(project, "p.yaml", LLM_AFTER_SIDE_EFFECT)
    proc = dagplan("run", "p.yaml", "--ephemeral", "--model", "openai/gpt-4o-mini", cwd=project)
    assert proc.returncode == 2 and "needs OPENAI_API_KEY in the environment" in proc.stderr
    assert not (project / "greeted.log").exists()


def test_preflight_also_guards_resume(project):
    write(
        project,
        "p.yaml",
        """\
        steps:
          - {id: ok, gate: {question: "Go on?", choices: [yes, no]}, output: †state.ok}
          - {id: first, tool: greet, args: {name: ada}, deps: [ok], output: †state.greeting}
          - {id: confirm, llm: "Confirm: #first", output: †state.confirmation}
        result: †state.confirmation
        """,
    )
    waiting = dagplan(
        "run", "p.yaml", "--no-input", cwd=project, env={"DAGPLAN_MODEL": "openai/x", "OPENAI_API_KEY": "k"}
    )
    assert waiting.returncode == 3, waiting.stderr
    run_id = waiting.stderr.split("run ", 1)[1].split()[0]
    assert dagplan("answer", run_id, "ok", "yes", cwd=project).returncode == 0
    resumed = dagplan("resume", run_id, cwd=project)  # no model in this environment
    assert resumed.returncode == 2 and "no-model" in resumed.stderr
    assert not (project / "greeted.log").exists()


def test_resume_needs_no_flags_and_warns_when_a_tools_file_changed(project):
    write(
        project,
        "p.yaml",
        """\
        steps:
          - {id: ok, gate: {question: "Go on?", choices: [yes, no]}, output: †state.ok}
          - {id: hello, tool: greet, args: {name: ada}, deps: [ok], output: †state.greeting}
        result: †state.greeting
        """,
    )
    waiting = dagplan("run", "p.yaml", "--no-input", cwd=project)
    run_id = waiting.stderr.split("run ", 1)[1].split()[0]
    dagplan("answer", run_id, "ok", "yes", cwd=project)
    (project / "dagplan.toml").unlink()  # not even the configuration says where the tools are
    with open(project / "sub" / "tools.py", "a") as f:
        f.write("# edited\n")
    resumed = dagplan("resume", run_id, "--format", "json", cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    assert f"warning: {project / 'sub' / 'tools.py'} changed since the run started" in resumed.stderr
    assert json.loads(resumed.stdout)["result"] == "hi ada"


def interrupted_side_effect(project: Path) -> str:
    """A run killed while its side-effecting step ran: the intent is in the journal, no result."""
    from dagplan.interpreter.stores.store import RunStore

    doc = {"steps": [{"id": "hello", "tool": "greet", "args": {"name": "ada"}, "output": "\u2020state.g"}],
           "result": "\u2020state.g"}  # fmt: skip
    run = RunStore(project / ".dagplan").create(plan_doc=doc, plan_name="p.yaml", inputs={},
                                                meta={"tool_sources": [{"module": "greeting_tools"}]})  # fmt: skip
    run.acquire()
    run.append({"type": "plan_started"})
    run.append({"type": "plan_step_started", "step": "hello", "attempt": 1})
    run.commit_sync()
    run.release()
    return run.id


@pytest.mark.parametrize("policy, runs_again", [("adopt", False), ("retry", True)])
def test_on_interrupted_decides_about_an_interrupted_side_effect(project, policy, runs_again):
    (project / "greeting_tools.py").write_text(textwrap.dedent(TOOLS))
    run_id = interrupted_side_effect(project)
    proc = subprocess.run(
        [sys.executable, "-m", "dagplan", "resume", run_id, "--on-interrupted", policy, "--no-input"],
        cwd=project, capture_output=True, text=True, timeout=120,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(project)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (project / "greeted.log").exists() is runs_again


def test_an_interrupted_side_effect_nobody_decides_says_what_to_do(project):
    (project / "greeting_tools.py").write_text(textwrap.dedent(TOOLS))
    run_id = interrupted_side_effect(project)
    proc = subprocess.run(
        [sys.executable, "-m", "dagplan", "resume", run_id, "--no-input"],
        cwd=project, capture_output=True, text=True, timeout=120,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(project)},
    )  # fmt: skip
    assert proc.returncode == 3 and not (project / "greeted.log").exists()  # waiting for a person's decision
    assert f"dagplan resume {run_id} --on-interrupted retry" in proc.stderr and "--on-interrupted adopt" in proc.stderr


def test_diagnostics_on_resume_point_at_the_plan_files_own_lines(project):
    write(
        project,
        "p.yaml",
        """\
        steps:
          - {id: ok, gate: {question: "Go on?", choices: [yes, no]}, output: †state.ok}
          - id: hello
            tool: greet
            args: {name: ada}
            deps: [ok]
            output: †state.greeting
        result: [†state.greeting, †state.ok]
        """.replace("result: [†state.greeting, †state.ok]", "result: †state.greeting"),
    )
    waiting = dagplan("run", "p.yaml", "--no-input", cwd=project)
    run_id = waiting.stderr.split("run ", 1)[1].split()[0]
    dagplan("answer", run_id, "ok", "yes", cwd=project)
    (project / "other.py").write_text("import dagplan\n@dagplan.tool\ndef greet(nome: str) -> str:\n    return nome\n")
    resumed = dagplan("resume", run_id, "--tools", "other.py", cwd=project)
    assert resumed.returncode == 1
    assert "p.yaml:5:18: error bad-argument: tool 'greet' has no argument 'name'" in resumed.stderr


def test_resume_from_another_directory_uses_the_configuration_the_run_started_with(project, tmp_path_factory):
    (project / "dagplan.toml").write_text('tools = ["sub/tools.py"]\nstate_dir = "runs-here"\nmax_concurrency = 3\n')
    write(
        project,
        "p.yaml",
        """\
        steps:
          - {id: ok, gate: {question: "Go on?", choices: [yes, no]}, output: †state.ok}
          - {id: hello, tool: greet, args: {name: ada}, deps: [ok], output: †state.greeting}
        result: †state.greeting
        """,
    )
    waiting = dagplan("run", "p.yaml", "--no-input", cwd=project)
    run_id = waiting.stderr.split("run ", 1)[1].split()[0]
    state = str(project / "runs-here")
    assert dagplan("answer", run_id, "ok", "yes", "--state-dir", state, cwd=project).returncode == 0
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    resumed = dagplan("resume", run_id, "--state-dir", state, "--format", "json", cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["result"] == "hi ada"
