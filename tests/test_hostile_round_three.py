"""Hostile input, round three: diff, purity, locks, notifiers, gate deadlines, answers, ``||`` defaults and
``${VAR}``, each through the CLI as a user meets it (the MCP server and the language server have their own
files: test_mcp_hostile.py, test_lsp_hostile.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = (ROOT / "examples" / "tools.py").read_text()


def _cli(cwd, *args, env=None, timeout=60):
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(Path(cwd) / "s"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           **(env or {})}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc


@pytest.fixture
def project(tmp_path):
    (tmp_path / "tools.py").write_text(TOOLS)
    return tmp_path


# --- diff: every key of a plan, precomputed outputs, sub-plans by content -------------------------

ONE = 'steps:\n  - id: history\n    tool: checkBillingHistory\n    args: {customerId: "c1"}\n    output: †state.h\n'


@pytest.mark.parametrize(
    "key, before, after",
    [("max_cost", "0.1", "500"), ("max_tokens", "1000", "900000"), ("executor", "local", "ray"),
     ("timeout", "10s", "1h"), ("mode", "eager", "lazy"), ("on_failure", "abort", "continue")],
)  # fmt: skip
def test_diff_reports_every_plan_key(project, key, before, after):
    (project / "a.yaml").write_text(f"{key}: {before}\n{ONE}")
    (project / "b.yaml").write_text(f"{key}: {after}\n{ONE}")
    proc = _cli(project, "diff", "a.yaml", "b.yaml", "--tools", "tools.py", "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert key in json.loads(proc.stdout)["plan"], proc.stdout


def test_diff_sees_a_changed_or_removed_precomputed_output(project):
    call = {"_tool": "checkBillingHistory", "customerId": "c1", "_outputPath": "†state.h"}
    (project / "c1.json").write_text(json.dumps([{**call, "_output": {"orders": 1}}]))
    (project / "c2.json").write_text(json.dumps([{**call, "_output": {"orders": 999}}]))
    (project / "c3.json").write_text(json.dumps([call]))
    (project / "c1copy.json").write_text(json.dumps([{**call, "_output": {"orders": 1}}]))
    assert _cli(project, "diff", "c1.json", "c2.json", "--tools", "tools.py").returncode == 1
    assert _cli(project, "diff", "c1.json", "c3.json", "--tools", "tools.py").returncode == 1
    assert _cli(project, "diff", "c1.json", "c1copy.json", "--tools", "tools.py").returncode == 0


INLINE = """steps:
  - id: child
    plan:
      steps:
        - id: look
          tool: {tool}
          args: {args}
          output: †state.h
      result: †state.h
    output: †state.out
