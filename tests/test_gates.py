"""Gate deadlines (timeout, on_timeout) and notices (notify), through the CLI as a user meets them (issue 26)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from as_user import run_dagplan, run_dagplan_s, with_example_tools
import pytest

ROOT = Path(__file__).resolve().parent.parent

DEADLINES = """steps:
  - id: ship
    gate: {question: "Ship it?", timeout: 1h, on_timeout: approve}
    output: †state.go
  - id: sure
    gate: {question: "Really?", timeout: 1h}
    output: †state.sure || †state.late
    catch:
      - {errors: [GateTimeout], output: †state.late}
  - {id: done, tool: presentSuggestion, args: {suggestion: '†state.sure || "nobody answered"'}, output: †state.r}
result: "†state.go: †state.r"
"""


def cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


def _project(tmp_path: Path, plan: str, config: str = "") -> Path:
    (tmp_path / "tools.py").write_text((ROOT / "examples" / "tools.py").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "p.yaml").write_text(plan, encoding="utf-8")
    if config:
        (tmp_path / "dagplan.toml").write_text(config, encoding="utf-8")
    return tmp_path


def _waiting(root: Path) -> list[dict]:
    return json.loads(cli(root, "runs", "--format", "json").stdout)[0]["waiting"]


def test_a_gate_deadline_holds_across_resumes_then_its_on_timeout_applies(tmp_path):
    root = _project(tmp_path, DEADLINES)
    assert cli(root, "check", "p.yaml", "--tools", "tools.py").returncode == 0
    started = cli(root, "run", "p.yaml", "--tools", "tools.py")
    assert started.returncode == 3, started.stderr
    deadlines = {w["step"]: w["deadline"] for w in _waiting(root)}
    assert set(deadlines) == {"ship", "sure"} and all(d > time.time() for d in deadlines.values())
    shown = cli(root, "runs")
    assert "then approve)" in shown.stderr and "then fail)" in shown.stderr, shown.stderr
    early = cli(root, "resume", "@last", "--tools", "tools.py")  # before the deadline: it waits again...
    assert early.returncode == 3, early.stderr
    assert {w["step"]: w["deadline"] for w in _waiting(root)} == deadlines  # ...counted from the first wait
    bad = cli(root, "resume", "@last", "--tools", "tools.py", DAGPLAN_CLOCK_OFFSET="soon")
    assert bad.returncode == 2 and "DAGPLAN_CLOCK_OFFSET='soon' is not a number of seconds" in bad.stderr, bad.stderr
    # two hours later: the engine's clock is moved, not waited for (no test depends on the machine's speed)
    late = cli(root, "resume", "@last", "--tools", "tools.py", "--format", "json", DAGPLAN_CLOCK_OFFSET="7200")
    assert late.returncode == 0, late.stderr
    done = json.loads(late.stdout)
    assert done["result"] == "approve: Today I suggest nobody answered."
    assert (
        done["steps"]["sure"]["status"] == "handled"
        and "no answer within 1h" in done["steps"]["sure"]["output"]["message"]
    )
    events = cli(root, "events", "@last", "--format", "json")
    answered = [e for e in json.loads(events.stdout) if e["type"] == "gate_answered"]
    assert [(e["step"], e.get("timed_out")) for e in answered] == [("ship", True)]


def test_on_timeout_must_be_a_choice_and_needs_a_timeout(tmp_path):
    root = _project(tmp_path, "steps:\n  - {id: g, gate: {question: ok?, on_timeout: approve}, output: †state.a}\n"
                              "  - {id: h, gate: {question: ok?, timeout: 1h, on_timeout: later}, output: †state.b}\n"
                              "result: \"†state.a †state.b\"\n")  # fmt: skip
    out = cli(root, "check", "p.yaml")
    assert out.returncode == 1
    assert "p.yaml:2:47: error gate-timeout: `on_timeout` says what happens after `timeout`" in out.stdout, out.stdout
    assert "'later' is neither `fail` nor one of the choices (approve, reject)" in out.stdout


class _Hook(BaseHTTPRequestHandler):
    received: list = []
    status = 200

    def do_POST(self) -> None:  # noqa: N802 - the http.server spelling
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.headers["Content-Type"], json.loads(body)))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def _server(status: int) -> tuple[ThreadingHTTPServer, type]:
    handler = type("Hook", (_Hook,), {"received": [], "status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


NOTIFIED = """steps:
  - id: ship
    gate: {question: "Ship release 4.2?", notify: [ops, log]}
    output: †state.go
