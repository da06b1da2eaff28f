"""`dagplan.Project` is the implementation (issue 62): the context of every call (configuration, state, tools,
secrets) is assembled by the project and nowhere else, and a project's secrets are its own.

- a source walk over the API's modules and the doors (CLI, viewer, MCP and language servers, pytest plugin,
  workers): no configuration read, tool merge or state pick outside ``dagplan/project.py``;
- two projects in one process, running at once, each masking its own secrets at each of its sinks (what a
  tool was called with and printed, a failed step's error, its runs' pages in a viewer of its own);
- the doors agree for ``fmt``, ``db upgrade`` and ``submit`` as for the rest (tests/test_doors.py).
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dagplan
from test_front_door import _context_assembled

PACKAGE = Path(dagplan.__file__).parent


def test_no_module_but_the_project_assembles_a_context():
    """The module-level functions are the methods of :meth:`Project.given`; the doors ask their project. The
    walk covers every module of the package's own folder (its API, doors and servers) but ``project.py``."""
    problems = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "project.py" or relative.split("/")[0] in ("dsl", "interpreter", "schemas"):
            continue
        found = _context_assembled(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            problems[relative] = found
    assert problems == {}
    # and the API module holds no body: each public function is a line or two past its docstring (but `load`,
    # the pipeline's entry: it reads no context, the tools and the budget it checks with are given)
    tree = ast.parse((PACKAGE / "api.py").read_text(encoding="utf-8"))
    bodies = {}
    for node in tree.body:
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not node.name.startswith("_")
            and node.name != "load"
        ):
            statements = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            bodies[node.name] = len(statements)
    assert max(bodies.values()) <= 2, {name: n for name, n in bodies.items() if n > 2}


TOOLS = """import dagplan

@dagplan.tool(purity="pure")
def fetch(account: str) -> str:
    print("fetching " + account)
    return "record of " + account

@dagplan.tool(purity="pure")
def refuse(account: str) -> str:
    raise ValueError("no access to " + account)
"""
PLAN = """inputs:
  account: {type: string}
steps:
  - id: a
    tool: fetch
    args: {account: $input.account}
    output: $state.a
  - id: b
    tool: refuse
    args: {account: $input.account}
    output: $state.b
result: $state.a
"""


def _project(root: Path, pattern: str) -> dagplan.Project:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "tools.py").write_text(TOOLS)
    (root / "plan.yaml").write_text(PLAN)
    (root / "dagplan.toml").write_text(f'tools = ["tools.py"]\nredact = ["{pattern}"]\n')
    return dagplan.Project(root)