"""


def test_diff_compares_sub_plans_by_content_not_by_file(project):
    looked = INLINE.format(tool="checkBillingHistory", args='{customerId: "c1"}')
    (project / "i1.yaml").write_text(looked)
    (project / "i1copy.yaml").write_text(looked)
    (project / "i2.yaml").write_text(INLINE.format(tool="issueRefund", args='{customerId: "c1", amount: 999}'))
    same = _cli(project, "diff", "i1.yaml", "i1copy.yaml", "--tools", "tools.py")
    assert same.returncode == 0, same.stdout
    changed = _cli(project, "diff", "i1.yaml", "i2.yaml", "--tools", "tools.py", "--format", "json")
    found = json.loads(changed.stdout)
    assert changed.returncode == 1 and found["side_effects_added"] == ["child.look"], found
    assert found["changed"]["child.look"]["tool"] == {"before": "checkBillingHistory", "after": "issueRefund"}
    assert found["changed"]["child.look"]["args.amount"] == {"before": None, "after": 999}  # the key that changed
    sub = "steps:\n  - id: look\n    tool: {}\n    args: {}\n    output: †state.h\nresult: †state.h\n"
    for folder, child in (("old", sub.format("checkBillingHistory", '{customerId: "c1"}')),
                          ("new", sub.format("checkBillingHistory", '{customerId: "c1"}')),
                          ("new2", sub.format("issueRefund", '{customerId: "c1", amount: 1}'))):  # fmt: skip
        (project / folder).mkdir()
        (project / folder / "p.yaml").write_text("steps:\n  - id: child\n    plan: sub.yaml\n    output: †state.o\n")
        (project / folder / "sub.yaml").write_text(child)
    assert _cli(project, "diff", "old/p.yaml", "new/p.yaml", "--tools", "tools.py").returncode == 0
    moved = _cli(project, "diff", "old/p.yaml", "new2/p.yaml", "--tools", "tools.py", "--format", "json")
    assert moved.returncode == 1 and json.loads(moved.stdout)["side_effects_added"] == ["child.look"], moved.stdout


# --- purity: a step may make its tool stricter, never laxer ----------------------------------------


@pytest.mark.parametrize("word", ["pure", "idempotent"])
def test_a_step_cannot_declare_a_side_effect_tool_pure(project, word):
    (project / "p.yaml").write_text(
        f"steps:\n  - id: refund\n    tool: issueRefund\n    args: {{customerId: c, amount: 1}}\n    purity: {word}\n"
    )
    proc = _cli(project, "check", "p.yaml", "--tools", "tools.py")
    assert proc.returncode == 1 and "p.yaml:5:13: error laxer-purity" in proc.stdout, proc.stdout
    stricter = (project / "p.yaml").read_text().replace("issueRefund", "checkBillingHistory").replace(
        "args: {customerId: c, amount: 1}", "args: {customerId: c}").replace(word, "side_effect")  # fmt: skip
    (project / "q.yaml").write_text(stricter)
    assert _cli(project, "check", "q.yaml", "--tools", "tools.py").returncode == 0


# --- MCP tool sources and dagplan.lock: a listing or a lock of the wrong shape, a lock edited by hand ----

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


@pytest.fixture
def fake_server(tmp_path):
    (tmp_path / "fake.py").write_text(FAKE)
    (tmp_path / "dagplan.toml").write_text(
        f'[mcp.fake]\ncommand = "{sys.executable}"\nargs = ["fake.py"]\nenv = {{ MODE = "${{MODE:-ok}}" }}\n'
    )
    (tmp_path / "v.yaml").write_text("steps:\n  - id: go\n    tool: fake.launch\n    args: {target: x}\n")
    return tmp_path


@pytest.mark.parametrize("mode", ["badlist", "weird-space", "weird-empty", "weird-dot", "weird-dup", "weird-slash"])
def test_a_server_listing_tools_no_plan_can_call_is_an_error_naming_it(fake_server, mode):
    proc = _cli(fake_server, "tools", "lock", env={"MODE": mode})
    assert proc.returncode == 2 and "mcp-server" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "fake" in proc.stdout + proc.stderr and not (fake_server / "dagplan.lock").exists()


def test_a_servers_stray_stdout_line_stays_off_the_terminal(fake_server):
    proc = _cli(fake_server, "tools", "lock", env={"MODE": "garbage"})
    assert proc.returncode == 0 and proc.stderr.count("\n") <= 1, proc.stderr  # at most the 'wrote' line
    assert "Failed to parse" not in proc.stderr + proc.stdout


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


@pytest.mark.parametrize(
    "how, code",
    [("pure", "lock-tampered"), ("pure-rehashed-badly", "lock-tampered"), ("annotations", "tools-lock"),
     ("inputSchema", "tools-lock"), ("outputSchema", "tools-lock"), ("description", "tools-lock"),
     ("name", "tools-lock"), ("dup", "tools-lock"), ("entry", "tools-lock"), ("tools", "tools-lock"),
     ("version", "tools-lock")],
)  # fmt: skip
def test_a_damaged_or_hand_edited_lock_is_refused_everywhere(fake_server, how, code):
    assert _cli(fake_server, "tools", "lock").returncode == 0
    lock = json.loads((fake_server / "dagplan.lock").read_text())
    (fake_server / "dagplan.lock").write_text(json.dumps(_damage(lock, how), indent=2))
    for command in (("check", "v.yaml"), ("preview", "v.yaml"), ("tools", "list"), ("run", "v.yaml", "--no-input")):
        proc = _cli(fake_server, *command)
        assert proc.returncode == 2 and code in proc.stdout + proc.stderr, (command, proc.stdout, proc.stderr)
        assert "dagplan.lock:" in proc.stdout + proc.stderr, (command, proc.stdout + proc.stderr)
    assert not (fake_server / "CALLED").exists()


# --- one bound for durations and answers ----------------------------------------------------------


@pytest.mark.parametrize("timeout", [".inf", "-.inf", ".nan", "99999999d", "367d", "1e400", '"9999999999h"'])
def test_a_duration_past_the_bound_is_a_check_error(project, timeout):
    (project / "g.yaml").write_text(f"steps:\n  - id: approve\n    gate: {{question: ok?, timeout: {timeout}}}\n")
    (project / "t.yaml").write_text(
        f"steps:\n  - id: a\n    tool: checkBillingHistory\n    args: {{customerId: c}}\n    timeout: {timeout}\n"
    )
    for name in ("g.yaml", "t.yaml"):
        proc = _cli(project, "check", name, "--tools", "tools.py")
        assert proc.returncode == 1 and "duration" in proc.stdout, (timeout, proc.stdout)
    (project / "ok.yaml").write_text("steps:\n  - id: approve\n    gate: {question: ok?, timeout: 366d}\n")
    assert _cli(project, "check", "ok.yaml").returncode == 0


@pytest.mark.parametrize("deadline", [1e300, float("inf"), -1e300, 253402300800.0])
def test_a_waiting_run_whose_old_record_holds_a_deadline_past_any_calendar_is_listed(capsys, deadline):
    from dagplan.cli.runs import _show_waiting  # what `dagplan runs` prints for each waiting gate

    _show_waiting("r1", {"step": "approve", "question": "ok?", "deadline": deadline, "on_timeout": "fail"})
    assert "r1 waits at approve: ok? (until a date past any calendar; then fail)" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["[" * 3000 + "]" * 3000, "1e999", "-1e999", "NaN", "Infinity"])
def test_answers_and_inputs_are_bounded_like_every_json_word(project, value):
    (project / "p.yaml").write_text(
        "inputs: {n: {type: number}}\nsteps:\n  - id: val\n    gate: {question: a number?, schema: {type: number}}\n"
        "  - id: use\n    tool: checkBillingHistory\n    args: {customerId: '#val'}\n"
    )
    answered = _cli(project, "run", "p.yaml", "--tools", "tools.py", "-i", "n=1", "--answer", f"val={value}")
    assert answered.returncode == 2 and "--answer val" in answered.stderr, answered.stderr
    given = _cli(project, "run", "p.yaml", "--tools", "tools.py", "-i", f"n={value}")
    assert given.returncode == 2 and "bad-input" in given.stdout + given.stderr, given.stderr


# --- a literal default covers an input never given --------------------------------------------------


@pytest.mark.parametrize("args", ["{message: \"v: †input.nope || 'dflt'\"}", '{message: †input.nope || "dflt"}',
                                  '{message: †input.nope || †input.other || "dflt"}'])  # fmt: skip
def test_an_input_never_given_takes_its_literal_default(project, args):
    (project / "p.yaml").write_text(f"steps:\n  - id: a\n    tool: notify\n    args: {args}\n    output: †state.a\n")
    assert _cli(project, "check", "p.yaml", "--tools", "tools.py").returncode == 0
    run = _cli(project, "run", "p.yaml", "--tools", "tools.py", "--format", "json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["steps"]["a"]["output"] in ("v: dflt", "dflt")
    (project / "q.yaml").write_text("steps:\n  - id: a\n    tool: notify\n    args: {message: †input.nope}\n")
    assert _cli(project, "run", "q.yaml", "--tools", "tools.py").returncode != 0  # without a default: an error


# --- ${VAR}: the documented forms, $${ for a literal, anything else a config error -------------------


@pytest.mark.parametrize("arg", ["${TOKEN:-${FALLBACK}}", "${TOKEN:?TOKEN must be set}", "${ TOKEN }", "${TOKEN",
                                 "${1X}", "a${}b"])  # fmt: skip
def test_an_unsupported_variable_form_is_a_config_error(fake_server, arg):
    toml = (fake_server / "dagplan.toml").read_text().replace('args = ["fake.py"]', f'args = ["fake.py", "{arg}"]')
    (fake_server / "dagplan.toml").write_text(toml)
    proc = _cli(fake_server, "tools", "lock", env={"TOKEN": "", "FALLBACK": ""})
    assert (
        proc.returncode == 2
        and "error config" in proc.stdout + proc.stderr
        and "mcp.fake.args" in proc.stdout + proc.stderr
    )
    assert not (fake_server / "dagplan.lock").exists()


def test_variable_forms_that_work(monkeypatch):
    from dagplan.interpreter.core.config import expand_env

    monkeypatch.setenv("A", "x")
    monkeypatch.delenv("B", raising=False)
    assert expand_env("k", "${A}/${B:-dflt}/$${A}/${B:-}") == "x/dflt/${A}/"


# --- notifiers: never the URL, never a hang, nothing left running ----------------------------------

SLOW = """import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open("child.pid", "w").write(str(child.pid))
open("parent.pid", "w").write(str(os.getpid()))
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_command_notifier_that_times_out_is_killed_with_its_children(project):
    (project / "slow.py").write_text(SLOW)
    (project / "dagplan.toml").write_text(
        f'[notify.pager]\ncommand = ["{sys.executable}", "slow.py"]\nretries = 1\ntimeout = 1\n'
    )
    (project / "g.yaml").write_text("steps:\n  - id: approve\n    gate: {question: ok?, notify: pager}\n")
    proc = _cli(project, "run", "g.yaml")
    assert proc.returncode == 3 and "notifier pager: the notice was not delivered" in proc.stderr, proc.stderr
    assert "Event loop is closed" not in proc.stderr
    for name in ("parent.pid", "child.pid"):
        pid = int((project / name).read_text())
        assert not _alive(pid), name


