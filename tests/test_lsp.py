"""`dagplan lsp` through a real LSP client (pygls's), exchanging real messages with the server process:
diagnostics as `check` gives them, completion, hover, definition, references, rename, outline, quick fix."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest
from lsprotocol import types as t
from pygls.lsp.client import LanguageClient
import json
import subprocess

ROOT = Path(__file__).resolve().parent.parent

PLAN = """summary: Suggest something to do
inputs:
  city: {type: string}
steps:
  - id: weather
    tool: getWeather
    args: {city: †input.city}
    output: †state.weather || †state.rainy
  - id: park
    tool: findPark
    args: {weather: †state.weather}
    output: †state.park
  - id: tell
    tool: presentSuggestion
    args: {suggestion: "#park"}
    output: †state.told
result: †state.told
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "tools.py")
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    return tmp_path


async def _session(project: Path, body) -> None:
    client = LanguageClient("test", "v1")
    published: dict[str, asyncio.Queue] = {}

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: t.PublishDiagnosticsParams) -> None:
        published.setdefault(params.uri, asyncio.Queue()).put_nowait(params.diagnostics)

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    await client.start_io(sys.executable, "-m", "dagplan", "lsp", cwd=str(project), env=env)
    await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities(),
                                                     root_uri=project.as_uri()))  # fmt: skip
    client.initialized(t.InitializedParams())

    async def diagnostics(uri: str) -> list:
        return await asyncio.wait_for(published.setdefault(uri, asyncio.Queue()).get(), 30)

    try:
        await body(client, diagnostics)
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


def _open(client, uri: str, text: str) -> None:
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        text_document=t.TextDocumentItem(uri=uri, language_id="yaml", version=1, text=text)))  # fmt: skip


def _at(line: int, character: int, uri: str) -> dict:
    return {"text_document": t.TextDocumentIdentifier(uri=uri), "position": t.Position(line, character)}


def test_every_capability_through_a_real_client(project):
    uri = (project / "plan.yaml").as_uri()

    async def body(client, diagnostics) -> None:
        bad = PLAN.replace("tool: findPark", "tool: findPrak")
        _open(client, uri, bad)
        found = await diagnostics(uri)
        unknown = next(d for d in found if d.code == "unknown-tool")
        assert (unknown.range.start.line, unknown.range.start.character) == (9, 10)  # check's 10:11, 0-based
        assert "did you mean 'findPark'?" in unknown.message

        fixes = await client.text_document_code_action_async(t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=uri), range=unknown.range,
            context=t.CodeActionContext(diagnostics=[unknown])))  # fmt: skip
        edit = fixes[0].edit.changes[uri][0]
        assert edit.new_text == "findPark" and edit.range.start.character == 10

        client.text_document_did_change(t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[t.TextDocumentContentChangeWholeDocument(text=PLAN)]))  # fmt: skip
        assert [d for d in await diagnostics(uri) if d.severity == t.DiagnosticSeverity.Error] == []

        tools = await client.text_document_completion_async(t.CompletionParams(**_at(9, 16, uri)))
        labels = {i.label: i for i in tools.items}
        assert "findPark" in labels and labels["getWeather"].detail == "getWeather(city: string)"
        ids = await client.text_document_completion_async(t.CompletionParams(**_at(14, 26, uri)))
        assert {"weather", "park"} <= {i.label for i in ids.items}
        state = await client.text_document_completion_async(t.CompletionParams(**_at(10, 33, uri)))
        assert {"weather", "park", "told"} <= {i.label for i in state.items}

        shown = await client.text_document_hover_async(t.HoverParams(**_at(5, 12, uri)))
        assert "getWeather(city: string)" in shown.contents.value and "pure" in shown.contents.value
        about = await client.text_document_hover_async(t.HoverParams(**_at(8, 10, uri)))
        assert "read by tell" in about.contents.value

        where = await client.text_document_definition_async(t.DefinitionParams(**_at(14, 25, uri)))
        assert where.range.start.line == 8  # #park -> `- id: park`
        writer = await client.text_document_definition_async(t.DefinitionParams(**_at(10, 30, uri)))
        assert writer.range.start.line == 7  # †state.weather -> the output line of weather
        source = await client.text_document_definition_async(t.DefinitionParams(**_at(5, 12, uri)))
        assert source.uri.endswith("tools.py") and source.range.start.line > 0  # the tool's Python source

        refs = await client.text_document_references_async(t.ReferenceParams(
            **_at(8, 10, uri), context=t.ReferenceContext(include_declaration=True)))  # fmt: skip
        assert sorted(r.range.start.line for r in refs) == [8, 14]
        renamed = await client.text_document_rename_async(t.RenameParams(**_at(8, 10, uri), new_name="outdoors"))
        assert sorted((e.range.start.line, e.new_text) for e in renamed.changes[uri]) == [(8, "outdoors"),
                                                                                            (14, "outdoors")]  # fmt: skip

        outline = await client.text_document_document_symbol_async(t.DocumentSymbolParams(
            text_document=t.TextDocumentIdentifier(uri=uri)))  # fmt: skip
        assert [(s.name, s.detail) for s in outline] == [("weather", "getWeather"), ("park", "findPark"),
                                                        ("tell", "presentSuggestion")]  # fmt: skip

    asyncio.run(asyncio.wait_for(_session(project, body), 120))


