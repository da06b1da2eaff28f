"""MCP servers as tool sources, tried as a user would: declare a server in dagplan.toml, `dagplan tools
lock`, `check` with no server running, `run` against the real server (stdio and streamable HTTP),
failures routed, drift named, plan tests mocking MCP tools, and kill -9 during a side effect."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from net import free_port, wait_for_port
from as_user import run_dagplan_s

HERE = Path(__file__).parent
SERVER = HERE / "mcp_demo_server.py"


def cli(cwd: Path, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def project(tmp_path: Path, server_table: str) -> Path:
    shutil.copy(SERVER, tmp_path / "server.py")
    (tmp_path / "dagplan.toml").write_text(server_table, encoding="utf-8")
    return tmp_path


STDIO = f"""[mcp.demo]
command = {json.dumps(sys.executable)}
args = ["server.py"]
env = {{ DEMO_LEDGER = "${{LEDGER}}", DEMO_HOLD = "${{DEMO_HOLD:-0}}", DEMO_CALLS = "${{DEMO_CALLS:-}}" }}
"""

PLAN = """steps:
  - id: total
    tool: demo.add
    args: {a: 2, b: 3}
    output: †state.total
  - id: loud
    tool: demo.shout
    args: {text: "sum is †state.total.sum"}
    output: †state.loud
"""


@pytest.fixture
def locked(tmp_path):
    """A project with the demo server declared over stdio and locked."""
    root = project(tmp_path, STDIO)
    env = {"LEDGER": str(tmp_path / "ledger")}
    done = cli(root, "tools", "lock", env=env)
    assert done.returncode == 0, done.stderr
    assert "locked demo (7 tools)" in done.stderr
    return root, env


def test_lock_records_every_tool_with_its_schemas_annotations_and_hash(locked):
    root, _ = locked
    lock = json.loads((root / "dagplan.lock").read_text())
    tools = {t["name"]: t for t in lock["servers"]["demo"]["tools"]}
    assert set(tools) == {"add", "shout", "fail", "slow", "record", "remove", "bump"}
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert tools["add"]["annotations"] == {"readOnlyHint": True}
    assert tools["add"]["outputSchema"]["properties"]["sum"]["type"] == "integer"
    assert all(t["hash"].startswith("sha256:") for t in tools.values())
    listed = json.loads(cli(root, "tools", "list", "--format", "json").stdout)
    purity = {t["name"]: (t["purity"], t["destructive"]) for t in listed}
    assert purity["demo.add"] == ("pure", False)
    assert purity["demo.bump"] == ("idempotent", False)
    assert purity["demo.record"] == ("side_effect", False)
    assert purity["demo.remove"] == ("side_effect", True)


def test_check_works_from_the_lock_with_no_server(locked):
    root, _ = locked
    (root / "server.py").unlink()  # no server can be started: check must not need one
    (root / "plan.yaml").write_text(PLAN, encoding="utf-8")
    ok = cli(root, "check", "plan.yaml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (root / "bad.yaml").write_text(
        "steps:\n  - id: total\n    tool: demo.add\n    args: {a: two}\n  - id: x\n    tool: demo.ad\n    args: {a: 1, b: 2}\n",
        encoding="utf-8",
    )
    bad = cli(root, "check", "bad.yaml")
    assert bad.returncode == 1
    assert "bad.yaml:4:" in bad.stdout and "needs argument 'b'" in bad.stdout
    assert "unknown tool 'demo.ad'" in bad.stdout and "demo.add" in bad.stdout  # did you mean
    (root / "pure.yaml").write_text(
        "steps:\n  - id: wipe\n    tool: demo.remove\n    args: {name: x}\n    purity: pure\n", encoding="utf-8"
    )
    refused = cli(root, "check", "pure.yaml")  # a step may make its tool stricter, never laxer
    assert refused.returncode == 1 and "laxer-purity" in refused.stdout, refused.stdout
    assert "pure.yaml:5:" in refused.stdout, refused.stdout
    (root / "wipe.yaml").write_text(
        "steps:\n  - id: wipe\n    tool: demo.remove\n    args: {name: x}\n", encoding="utf-8"
    )
    shown = cli(root, "preview", "wipe.yaml", "--format", "json")
    assert json.loads(shown.stdout)["steps"][0]["destructive"] is True
    assert "(destructive)" in cli(root, "preview", "wipe.yaml").stdout


def test_check_without_a_lock_says_how_to_make_one(tmp_path):
    root = project(tmp_path, STDIO)
    (root / "plan.yaml").write_text(PLAN, encoding="utf-8")
    done = cli(root, "check", "plan.yaml")
    assert done.returncode == 2
    assert "no dagplan.lock" in done.stderr + done.stdout and "dagplan tools lock" in done.stderr + done.stdout


def test_run_calls_the_real_server_structured_and_text_results(locked):
    root, env = locked
    (root / "plan.yaml").write_text(PLAN, encoding="utf-8")
    done = cli(root, "run", "plan.yaml", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert steps["total"]["output"] == {"sum": 5}  # structuredContent
    assert steps["loud"]["output"] == "SUM IS 5"  # text content
    assert "Processing request" not in done.stderr  # the server's own log goes to the debug log


def test_is_error_is_a_failure_that_catch_routes(locked):
    root, env = locked
    (root / "plan.yaml").write_text(
        """steps:
  - id: risky
    tool: demo.fail
    args: {reason: disk on fire}
    catch:
      - {errors: [McpToolError], output: †state.problem}
    output: †state.fine
  - id: after
    tool: demo.shout
    args: {text: "†state.problem.message"}
    output: †state.shouted