def test_a_webhook_url_is_never_shown(project):
    (project / "dagplan.toml").write_text('[notify.ops]\nwebhook = "${HOOK}"\nretries = 1\ntimeout = 1\n')
    (project / "g.yaml").write_text("steps:\n  - id: approve\n    gate: {question: ok?, notify: ops}\n")
    for url in ("http://127.0.0.1:9/services/T000/B000/SECRETTOKEN x", "http://127.0.0.1:9/SECRETTOKEN\x07",
                "http://[::1/SECRETTOKEN", "http://127.0.0.1:99999/SECRETTOKEN"):  # fmt: skip
        proc = _cli(project, "run", "g.yaml", env={"HOOK": url})
        assert proc.returncode == 3 and "notifier ops" in proc.stderr, proc.stderr
        assert "SECRETTOKEN" not in proc.stdout + proc.stderr, proc.stderr


# --- left from round two: cassettes, output paths, positions in the configuration -------------------


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda c: c.update(kind="model", request={"params": {"response_format": "x"}}), "response_format"),
        (lambda c: c.update(kind="model", request={"params": "x"}), "request.params"),
        (lambda c: c.update(alternative=[1]), "alternative"),
        (lambda c: c.update(duration="slow"), "duration"),
        (lambda c: c.update(name=5), "name"),
    ],
)
def test_a_cassette_call_of_the_wrong_shape_is_a_diagnostic(project, change, words):
    (project / "w.yaml").write_text(ONE)
    assert _cli(project, "run", "w.yaml", "--tools", "tools.py", "--record", "c.json").returncode == 0
    cassette = json.loads((project / "c.json").read_text())
    change(cassette["calls"][0])
    (project / "c.json").write_text(json.dumps(cassette))
    proc = _cli(project, "run", "w.yaml", "--tools", "tools.py", "--replay", "c.json", "--ephemeral")
    assert proc.returncode in (1, 2) and "c.json" in proc.stdout + proc.stderr and words in proc.stdout + proc.stderr


