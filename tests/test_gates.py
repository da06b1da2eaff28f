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
    assert proc.returncode == 0, out
    assert "answered elsewhere (answer, by" in out and "Today I suggest approve" in out, out
    events = cli(root, "events", "@last", "--format", "json", DAGPLAN_STATE_DIR=str(root / "state"))
    given = [e for e in json.loads(events.stdout) if e["type"] == "gate_answered"]
    assert [(e["step"], e["value"], e["channel"]) for e in given] == [("ok", "approve", "answer")]