result: †state.go
"""
CONFIG = """[notify.ops]
webhook = "${OPS_HOOK}"
retries = 2
timeout = 2

[notify.log]
command = ["%s", "log_notice.py"]
"""


def test_a_waiting_gate_tells_a_webhook_and_a_command_once(tmp_path):
    root = _project(tmp_path, NOTIFIED, CONFIG % sys.executable)
    (root / "log_notice.py").write_text("import sys\nopen('notices.jsonl', 'a').write(sys.stdin.read() + '\\n')\n")
    server, hook = _server(200)
    url = f"http://127.0.0.1:{server.server_port}/services/T0/B0/secret"
    try:
        assert cli(root, "check", "p.yaml").returncode == 0
        unset = cli(root, "run", "p.yaml")  # the webhook's variable unset: said before anything runs
        assert unset.returncode == 2 and "notify.ops.webhook uses ${OPS_HOOK}" in unset.stderr, unset.stderr
        started = cli(root, "run", "p.yaml", OPS_HOOK=url)
        assert started.returncode == 3, started.stderr
        assert len(hook.received) == 1
        kind, body = hook.received[0]
        run_id = body["run_id"]
        assert kind == "application/json" and body["step"] == "ship" and body["choices"] == ["approve", "reject"]
        assert body["text"].startswith(f"dagplan: run {run_id} waits at ship: Ship release 4.2? [approve/reject]")
        assert f"dagplan answer {run_id} ship VALUE" in body["text"]
        logged = [json.loads(line) for line in (root / "notices.jsonl").read_text().splitlines()]
        assert [n["run_id"] for n in logged] == [run_id]
        again = cli(root, "resume", run_id, OPS_HOOK=url)  # still waiting: nobody is told twice
        assert again.returncode == 3 and len(hook.received) == 1
        assert len((root / "notices.jsonl").read_text().splitlines()) == 1
    finally:
        server.shutdown()


def test_a_webhook_that_fails_never_blocks_the_run_nor_shows_its_url(tmp_path):
    root = _project(tmp_path, NOTIFIED.replace("[ops, log]", "ops"), CONFIG % sys.executable)
    server, hook = _server(500)
    url = f"http://127.0.0.1:{server.server_port}/services/T0/B0/secret-token"
    try:
        started = cli(root, "run", "p.yaml", OPS_HOOK=url)
    finally:
        server.shutdown()
    assert started.returncode == 3, started.stderr  # waiting, as without a notifier
    assert len(hook.received) == 2  # retried: `retries = 2`
    assert "notifier ops: the notice was not delivered: HTTP 500" in started.stderr
    assert "secret-token" not in started.stderr + started.stdout


def test_a_notifier_the_configuration_does_not_declare_is_an_error_at_its_line(tmp_path):
    root = _project(tmp_path, NOTIFIED.replace("[ops, log]", "opps"), CONFIG % sys.executable)
    out = cli(root, "check", "p.yaml")
    assert out.returncode == 1 and "p.yaml:3:51: error unknown-notifier: gate 'ship' notifies 'opps'" in out.stdout
    assert "did you mean 'ops'?" in out.stdout
    (root / "dagplan.toml").write_text('[notify.ops]\nwebhook = "https://hooks.example.com/T0/B0/x"\n')
    bad = cli(root, "check", "p.yaml")
    assert bad.returncode == 2 and "notify.ops.webhook must be a URL from the environment" in bad.stderr, bad.stderr


def test_an_answer_given_elsewhere_is_taken_by_the_run_prompting_on_a_terminal(tmp_path):
    """`dagplan run` asks at a terminal; meanwhile a person answers from another terminal (`dagplan answer`):
    the prompting run takes that answer, says so, records who gave it and goes on (no `not-waiting`)."""
    import pty
    import re
    import select

    root = _project(tmp_path, "steps:\n  - {id: ok, gate: {question: Ship it?}, output: †state.ok}\n"
                              "  - {id: done, tool: presentSuggestion, args: {suggestion: †state.ok}, output: †state.r}\n"
                              "result: †state.r\n")  # fmt: skip
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DAGPLAN_STATE_DIR": str(root / "state")}
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dagplan", "run", "p.yaml", "--tools", "tools.py"], cwd=root,
                            env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True)  # fmt: skip
    os.close(slave)
    seen, answer, deadline = b"", None, time.monotonic() + 90
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
            if answer is None and b"Ship it?" in seen:  # the prompt is up: answer it from elsewhere
                run_id = re.search(rb"run (\d{8}-\d{6}-\w+)", seen).group(1).decode()
                listed = subprocess.run([sys.executable, "-m", "dagplan", "runs", "--status", "waiting", "--json"],
                                        cwd=root, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
                answer = subprocess.run([sys.executable, "-m", "dagplan", "answer", run_id, "ok", "approve"],
                                        cwd=root, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        proc.wait(timeout=60)
        while select.select([master], [], [], 0.1)[0]:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    out = seen.decode("utf-8", "replace")
    assert answer is not None and answer.returncode == 0, answer.stderr if answer else out
    # a run asking at a terminal is waiting, with what it asks (issue 63); the answer says who takes it
    assert [(r["id"], r["status"]) for r in json.loads(listed.stdout)] == [(run_id, "waiting")], listed.stdout
    assert "asking at a terminal, takes the answer and goes on" in answer.stderr, answer.stderr
    assert "dagplan resume" not in answer.stderr
    assert proc.returncode == 0, out
    assert "answered elsewhere (answer, by" in out and "Today I suggest approve" in out, out
    events = cli(root, "events", "@last", "--format", "json", DAGPLAN_STATE_DIR=str(root / "state"))
    given = [e for e in json.loads(events.stdout) if e["type"] == "gate_answered"]
    assert [(e["step"], e["value"], e["channel"]) for e in given] == [("ok", "approve", "answer")]


TWO_GATES = """steps:
  - id: first
    gate: {question: "Go?", choices: [yes, no]}
  - id: second
    gate: {question: "Really?", choices: [yes, no]}
    deps: [first]
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