@pytest.mark.parametrize("value", ["", "\x00x"])
def test_an_empty_output_path_is_a_usage_error(project, value):
    (project / "w.yaml").write_text(ONE)
    (project / "w.test.yaml").write_text("plan: w.yaml\ntools: [tools.py]\ncases:\n  - name: x\n")
    for command in (("run", "w.yaml", "--tools", "tools.py", "--record", value), ("test", "w.test.yaml", "-o", value),
                    ("plan", "do it", "-o", value)):  # fmt: skip
        if "\x00" in value:
            continue  # a NUL cannot be passed on a command line; the rule is tested by the empty path
        proc = _cli(project, *command)
        assert proc.returncode == 2 and "cannot name a file" in proc.stderr, (command, proc.stderr)


def test_a_missing_tools_file_of_a_test_is_reported_at_its_line(project):
    (project / "w.yaml").write_text(ONE)
    (project / "w.test.yaml").write_text("plan: w.yaml\ntools: [nope.py]\ncases:\n  - name: x\n")
    proc = _cli(project, "check", "w.test.yaml")
    assert proc.returncode == 2 and "w.test.yaml:2:9: error tools-import" in proc.stdout, proc.stdout


def test_a_full_disk_while_spilling_a_large_output_stops_the_run_and_keeps_what_was_committed(tmp_path, monkeypatch):
    """The journal's own writes already stopped a run on a full disk; a large output spilled to its own file
    did not (OSError: No space left on device). Now both stop the run the same way, and a resume finishes."""
    import errno

    import dagplan
    from dagplan.interpreter.stores import wal

    @dagplan.tool(purity="pure")
    def small() -> int:
        return 1

    @dagplan.tool(purity="pure")
    def blob(n: int) -> str:
        return "x" * 40_000 + str(n)  # spilled beside the journal (over its inline limit)

    plan = dagplan.load(text="steps:\n  - {id: a, tool: small, output: †state.a}\n"
                             "  - {id: b, tool: blob, args: {n: †state.a}, output: †state.b}\nresult: †state.b\n",
                        tools=[small, blob])  # fmt: skip
    real = wal.atomic_write

    def full(path, data):
        if "step_results" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(wal, "atomic_write", full)
    created: list[str] = []
    with pytest.raises(dagplan.DagplanError) as stopped:
        dagplan.run(plan, tools=[small, blob], durable=True, state_dir=tmp_path / "s", on_run_created=created.append)
    assert stopped.value.headline.code == "io" and "No space left" in stopped.value.headline.message
    monkeypatch.setattr(wal, "atomic_write", real)  # space is free again
    resumed = dagplan.resume(created[0], tools=[small, blob], state_dir=tmp_path / "s")
    assert resumed.status == "completed" and resumed.result.endswith("1")