def test_a_test_file_gets_the_diagnostics_of_check(project):
    (project / "plan.yaml").write_text(PLAN)
    uri = (project / "plan.test.yaml").as_uri()

    async def body(client, diagnostics) -> None:
        _open(client, uri, "plan: plan.yaml\ncases:\n  - name: x\n    expect: {result: {$regexp: a}}\n")
        found = await diagnostics(uri)
        assert any(d.severity == t.DiagnosticSeverity.Error for d in found), found

    asyncio.run(asyncio.wait_for(_session(project, body), 120))


def test_a_workflow_a_compose_file_and_package_json_are_left_alone_while_a_plan_is_checked(project):
    """The README's editor set-up sends every YAML/JSON file to `dagplan lsp`: a document that is not a plan
    (by its folder, name, modeline or shape) gets no diagnostics; a plan beside it does."""
    others = {
        ".github/workflows/ci.yml": "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/checkout@v4\n",
        "compose.yaml": "services:\n  web: {image: nginx}\n",
        "package.json": '{"name": "x", "scripts": {"test": "jest"}}',
    }

    async def body(client, diagnostics) -> None:
        for name, text in others.items():
            uri = (project / name).as_uri()
            _open(client, uri, text)
            assert list(await diagnostics(uri)) == [], name
        uri = (project / "triage.yaml").as_uri()
        _open(client, uri, PLAN.replace("findPark", "findPrak"))
        found = await diagnostics(uri)
        assert any(d.code == "unknown-tool" for d in found), found

    asyncio.run(_session(project, body))


def test_checks_run_off_the_event_loop_and_a_newer_version_makes_the_older_one_stale():
    """Issue 43: while a check runs in its thread the loop goes on (hover, completion answer); a newer
    version cancels the check it makes stale: dropped if still queued, its result thrown away if running."""
    import threading

    from dagplan.lsp import Checks

    docs = {"big": (1, "big v1"), "other": (1, "other v1")}
    entered, go = threading.Event(), threading.Event()
    called: list[str] = []
    published: list[tuple[str, list]] = []

    def diagnose(uri: str, text: str) -> list:
        called.append(text)
        if text == "big v1":
            entered.set()
            assert go.wait(30)
        return [text]

    async def main() -> None:
        checks = Checks(docs.get, diagnose, lambda uri, found: published.append((uri, found)))
        first = checks.schedule("big", 0)
        await asyncio.to_thread(entered.wait, 30)  # the check holds its thread...
        other = checks.schedule("other", 0)  # ...a check queued behind it...
        for _ in range(5):
            await asyncio.sleep(0)  # ...and the loop still turns
        docs["other"] = (2, "other v2")
        newer_other = checks.schedule("other", 0)  # the queued check is stale: it never runs
        docs["big"] = (2, "big v2")
        newer_big = checks.schedule("big", 0)  # the running one is stale: its result is dropped
        go.set()
        await asyncio.gather(first, other, newer_other, newer_big, return_exceptions=True)
        assert first.cancelled() and other.cancelled()
        assert checks.pending == {}

    asyncio.run(main())
    assert "other v1" not in called
    assert sorted(published) == [("big", ["big v2"]), ("other", ["other v2"])]


