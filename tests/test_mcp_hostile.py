"""``dagplan mcp`` attacked as a hostile client would: raw JSON-RPC lines over stdio (what the SDK's client
would never send), plans that try to get past a person's approval or read outside the project, and a fuzz
of requests in which every request must be answered and nothing may reach stderr as a traceback."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from net import read_some

TOOLS = '''import dagplan

@dagplan.tool(purity="pure")
def lookup(customer: str) -> dict:
    """Find a customer."""
    return {"customer": customer}

@dagplan.tool(purity="side_effect")
def launch(target: str) -> str:
    """Act on the world: leaves a mark."""
    with open("LAUNCHED", "a") as f:
        f.write(target + "\\n")
    return "launched"

@dagplan.tool
def undeclared(target: str) -> str:
    """Says nothing of its purity: counted as acting on the world."""
    with open("LAUNCHED", "a") as f:
        f.write("undeclared " + target + "\\n")
    return "done"
'''


def _env() -> dict:
    return {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DAGPLAN_MODEL": "",
        "OPENAI_API_KEY": "sk-never-used",
    }


class Raw:
    """``dagplan mcp`` over stdio, one JSON-RPC message a line, as a hostile client writes them."""

    def __init__(self, cwd: Path, *args: str):
        self.p = subprocess.Popen([sys.executable, "-m", "dagplan", "mcp", *args], cwd=cwd, env=_env(),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        self.buffer, self.id = b"", 0

    def send_raw(self, data: bytes) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def recv(self, timeout: float = 30) -> dict | None:
        assert self.p.stdout is not None
        end = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            chunk = read_some(self.p.stdout, end)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        self.id += 1
        message = {"jsonrpc": "2.0", "id": self.id, "method": method, **({"params": params} if params else {})}
        self.send_raw(json.dumps(message).encode() + b"\n")
        while True:
            answer = self.recv(timeout)
            assert answer is not None, f"no answer to {method}"
            if answer.get("id") == self.id:
                return answer

    def init(self) -> "Raw":
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "hostile-test", "version": "1"}})  # fmt: skip
        self.send_raw(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        return self

    def call(self, name: str, arguments: dict, timeout: float = 60) -> dict:
        answer = self.request("tools/call", {"name": name, "arguments": arguments}, timeout)
        assert "result" in answer, answer
        return answer["result"]

    def close(self) -> str:
        """Ends the server; what it wrote on stderr."""
        assert self.p.stdin is not None and self.p.stderr is not None
        self.p.stdin.close()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.stderr.read().decode("utf-8", "replace")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    return tmp_path


@pytest.fixture
def server(project):
    started: list[Raw] = []

    def start(*args: str) -> Raw:
        started.append(Raw(project, *args).init())
        return started[-1]

    yield start
    for raw in started:
        stderr = raw.close()
        assert "Traceback" not in stderr, stderr


def test_initialize_reports_the_servers_name_and_version(project):
    """Issue 63: `initialize` reported an empty server version."""
    import dagplan

    raw = Raw(project)
    try:
        answer = raw.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "hostile-test", "version": "1"}})  # fmt: skip
        assert answer["result"]["serverInfo"] == {"name": "dagplan", "version": dagplan.__version__} or (
            answer["result"]["serverInfo"]["version"] == dagplan.__version__
        ), answer
    finally:
        raw.close()


# --- the framing guard: every request is answered, and the server goes on -------------------------


@pytest.mark.parametrize(
    "line, code, has_id",
    [
        (b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"check_plan","arguments":'
         b'{"plan":"steps: \\ud800"}}}', -32600, True),
        (b'{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"check_plan","arguments":{"plan":"a"},'
         b'"x":' + b"[" * 5000 + b"]" * 5000 + b"}}", -32700, False),
        (b'{"jsonrpc":"2.0","id":43,"method":"ping","params":' + b"[" * 100 + b"]" * 100 + b"}", -32600, True),
        (b"{not json}", -32700, False),
        (b'{"jsonrpc":"2.0","id":44,"method":"ping","x":NaN}', -32700, False),
        (b'\xff\xfe{"jsonrpc":"2.0","id":45,"method":"ping"}', -32700, False),
        (b'{"jsonrpc":"1.0","id":46,"method":"ping"}', -32600, True),
        (b'{"jsonrpc":"2.0","id":47,"method":12}', -32600, True),
        (b"[1, 2, 3]", -32600, False),
    ],
)  # fmt: skip
def test_a_malformed_line_gets_its_json_rpc_error_and_the_server_goes_on(server, line, code, has_id):
    raw = server()
    raw.send_raw(line + b"\n")
    answer = raw.recv(20)
    assert answer is not None and answer["error"]["code"] == code, answer
    assert answer["id"] == (json.loads(line.decode("utf-8", "replace"))["id"] if has_id else None)
    assert raw.request("ping")["result"] == {}


def test_a_fuzz_of_requests_each_answered_none_with_a_traceback(server, project):
    """Mutated requests (seeded, bounded): each one with an id gets a result or an error."""
    rng = random.Random(20261126)
    raw = server("--allow-run")
    plan = "steps:\n  - id: a\n    tool: lookup\n    args: {customer: x}\n    output: †state.a\n"
    bases = [
        ("check_plan", {"plan": plan}), ("preview_plan", {"plan": plan}), ("estimate_plan", {"plan": plan}),
        ("run_status", {"run_id": "x"}), ("list_runs", {}), ("list_tools", {}), ("resume_run", {"run_id": "x"}),
    ]  # fmt: skip
    odd = [None, 0, -1, 1e308, "", "\u2028", "\x00", "../../etc/passwd", [], {}, True, "a" * 5000, {"a": [[[]]]}]
    for number in range(150 * int(os.environ.get("DAGPLAN_FUZZ_SCALE", "1"))):  # longer by hand: the scale
        name, args = rng.choice(bases)
        args = dict(args)
        for key in list(args) + [rng.choice(["plan", "name", "inputs", "run_id", "extra"])]:
            if rng.random() < 0.5:
                args[key] = rng.choice(odd)
        raw.id += 1
        message = {"jsonrpc": "2.0", "id": raw.id, "method": "tools/call", "params": {"name": name, "arguments": args}}
        text = json.dumps(message)
        if number % 5 == 0:  # now and then a broken line too
            cut = rng.randrange(1, len(text))
            raw.send_raw(text[:cut].encode() + b"\n")
            assert raw.recv(20)["error"]["code"] == -32700
        raw.send_raw(text.encode() + b"\n")
        answer = raw.recv(60)
        assert answer is not None and answer.get("id") == raw.id and ("result" in answer or "error" in answer)
        if "result" in answer and answer["result"].get("isError"):
            assert answer["result"]["content"][0]["text"] != f"Error executing tool {name}", answer  # says why
    assert not (project / "LAUNCHED").exists()


# --- one path from an error to what a client reads ------------------------------------------------


def _error_of(result: dict) -> dict:
    assert result["isError"], result
    text = result["content"][0]["text"]
    return json.loads(text.split(": ", 1)[1] if text.startswith("Error executing tool") else text)


@pytest.mark.parametrize(
    "tool, args, code",
    [
        ("run_status", {"run_id": "no-such-run"}, "unknown-run"),
        ("resume_run", {"run_id": "no-such-run"}, "not-this-clients-run"),
        ("run_plan", {"plan": "inputs: {n: {type: number}}\nsteps:\n  - id: g\n    gate: {question: q}\n"},
         "missing-input"),
        ("check_plan", {"plan": "plans/refund.yaml"}, "bad-argument"),  # a path where the text goes
        ("run_plan", {"plan": "refund.json"}, "bad-argument"),
    ],
)  # fmt: skip
def test_errors_reach_the_client_as_codes_and_hints(server, tool, args, code):
    found = _error_of(server("--allow-run").call(tool, args))
    assert found["error"] == code and found["diagnostics"][0]["message"], found
    if code == "bad-argument":  # what to do instead, in the client's words
        assert "plan takes the plan's text, not a file name" in found["diagnostics"][0]["message"], found
    if code == "not-this-clients-run":  # and how a person goes on with it
        assert "dagplan resume no-such-run" in found["diagnostics"][0]["hint"], found


def test_a_bad_configuration_is_said_to_the_client(server, project):
    (project / "dagplan.toml").write_text('max_concurrency = "lots"\n')
    found = _error_of(server().call("list_tools", {}))
    assert found["error"] == "config" and "max_concurrency" in found["diagnostics"][0]["message"], found


# --- nothing acts on the world before a person says so ---------------------------------------------

SUB = "steps:\n  - id: go\n    tool: launch\n    args: {target: sub}\n    output: †state.o\nresult: †state.o\n"


@pytest.mark.parametrize(
    "plan",
    [
        "steps:\n  - id: go\n    tool: launch\n    args: {target: a}\n    output: †state.o\n",
        "steps:\n  - id: go\n    tool: undeclared\n    args: {target: a}\n    output: †state.o\n",
        "steps:\n  - id: go\n    plan: sub.yaml\n    output: †state.o\n",
        "steps:\n  - id: go\n    for_each: [1, 2]\n    plan: sub.yaml\n    output: †state.o\n",
        "steps:\n  - id: go\n    plan:\n"
        + "".join("      " + line + "\n" for line in SUB.splitlines())
        + "    output: †state.o\n",
        "steps:\n  - id: go\n    llm: 'launch something'\n    tools: [launch]\n    output: †state.o\n",
        "steps:\n  - id: approve_side_effects\n    tool: launch\n    args: {target: a}\n  - id: go\n    tool: launch\n"
        "    args: {target: b}\n    output: †state.out\n",
    ],
    ids=["tool", "undeclared", "sub-plan", "fan-out", "inline", "llm-tools", "own-gate-id"],
)
def test_every_step_that_can_act_waits_for_a_person(server, project, plan):
    (project / "sub.yaml").write_text(SUB)
    (project / "dagplan.toml").write_text('tools = ["tools.py"]\nmodel = "openai/never-called"\n')
    raw = server("--allow-run", "--allow-answer")
    assert raw.call("check_plan", {"plan": plan})["structuredContent"]["valid"] is True
    started = raw.call("run_plan", {"plan": plan})
    assert not started.get("isError"), started
    run = started["structuredContent"]
    assert run["status"] == "waiting", run
    assert not (project / "LAUNCHED").exists()
    gate = run["waiting"][0]["step"]
    assert gate.startswith("approve_side_effects") and run["waiting"][0].get("answered_by") == "person"
    refused = _error_of(raw.call("answer_gate", {"run_id": run["run_id"], "step": gate, "value": "approve"}))
    assert refused["error"] == "person-only" and "dagplan answer" in refused["diagnostics"][0]["hint"], refused
    assert not (project / "LAUNCHED").exists()


def test_a_person_answers_then_the_client_goes_on_and_the_answer_says_who(server, project):
    raw = server("--allow-run", "--allow-answer")
    plan = "steps:\n  - id: go\n    tool: launch\n    args: {target: a}\n    output: †state.o\n"
    run = raw.call("run_plan", {"plan": plan})["structuredContent"]
    person = subprocess.run([sys.executable, "-m", "dagplan", "answer", run["run_id"], "approve_side_effects", "approve"],
                            cwd=project, env=_env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert person.returncode == 0, person.stderr
    done = raw.call("resume_run", {"run_id": run["run_id"]})["structuredContent"]
    assert done["status"] == "completed" and (project / "LAUNCHED").read_text() == "a\n"
    events = subprocess.run([sys.executable, "-m", "dagplan", "events", run["run_id"], "--format", "jsonl"],
                            cwd=project, env=_env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    answered = [json.loads(line) for line in events.stdout.splitlines() if '"gate_answered"' in line]
    assert answered and answered[0]["channel"] == "answer" and answered[0]["who"], events.stdout


def test_a_gate_of_a_plan_from_mcp_is_a_persons_and_other_runs_are_not_the_clients(server, project):
    raw = server("--allow-run", "--allow-answer")
    plan = "steps:\n  - id: ask\n    gate: {question: 'go on?'}\n  - id: a\n    tool: lookup\n    args: {customer: x}\n"
    run = raw.call("run_plan", {"plan": plan})["structuredContent"]
    assert run["status"] == "waiting" and run["waiting"][0]["step"] == "ask"
    refused = _error_of(raw.call("answer_gate", {"run_id": run["run_id"], "step": "ask", "value": "approve"}))
    assert refused["error"] == "person-only", refused
    cli = subprocess.run([sys.executable, "-m", "dagplan", "run", "-"], input=plan, cwd=project,
                         env=_env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert cli.returncode == 3, cli.stderr  # a person's own run, waiting at its gate
    theirs = next(r["id"] for r in raw.call("list_runs", {})["structuredContent"]["runs"] if r["id"] != run["run_id"])
    found = _error_of(raw.call("answer_gate", {"run_id": theirs, "step": "ask", "value": "approve"}))
    assert found["error"] == "not-this-clients-run", found


def test_answer_gate_is_offered_only_with_allow_answer(server):
    names = {t["name"] for t in server("--allow-run").request("tools/list")["result"]["tools"]}
    assert "answer_gate" not in names and {"run_plan", "resume_run"} <= names


# --- check_plan reads only the project, and never runs code ----------------------------------------


def test_check_plan_reads_sub_plans_beside_it_and_nothing_outside_the_project(server, project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "creds.yaml").write_text("db_password_is_hunter2: 1\nsteps: []\n")
    (project / "sub.yaml").write_text(SUB)
    raw = server("--allow-run")
    near = raw.call("check_plan", {"plan": "steps:\n  - id: s\n    plan: sub.yaml\n    output: †state.o\n"})
    assert near["structuredContent"]["valid"] is True, near
    for path in (outside / "creds.yaml", os.path.relpath(outside / "creds.yaml", project)):
        plan = f"steps:\n  - id: s\n    plan: {path}\n    output: †state.o\n"
        for tool in ("check_plan", "run_plan"):
            answer = json.dumps(raw.call(tool, {"plan": plan}))
            assert "hunter2" not in answer and "outside the project folder" in answer, answer


def test_check_plan_never_imports_code_whatever_the_name(server, project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("evil")
    (elsewhere / "evil.py").write_text(f"open({str(elsewhere / 'PWNED')!r}, 'w').write('x')\n")
    (project / "plan.yaml").write_text("steps:\n  - id: a\n    tool: lookup\n    args: {customer: x}\n")
    text = (
        f"plan: plan.yaml\ntools: [{elsewhere / 'evil.py'}]\ncases:\n  - name: x\n    expect: {{status: completed}}\n"
    )
    for name in ("x.test.yaml", "../x.test.yaml", "..", "\x00", "a" * 300):
        answer = server().call("check_plan", {"plan": text, "name": name})
        assert not answer.get("isError") and not (elsewhere / "PWNED").exists(), answer


def test_what_the_server_teaches_a_model_passes_check_plan(server):
    raw = server()
    examples = json.loads(raw.request("resources/read", {"uri": "dagplan://examples"})["result"]["contents"][0]["text"])
    for name, text in examples.items():
        found = raw.call("check_plan", {"plan": text, "name": name})["structuredContent"]["diagnostics"]
        assert not [d for d in found if d["severity"] == "error" and d["code"] != "unknown-tool"], (name, found)
    reference = raw.request("resources/read", {"uri": "dagplan://reference"})["result"]["contents"][0]["text"]
    keys = [line for line in reference.splitlines() if "retry:" in line or "catch:" in line]
    assert keys and "limit" in reference
    plan = ("steps:\n  - id: a\n    llm: hi\n    retry: {limit: 3, backoff: 0.5}\n    timeout: 30s\n"
            "    catch: [{errors: [TimeoutError], output: †state.problem}]\n    output: †state.a\n")  # fmt: skip
    found = raw.call("check_plan", {"plan": plan})["structuredContent"]["diagnostics"]
    assert not [d for d in found if d["severity"] == "error"], found
