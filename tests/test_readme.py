"""The README's promises: its API example runs and prints what it says; its commands exist."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_api_example_runs_and_prints_what_the_readme_says(monkeypatch):
    block = re.search(r"## From Python\n\n```python\n(.*?)```", README, re.S).group(1)
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    printed = out.getvalue().splitlines()
    expected = re.findall(r"# (\[\[.*\]\]|completed .*)$", block, re.M)
    assert printed == expected


def test_the_two_setup_commands_are_there_and_ci_runs_the_test_one():
    commands = re.findall(r"```sh\n(python3 -m venv .venv && .*?)\n```", README)
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci
    # set -e does not stop a script at a failed command inside an && list (only at its last): CI went on past
    # a failed install (stop 71, seen when an install was killed) and could have passed with nothing tested
    assert re.search(re.escape(commands[1]) + r" \|\| exit \$\?$", ci, re.M), (
        "a failure of the test command must end CI"
    )
    assert "dagplan run examples/" in commands[0]


def test_every_cli_command_named_in_the_readme_exists():
    from dagplan.cli import COMMANDS

    named = set(re.findall(r"^dagplan ([a-z]+)", README, re.M)) | set(re.findall(r"`dagplan ([a-z]+)", README))
    assert named, "the README names no command"
    assert named <= set(COMMANDS), named - set(COMMANDS)


def test_the_readmes_sample_diagnostics_are_what_check_prints():
    """Every output block that starts with `examples/...:LINE:COL:` is real: `dagplan check` prints it."""
    import os
    import subprocess
    import sys

    blocks = re.findall(r"```console\n\$ dagplan check \S+.*?\n((examples/\S+?):\d+:\d+: .*?)```", README, re.S)
    assert blocks, "the README shows no sample diagnostic"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for block, path in blocks:
        out = subprocess.run([sys.executable, "-m", "dagplan", "check", path], cwd=ROOT, env=env,
                             stderr=subprocess.STDOUT, stdout=subprocess.PIPE, text=True, timeout=60).stdout  # fmt: skip
        for line in block.strip().splitlines():
            assert line.rstrip() in out, f"README says {line!r}; check prints:\n{out}"
