"""The front door, finished (issue 62): the CLI takes its context from the project, and a run's settings are one
typed holder.

- a source walk: no command of the CLI reads the configuration, merges tools or picks where runs are kept
  itself (each asks its project: ``cli/common.project_of``);
- ``--state`` and ``--tools`` are declared once, on the group (a command takes them after its name too, hidden
  from its help, which says so once); the CLI's visible options stay under the ratchet;
- :class:`dagplan.RunSettings`: each field is one setting; its flag, where it has one, is generated with its
  docstring as its help; ``arun``, ``aresume`` and ``Project`` take the same names.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import dagplan
from dagplan import api, settings as run_settings
from dagplan.cli.group import cli

CLI_DIR = Path(dagplan.__file__).parent / "cli"
OPTIONS_AT_MOST = 116  # issue 62's goal was ~115 (149 before); a new option raises this on purpose


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    found: list[tuple[str, click.Command]] = []

    def walk(command: click.Command, name: str) -> None:
        found.append((name, command))
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                child = command.get_command(ctx, sub)
                if child is not None:
                    walk(child, f"{name} {sub}")

    walk(cli, "dagplan")
    return found


def _context_assembled(tree: ast.AST) -> list[str]:
    """What a door must not do itself: read the configuration, merge tool sources, choose a state."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "load_config",
            "state_of",
            "load_tool_specs",
        ):
            found.append(f"line {node.lineno}: calls {ast.unparse(node.func)}")
        if isinstance(node, ast.Starred) and ast.unparse(node.value).endswith(".tools"):
            found.append(f"line {node.lineno}: merges {ast.unparse(node.value)} into tool sources")
        if isinstance(node, ast.BoolOp) and any(ast.unparse(v).endswith(".state_dir") for v in node.values[1:]):
            if "project_of" not in ast.unparse(node):  # the project's own configuration, asked for a URL
                found.append(f"line {node.lineno}: picks a state: {ast.unparse(node)}")
        if isinstance(node, ast.ImportFrom) and any(a.name == "load_config" for a in node.names):
            found.append(f"line {node.lineno}: imports load_config")
    return found


def test_no_command_assembles_its_own_context():
    """Every command gets its project (configuration, tools, state) from ``project_of``: none reads
    ``dagplan.toml``, merges ``[*config.tools, *given]`` or picks ``state or config.state_dir`` itself."""
    problems = {}
    for path in sorted(CLI_DIR.glob("*.py")):
        if path.name == "common.py":  # project_of: where a command's project is built, the one way
            continue
        found = _context_assembled(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            problems[path.name] = found
    assert problems == {}


def test_the_walk_finds_what_it_looks_for():
    """The walk can fail: each shape it refuses, written as a door once wrote it, is found."""
    for shape in (
        "from .. import load_config\nconfig = load_config()\n",
        "sources = [*config.tools, *tool_sources]\n",
        "url = state_dir or config.state_dir\n",
        "specs = load_tool_specs(every)\n",
    ):
        assert _context_assembled(ast.parse(shape)), shape


def test_state_and_tools_are_declared_once_and_the_options_stay_few():
    visible: dict[str, list[str]] = {}
    for name, command in _commands():
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                visible.setdefault(param.opts[0], []).append(name)
    assert visible["--state"] == ["dagplan"] and visible["--tools"] == ["dagplan"]
    assert sum(map(len, visible.values())) <= OPTIONS_AT_MOST


def test_a_commands_help_says_it_takes_the_groups_options(tmp_path):
    """The spelling after the command still works (hidden, said once under its options)."""
    done = subprocess.run([sys.executable, "-m", "dagplan", "run", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0
    assert "Also takes --tools and --state" in " ".join(done.stdout.split())
    top = subprocess.run([sys.executable, "-m", "dagplan", "--help"], capture_output=True, text=True, timeout=60)
    assert "--state DIR|URL" in top.stdout and "--tools FILE_OR_MODULE" in top.stdout


def test_the_same_option_after_the_command_still_works(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "tools.py").write_text("import dagplan\n\n@dagplan.tool(purity='pure')\ndef echo(text: str) -> str:"
                                       "\n    return text\n")  # fmt: skip
    (tmp_path / "plan.yaml").write_text("steps:\n  - id: a\n    tool: echo\n    args: {text: hi}\n    output: $state.a\n"
                                        "result: $state.a\n")  # fmt: skip
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("DAGPLAN_STATE", None), env.pop("DAGPLAN_STATE_DIR", None)
    for args in (["run", "plan.yaml", "--tools", "tools.py", "--state", "kept", "--format", "json"],
                 ["--tools", "tools.py", "--state", "kept", "run", "plan.yaml", "--format", "json"]):  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["result"] == "hi"
    assert len(list((tmp_path / "kept" / "runs").iterdir())) == 2


def test_run_settings_are_one_holder_every_door_reads():
    fields = dataclasses.fields(dagplan.RunSettings)
    assert api.RUN_SETTINGS == tuple(f.name for f in fields)
    assert set(api.RESUME_SETTINGS) <= set(api.RUN_SETTINGS)
    helps = run_settings.helps()
    assert set(helps) == {f.name for f in fields}  # every field carries its help (the reference shows it)
    flagged = [f for f in fields if f.metadata["flag"]]
    assert flagged, "the generated options are tested below"
    by_name = dict(_commands())
    for field in flagged:
        for command in field.metadata["commands"]:
            option = next(p for p in by_name[f"dagplan {command}"].params if p.name == field.name)
            assert option.opts[0] == field.metadata["flag"] and option.help == helps[field.name], (command, field.name)
        for name, command in by_name.items():  # and no command declares the flag by hand beside it
            if name.split()[-1] not in field.metadata["commands"] and name.split()[-1] not in ("eval",):
                assert field.metadata["flag"] not in [o for p in command.params for o in p.opts], name


def test_arun_takes_one_settings_value_and_a_keyword_over_it(tmp_path):
    seen: list[str] = []
    plan = tmp_path / "plan.yaml"
    plan.write_text("steps:\n  - id: a\n    tool: echo\n    args: {text: hi}\n    output: $state.a\nresult: $state.a\n")

    @dagplan.tool(purity="pure")
    def echo(text: str) -> str:
        return text

    held = dagplan.RunSettings(subscribers=[lambda e: seen.append("held")], max_concurrency=1)
    done = dagplan.run(str(plan), tools=[echo], settings=held)
    assert done.result == "hi" and "held" in seen
    seen.clear()
    dagplan.run(str(plan), tools=[echo], settings=held, subscribers=[lambda e: seen.append("given")])
    assert seen and set(seen) == {"given"}  # the keyword is over the holder
    assert held.merged(model="m").given()["model"] == "m" and "model" not in held.given()
    with pytest.raises(TypeError, match="unexpected keyword argument 'modle'"):
        dagplan.RunSettings(modle="local")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"aresume\(\) got an unexpected keyword argument 'max_cost'"):
        dagplan.resume("nothing", settings=dagplan.RunSettings(max_cost=1.0))  # a resume cannot change it