SLOW = """import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open("child.pid", "w").write(str(child.pid))
open("parent.pid", "w").write(str(os.getpid()))
time.sleep(60)
"""


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


def test_run_answer_answers_a_gate_ahead_and_leaves_the_others_waiting(tmp_path):
    root = with_example_tools(tmp_path)
    both = run_dagplan(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py", "-i",
               "customerId=c", "-i", "amount=5", "--answer", "approve=approve", "--format", "json")  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout)["steps"]["refund"]["status"] == "completed"
    (root / "two.yaml").write_text(TWO_GATES)
    half = run_dagplan(root, "run", "two.yaml", "--answer", "first=yes", "--no-input", "--format", "json")
    assert half.returncode == 3
    steps = json.loads(half.stdout)["steps"]
    assert steps["first"]["status"] == "completed" and steps["second"]["status"] == "waiting"
    wrong = run_dagplan(root, "run", "two.yaml", "--answer", "frist=yes")
    assert wrong.returncode == 2 and "did you mean 'first'?" in wrong.stderr


def test_a_gate_answer_nested_thousands_deep_is_refused(tmp_path):
    (tmp_path / "p.yaml").write_text("steps:\n  - id: ok\n    gate: {question: what?, schema: {type: array}}\n")
    waiting = run_dagplan_s(tmp_path, "run", "p.yaml")
    assert waiting.returncode == 3
    run_id = waiting.stderr.split("run ", 1)[1].split()[0]
    proc = run_dagplan_s(tmp_path, "answer", run_id, "ok", "[" * 5000 + "]" * 5000)
    assert proc.returncode == 2 and "error bad-answer" in proc.stderr and len(proc.stderr) < 2000, proc.stderr


