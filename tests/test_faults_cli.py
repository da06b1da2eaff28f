"""Faults around a run (issue "hostile input"): the state directory, tool outputs, tools that exit
or never return, run ids from the command line. Each ends in a diagnostic and an exit code."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TOOLS = """\
    import sys, time, datetime, dagplan

    @dagplan.tool
    def blob() -> bytes:
        return b"\\x00\\x01"

    @dagplan.tool
    def when() -> object:
        return {"at": datetime.date(2026, 1, 2), "tags": ("a", "b")}

    @dagplan.tool
    def quit() -> str:
        sys.exit(3)

    @dagplan.tool
    def forever() -> str:
        time.sleep(3600)
    """


def dagplan_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("DAGPLAN_STATE_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(textwrap.dedent(TOOLS))
    (tmp_path / "p.yaml").write_text(
        textwrap.dedent("""\
        steps:
          - {id: a, tool: blob, output: †state.a}
          - {id: b, tool: quit, output: †state.b}
          - {id: c, tool: when, output: †state.c}
        result: †state.c
        """)
    )
    return tmp_path


def test_a_file_in_the_way_of_the_state_directory_is_an_io_error(project):
    (project / "state").write_text("not a directory")
    out = dagplan_cli("run", "p.yaml", "--tools", "tools.py", "--state-dir", "state/runs", cwd=project)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "error io: cannot keep runs in state/runs: a file is in the way" in out.stderr


def test_non_json_outputs_fail_their_step_and_json_like_ones_are_converted(project):
    out = dagplan_cli("run", "p.yaml", "--tools", "tools.py", "--ephemeral", "--format", "json", cwd=project)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    import json

    result = json.loads(out.stdout)
    assert result["steps"]["a"]["error"]["type"] == "NotJSON"
    assert result["steps"]["a"]["error"]["message"] == "a bytes is not a JSON value"
    assert result["result"] == {"at": "2026-01-02", "tags": ["a", "b"]}


def test_a_tool_calling_sys_exit_fails_its_step_and_the_run_goes_on(project):
    out = dagplan_cli("run", "p.yaml", "--tools", "tools.py", "--ephemeral", "--format", "json", cwd=project)
    import json

    steps = json.loads(out.stdout)["steps"]
    # the tool declares nothing (it acts): it may have acted before it exited, so a resume would ask
    assert steps["b"]["error"] == {"step": "b", "type": "ToolExit", "message": "the tool called sys.exit(3)",
                                   "outcome": "unknown"}  # fmt: skip
    assert steps["c"]["status"] == "completed"


def test_a_sync_tool_that_never_returns_does_not_keep_the_process_alive(project):
    (project / "hang.yaml").write_text("steps:\n  - {id: a, tool: forever, timeout: 0.2s, retry: {limit: 0}}\n")
    out = dagplan_cli("run", "hang.yaml", "--tools", "tools.py", "--ephemeral", cwd=project, timeout=60)
    assert out.returncode == 1 and "TimeoutError: timed out after 0.2s" in out.stderr


@pytest.mark.parametrize("run_id", ["../../etc", "x/../y", "/tmp", "", "20261121-224501-3f9a/.."])
@pytest.mark.parametrize("command", [["runs", "show"], ["resume"], ["events"], ["discard"], ["answer"]])
def test_run_ids_from_the_command_line_never_leave_the_state_directory(project, command, run_id):
    extra = ["step", "yes"] if command == ["answer"] else []
    out = dagplan_cli(*command, run_id, *extra, "--state-dir", "state", cwd=project)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "error unknown-run:" in out.stderr and "is not a run id" in out.stderr or "no run" in out.stderr