""",
        encoding="utf-8",
    )
    done = cli(root, "run", "plan.yaml", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert steps["risky"]["status"] == "handled" and steps["risky"]["error"]["type"] == "McpToolError"
    assert "DISK ON FIRE" in steps["after"]["output"]


def test_a_changed_tool_is_refused_and_named(locked):
    root, env = locked
    lock_file = root / "dagplan.lock"
    lock = json.loads(lock_file.read_text())
    for tool in lock["servers"]["demo"]["tools"]:
        if tool["name"] == "add":  # as if the server changed add's schema since the lock was written
            from dagplan.interpreter.tools.mcp import tool_hash

            tool["inputSchema"] = {**tool["inputSchema"], "description": "an older listing"}
            tool["hash"] = tool_hash(tool)
    lock_file.write_text(json.dumps(lock))
    (root / "plan.yaml").write_text(PLAN, encoding="utf-8")
    done = cli(root, "run", "plan.yaml", "--format", "json", env=env)
    assert done.returncode == 1
    error = json.loads(done.stdout)["steps"]["total"]["error"]
    assert error["type"] == "McpDrift" and "demo.add changed" in error["message"] and "tools lock" in error["message"]


def test_a_secret_from_the_environment_is_required_before_anything_runs(locked):
    root, _ = locked
    (root / "plan.yaml").write_text(PLAN, encoding="utf-8")
    done = cli(root, "run", "plan.yaml")  # LEDGER not given
    assert done.returncode == 2
    assert "mcp.demo.env.DEMO_LEDGER uses ${LEDGER}, which is not set" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_declaration_is_a_configuration_error_with_its_line(tmp_path):
    (tmp_path / "dagplan.toml").write_text('model = "x"\n\n[mcp.demo]\ncommand = "a"\nurl = "b"\nheaderz = {}\n')
    (tmp_path / "plan.yaml").write_text(PLAN)
    done = cli(tmp_path, "check", "plan.yaml")
    assert done.returncode == 2
    assert "dagplan.toml:3:" in done.stderr
    assert "give either command" in done.stderr and "unknown key 'headerz'" in done.stderr and "headers" in done.stderr


def test_plan_tests_mock_mcp_tools_with_no_server(locked):
    root, _ = locked
    (root / "server.py").unlink()
    (root / "plan.yaml").write_text(PLAN, encoding="utf-8")
    (root / "plan.test.yaml").write_text(
        """plan: plan.yaml
