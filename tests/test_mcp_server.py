"""`dagplan mcp` driven by the MCP SDK's own client, as an agent host would: a model-shaped sequence
(write a plan with a mistake, read the diagnostics, repair it, preview, run, answer the gate, read the
result), over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from net import free_port, wait_for_port

TOOLS = '''import dagplan, os

@dagplan.tool(purity="pure")
def lookup(customer: str) -> dict:
    """Find a customer."""
    return {"customer": customer, "email": customer + "@example.com"}

@dagplan.tool(purity="side_effect")
def send_email(to: str, body: str) -> str:
    """Send an email (a side effect)."""
    with open("outbox.txt", "a") as f:
        f.write(to + ": " + body + "\\n")
    return "sent"
'''

WRONG = """steps:
  - id: who
    tool: lookup_user
    args: {customer: ada}
    output: †state.who
  - id: mail
    tool: send_email
    args: {to: †state.who.email, body: hello}
    output: †state.sent
"""
RIGHT = WRONG.replace("lookup_user", "lookup")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    return tmp_path


def _env() -> dict:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


async def _conversation(client, project: Path) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"check_plan", "preview_plan", "estimate_plan", "list_tools", "list_runs", "run_plan", "resume_run"} <= names
    listed = (await client.call_tool("list_tools", {})).structured_content["tools"]
    assert {(t["name"], t["purity"]) for t in listed} == {("lookup", "pure"), ("send_email", "side_effect")}

    checked = (await client.call_tool("check_plan", {"plan": WRONG})).structured_content
    assert checked["valid"] is False
    problem = next(d for d in checked["diagnostics"] if d["code"] == "unknown-tool")
    assert (problem["line"], problem["col"]) == (3, 11) and "lookup" in problem["hint"]  # the repair hint

    assert (await client.call_tool("check_plan", {"plan": RIGHT})).structured_content == {
        "valid": True,
        "tools_checked": True,
        "diagnostics": [],
    }
    preview = (await client.call_tool("preview_plan", {"plan": RIGHT})).structured_content
    assert [s["id"] for s in preview["steps"]] == ["who", "mail"]

    refused = await client.call_tool("run_plan", {"plan": WRONG})
    assert refused.is_error and "unknown-tool" in refused.content[0].text

    started = (await client.call_tool("run_plan", {"plan": RIGHT})).structured_content
    assert started["status"] == "waiting" and started["waiting"][0]["step"] == "approve_side_effects"
    assert not (project / "outbox.txt").exists()  # nothing acted on the world before a person said so

    # The agent cannot approve its own side effects: a person does, then the agent goes on with the run.
    assert "answer_gate" not in names
    early = await client.call_tool("resume_run", {"run_id": started["run_id"]})
    assert early.structured_content["status"] == "waiting" and not (project / "outbox.txt").exists()
    person = subprocess.run([sys.executable, "-m", "dagplan", "answer", started["run_id"], "approve_side_effects",
                             "approve"], cwd=project, env=_env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert person.returncode == 0, person.stderr
    done = await client.call_tool("resume_run", {"run_id": started["run_id"]})
    assert done.structured_content["status"] == "completed", done
    assert (project / "outbox.txt").read_text() == "ada@example.com: hello\n"  # once
    status = (await client.call_tool("run_status", {"run_id": started["run_id"]})).structured_content
    assert status["status"] == "completed"
    runs = (await client.call_tool("list_runs", {})).structured_content["runs"]
    assert runs[0]["id"] == started["run_id"]
    assert runs[0]["plan"].startswith("(sent by a client) "), runs[0]  # not a path where no file is (issue 63)

    reference = await client.read_resource("dagplan://reference")
    assert "†state" in reference.contents[0].text
    schema = json.loads((await client.read_resource("dagplan://schema/plan")).contents[0].text)
    assert "steps" in schema["properties"]
    prompt = await client.get_prompt("write_plan", {"task": "email ada"})
    text = prompt.messages[0].content.text
    assert "send_email(to, body)" in text and "email ada" in text


def test_an_agent_writes_repairs_previews_runs_and_answers_over_stdio(project):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "dagplan", "mcp", "--allow-run"], cwd=str(project), env=_env()
    )

    async def main() -> None:
        async with Client(params) as client:
            await _conversation(client, project)

    asyncio.run(asyncio.wait_for(main(), 120))


def test_without_allow_run_nothing_can_be_run(project):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "dagplan", "mcp"], cwd=str(project), env=_env())

    async def main() -> set[str]:
        async with Client(params) as client:
            return {t.name for t in (await client.list_tools()).tools}

    names = asyncio.run(asyncio.wait_for(main(), 60))
    assert "check_plan" in names and not names & {"run_plan", "answer_gate", "run_status", "resume_run"}


def test_a_server_that_knows_no_tools_says_so_and_takes_tools_of_its_own(tmp_path):
    """`valid: true` must not read as "its tools exist" to a model: without tools, check_plan says what it
    did not check (tools-unchecked, tools_checked: false); `dagplan mcp --tools FILE` gives it its tools."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / ".git").mkdir()  # the project's root: no configuration above it is read

    async def check(*extra: str) -> dict:
        params = StdioServerParameters(command=sys.executable, args=["-m", "dagplan", "mcp", *extra],
                                       cwd=str(tmp_path), env=_env())  # fmt: skip
        async with Client(params) as client:
            return (await client.call_tool("check_plan", {"plan": WRONG})).structured_content

    bare = asyncio.run(asyncio.wait_for(check(), 60))
    assert bare["valid"] is True and bare["tools_checked"] is False, bare
    assert [d["code"] for d in bare["diagnostics"]] == ["tools-unchecked"]
    given = asyncio.run(asyncio.wait_for(check("--tools", "tools.py"), 60))
    assert given["valid"] is False and given["tools_checked"] is True
    assert "unknown-tool" in [d["code"] for d in given["diagnostics"]]