def test_a_run_whose_database_goes_away_ends_with_state_unavailable_and_resumes(tmp_path, postgres):
    import psycopg

    (tmp_path / "t.py").write_text(
        "import dagplan, os, time\n"
        "@dagplan.tool(purity='pure')\ndef hold() -> int:\n"
        "    open('started', 'w').close()\n"
        "    while not os.path.exists('go'):\n        time.sleep(0.02)\n    return 1\n"
        "@dagplan.tool(purity='pure')\ndef inc(n: int) -> int:\n    return n + 1\n"
    )
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: hold, output: †state.a}\n"
                                     "  - {id: b, tool: inc, args: {n: †state.a}, output: †state.b}\nresult: †state.b\n")  # fmt: skip
    name = postgres.rsplit("/", 1)[1]
    admin = postgres.rsplit("/", 1)[0] + "/postgres"
    assert _cli(tmp_path, "db", "upgrade", "--state", postgres).returncode == 0
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    run = subprocess.Popen([sys.executable, "-m", "dagplan", "run", "p.yaml", "--tools", "t.py", "--state", postgres],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # a bound on waiting for the first step, not a timing assertion
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and run.poll() is None, run.communicate()
            time.sleep(0.05)
        with psycopg.connect(admin, autocommit=True) as conn:  # the database goes away under the run
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        (tmp_path / "go").touch()
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 2 and "state-unavailable" in out + err and "Traceback" not in out + err, err
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    listed = _cli(tmp_path, "runs", "--state", postgres, "--format", "json")
    run_id = json.loads(listed.stdout)[0]["id"]
    resumed = _cli(tmp_path, "resume", run_id, "--tools", "t.py", "--state", postgres)
    assert resumed.returncode == 0, resumed.stderr


# --- an approval bound to the exact plan a person approved ------------------------------------------

REFUND = """summary: Refund a customer
inputs:
  customerId: {type: string}
steps:
  - id: history
    tool: checkBillingHistory
    args: {customerId: †input.customerId}
    output: †state.history
  - id: refund
    tool: issueRefund
    args: {customerId: †input.customerId, amount: 20}
    output: †state.receipt
result: †state.receipt
"""


def test_a_plan_approved_in_review_is_the_plan_that_runs(project):
    (project / "refund.yaml").write_text(REFUND)
    shown = _cli(project, "preview", "refund.yaml", "--tools", "tools.py", "--approve", "-o", "refund.approval.json")
    assert shown.returncode == 0 and "--approved refund.approval.json" in shown.stderr, shown.stderr
    approval = json.loads((project / "refund.approval.json").read_text())
    assert approval["side_effects"] == ["refund"] and approval["approved_by"] and approval["plan_hash"].startswith(
        "sha256:")  # fmt: skip
    run = ("run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1", "--approved", "refund.approval.json")
    done = _cli(project, *run, "--format", "json")
    assert done.returncode == 0, done.stderr
    (record,) = (project / "s").rglob(f"{json.loads(done.stdout)['run_id']}/plan.json")
    assert approval["plan_hash"] in record.read_text()  # the approval is kept in the run's record
    # the same plan in JSON and another key order is the same plan
    (project / "same.json").write_text(json.dumps(yaml_load(REFUND), sort_keys=True))
    same = _cli(project, "run", "same.json", *run[2:])
    assert same.returncode == 0, same.stderr


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda t: t.replace("amount: 20", "amount: 2000"), "step refund changed: args"),
        (lambda t: t.replace("result:", "  - id: again\n    tool: issueRefund\n    args: {customerId: x, amount: 1}\nresult:"),
         "a step that acts on the world was added: again"),
        (lambda t: t.replace("summary: Refund a customer", "summary: Refund\nmax_cost: 500"), "max_cost"),
    ],
)  # fmt: skip
def test_a_plan_changed_after_its_approval_is_refused_naming_what_changed(project, edit, words):
    (project / "refund.yaml").write_text(REFUND)
    assert _cli(project, "preview", "refund.yaml", "--tools", "tools.py", "--approve").returncode == 0
    (project / "refund.yaml").write_text(edit(REFUND))
    proc = _cli(project, "run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1",
                "--approved", "refund.approval.json")  # fmt: skip
    assert proc.returncode == 1 and "not-approved" in proc.stderr and words in proc.stderr, proc.stderr
    assert not list((project / "s").rglob("*.jsonl"))  # nothing ran