def test_a_command_notifier_that_times_out_is_killed_with_its_children(tools_project):
    (tools_project / "slow.py").write_text(SLOW)
    (tools_project / "dagplan.toml").write_text(
        f'[notify.pager]\ncommand = ["{sys.executable}", "slow.py"]\nretries = 1\ntimeout = 1\n'
    )
    (tools_project / "g.yaml").write_text("steps:\n  - id: approve\n    gate: {question: ok?, notify: pager}\n")
    proc = run_dagplan_s(tools_project, "run", "g.yaml")
    assert proc.returncode == 3 and "notifier pager: the notice was not delivered" in proc.stderr, proc.stderr
    assert "Event loop is closed" not in proc.stderr
    for name in ("parent.pid", "child.pid"):
        pid = int((tools_project / name).read_text())
        assert not _alive(pid), name


def test_a_webhook_url_is_never_shown(tools_project):
    (tools_project / "dagplan.toml").write_text('[notify.ops]\nwebhook = "${HOOK}"\nretries = 1\ntimeout = 1\n')
    (tools_project / "g.yaml").write_text("steps:\n  - id: approve\n    gate: {question: ok?, notify: ops}\n")
    for url in ("http://127.0.0.1:9/services/T000/B000/SECRETTOKEN x", "http://127.0.0.1:9/SECRETTOKEN\x07",
                "http://[::1/SECRETTOKEN", "http://127.0.0.1:99999/SECRETTOKEN"):  # fmt: skip
        proc = run_dagplan_s(tools_project, "run", "g.yaml", env={"HOOK": url})
        assert proc.returncode == 3 and "notifier ops" in proc.stderr, proc.stderr
        assert "SECRETTOKEN" not in proc.stdout + proc.stderr, proc.stderr


def test_gates_of_a_fan_out_are_listed_and_answered_at_once(tools_project):
    (tools_project / "f.yaml").write_text(FAN)
    waiting = run_dagplan_s(tools_project, "run", "f.yaml")
    assert waiting.returncode == 3 and all(f"each[{i}].approve_close" in waiting.stderr for i in range(3))
    listed = run_dagplan_s(tools_project, "runs")
    assert all(f"waits at each[{i}].approve_close" in listed.stderr for i in range(3)), listed.stderr
    run_id = waiting.stderr.split("run ", 1)[1].split()[0]
    assert (
        run_dagplan_s(tools_project, "answer", run_id, "each[*].approve_close", "maybe").returncode == 2
    )  # each one checked
    assert run_dagplan_s(tools_project, "answer", run_id, "each[*].approve_close", "approve").returncode == 0
    done = run_dagplan_s(tools_project, "resume", run_id)
    assert done.returncode == 0, done.stderr
    one = run_dagplan_s(tools_project, "run", "f.yaml", "--answer", "each[1].approve_close=approve", "--format", "json")
    assert one.returncode == 3 and [w["step"] for w in json.loads(one.stdout)["waiting"]] == [
        "each[0].approve_close", "each[2].approve_close"]  # fmt: skip
    every = run_dagplan_s(tools_project, "run", "f.yaml", "--answer", "each[*].approve_close=approve")
    assert every.returncode == 0, every.stderr
    wrong = run_dagplan_s(tools_project, "run", "f.yaml", "--answer", "each[0].aprove_close=approve")
    assert wrong.returncode == 2 and "no gate" in wrong.stderr