def test_two_projects_in_one_process_each_mask_their_own_secrets_at_every_sink(tmp_path, monkeypatch):
    """A masks acct_NNN, B masks ord_NNN; both run at once in one process, each with the other's secret in
    its input too. Each project's journal (the call's arguments, what the tool printed, the failed step's
    error), its run report and its viewer's run page mask its own secret; neither takes the other's."""
    for name in ("DAGPLAN_STATE", "DAGPLAN_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    a, b = _project(tmp_path / "A", "acct_[0-9]+"), _project(tmp_path / "B", "ord_[0-9]+")
    monkeypatch.chdir(tmp_path)  # neither project's folder: each call takes its own project's context
    given = "acct_31415 and ord_27182"

    async def both() -> list:
        return await asyncio.gather(a.arun("plan.yaml", inputs={"account": given}, durable=True),
                                    b.arun("plan.yaml", inputs={"account": given}, durable=True))  # fmt: skip

    ran_a, ran_b = asyncio.run(both())
    for project, run, own, other in ((a, ran_a, "acct_31415", "ord_27182"), (b, ran_b, "ord_27182", "acct_31415")):
        assert run.steps["b"].status == dagplan.StepStatus.FAILED
        sinks = [e.to_json() for e in project.events(run.run_id)
                 if str(e.type) in ("tool_called", "plan_step_printed", "plan_step_failed")]  # fmt: skip
        said = json.dumps(sinks)
        assert "fetching" in said and "no access to" in said, said  # the sinks were read
        assert own not in said and other in said, (project, said)
        report = project.run_report(run.run_id).to_json()  # its values are the program's (masked where shown)
        said = json.dumps([report["steps"]["b"]["error"], report["printed"]])  # what it says of them: masked
        assert "no access to" in said and own not in said and other in said, said

    from starlette.testclient import TestClient

    from dagplan.web.app import Viewer

    for project, run, own in ((a, ran_a, "acct_31415"), (b, ran_b, "ord_27182")):
        client = TestClient(Viewer(project=project, token="t", root=project.root).app, base_url="http://127.0.0.1")
        page = client.get(f"/runs/{run.run_id}?token=t").text + client.get(
            f"/runs/{run.run_id}/steps/a/output?token=t").text  # fmt: skip
        assert "record of" in page and own not in page, page[-2000:]


def test_a_module_function_and_its_project_give_one_answer(tmp_path, monkeypatch):
    """``dagplan.X(..., state_dir=..., config=...)`` is ``Project.given(...).X(...)``: the same runs, report,
    preview and estimate; a configuration given is the project's, not the working directory's."""
    project = _project(tmp_path / "P", "acct_[0-9]+")
    monkeypatch.chdir(project.root)
    for name in ("DAGPLAN_STATE", "DAGPLAN_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    done = dagplan.run("plan.yaml", inputs={"account": "x"}, durable=True)
    assert [r.id for r in dagplan.runs()] == [r.id for r in project.runs()] == [done.run_id]
    assert dagplan.run_report(done.run_id).to_json() == project.run_report(done.run_id).to_json()
    assert dagplan.preview("plan.yaml").to_json() == project.preview("plan.yaml", None).to_json()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert [r.id for r in dagplan.runs(state_dir=project.state)] == [done.run_id]
    given = dagplan.Project.given(config=project.config)
    assert given.root == project.root and given.state == project.state


def _cli(where: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGPLAN_")}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=where, capture_output=True, text=True,
                          timeout=120, env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})  # fmt: skip


REWOO = """Plan: look the account up.
#E1 = fetch[acct_1]
"""


def test_fmt_reads_a_rewoo_text_as_the_project_does_through_every_door(tmp_path):
    """``dagplan fmt`` (from a sub-folder), ``Project.format_document`` and the loader all give a ReWOO text's
    bare argument to the parameter the project's tools name; the formatted plan checks as valid."""
    project = _project(tmp_path / "P", "acct_[0-9]+")
    (project.root / "plans").mkdir()
    (project.root / "plans" / "look.rewoo").write_text(REWOO)
    shown = _cli(project.root / "plans", "fmt", "look.rewoo")
    assert shown.returncode == 0, shown.stderr
    from dagplan.dsl.load import load_file

    document = load_file(str(project.root / "plans" / "look.rewoo"))
    assert shown.stdout == project.format_document(document)
    assert "account: acct_1" in shown.stdout, shown.stdout
    (project.root / "plans" / "look.yaml").write_text(shown.stdout)
    checked = _cli(project.root / "plans", "check", "look.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_submit_and_db_upgrade_agree_through_the_cli_and_the_project(tmp_path, postgres):
    """The run database's doors: ``dagplan db upgrade`` and ``Project.db_upgrade`` migrate the same database to
    the same version; ``dagplan submit`` and ``Project.submit`` queue the same run (its plan named from the
    project's root, its tool sources the project's)."""
    project = _project(tmp_path / "P", "acct_[0-9]+")
    (project.root / "plans").mkdir()
    (project.root / "plans" / "plan.yaml").write_text(PLAN)
    upgraded = _cli(project.root / "plans", "--state", postgres, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    there = dagplan.Project(project.root, state=postgres)
    before, after = there.db_upgrade()
    assert before == after > 0  # the CLI already brought it to the version the project's door knows
    submitted = _cli(project.root / "plans", "--state", postgres, "submit", "plan.yaml", "-i", "account=x")
    assert submitted.returncode == 0, submitted.stderr
    by_cli = submitted.stdout.strip()
    by_project = there.submit(project.root / "plans" / "plan.yaml", {"account": "x"})
    from dagplan.interpreter.stores.pgstore import PgRegistry

    names = {info.id: info.plan_name for info in there.runs()}
    assert names[by_cli] == names[by_project] == "plans/plan.yaml", names
    kept = PgRegistry(postgres)
    sources = [[s.get("file") or s.get("module") for s in kept.open(run_id).meta["tool_sources"]]
               for run_id in (by_cli, by_project)]  # fmt: skip
    assert sources[0] == sources[1] and str(project.root / "tools.py") in json.dumps(sources[0]), sources


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def test_one_language_server_checks_each_root_of_a_workspace_with_its_own_project(tmp_path):
    """A workspace of two projects, one language server (started in the first): a document of the second is
    checked with the second's tools, as `dagplan check` run there would; the first's with its own."""
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient

    plan = "steps:\n  - id: a\n    tool: {tool}\n    args: {{account: x}}\n    output: $state.a\nresult: $state.a\n"
    first, second = tmp_path / "first", tmp_path / "second"
    for root, tool in ((first, "fetch"), (second, "lookup")):
        root.mkdir()
        (root / ".git").mkdir()
        (root / "tools.py").write_text(TOOLS.replace("def fetch(", f"def {tool}("))
        (root / "dagplan.toml").write_text('tools = ["tools.py"]\n')
        (root / "plan.yaml").write_text(plan.format(tool="lookup"))  # the second's tool: unknown in the first
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGPLAN_")}

    async def main() -> dict:
        client = LanguageClient("roots", "v1")
        published: dict[str, asyncio.Queue] = {}

        @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: t.PublishDiagnosticsParams) -> None:
            published.setdefault(params.uri, asyncio.Queue()).put_nowait(params.diagnostics)

        await client.start_io(sys.executable, "-m", "dagplan", "lsp", cwd=str(first), env=env)
        folders = [t.WorkspaceFolder(uri=r.as_uri(), name=r.name) for r in (first, second)]
        await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities(), root_uri=first.as_uri(),
                                                         workspace_folders=folders))  # fmt: skip
        client.initialized(t.InitializedParams())
        found = {}
        try:
            for root in (first, second):
                uri = (root / "plan.yaml").as_uri()
                published.setdefault(uri, asyncio.Queue())
                client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                    uri=uri, language_id="yaml", version=1, text=(root / "plan.yaml").read_text())))  # fmt: skip
                found[root.name] = sorted(str(d.code) for d in await asyncio.wait_for(published[uri].get(), 60))
        finally:
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()
        return found

    found = asyncio.run(asyncio.wait_for(main(), 120))
    assert "unknown-tool" in found["first"] and "unknown-tool" not in found["second"], found


def test_a_run_with_a_state_given_records_its_projects_tool_sources_for_resume(tmp_path):
    """`dagplan --state DIR run` (or $DAGPLAN_STATE_DIR) records the configured tool files with the run, so that
    `resume --from` loads them (a run that recorded none could not find its tools again: repro5 h02, h03)."""
    project = _project(tmp_path / "P", "acct_[0-9]+")
    (project.root / "plan.yaml").write_text(PLAN.split("  - id: b")[0] + "result: $state.a\n")
    ran = _cli(project.root, "--state", "kept", "run", "plan.yaml", "-i", "account=x")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    again = _cli(project.root, "--state", "kept", "resume", "@last", "--from", "a", "--no-input")
    assert again.returncode == 0 and "record of x" in again.stdout, again.stdout + again.stderr
