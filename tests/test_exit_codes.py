"""The exit-code table holds for every command: each is walked through each class of outcome (ok, a plan or
test finding, a failed run, usage, an unreadable file, a bad configuration, waiting for a person) on the
installed package, and the code it ends with is the table's. The README's table is the code's table."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dagplan.cli import COMMANDS
from dagplan.cli.common import EXITS, Exit, exit_table

ROOT = Path(__file__).resolve().parent.parent
OK, FINDING, USAGE, WAITING = Exit.OK, Exit.FINDING, Exit.USAGE, Exit.WAITING
W = "examples/weather.yaml"
TOOLS = "--tools examples/tools.py"

FAILING_PLAN = """steps:
  - id: boom
    tool: explode
"""
FAILING_TOOLS = """import dagplan

@dagplan.tool
def explode() -> str:
    raise ValueError("boom")
"""
UGLY = "steps: [{id: a, tool: getWeather, args: {city: Rome}}]\n"
FAILING_TEST = """plan: weather.yaml
tools: [tools.py]
cases:
  - name: wrong
    inputs: {city: Rome}
    mocks: {tools: {getWeather: {result: sunny}, findPark: {result: p}, findMovie: {result: m}}}
    expect: {result: nothing like it}
"""
BAD_TEST = """plan: weather.yaml
cases:
  - name: typo
    expect: {result: {$regexp: x}}
