"""Door equivalence: one project (its configuration, tools, secrets and state location) driven through every
door -- the CLI, the API, `dagplan.Project`, MCP, the language server, the viewer, the pytest plugin and a
worker -- each started from a sub-folder of the project, each asked the same four things: where the runs
are, which tools there are, what `check` says of a plan, and whether the configured secret is masked.

Every door builds its context as `dagplan.Project` does (dagplan/project.py); a door that assembled its own
(the configuration of the working directory, tools merged by hand, the state of the environment only) gives
a different answer here.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dagplan

TOOLS = '''import dagplan

@dagplan.tool(purity="pure")
def lookup(account: str) -> str:
    """Find an account's balance."""
    print("looking up " + account)
    return "balance of " + account

@dagplan.tool(purity="pure")
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()
'''
PLAN = """steps:
  - id: a
    tool: lookup
    args: {account: $input.account}
    output: $state.a
result: $state.a
"""
BAD = PLAN.replace("tool: lookup", "tool: lokup")  # a misspelt tool: only a door that knows the tools says so
TEST = """plan: plan.yaml
cases:
  - name: the configured tool runs for real
    inputs: {account: x1}
    real: [lookup]
    expect:
      result: balance of x1
  - name: a tool that declares itself pure runs for real unless mocked
    inputs: {account: x2}
    expect:
      result: balance of x2
  - name: a mock wins over the real tool
    inputs: {account: x3}
    mocks: {tools: {lookup: {result: mocked}}}
    expect:
      result: mocked
"""
SECRET = "acct_27182"
TOOL_NAMES = ["lookup", "shout"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "plans").mkdir(parents=True)
    (root / ".git").mkdir()  # the project's root: nothing above it configures it
    (root / "tools.py").write_text(TOOLS)
    (root / "dagplan.toml").write_text('tools = ["tools.py"]\nstate = "kept-runs"\nredact = ["acct_[0-9]+"]\n')
    (root / "plans" / "plan.yaml").write_text(PLAN)
    (root / "plans" / "bad.yaml").write_text(BAD)
    (root / "plans" / "plan.test.yaml").write_text(TEST)
    (tmp_path / "dagplan.toml").write_text('tools = ["elsewhere.py"]\nstate = "wrong-place"\n')  # stray, above
    return root


def _env(**more: str) -> dict:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("DAGPLAN_")}
    return {**kept, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **more}


def _cli(where: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=where, capture_output=True, text=True,
                          timeout=120, env=_env(**env))  # fmt: skip


def _codes(diagnostics) -> list[str]:
    return sorted(d["code"] if isinstance(d, dict) else d.code for d in diagnostics)


# --- the doors, each asked the four questions ---


def _through_cli(where: Path, run_id: str) -> dict:
    listed = json.loads(_cli(where, "runs", "--format", "json").stdout)
    tools = json.loads(_cli(where, "tools", "list", "--format", "json").stdout)
    checked = json.loads(_cli(where, "check", "bad.yaml", "--format", "json").stdout)["files"][0]
    shown = _cli(where, "runs", "show", run_id, "--step", "a").stdout + _cli(where, "events", run_id).stdout
    return {"runs": sorted(r["id"] for r in listed), "tools": sorted(t["name"] for t in tools),
            "check": _codes(checked["diagnostics"]), "secret_shown": SECRET in shown}  # fmt: skip


def _through_api(where: Path, run_id: str) -> dict:
    os.chdir(where)  # in a process of its own (_installed_door)
    found = [e.to_json() for e in dagplan.events(run_id) if str(e.type) in ("tool_called", "plan_step_printed")]
    return {"runs": sorted(r.id for r in dagplan.runs()), "tools": sorted(dagplan.load_tool_specs(dagplan.load_config().tools)),
            "check": _codes(dagplan.check_files(["bad.yaml"])[0].diagnostics),
            "secret_shown": SECRET in json.dumps(found)}  # fmt: skip


def _through_project(project: Path, run_id: str) -> dict:
    door = dagplan.Project(project)
    found = [e.to_json() for e in door.events(run_id) if str(e.type) in ("tool_called", "plan_step_printed")]
    return {"runs": sorted(r.id for r in door.runs()), "tools": [s.name for s in door.catalog()],
            "check": _codes(door.check([project / "plans" / "bad.yaml"])[0].diagnostics),
            "secret_shown": SECRET in json.dumps(found)}  # fmt: skip


def _through_mcp(where: Path, run_id: str) -> dict:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "dagplan", "mcp", "--allow-run"],
                                   cwd=str(where), env=_env())  # fmt: skip

    async def main() -> dict:
        async with Client(params) as client:
            runs = (await client.call_tool("list_runs", {})).structured_content["runs"]
            tools = (await client.call_tool("list_tools", {})).structured_content["tools"]
            checked = (await client.call_tool("check_plan", {"plan": BAD})).structured_content
            ran = (await client.call_tool("run_plan", {"plan": PLAN, "inputs": {"account": SECRET}})).structured_content
            assert ran["status"] == "completed", ran
            return {"runs": sorted(r["id"] for r in runs),
                    "tools": sorted(t["name"] for t in tools), "check": _codes(checked["diagnostics"]),
                    "secret_shown": SECRET in json.dumps(ran), "tools_checked": checked["tools_checked"]}  # fmt: skip

    return asyncio.run(asyncio.wait_for(main(), 120))


def _ids(where: Path) -> set[str]:
    return {r.id for r in dagplan.Project(where).runs()}


def _through_lsp(where: Path) -> dict:
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient

    async def main() -> dict:
        client = LanguageClient("doors", "v1")
        published: asyncio.Queue = asyncio.Queue()

        @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: t.PublishDiagnosticsParams) -> None:
            published.put_nowait(params.diagnostics)

        await client.start_io(sys.executable, "-m", "dagplan", "lsp", cwd=str(where), env=_env())
        await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities(),
                                                         root_uri=where.as_uri()))  # fmt: skip
        client.initialized(t.InitializedParams())
        uri = (where / "bad.yaml").as_uri()
        client.text_document_did_open(t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="yaml", version=1, text=BAD)))  # fmt: skip
        try:
            diagnostics = await asyncio.wait_for(published.get(), 60)
            line = BAD.splitlines().index("    tool: lokup")
            done = await client.text_document_completion_async(t.CompletionParams(
                text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line, len("    tool: "))))  # fmt: skip
        finally:
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()
        items = done.items if isinstance(done, t.CompletionList) else done
        return {"tools": sorted(i.label for i in items if i.label in TOOL_NAMES or i.kind == t.CompletionItemKind.Function),
                "check": sorted(str(d.code) for d in diagnostics)}  # fmt: skip

    return asyncio.run(asyncio.wait_for(main(), 120))


def _through_viewer(where: Path, run_id: str) -> dict:
    from starlette.testclient import TestClient

    from dagplan.web.app import Viewer

    os.chdir(where)  # in a process of its own (_installed_door)
    client = TestClient(Viewer(token="t").app, base_url="http://127.0.0.1")
    runs_page = client.get("/?token=t").text
    run_page = client.get(f"/runs/{run_id}?token=t").text + client.get(f"/runs/{run_id}/steps/a/output?token=t").text
    plan_page = client.get("/plan?file=bad.yaml&token=t").text
    return {"runs": sorted(i for i in _ids(where) if i in runs_page), "check": sorted(set(re.findall(r"unknown-tool", plan_page))),
            "secret_shown": SECRET in run_page}  # fmt: skip


def _through_pytest(project: Path) -> bool:
    """The pytest plugin, started above the project (a monorepo's root): the test file's own project."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "plans")],
                          cwd=project.parent, capture_output=True, text=True, timeout=180, env=_env())  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return "3 passed" in done.stdout


def _installed_door(door: str, *args: Path | str) -> dict:
    """A door of the Python API asked in a process of its own whose `dagplan` is the installed wheel (the
    ``installed`` fixture's ``PYTHONPATH``, set for this test), as a user's program would import it."""
    code = ("import json, sys\nfrom pathlib import Path\nimport dagplan, test_doors\n"
            f"found = test_doors.{door}(Path(sys.argv[1]), *sys.argv[2:])\n"
            "print(json.dumps({'found': found, 'from': dagplan.__file__}))\n")  # fmt: skip
    env = _env(PYTHONPATH=os.pathsep.join([os.environ["PYTHONPATH"], str(Path(__file__).parent)]))
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=180, env=env, cwd=args[0]
    )  # fmt: skip (started in the project: never this tree's folder)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["from"].startswith(os.environ["PYTHONPATH"]), said["from"]  # the wheel's, not this tree's
    return said["found"]


def test_every_door_gives_the_same_answer_for_one_project(project, installed, monkeypatch):
    """On the installed package: every door is the wheel's (its CLI, its MCP and language servers, the API
    imported by a program, the pytest plugin), so a file the package lacks shows here."""
    for name in ("PATH", "PYTHONPATH"):
        monkeypatch.setenv(name, installed[name])
    where = project / "plans"  # every door is started inside the project, not at its root
    started = _cli(where, "run", "plan.yaml", "-i", f"account={SECRET}")
    assert started.returncode == 0 and SECRET not in started.stdout, started.stdout + started.stderr
    run_id = re.search(r"Run (\S+):", started.stdout).group(1)
    assert (project / "kept-runs" / "runs" / run_id).is_dir()  # the configuration's place, relative to it

    expected = {"runs": [run_id], "tools": TOOL_NAMES, "check": ["unknown-tool"], "secret_shown": False}
    assert _through_cli(where, run_id) == expected
    assert _installed_door("_through_api", where, run_id) == expected
    assert _installed_door("_through_project", project, run_id) == expected
    assert _installed_door("_through_viewer", where, run_id) == {k: v for k, v in expected.items() if k != "tools"}
    mcp = _through_mcp(where, run_id)
    assert mcp.pop("tools_checked") is True and mcp == expected
    assert _through_lsp(where) == {"tools": TOOL_NAMES, "check": ["unknown-tool"]}
    assert _through_pytest(project)
    # the group's options are every command's: one --state for the CLI as for the API's Project(state=...)
    other = project / "other-runs"
    assert _cli(where, "--state", str(other), "run", "plan.yaml", "-i", "account=x2").returncode == 0
    assert [r.id for r in dagplan.Project(project, state=other).runs()] == [
        r["id"] for r in json.loads(_cli(where, "--state", str(other), "runs", "--format", "json").stdout)
    ]


def test_the_default_state_is_the_projects_wherever_a_door_starts(tmp_path, monkeypatch):
    """No `state` configured: the runs are kept at the project's root (its .dagplan), from any sub-folder."""
    root = tmp_path / "proj"
    (root / "deep" / "er").mkdir(parents=True)
    (root / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    (root / "tools.py").write_text(TOOLS)
    (root / "deep" / "er" / "plan.yaml").write_text(PLAN)
    done = _cli(root / "deep" / "er", "run", "plan.yaml", "-i", "account=x1")
    run_id = re.search(r"Run (\S+):", done.stdout).group(1)
    assert (root / ".dagplan" / "runs" / run_id).is_dir(), done.stdout + done.stderr
    monkeypatch.chdir(root / "deep")
    for name in ("DAGPLAN_STATE", "DAGPLAN_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert [r.id for r in dagplan.runs()] == [run_id] == [r.id for r in dagplan.Project().runs()]


def test_a_worker_runs_the_projects_runs_with_its_tools_and_masks_its_secret(project, postgres):
    """The worker door: `submit` and `worker` on the project's run database (the group's --state), the run
    done with the project's tools, its log and `runs show` masked, the API seeing the same runs."""
    where = project / "plans"
    submitted = _cli(where, "--state", postgres, "submit", "plan.yaml", "-i", f"account={SECRET}")
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    worked = _cli(where, "--state", postgres, "worker", "--drain")
    assert worked.returncode == 0 and f"{run_id} completed" in worked.stderr, worked.stderr
    assert SECRET not in worked.stdout + worked.stderr
    shown = _cli(where, "--state", postgres, "runs", "show", run_id, "--step", "a")
    assert "[REDACTED]" in shown.stdout and SECRET not in shown.stdout, shown.stdout
    assert [r.id for r in dagplan.Project(project, state=postgres).runs()] == [run_id]
    assert dagplan.Project(project, state=postgres).run_report(run_id).to_json()["status"] == "completed"


def test_the_groups_tools_and_state_are_every_commands(tmp_path):
    """`dagplan --tools FILE --state DIR COMMAND`: one --tools and one --state for every command, as each
    command's own would be; a command's own --tools adds to the group's."""
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "plan.yaml").write_text(PLAN)
    (tmp_path / "bad.yaml").write_text(BAD)
    (tmp_path / "more.py").write_text("import dagplan\n\n@dagplan.tool(purity='pure')\ndef extra(x: str) -> str:\n"
                                      "    return x\n")  # fmt: skip
    unchecked = _cli(tmp_path, "check", "bad.yaml")
    assert unchecked.returncode == 0 and "not checked" in unchecked.stderr  # no tools known: said
    checked = _cli(tmp_path, "--tools", "tools.py", "check", "bad.yaml")
    assert checked.returncode == 1 and "unknown-tool" in checked.stdout, checked.stdout + checked.stderr
    listed = json.loads(_cli(tmp_path, "--tools", "tools.py", "tools", "list", "--tools", "more.py", "--format",
                             "json").stdout)  # fmt: skip
    assert sorted(t["name"] for t in listed) == ["extra", *TOOL_NAMES]
    ran = _cli(tmp_path, "--tools", "tools.py", "--state", "elsewhere", "run", "plan.yaml", "-i", "account=x1")
    assert ran.returncode == 0, ran.stderr
    run_id = re.search(r"Run (\S+):", ran.stdout).group(1)
    assert (tmp_path / "elsewhere" / "runs" / run_id).is_dir() and not (tmp_path / ".dagplan").exists()
    shown = _cli(tmp_path, "--state", "elsewhere", "runs", "show", run_id)
    assert shown.returncode == 0 and run_id in shown.stdout