cases:
  - name: adds then shouts
    mocks:
      tools:
        demo.add: {result: {sum: 7}}
        demo.shout:
          - args: {text: "sum is 7"}
            result: "SUM IS 7"
    expect:
      status: completed
      state: {loud: "SUM IS 7"}
      calls: {demo.add: 1, demo.shout: 1}
""",
        encoding="utf-8",
    )
    done = cli(root, "test", "plan.test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_streamable_http_server_with_a_header_from_the_environment(tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for_port(port)
        (tmp_path / "dagplan.toml").write_text(
            f'[mcp.demo]\nurl = "http://127.0.0.1:{port}/mcp"\nheaders = {{ Authorization = "Bearer ${{TOKEN}}" }}\n'
        )
        assert cli(tmp_path, "tools", "lock").returncode == 2  # TOKEN is not set
        assert cli(tmp_path, "tools", "lock", env={"TOKEN": "s3cret"}).returncode == 0
        assert "s3cret" not in (tmp_path / "dagplan.lock").read_text()
        (tmp_path / "plan.yaml").write_text(PLAN, encoding="utf-8")
        done = cli(tmp_path, "run", "plan.yaml", "--format", "json", env={"TOKEN": "s3cret"})
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["steps"]["loud"]["output"] == "SUM IS 5"
        assert not list((tmp_path / ".dagplan").rglob("*")) or "s3cret" not in "".join(
            p.read_text(errors="replace") for p in (tmp_path / ".dagplan").rglob("*") if p.is_file()
        )
    finally:
        server.kill()
        server.wait()


SIDE_EFFECT_PLAN = """steps:
  - id: note
    tool: demo.record
    args: {line: paid}
    output: †state.note
  - id: total
    tool: demo.add
    args: {a: 1, b: 1}
    output: †state.total
    deps: [note]