def test_a_refusal_the_plan_routes_is_an_ordinary_completion(tools_project):
    (tools_project / "g.yaml").write_text(
        "steps:\n  - id: approve\n    gate: {question: ship?, choices: [approve, reject]}\n"
        "    output: †state.approved || †state.rejected\n"
        "  - id: ship\n    tool: notify\n    args: {message: †state.approved}\n    output: †state.shipped\n"
        "  - id: tell\n    tool: notify\n    args: {message: 'not shipped'}\n    deps: [approve]\n"
        "    when: †state.rejected\n    output: †state.told\n"
    )
    refused = run_dagplan_s(
        tools_project, "run", "g.yaml", "--tools", "tools.py", "--answer", "approve=reject", "--format", "json"
    )
    assert refused.returncode == 0, refused.stdout + refused.stderr
    steps = json.loads(refused.stdout)["steps"]
    assert steps["ship"]["status"] == "skipped" and steps["tell"]["status"] == "completed"
    (tools_project / "w.yaml").write_text(
        "steps:\n  - id: decide\n    gate: {question: ship?, choices: [approve, reject]}\n    output: †state.decision\n"
        "  - id: ship\n    tool: notify\n    args: {message: shipping}\n    when: †state.decision == 'approve'\n"
        "  - id: tell\n    tool: notify\n    args: {message: no}\n    when: †state.decision == 'reject'\n"
    )
    decided = run_dagplan_s(
        tools_project, "run", "w.yaml", "--tools", "tools.py", "--answer", "decide=reject", "--format", "json"
    )
    assert decided.returncode == 0, decided.stdout + decided.stderr  # a when: on the answer decides
    steps = json.loads(decided.stdout)["steps"]
    assert [steps[s]["status"] for s in ("decide", "ship", "tell")] == ["completed", "skipped", "completed"], steps
    outside = run_dagplan_s(tools_project, "run", "w.yaml", "--tools", "tools.py", "--answer", "decide=maybe")
    assert outside.returncode == 2  # an answer the gate cannot take is refused before the run starts (issue 63)
    assert "--answer decide: 'maybe' is not one of approve, reject" in outside.stderr
    (tools_project / "h.yaml").write_text(
        "steps:\n  - id: approve\n    gate: {question: ship?, choices: [approve, reject]}\n"
    )
    unrouted = run_dagplan_s(tools_project, "run", "h.yaml", "--answer", "approve=reject")
    assert unrouted.returncode == 1  # a refusal nothing handles: completed with errors


@pytest.mark.parametrize("schema, answer, ok", [("{type: integer}", "approve", False), ("{type: string}", "approve", True),
                                                ("{enum: [yes, no]}", "maybe", False), ("{enum: [yes, no]}", "no", True)])  # fmt: skip
def test_on_timeout_must_be_an_answer_the_gates_schema_accepts(tools_project, schema, answer, ok):
    (tools_project / "g.yaml").write_text(
        f"steps:\n  - id: n\n    gate: {{question: q, schema: {schema}, timeout: 1h, on_timeout: {answer}}}\n"
    )
    proc = run_dagplan_s(tools_project, "check", "g.yaml")
    assert (proc.returncode == 0) == ok and (ok or "g.yaml:3:" in proc.stdout and "gate-timeout" in proc.stdout)


def test_a_plan_test_mocks_every_items_gate_with_one_pattern(tools_project):
    (tools_project / "f.yaml").write_text(FAN)
    (tools_project / "f.test.yaml").write_text(
        "plan: f.yaml\ncases:\n  - name: all approved\n    mocks:\n      gates: {'each[*].approve_close': approve}\n"
        "    expect: {status: completed}\n"
    )
    proc = run_dagplan_s(tools_project, "test", "f.test.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
