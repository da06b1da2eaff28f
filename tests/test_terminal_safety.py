"""Text from tools, models and errors never reaches a terminal raw: control characters are shown escaped in
every human-readable output (run, runs, runs show, events, errors), on a terminal too; JSON stays exact."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time

TOOLS = """\
import dagplan

EVIL = "ok\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x1b]0;pwned\\x07 \\u202egnp.exe \\x9b31m"


@dagplan.tool
def evil() -> str:
    return EVIL


@dagplan.tool
def boom() -> str:
    raise ValueError("bad \\x1b]0;title\\x07 news")
"""
PLAN = "steps:\n  - {id: a, tool: evil, output: †state.a}\n  - {id: b, tool: boom}\nresult: †state.a\n"
DANGER = ("\x1b]52", "\x1b]0;", "\x1b[2J", "\u202e", "\x9b", "\x07")


def _env(tmp_path):
    return {**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "s"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _cli(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_text_outputs_show_control_characters_escaped_and_json_stays_exact(tmp_path):
    (tmp_path / "t.py").write_text(TOOLS)
    (tmp_path / "p.yaml").write_text(PLAN)
    ran = _cli(tmp_path, "run", "p.yaml", "--tools", "t.py")
    run_id = ran.stderr.split("run ", 1)[1].split()[0]
    outputs = [ran, _cli(tmp_path, "runs"), _cli(tmp_path, "runs", "show", run_id), _cli(tmp_path, "events", run_id)]
    for proc in outputs:
        for danger in DANGER:
            assert danger not in proc.stdout + proc.stderr, (danger, proc.args)
    assert "\\u001b]52" in ran.stdout + ran.stderr
    as_json = _cli(tmp_path, "run", "p.yaml", "--tools", "t.py", "--format", "json")
    assert json.loads(as_json.stdout)["result"].startswith("ok\x1b]52;c;")  # the same value, escaped as JSON does


def test_the_live_progress_on_a_terminal_draws_its_table_but_no_tool_text(tmp_path):
    (tmp_path / "t.py").write_text(TOOLS)
    (tmp_path / "p.yaml").write_text(
        PLAN.replace("{id: a, tool: evil", '{id: a, description: "x\\e]0;t\\a", tool: evil')
    )
    shown, _ = _run_on_a_terminal(tmp_path)
    assert "\x1b[" in shown  # rich drew its table
    for danger in ("\x1b]52", "\x1b]0;", "\x1b[2J", "\u202e"):
        assert danger not in shown, danger


def test_what_a_tools_subprocess_writes_reaches_the_terminal_escaped(tmp_path):
    """A subprocess a tool starts writes to file descriptor 1 itself, under Python's streams: on a terminal
    it reaches it escaped (the title, clear-screen and clipboard sequences shown as `\\u001b...`), never raw."""
    (tmp_path / "t.py").write_text(
        "import subprocess\nimport dagplan\n\n@dagplan.tool(purity='pure')\ndef shell() -> str:\n"
        "    subprocess.run(['printf', '\\\\033]0;owned\\\\007\\\\033]52;c;Y3VybA==\\\\007\\\\033[2J from the child\\\\n'])\n"
        "    return 'ran'\n")  # fmt: skip
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: s, tool: shell, output: $state.o}\nresult: $state.o\n")
    shown, code = _run_on_a_terminal(tmp_path)
    assert code == 0, shown
    assert "\\u001b]0;owned\\u0007" in shown and "from the child" in shown, shown  # shown, escaped
    for danger in ("\x1b]52", "\x1b]0;", "\x1b[2J"):
        assert danger not in shown, danger


def _run_on_a_terminal(tmp_path) -> tuple[str, int]:
    """`dagplan run p.yaml --tools t.py` on a pseudo-terminal: (everything it showed, its exit code)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: dagplan on a terminal
        os.chdir(tmp_path)
        os.execve(sys.executable, [sys.executable, "-m", "dagplan", "run", "p.yaml", "--tools", "t.py"], _env(tmp_path))
    chunks, deadline = [], time.monotonic() + 60  # a bound on waiting, not a timing assertion
    while time.monotonic() < deadline:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks).decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)