def test_tools_changed_after_the_approval_are_refused(project):
    (project / "refund.yaml").write_text(REFUND)
    assert _cli(project, "preview", "refund.yaml", "--tools", "tools.py", "--approve").returncode == 0
    (project / "tools.py").write_text(TOOLS.replace('"""Refund an amount', '"""Refund any amount'))
    proc = _cli(project, "run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1",
                "--approved", "refund.approval.json")  # fmt: skip
    assert proc.returncode == 1 and "tool issueRefund is not the one approved" in proc.stderr, proc.stderr
    (project / "tools.py").write_text(TOOLS + "\n# a comment: the code changed\n")
    proc = _cli(project, "run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1",
                "--approved", "refund.approval.json")  # fmt: skip
    assert proc.returncode == 1 and "the code of tool issueRefund changed since the approval" in proc.stderr, (
        proc.stderr
    )


@pytest.mark.parametrize("damage", ["{}", "not json", '{"dagplan_approval": 1}', "EDITED"])
def test_a_damaged_or_edited_approval_is_refused(project, damage):
    (project / "refund.yaml").write_text(REFUND)
    assert _cli(project, "preview", "refund.yaml", "--tools", "tools.py", "--approve").returncode == 0
    path = project / "refund.approval.json"
    if damage == "EDITED":  # the plan inside widened by hand, the hashes left
        data = json.loads(path.read_text())
        data["document"]["steps"][1]["args"]["amount"] = 2000
        path.write_text(json.dumps(data))
    else:
        path.write_text(damage)
    proc = _cli(project, "run", "refund.yaml", "--tools", "tools.py", "-i", "customerId=c1", "--approved", str(path))
    assert proc.returncode == 2 and "bad-approval" in proc.stderr, proc.stderr


def yaml_load(text: str):
    import yaml

    return yaml.safe_load(text)


# --- gates in bulk, and a refusal that is routed is a decision ---------------------------------------

FAN = """steps:
  - id: each
    for_each: [a, b, c]
    plan:
      inputs: {x: {type: string}}
      steps:
        - id: approve_close
          gate: {question: "close †input.x?", choices: [approve, reject]}
    args: {x: †item}
    output: †state.closed
"""