HARNESS = r"""
const Module = require("module");
const seen = {};
const fakes = {
  vscode: {
    workspace: {
      getConfiguration: (section) => ({ get: (key) => (section === "dagplan" && key === "command" ? ["dagplan", "lsp"] : undefined) }),
      workspaceFolders: [{ uri: { fsPath: "/project" } }],
    },
  },
  "vscode-languageclient/node": {
    LanguageClient: class {
      constructor(id, name, server, client) { Object.assign(seen, { id, name, server, client }); }
      start() { seen.started = true; return Promise.resolve(); }
      stop() { seen.stopped = true; return Promise.resolve(); }
      dispose() {}
    },
  },
};
const load = Module._load;
Module._load = function (request, ...rest) { return request in fakes ? fakes[request] : load.call(this, request, ...rest); };
const extension = require(process.argv[2]);
const context = { subscriptions: [] };
Promise.resolve(extension.activate(context)).then(() => extension.deactivate()).then(() => {
  console.log(JSON.stringify({ ...seen, subscriptions: context.subscriptions.length }));
});
"""


def test_the_vs_code_extension_is_a_thin_client_of_dagplan_lsp(tmp_path):
    """The manifest has what `vsce package` requires; the extension, loaded by Node with VS Code's API faked,
    starts `dagplan lsp` in the workspace folder for YAML and JSON files and stops it."""
    import shutil

    folder = ROOT / "editors" / "vscode"
    manifest = json.loads((folder / "package.json").read_text())
    for key in ("name", "publisher", "version", "engines", "main", "activationEvents", "contributes"):
        assert key in manifest, key
    assert (folder / manifest["main"]).is_file() and (folder / "README.md").is_file()
    assert manifest["contributes"]["configuration"]["properties"]["dagplan.command"]["default"] == ["dagplan", "lsp"]
    assert "vscode-languageclient" in manifest["dependencies"]
    node = shutil.which("node")
    assert node, "node is needed to smoke-test the extension (Debian's nodejs)"
    (tmp_path / "harness.js").write_text(HARNESS)
    done = subprocess.run([node, str(tmp_path / "harness.js"), str(folder / "extension.js")], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["server"]["run"] == {"command": "dagplan", "args": ["lsp"], "options": {"cwd": "/project"}}
    assert {s["language"] for s in seen["client"]["documentSelector"]} == {"yaml", "json"}
    assert seen["started"] and seen["stopped"] and seen["subscriptions"] == 1


def test_the_vs_code_extension_packages_as_a_vsix_with_its_client(tmp_path):
    """Issue 63: the extension as a `.vsix`, built as its README says (npm ci from its lock, then vsce), unpacked:
    its manifest, its code and the language client it runs with are in it, vsce (a build tool) is not."""
    import shutil
    import zipfile

    npm = shutil.which("npm")
    assert npm, "npm is needed to build the extension (Debian's npm; .ci/run installs it)"
    folder = tmp_path / "vscode"
    shutil.copytree(ROOT / "editors" / "vscode", folder, ignore=shutil.ignore_patterns("node_modules", "*.vsix"))
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
    installed = subprocess.run([npm, "ci", "--no-audit"], cwd=folder, capture_output=True, text=True, timeout=600,
                               env=env)  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    packed = subprocess.run([npm, "run", "package"], cwd=folder, capture_output=True, text=True, timeout=600, env=env)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    manifest = json.loads((folder / "package.json").read_text())
    with zipfile.ZipFile(folder / "dagplan.vsix") as vsix:
        names = set(vsix.namelist())
        inside = json.loads(vsix.read("extension/package.json"))
    assert (
        inside["name"] == "dagplan" and inside["version"] == manifest["version"] and inside["main"] == "./extension.js"
    )
    assert {"extension.vsixmanifest", "extension/extension.js", "extension/readme.md", "extension/LICENSE.txt"} <= names
    assert "extension/node_modules/vscode-languageclient/package.json" in names  # the client it runs with
    assert not any(n.startswith("extension/node_modules/@vscode/vsce/") for n in names)  # a build tool stays out