"""


def test_kill_9_during_a_side_effect_then_resume_never_repeats_it(locked):
    """record is not read-only: interrupted, it is a side effect whose outcome is unknown. A resume with no
    one to ask stops for a decision (exit 3); adopting it goes on without calling it again."""
    root, env = locked
    ledger = root / "ledger"
    (root / "plan.yaml").write_text(SIDE_EFFECT_PLAN, encoding="utf-8")
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env, "DEMO_HOLD": "60"}
    run = subprocess.Popen([sys.executable, "-m", "dagplan", "run", "plan.yaml", "--no-input"], cwd=root, env=full,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (ledger.exists() and ledger.read_text()):
        time.sleep(0.1)
    assert ledger.read_text() == "paid\n"
    os.killpg(run.pid, signal.SIGKILL)  # dagplan and the server it started
    run.wait()
    run_id = json.loads(cli(root, "runs", "--format", "json").stdout)[0]["id"]
    asked = cli(root, "resume", run_id, "--no-input", env=env)
    assert asked.returncode == 3, asked.stderr
    assert "note" in asked.stderr
    assert ledger.read_text() == "paid\n"
    adopted = cli(root, "resume", run_id, "--on-interrupted", "adopt", "--format", "json", env=env)
    assert adopted.returncode == 0, adopted.stderr
    assert json.loads(adopted.stdout)["steps"]["total"]["output"] == {"sum": 2}
    assert ledger.read_text() == "paid\n"  # the side effect happened once


def test_a_read_only_tool_interrupted_is_simply_run_again(locked):
    root, env = locked
    (root / "plan.yaml").write_text(
        "steps:\n  - id: wait\n    tool: demo.slow\n    args: {seconds: 60}\n    output: †state.w\n", encoding="utf-8"
    )
    calls = root / "calls"
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env, "DEMO_CALLS": str(calls)}
    run = subprocess.Popen([sys.executable, "-m", "dagplan", "run", "plan.yaml", "--no-input"], cwd=root, env=full,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (calls.exists() and calls.read_text()):
        time.sleep(0.1)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    run_id = json.loads(cli(root, "runs", "--format", "json").stdout)[0]["id"]
    # a pure step is retried without asking: the resume starts it again (the test waits for the call)
    again = subprocess.Popen([sys.executable, "-m", "dagplan", "resume", run_id, "--no-input"], cwd=root, env=full,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and calls.read_text().count("slow") < 2:
        time.sleep(0.1)
    os.killpg(again.pid, signal.SIGKILL)
    again.wait()
    assert calls.read_text().count("slow") == 2


EXAMPLE = HERE.parent / "examples" / "mcp"


def _with_python_on_path(env: dict | None = None) -> dict:
    """The example's servers are started as `python -m ...`: this interpreter's, as in an activated venv."""
    return {**(env or {}), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_the_published_servers_example_checks_and_tests_offline(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "mcp")
    root = tmp_path / "mcp"
    offline = {"PATH": "/nonexistent"}  # no python, no server on PATH: only dagplan.lock is read
    checked = cli(root, "check", "commit_notes.yaml", env=offline)
    assert checked.returncode == 0 and "0 warnings" in checked.stderr + checked.stdout, checked.stdout
    tested = cli(root, "test", "--coverage", "--fail-under", "100", env=offline)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_example_lock_is_what_the_published_servers_list_today(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "mcp")
    root = tmp_path / "mcp"
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    done = cli(root, "tools", "lock", env=_with_python_on_path({"REPO": str(tmp_path / "repo")}))
    assert done.returncode == 0, done.stderr
    assert json.loads((root / "dagplan.lock").read_text()) == json.loads((EXAMPLE / "dagplan.lock").read_text())


def test_the_published_servers_example_runs_waits_for_a_person_and_commits_once(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "mcp")
    root, repo = tmp_path / "mcp", tmp_path / "repo"
    repo.mkdir()
    for command in (["init", "-q"], ["config", "user.email", "me@example.com"], ["config", "user.name", "me"]):
        subprocess.run(["git", *command], cwd=repo, check=True)
    (repo / "notes.txt").write_text("hello\n")
    env = _with_python_on_path({"REPO": str(repo)})
    args = ["-i", f"repo={repo}", "-i", "file=notes.txt"]
    waiting = cli(root, "run", "commit_notes.yaml", *args, "--no-input", "--format", "json", env=env)
    assert waiting.returncode == 3, waiting.stderr
    report = json.loads(waiting.stdout)
    assert report["steps"]["now"]["output"]["timezone"] == "UTC"  # time.get_current_time's structured result
    assert "+hello" in report["steps"]["diff"]["output"]  # git.git_diff_staged saw what git_add staged
    run_id = report["run_id"]
    assert cli(root, "answer", run_id, "approve", "commit").returncode == 0
    done = cli(root, "resume", run_id, "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    assert "notes.txt at " in json.loads(done.stdout)["result"]
    log = subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True).stdout
    assert log.count("notes.txt at") == 1  # committed once
    again = cli(root, "resume", run_id, env=env)  # a finished run: everything replays, nothing is called
    assert again.returncode == 0 and "(replayed)" in again.stderr
    assert log == subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True).stdout


def test_a_recorded_run_replays_its_mcp_calls_with_no_server(locked):
    root, env = locked
    (root / "plan.yaml").write_text(PLAN, encoding="utf-8")
    recorded = cli(root, "run", "plan.yaml", "--record", "c.json", env=env)
    assert recorded.returncode == 0, recorded.stderr
    calls = json.loads((root / "c.json").read_text())
    assert "demo.add" in json.dumps(calls) and "demo.shout" in json.dumps(calls)
    (root / "server.py").unlink()  # nothing can be called for real now
    replayed = cli(root, "run", "plan.yaml", "--replay", "c.json", "--format", "json", env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["steps"]["loud"]["output"] == "SUM IS 5"


def test_a_step_timeout_ends_a_slow_mcp_call_and_the_run(locked):
    root, env = locked
    (root / "plan.yaml").write_text(
        "steps:\n  - id: wait\n    tool: demo.slow\n    args: {seconds: 60}\n    timeout: 1s\n"
        "    retry: {limit: 0}\n    output: †state.w\n",
        encoding="utf-8",
    )
    started = time.monotonic()
    done = cli(root, "run", "plan.yaml", "--format", "json", env=env, timeout=50)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["steps"]["wait"]["error"]
    assert error["type"] == "TimeoutError", error
    assert time.monotonic() - started < 45  # the call was given up, the server closed: no hang on a 60 s call


def test_an_llm_step_calls_an_mcp_tool_by_a_name_providers_accept(locked, stub, stub_model, monkeypatch):
    """Providers allow no dot in a function name: the model sees demo__add and the call reaches demo.add."""
    from llm_stub import text, tool_calls

    import dagplan

    root, env = locked
    monkeypatch.chdir(root)
    monkeypatch.setenv("LEDGER", env["LEDGER"])
    (root / "plan.yaml").write_text(
        'steps:\n  - id: ask\n    llm: "2+3?"\n    tools: [demo.add]\n    output: †state.answer\n', encoding="utf-8"
    )
    stub.script(tool_calls(("demo__add", {"a": 2, "b": 3})), text("The sum is 5."))
    tools = dagplan.load_tools(["mcp:demo"])
    result = dagplan.run("plan.yaml", tools=tools, model=stub_model, completion_kwargs=stub.kwargs())
    assert str(result.status) == "completed" and result.steps["ask"].output == "The sum is 5.", result.message
    first, second = stub.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["demo__add"]
    assert json.loads(second["messages"][-1]["content"]) == {"sum": 5}  # the real server's structured answer


@pytest.fixture
def fake_server(tmp_path):
    (tmp_path / "fake.py").write_text(FAKE)
    (tmp_path / "dagplan.toml").write_text(
        f'[mcp.fake]\ncommand = "{sys.executable}"\nargs = ["fake.py"]\nenv = {{ MODE = "${{MODE:-ok}}" }}\n'
    )
    (tmp_path / "v.yaml").write_text("steps:\n  - id: go\n    tool: fake.launch\n    args: {target: x}\n")
    return tmp_path


FAKE = r'''"""A raw MCP server over stdio; MODE: ok | garbage (a stray stdout line first) | badlist | weird"""
import json, os, pathlib, sys
mode = os.environ.get("MODE", "ok")
if mode == "garbage":
    print("this is not json", flush=True)
TOOLS = [{"name": "launch", "description": "acts", "inputSchema": {"type": "object",
          "properties": {"target": {"type": "string"}}, "required": ["target"]}}]
if mode == "badlist":
    TOOLS = [{"name": "t", "inputSchema": "notaschema", "annotations": [1, 2]}]
if mode.startswith("weird"):
    TOOLS.append({"name": {"weird-space": "we ird", "weird-empty": "", "weird-dot": "a.b", "weird-dup": "launch",
                           "weird-slash": "../x"}[mode], "inputSchema": {"type": "object"}})
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("id") is None:
        continue
    method = msg["method"]
    if method == "initialize":
        res = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
               "serverInfo": {"name": "fake", "version": "1"}}
    elif method == "tools/list":
        res = {"tools": TOOLS}
    elif method == "tools/call":
        pathlib.Path("CALLED").write_text(json.dumps(msg["params"]))
        res = {"content": [{"type": "text", "text": "done"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}), flush=True)
'''


def _damage(lock: dict, how: str) -> dict:
    entry = lock["servers"]["fake"]["tools"][0]
    if how == "pure":  # the side effect claims to be read-only, its hash untouched
        entry["annotations"] = {"readOnlyHint": True}
    elif how == "pure-rehashed-badly":
        entry["annotations"] = {"readOnlyHint": True}
        entry["hash"] = "sha256:" + "0" * 64
    elif how in ("annotations", "inputSchema", "outputSchema", "description"):
        entry[how] = "x" if how != "description" else 5
    elif how == "name":
        entry["name"] = "a.b"
    elif how == "dup":
        lock["servers"]["fake"]["tools"].append(dict(entry))
    elif how == "entry":
        lock["servers"]["fake"]["tools"][0] = "launch"
    elif how == "tools":
        lock["servers"]["fake"]["tools"] = {"launch": 1}
    elif how == "version":
        lock["version"] = 99
    return lock


@pytest.mark.parametrize("mode", ["badlist", "weird-space", "weird-empty", "weird-dot", "weird-dup", "weird-slash"])
def test_a_server_listing_tools_no_plan_can_call_is_an_error_naming_it(fake_server, mode):
    proc = run_dagplan_s(fake_server, "tools", "lock", env={"MODE": mode})
    assert proc.returncode == 2 and "mcp-server" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "fake" in proc.stdout + proc.stderr and not (fake_server / "dagplan.lock").exists()


def test_a_servers_stray_stdout_line_stays_off_the_terminal(fake_server):
    proc = run_dagplan_s(fake_server, "tools", "lock", env={"MODE": "garbage"})
    assert proc.returncode == 0 and proc.stderr.count("\n") <= 1, proc.stderr  # at most the 'wrote' line
    assert "Failed to parse" not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    "how, code",
    [("pure", "lock-tampered"), ("pure-rehashed-badly", "lock-tampered"), ("annotations", "tools-lock"),
     ("inputSchema", "tools-lock"), ("outputSchema", "tools-lock"), ("description", "tools-lock"),
     ("name", "tools-lock"), ("dup", "tools-lock"), ("entry", "tools-lock"), ("tools", "tools-lock"),
     ("version", "tools-lock")],
)  # fmt: skip
def test_a_damaged_or_hand_edited_lock_is_refused_everywhere(fake_server, how, code):
    assert run_dagplan_s(fake_server, "tools", "lock").returncode == 0
    lock = json.loads((fake_server / "dagplan.lock").read_text())
    (fake_server / "dagplan.lock").write_text(json.dumps(_damage(lock, how), indent=2))
    for command in (("check", "v.yaml"), ("preview", "v.yaml"), ("tools", "list"), ("run", "v.yaml", "--no-input")):
        proc = run_dagplan_s(fake_server, *command)
        assert proc.returncode == 2 and code in proc.stdout + proc.stderr, (command, proc.stdout, proc.stderr)
        assert "dagplan.lock:" in proc.stdout + proc.stderr, (command, proc.stdout + proc.stderr)
    assert not (fake_server / "CALLED").exists()


@pytest.mark.parametrize("arg", ["${TOKEN:-${FALLBACK}}", "${TOKEN:?TOKEN must be set}", "${ TOKEN }", "${TOKEN",
                                 "${1X}", "a${}b"])  # fmt: skip
def test_an_unsupported_variable_form_is_a_config_error(fake_server, arg):
    toml = (fake_server / "dagplan.toml").read_text().replace('args = ["fake.py"]', f'args = ["fake.py", "{arg}"]')
    (fake_server / "dagplan.toml").write_text(toml)
    proc = run_dagplan_s(fake_server, "tools", "lock", env={"TOKEN": "", "FALLBACK": ""})
    assert (
        proc.returncode == 2
        and "error config" in proc.stdout + proc.stderr
        and "mcp.fake.args" in proc.stdout + proc.stderr
    )
    assert not (fake_server / "dagplan.lock").exists()