def test_gates_of_a_fan_out_are_listed_and_answered_at_once(project):
    (project / "f.yaml").write_text(FAN)
    waiting = _cli(project, "run", "f.yaml")
    assert waiting.returncode == 3 and all(f"each[{i}].approve_close" in waiting.stderr for i in range(3))
    listed = _cli(project, "runs")
    assert all(f"waits at each[{i}].approve_close" in listed.stderr for i in range(3)), listed.stderr
    run_id = waiting.stderr.split("run ", 1)[1].split()[0]
    assert _cli(project, "answer", run_id, "each[*].approve_close", "maybe").returncode == 2  # each one checked
    assert _cli(project, "answer", run_id, "each[*].approve_close", "approve").returncode == 0
    done = _cli(project, "resume", run_id)
    assert done.returncode == 0, done.stderr
    one = _cli(project, "run", "f.yaml", "--answer", "each[1].approve_close=approve", "--format", "json")
    assert one.returncode == 3 and [w["step"] for w in json.loads(one.stdout)["waiting"]] == [
        "each[0].approve_close", "each[2].approve_close"]  # fmt: skip
    every = _cli(project, "run", "f.yaml", "--answer", "each[*].approve_close=approve")
    assert every.returncode == 0, every.stderr
    wrong = _cli(project, "run", "f.yaml", "--answer", "each[0].aprove_close=approve")
    assert wrong.returncode == 2 and "no gate" in wrong.stderr


def test_a_refusal_the_plan_routes_is_an_ordinary_completion(project):
    (project / "g.yaml").write_text(
        "steps:\n  - id: approve\n    gate: {question: ship?, choices: [approve, reject]}\n"
        "    output: †state.approved || †state.rejected\n"
        "  - id: ship\n    tool: notify\n    args: {message: †state.approved}\n    output: †state.shipped\n"
        "  - id: tell\n    tool: notify\n    args: {message: 'not shipped'}\n    deps: [approve]\n"
        "    when: †state.rejected\n    output: †state.told\n"
    )
    refused = _cli(project, "run", "g.yaml", "--tools", "tools.py", "--answer", "approve=reject", "--format", "json")
    assert refused.returncode == 0, refused.stdout + refused.stderr
    steps = json.loads(refused.stdout)["steps"]
    assert steps["ship"]["status"] == "skipped" and steps["tell"]["status"] == "completed"
    (project / "w.yaml").write_text(
        "steps:\n  - id: decide\n    gate: {question: ship?, choices: [approve, reject]}\n    output: †state.decision\n"
        "  - id: ship\n    tool: notify\n    args: {message: shipping}\n    when: †state.decision == 'approve'\n"
        "  - id: tell\n    tool: notify\n    args: {message: no}\n    when: †state.decision == 'reject'\n"
    )
    decided = _cli(project, "run", "w.yaml", "--tools", "tools.py", "--answer", "decide=reject", "--format", "json")
    assert decided.returncode == 0, decided.stdout + decided.stderr  # a when: on the answer decides
    steps = json.loads(decided.stdout)["steps"]
    assert [steps[s]["status"] for s in ("decide", "ship", "tell")] == ["completed", "skipped", "completed"], steps
    assert _cli(project, "run", "w.yaml", "--tools", "tools.py", "--answer", "decide=maybe").returncode == 1
    (project / "h.yaml").write_text(
        "steps:\n  - id: approve\n    gate: {question: ship?, choices: [approve, reject]}\n"
    )
    unrouted = _cli(project, "run", "h.yaml", "--answer", "approve=reject")
    assert unrouted.returncode == 1  # a refusal nothing handles: completed with errors


@pytest.mark.parametrize("schema, answer, ok", [("{type: integer}", "approve", False), ("{type: string}", "approve", True),
                                                ("{enum: [yes, no]}", "maybe", False), ("{enum: [yes, no]}", "no", True)])  # fmt: skip
def test_on_timeout_must_be_an_answer_the_gates_schema_accepts(project, schema, answer, ok):
    (project / "g.yaml").write_text(
        f"steps:\n  - id: n\n    gate: {{question: q, schema: {schema}, timeout: 1h, on_timeout: {answer}}}\n"
    )
    proc = _cli(project, "check", "g.yaml")
    assert (proc.returncode == 0) == ok and (ok or "g.yaml:3:" in proc.stdout and "gate-timeout" in proc.stdout)


def test_a_plan_test_mocks_every_items_gate_with_one_pattern(project):
    (project / "f.yaml").write_text(FAN)
    (project / "f.test.yaml").write_text(
        "plan: f.yaml\ncases:\n  - name: all approved\n    mocks:\n      gates: {'each[*].approve_close': approve}\n"
        "    expect: {status: completed}\n"
    )
    proc = _cli(project, "test", "f.test.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