"""

# (command line, outcome class, expected code); RUN is the newest run, WAITING_RUN the one at a gate
WALK: list[tuple[str, str, Exit]] = [
    # ok
    (f"check {W}", "ok", OK),
    (f"fmt --check {W}", "ok", OK),
    ("test examples/weather.test.yaml", "ok", OK),
    ("test examples", "ok", OK),
    (f"run {W} {TOOLS} -i city=Rome", "ok", OK),
    (f"preview {W}", "ok", OK),
    (f"graph {W}", "ok", OK),
    ("schema", "ok", OK),
    ("init new-project", "ok", OK),
    ("score 'rename a variable'", "ok", OK),
    ("runs", "ok", OK),
    ("runs show RUN", "ok", OK),
    ("runs show @last", "ok", OK),
    ("runs prune --older-than 30d --dry-run", "ok", OK),
    ("events RUN", "ok", OK),
    ("runs export RUN -o cassette.json", "ok", OK),
    (f"tools list {TOOLS}", "ok", OK),
    (f"diff {W} {W}", "ok", OK),
    ("schedule", "ok", OK),  # none configured: said, exit 0
    # a plan or test finding
    ("check examples/invalid/unknown_step.yaml", "finding", FINDING),
    ("check examples/invalid/unknown_placeholder.yaml", "finding", FINDING),
    ("check examples/invalid/cycle.yaml --format json", "finding", FINDING),
    ("check examples/invalid/dead_step_strict.yaml --strict", "finding", FINDING),
    ("check bad.test.yaml", "finding", FINDING),
    ("fmt --check ugly.yaml", "finding", FINDING),
    (f"diff {W} examples/refund.yaml", "finding", FINDING),  # they differ, as diff says
    ("test failing.test.yaml", "finding", FINDING),
    ("test failing.test.yaml --coverage", "finding", FINDING),
    ("test bad.test.yaml", "finding", FINDING),
    (f"run examples/invalid/unknown_step.yaml {TOOLS}", "finding", FINDING),
    ("preview examples/invalid/cycle.yaml", "finding", FINDING),
    ("graph examples/invalid/cycle.yaml", "finding", FINDING),
    ("submit examples/invalid/unknown_step.yaml", "finding", FINDING),
    # a run that failed
    ("run failing.yaml --tools failing_tools.py", "run failed", FINDING),
    # usage
    ("check", "usage", USAGE),
    ("init examples", "usage", USAGE),  # a file of its own is there already: nothing is overwritten
    ("check --no-such-option x.yaml", "usage", USAGE),
    ("run", "usage", USAGE),
    (f"run {W} {TOOLS}", "usage", USAGE),  # a required input missing
    (f"run {W} {TOOLS} -i nonsense", "usage", USAGE),
    ("runs show no-such-run", "usage", USAGE),
    ("runs prune --older-than soon", "usage", USAGE),
    ("resume no-such-run", "usage", USAGE),
    ("answer no-such-run approve approve", "usage", USAGE),
    ("answer WAITING_RUN no_such_step approve", "usage", USAGE),
    ("events no-such-run", "usage", USAGE),
    ("discard no-such-run", "usage", USAGE),
    ("worker --drain", "usage", USAGE),  # workers need a run database
    ("db upgrade", "usage", USAGE),
    ("submit", "usage", USAGE),
    ("serve --port 99999999", "usage", USAGE),
    ("plan", "usage", USAGE),
    ("agent", "usage", USAGE),
    ("agent 'do it' --model openai/x --tools no_such_tools.py", "usage", USAGE),
    ("eval no-such-tasks.yaml --model openai/x --tools examples/tools.py", "unreadable file", USAGE),
    ("eval examples/weather.yaml --model openai/x --tools examples/tools.py", "usage", USAGE),  # not a task file
    ("chek examples", "usage", USAGE),
    ("tools lock", "usage", USAGE),  # no MCP server is declared
    ("tools list --tools no_such_tools.py", "usage", USAGE),
    ("mcp --allow-side-effects", "usage", USAGE),  # only with --allow-run
    ("lsp --no-such-option", "usage", USAGE),
    (f"run {W} --tools no_such_tools.py -i city=Rome", "usage", USAGE),
    # an unreadable file
    ("check no-such.yaml", "unreadable file", USAGE),
    ("fmt no-such.yaml", "unreadable file", USAGE),
    ("test no-such.test.yaml", "unreadable file", USAGE),
    (f"run no-such.yaml {TOOLS}", "unreadable file", USAGE),
    ("graph no-such.yaml", "unreadable file", USAGE),
    (f"diff no-such.yaml {W}", "unreadable file", USAGE),
    (f"run {W} {TOOLS} --input-file no-such.json", "unreadable file", USAGE),
    # waiting for a person
    (f"run examples/approve_refund.yaml {TOOLS} -i customerId=c1 -i amount=5", "waiting", WAITING),
    ("resume WAITING_RUN", "waiting", WAITING),
    ("cancel no-such-run", "usage", USAGE),
    ("cancel WAITING_RUN", "ok", OK),
]

BAD_CONFIG = "state = 3\n"
# with a bad configuration: every command that reads it stops with 2 before doing anything
CONFIGURED = [
    f"check {W}",
    "test examples/weather.test.yaml",
    f"run {W} {TOOLS} -i city=Rome",
    "runs",
    "serve --port 0",
    "worker --drain",
    "schedule",
    f"submit {W} {TOOLS} -i city=Rome",
    "db upgrade",
    f"preview {W}",
    "tools list",
    "tools lock",
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    home = tmp_path_factory.mktemp("walk")
    shutil.copytree(ROOT / "examples", home / "examples")
    for name, text in {
        "failing.yaml": FAILING_PLAN,
        "failing_tools.py": FAILING_TOOLS,
        "ugly.yaml": UGLY,
        "examples/failing.test.yaml": FAILING_TEST,
        "examples/bad.test.yaml": BAD_TEST,
    }.items():
        (home / name).write_text(text)
    shutil.move(home / "examples/failing.test.yaml", home / "failing.test.yaml")
    shutil.move(home / "examples/bad.test.yaml", home / "bad.test.yaml")
    for name in ("failing.test.yaml", "bad.test.yaml"):
        text = (home / name).read_text().replace("plan: weather.yaml", "plan: examples/weather.yaml")
        (home / name).write_text(text.replace("tools: [tools.py]", "tools: [examples/tools.py]"))
    return home


def _dagplan(line: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f"dagplan {line}"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _ids(workdir: Path, env: dict) -> dict[str, str]:
    import json

    runs = json.loads(_dagplan("runs --format json", workdir, env).stdout)
    waiting = [r["id"] for r in runs if r["status"] == "waiting"]
    done = [r["id"] for r in runs if r["status"] == "completed"]
    return {"WAITING_RUN": waiting[0] if waiting else "", "RUN": done[0] if done else ""}


def test_every_command_ends_with_the_tables_code(workdir, installed):
    env = {k: v for k, v in installed.items() if not k.startswith("DAGPLAN_")}
    wrong = []
    for line, outcome, code in WALK:
        if "RUN" in line:
            for name, run_id in _ids(workdir, env).items():
                line = re.sub(rf"\b{name}\b", run_id, line)
        proc = _dagplan(line, workdir, env)
        if proc.returncode != code:
            wrong.append(f"dagplan {line} ({outcome}): exit {proc.returncode}, the table says {int(code)}\n"
                         f"{(proc.stdout + proc.stderr)[-600:]}")  # fmt: skip
        assert "Traceback" not in proc.stderr, proc.stderr
    assert not wrong, "\n".join(wrong)


def test_a_bad_configuration_is_exit_2_for_every_command_that_reads_it(workdir, installed, tmp_path):
    shutil.copytree(workdir / "examples", tmp_path / "examples")
    (tmp_path / "dagplan.toml").write_text(BAD_CONFIG)
    env = {k: v for k, v in installed.items() if not k.startswith("DAGPLAN_")}
    for line in CONFIGURED:
        proc = subprocess.run(
            ["bash", "-c", f"timeout 60 dagplan {line}"], cwd=tmp_path, env=env, capture_output=True, text=True
        )  # fmt: skip
        assert proc.returncode == USAGE, f"dagplan {line}: {proc.returncode}\n{proc.stderr[-800:]}"
        assert "dagplan.toml:1:1: error config" in proc.stderr, proc.stderr


def test_the_walk_covers_every_command_and_every_code():
    walked = {line.split()[0] for line, _, _ in WALK}
    assert set(COMMANDS) - walked == set(), set(COMMANDS) - walked
    assert {code for _, _, code in WALK} | {Exit.INTERRUPTED} == set(EXITS)
    assert {"ok", "finding", "run failed", "usage", "unreadable file", "waiting"} == {o for _, o, _ in WALK}


def test_the_reference_page_shows_the_table():
    """The exit codes page is generated from EXITS (docs/hooks.py; tests/test_site.py reads the built page)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = (ROOT / "docs" / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    assert exit_table() in hooks.on_page_markdown(page, page=None)