def test_the_same_over_streamable_http_with_a_token_and_the_host_and_origin_checked(project, tmp_path):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    port = free_port()
    log = (tmp_path / "mcp.log").open("w+")
    server = subprocess.Popen([sys.executable, "-m", "dagplan", "mcp", "--allow-run", "--http", str(port)],
                              cwd=project, env=_env(), stdout=subprocess.DEVNULL, stderr=log)  # fmt: skip
    try:
        wait_for_port(port)
        log.seek(0)
        said = log.read()  # the endpoint and the token, printed once; no server chatter
        url = f"http://127.0.0.1:{port}/mcp"
        assert said.startswith(f"dagplan mcp: {url} (send the header Authorization: Bearer "), said
        assert "INFO" not in said, said
        token = said.split("Bearer ", 1)[1].split(")", 1)[0]
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        anyone = httpx.post(url, json=hello, headers=headers, timeout=10)
        assert anyone.status_code == 401, anyone.status_code  # another local process, without the token
        wrong = httpx.post(url, json=hello, headers={**headers, "Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401, wrong.status_code
        headers["Authorization"] = f"Bearer {token}"
        forged = httpx.post(url, json=hello, headers={**headers, "Host": "evil.example"}, timeout=10)
        assert forged.status_code in (403, 421), forged.status_code  # DNS rebinding: another Host is refused
        cross = httpx.post(url, json=hello, headers={**headers, "Origin": "https://evil.example"}, timeout=10)
        assert cross.status_code == 403, cross.status_code  # a web page cannot drive it

        async def main() -> None:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                await _conversation(client, project)

        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        server.terminate()
        server.wait(10)


def test_run_plan_given_a_task_streams_the_plan_and_still_stops_before_side_effects(project, stub):
    """`run_plan` with a task: the configured model writes the plan (streamed, the stub here); the lookup
    (pure) starts while it is written; the email waits behind the gate only a person answers."""
    from llm_stub import streamed
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    (project / "dagplan.toml").write_text(
        f'tools = ["tools.py"]\nmodel = "openai/gpt-4o-mini"\n[llm]\napi_base = "{stub.url}"\napi_key = "x"\n'
    )
    plan = {"steps": [
        {"id": "who", "tool": "lookup", "args": {"customer": "ada"}, "output": "$state.who"},
        {"id": "mail", "tool": "send_email", "args": {"to": "$state.who.email", "body": "hello"},
         "output": "$state.sent"}]}  # fmt: skip
    stub.script(streamed(json.dumps(plan)))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "dagplan", "mcp", "--allow-run"], cwd=str(project), env=_env()
    )

    async def main() -> dict:
        async with Client(params) as client:
            empty = await client.call_tool("run_plan", {})
            assert empty.is_error and "bad-argument" in empty.content[0].text
            return (await client.call_tool("run_plan", {"task": "email ada hello"})).structured_content

    started = asyncio.run(asyncio.wait_for(main(), 120))
    assert started["status"] == "waiting" and started["waiting"][0]["step"] == "approve_side_effects", started
    assert started["steps"]["who"]["status"] == "completed" and started["steps"]["who"].get("reused") == "early"
    assert not (project / "outbox.txt").exists()
