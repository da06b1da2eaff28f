"""What a newcomer tripped on, round four: each item through the CLI (or raw LSP) as the README sets it up."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

WORKFLOW = """on: push
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: make test
"""
COMPOSE = "services:\n  web: {image: nginx}\n"
CLOUDBUILD = "steps:\n  - name: gcr.io/cloud-builders/docker\n    id: build\n    args: [build, .]\n"
BROKEN_PLAN = """steps:
  - id: get
    tool: fetchIssue
    args: {n: 1}
    output: $state.issue
  - id: label
    tool: closeIsue
    args: {issue: $state.isue}
"""


def dagplan(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, input=stdin)  # fmt: skip


def hook_files(hook: dict, files: list[str]) -> list[str]:
    """The files pre-commit hands the hook: its `types_or` (yaml, json: by extension, as `identify` tags
    them), minus its `exclude`."""
    kinds = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}
    wanted = set(hook.get("types_or") or hook.get("types") or ())
    chosen = [f for f in files if kinds.get(Path(f).suffix) in wanted]
    if hook.get("files"):
        chosen = [f for f in chosen if re.search(hook["files"], f)]
    return [f for f in chosen if not re.search(hook.get("exclude", "^$"), f)]


def run_hook(project: Path, hook_id: str = "dagplan-check", changed: list[str] | None = None
             ) -> subprocess.CompletedProcess:  # fmt: skip
    """The hook as pre-commit runs it on a commit of ``changed`` files (default: every file): its entry split as
    a shell splits it, the files it is handed, or none (pass_filenames: false) when one of its types changed."""
    import shlex

    (hook,) = [h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()) if h["id"] == hook_id]
    files = changed if changed is not None else sorted(str(p.relative_to(project)) for p in project.rglob("*")
                                                       if p.is_file())  # fmt: skip
    entry = shlex.split(hook["entry"])
    assert entry[0] == "dagplan"
    if hook.get("pass_filenames", True):
        return dagplan(project, *entry[1:], *hook_files(hook, files))
    assert any(Path(f).suffix == ".py" for f in files) and hook["types"] == ["python"]
    return dagplan(project, *entry[1:])


def test_the_pre_commit_hook_checks_a_broken_plan_at_the_top_level_and_leaves_other_yaml_alone(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    (tmp_path / "cloudbuild.yaml").write_text(CLOUDBUILD)
    (tmp_path / "package.json").write_text('{"name": "x", "scripts": {"test": "jest"}}')
    (tmp_path / "triage.yaml").write_text(BROKEN_PLAN)
    done = run_hook(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr  # it checked the plan, and the plan is broken
    assert "triage.yaml:8:19: error unwritten-state" in done.stdout
    assert "ci.yml" not in done.stdout and "compose" not in done.stdout and "package.json" not in done.stdout
    assert "4 other YAML/JSON files left alone (not plans)" in done.stderr, done.stderr
    # no tools known: the hook says that tool names were not checked (closeIsue is a typo it cannot see)
    assert "note: tool names and arguments were not checked" in done.stderr
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    (tmp_path / "tools.py").write_text("import dagplan\n\n@dagplan.tool\ndef fetchIssue(n: int) -> dict:\n"
                                       "    return {}\n\n@dagplan.tool\ndef closeIssue(issue: dict) -> str:\n"
                                       "    return 'ok'\n")  # fmt: skip
    typed = run_hook(tmp_path)
    assert "unknown-tool" in typed.stdout and "closeIssue" in typed.stdout and "not checked" not in typed.stderr


def test_a_commit_that_changes_only_the_tools_checks_every_plan_against_them(tmp_path):
    """A renamed tool breaks a plan that did not change: the tools hook (on Python files) checks every plan of
    the repository, leaves `invalid/` folders and other YAML alone (issue 51, item 2)."""
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "triage.yaml").write_text(BROKEN_PLAN.replace("closeIsue", "closeIssue").replace(
        "isue", "issue"))  # fmt: skip
    (tmp_path / "examples" / "invalid").mkdir(parents=True)
    (tmp_path / "examples" / "invalid" / "bad.yaml").write_text(BROKEN_PLAN)  # meant to be invalid
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    tools = "import dagplan\n\n@dagplan.tool\ndef fetchIssue(n: int) -> dict:\n    return {}\n\n"
    (tmp_path / "tools.py").write_text(tools + "@dagplan.tool\ndef closeIssue(issue: dict) -> str:\n    return 'ok'\n")
    assert run_hook(tmp_path, "dagplan-check-tools", ["tools.py"]).returncode == 0
    (tmp_path / "tools.py").write_text(tools + "@dagplan.tool\ndef shutIssue(issue: dict) -> str:\n    return 'ok'\n")
    broken = run_hook(tmp_path, "dagplan-check-tools", ["tools.py"])  # only tools.py changed
    assert broken.returncode == 1 and "plans/triage.yaml" in broken.stdout and "unknown-tool" in broken.stdout
    assert "invalid/bad.yaml" not in broken.stdout and "compose" not in broken.stdout, broken.stdout


def test_the_hook_snippet_names_the_release_tag_of_this_version(tmp_path):
    """`rev:` is a tag (`scripts/release` makes it from pyproject's version, and refuses a snippet that names
    another, or a changelog without the version's section): on a copy of this repository, it tags v<version>
    once and refuses a second time."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    (snippet,) = re.findall(r"```yaml\n- repo: .*?```", (ROOT / "docs" / "guide" / "checking.md").read_text(), re.S)
    assert f"  rev: v{version}\n" in snippet and "id: dagplan-check" in snippet
    assert json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())["version"] == version
    copy = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-tags", str(ROOT), str(copy)], check=True)
    for path in ("docs/guide/checking.md", "CHANGELOG.md", "pyproject.toml", "editors/vscode/package.json",
                 "scripts/release"):  # fmt: skip
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_bytes((ROOT / path).read_bytes())  # this tree's, committed or not
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    env = {**os.environ, **who}  # a fresh machine has no git identity
    git = ["git", "-C", str(copy)]
    subprocess.run([*git, "commit", "-qam", "release", "--allow-empty"], check=True, env=env)
    first = subprocess.run(["bash", str(copy / "scripts" / "release")], capture_output=True, text=True, env=env)
    assert first.returncode == 0 and f"tagged v{version}" in first.stdout, first.stderr
    assert subprocess.run([*git, "tag", "-l"], capture_output=True, text=True).stdout.split() == [f"v{version}"]
    again = subprocess.run(["bash", str(copy / "scripts" / "release")], capture_output=True, text=True, env=env)
    assert again.returncode == 2 and "exists already" in again.stderr


def test_the_hook_says_so_when_a_project_has_no_plan(tmp_path):
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    (tmp_path / "package.json").write_text("{}")
    done = run_hook(tmp_path)
    assert done.returncode == 0
    assert "no plan among 2 YAML/JSON files: nothing to check" in done.stderr, done.stderr


def test_plans_are_recognised_by_folder_name_modeline_and_shape():
    from dagplan.dsl.recognize import is_plan

    assert is_plan("anything: at all\n", "plans/x.yaml") and is_plan("{}", "a/b/c.plan.json")
    assert is_plan("# yaml-language-server: $schema=../schemas/plan.schema.json\nsteps: []\n", "x.yaml")
    assert is_plan(json.dumps([{"_tool": "a", "_outputPath": "$state.x"}]), "calls.json")
    assert is_plan(json.dumps({"steps": [{"id": "E1", "agent": "search", "task": "x"}]}), "x.json")
    assert is_plan("steps:\n  - id: a\n    tool: t\n    args: {x: [unclosed\n", "broken.yaml")  # judged by text
    assert not is_plan(WORKFLOW, ".github/workflows/ci.yml") and not is_plan(COMPOSE, "compose.yaml")
    assert not is_plan(CLOUDBUILD, "cloudbuild.yaml") and not is_plan('{"steps": 3}', "package.json")


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


FAILING_TOOLS = """import dagplan

def helper(d):
    return d["title"]

@dagplan.tool(purity="pure")
def fetch(q: str) -> str:
    issue = {"name": q}
    return helper(issue)

@dagplan.tool(purity="pure")
def leak(q: str) -> str:
    raise ValueError("no"); token = "sk-abcdefghijklmnopqrstuvwx"
"""

FAILING_PLAN = """steps:
  - id: get
    tool: fetch
    args: {q: x}
    output: $state.t
  - id: other
    tool: leak
    args: {q: y}
    output: $state.u
"""


def test_a_tools_exception_says_which_file_and_line_everywhere(tmp_path):
    (tmp_path / "tools.py").write_text(FAILING_TOOLS)
    (tmp_path / "p.yaml").write_text(FAILING_PLAN)
    done = dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 1
    assert "(FAILED: KeyError: 'title') (at tools.py:4 in helper)" in done.stdout, done.stdout  # the run table
    assert "fetch: FAILED: KeyError: 'title' (at tools.py:4 in helper)" in done.stderr  # the progress line
    assert "Traceback" not in done.stdout
    verbose = dagplan(tmp_path, "-v", "run", "p.yaml", "--tools", "tools.py")
    assert (
        'Traceback of get (its frames in your code, innermost last):\n  File "tools.py", line 9, in fetch\n'
        '    return helper(issue)\n  File "tools.py", line 4, in helper\n    return d["title"]'
    ) in verbose.stdout
    assert "sk-abcdefghijkl" not in verbose.stdout and "[REDACTED]" in verbose.stdout  # a secret in a code line
    shown = dagplan(tmp_path, "runs", "show", "@last", "--step", "get")
    assert "KeyError: 'title' (at tools.py:4 in helper)" in shown.stdout and "line 4, in helper" in shown.stdout
    events = json.loads(dagplan(tmp_path, "events", "@last", "--format", "json").stdout)
    failed = next(e for e in events if e["type"] == "plan_step_failed" and e["step"] == "get")
    assert [(Path(f["file"]).name, f["line"], f["function"]) for f in failed["traceback"]] == [
        ("tools.py", 9, "fetch"), ("tools.py", 4, "helper")]  # fmt: skip
    journal = "".join(p.read_text() for p in (tmp_path / ".dagplan").rglob("wal.jsonl"))
    assert "sk-abcdefghijkl" not in journal


def served_page(folder: Path, path: str, *serve_args: str) -> str:
    """A page of `dagplan serve` started in ``folder`` (its printed URL, its token), the server stopped after."""
    import httpx

    server = subprocess.Popen([sys.executable, "-m", "dagplan", "serve", "--port", "0", *serve_args], cwd=folder,
                              env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        url = re.search(r"(http://\S+)", server.stderr.readline())[1]
        base, query = url.split("/?", 1)
        return httpx.get(f"{base}{path}{'&' if '?' in path else '?'}{query}", timeout=30).text
    finally:
        server.terminate()
        server.wait(10)


def test_the_viewer_shows_where_a_tool_failed(tmp_path):
    (tmp_path / "tools.py").write_text(FAILING_TOOLS)
    (tmp_path / "p.yaml").write_text(FAILING_PLAN)
    run_id = re.search(r"run (\S+)", dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py").stderr)[1]
    page = served_page(tmp_path, f"/runs/{run_id}")
    assert "attempt 1 failed at tools.py:4 in helper" in page
    assert "traceback (your code)" in page and "return d[&#34;title&#34;]" in page


def test_the_viewers_plan_page_checks_with_the_tools_serve_was_given(tmp_path):
    (tmp_path / "tools.py").write_text(FAILING_TOOLS)
    (tmp_path / "p.yaml").write_text(FAILING_PLAN.replace("tool: leak", "tool: leek"))
    page = served_page(tmp_path, "/plan?file=p.yaml", "--tools", "tools.py")
    assert "unknown-tool" in page and "leek" in page, page[:2000]  # as `check --tools tools.py` says


def test_a_secret_a_tool_returns_is_masked_where_people_read_it_and_kept_for_the_run(tmp_path):
    (tmp_path / "tools.py").write_text("import dagplan\n\n@dagplan.tool(purity='pure')\ndef login(user: str) -> str:\n"
                                       "    return 'session for ' + user + ': sk-abcdefghijklmnopqrstuvwx'\n")  # fmt: skip
    (tmp_path / "p.yaml").write_text("steps:\n  - id: s\n    tool: login\n    args: {user: ada}\n"
                                     "    output: $state.session\nresult: $state.session\n")  # fmt: skip
    done = dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 0 and "sk-abcdefghijkl" not in done.stdout + done.stderr, done.stdout
    assert "session for ada: [REDACTED]" in done.stdout
    for args in (("runs", "show", "@last"), ("events", "@last")):
        shown = dagplan(tmp_path, *args)
        assert "sk-abcdefghijkl" not in shown.stdout and "[REDACTED]" in shown.stdout, args
    as_json = json.loads(dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py", "--format", "json").stdout)
    assert as_json["result"].endswith("sk-abcdefghijklmnopqrstuvwx")  # the value, for a program (README)


def test_preview_marks_the_steps_that_act_on_the_world(tmp_path):
    shown = dagplan(ROOT, "preview", "examples/approve_refund.yaml", "--tools", "examples/tools.py")
    assert "3. [refund] tool=issueRefund (acts on the world)" in shown.stdout, shown.stdout
    assert "[history] tool=checkBillingHistory\n" in shown.stdout  # pure: no mark
    as_json = json.loads(dagplan(ROOT, "preview", "examples/approve_refund.yaml", "--tools", "examples/tools.py",
                                 "--format", "json").stdout)  # fmt: skip
    assert [s["id"] for s in as_json["steps"] if s.get("acts")] == ["refund"]


def test_graph_labels_a_condition_once_on_its_step_not_on_every_edge():
    out = dagplan(ROOT, "graph", "examples/ci_triage.yaml").stdout
    assert out.count("†state.ci.status == #quot;failed#quot; and †input.attempt < 3") == 2  # triage, page_owner
    assert not any("-->|" in line and "when" in line for line in out.splitlines()), out


SIX_MISTAKES = """steps:
  - id: get
    tool: fetchIssue
    args: {n: 1}
    output: $state.issue
    retries: 3
  - id: label
    tool: labelIssue
    args: {issue: "#gett"}
    deps: [gett]
    output: $state.labelled
  - id: close
    tool: closeIssue
    args: {issue: $state.isue}
"""


def test_check_reports_the_errors_of_every_stage_a_file_reaches_in_one_round(tmp_path):
    """A schema error (an unknown key) no longer hides the placeholder, dependency and state errors after it:
    each is reported at its line and column, in one run of check."""
    (tmp_path / "p.yaml").write_text(SIX_MISTAKES)
    done = dagplan(tmp_path, "check", "p.yaml")
    assert done.returncode == 1
    for where in ("p.yaml:6:5: error schema: unknown key 'retries'", "p.yaml:9:19: error unknown-step",
                  "p.yaml:10:12: error unknown-step", "p.yaml:14:19: error unwritten-state"):  # fmt: skip
        assert where in done.stdout, done.stdout
    assert "(4 errors, 0 warnings)" in done.stderr
    # a refused key later stages lean on (a misspelt output) holds them back: no errors that are its echoes
    misspelt = SIX_MISTAKES.replace("    output: $state.issue\n", "    ouput: $state.issue\n")
    (tmp_path / "q.yaml").write_text(misspelt.replace("    retries: 3\n", ""))
    held = dagplan(tmp_path, "check", "q.yaml")
    assert "unknown key 'ouput'" in held.stdout and "unknown-step" not in held.stdout, held.stdout


def test_a_misspelt_reference_root_is_said_not_kept_as_text_silently(tmp_path):
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - id: get\n    tool: fetchIssue\n    args: {n: 1}\n    output: $state.issue\n"
        "  - id: label\n    tool: labelIssue\n"
        '    args: {issue: $state.issue, label: $stat.kind, price: "$5.00 or $USD.rate", note: "ask $imput.who"}\n'
        "    output: $state.labelled\nresult: $state.labelled\n"
    )
    done = dagplan(tmp_path, "check", "p.yaml")
    assert done.returncode == 0  # a warning: a literal dollar is text a plan may mean
    assert "p.yaml:8:40: warning misspelt-reference: step 'label': '$stat.kind' is text" in done.stdout, done.stdout
    # quoted as the author spells references ($), not with the dagger the author never typed
    assert "did you mean $state.kind?" in done.stdout and "did you mean $input.who?" in done.stdout
    assert done.stdout.count("misspelt-reference") == 2  # not `$USD.rate`: no root is close to USD


def test_a_misspelt_state_path_gets_the_did_you_mean_every_other_name_gets(tmp_path):
    """`unwritten-state` for †state.isue.title: the path a step writes, put in place of the misspelt part."""
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - id: fetch\n    tool: getIssue\n    args: {n: 1}\n    output: $state.issue\n"
        "  - id: label\n    tool: setLabel\n    args: {title: $state.isue.title, whole: $state.isue}\n"
        "    output: $state.done\nresult: $state.done\n"
    )
    done = dagplan(tmp_path, "check", "p.yaml")
    assert done.returncode == 1
    assert "hint: did you mean '$state.issue.title'?" in done.stdout, done.stdout  # as the author spells it
    assert "hint: did you mean '$state.issue'?" in done.stdout
    (tmp_path / "q.yaml").write_text("steps:\n  - {id: a, tool: t, args: {x: $state.zzz}, output: $state.issue}\n")
    far = dagplan(tmp_path, "check", "q.yaml")
    assert "did you mean" not in far.stdout and "give it a value in `initial_state`" in far.stdout


PRINTING_TOOLS = """import sys
import dagplan

@dagplan.tool(purity="pure")
def fetch(q: str) -> str:
    print("fetching", q)
    print("slow server", file=sys.stderr)
    return q.upper()

@dagplan.tool(purity="pure")
async def tag(text: str) -> str:
    print("tagging", text, "token sk-abcdefghijklmnopqrstuvwx")
    return text + "!"
"""


def test_what_a_tool_prints_is_kept_with_its_step_not_written_raw_to_the_terminal(tmp_path):
    (tmp_path / "tools.py").write_text(PRINTING_TOOLS)
    (tmp_path / "p.yaml").write_text("steps:\n  - id: get\n    tool: fetch\n    args: {q: owls}\n"
                                     "    output: $state.t\n  - id: mark\n    tool: tag\n    args: {text: $state.t}\n"
                                     "    output: $state.m\nresult: $state.m\n")  # fmt: skip
    done = dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 0, done.stderr
    assert "fetching" not in done.stdout + done.stderr and "tagging" not in done.stdout + done.stderr
    shown = dagplan(tmp_path, "runs", "show", "@last", "--step", "get")
    assert "What get's tool printed:\nfetching owls\nslow server" in shown.stdout, shown.stdout
    marked = dagplan(tmp_path, "runs", "show", "@last", "--step", "mark").stdout
    assert "tagging OWLS token [REDACTED]" in marked and "sk-abcdefghijkl" not in marked
    events = json.loads(dagplan(tmp_path, "events", "@last", "--format", "json").stdout)
    assert [(e["step"], e["text"]) for e in events if e["type"] == "plan_step_printed"][0] == (
        "get",
        "fetching owls\nslow server\n",
    )
    run_id = json.loads(dagplan(tmp_path, "runs", "--format", "json").stdout)[0]["id"]
    page = served_page(tmp_path, f"/runs/{run_id}")
    assert "what the tool printed" in page and "fetching owls" in page


from test_mcp_server import TOOLS as AGENT_TOOLS  # noqa: E402 - lookup (pure) and send_email (side effect)


def test_dagplan_agent_runs_the_loop_and_a_person_approves_what_acts(tmp_path, stub):
    from llm_stub import json_reply

    (tmp_path / "tools.py").write_text(AGENT_TOOLS)
    (tmp_path / "dagplan.toml").write_text(
        f'tools = ["tools.py"]\nmodel = "openai/gpt-4o-mini"\n[llm]\napi_base = "{stub.url}"\napi_key = "x"\n'
    )
    look = json_reply({"calls": [{"_tool": "lookup", "customer": "ada", "_outputPath": "$state.who"}],
                       "output": None})  # fmt: skip
    mail = json_reply({"calls": [{"_tool": "send_email", "to": "$state.who.email", "body": "hi",
                                  "_outputPath": "$state.sent"}], "output": None})  # fmt: skip
    stub.script(look, mail)
    refused = dagplan(tmp_path, "agent", "email ada hi", "--no-input")
    assert refused.returncode == 1 and "not approved" in refused.stderr, refused.stderr
    assert "turn 1: ran lookup" in refused.stderr and not (tmp_path / "outbox.txt").exists()
    stub.script(look, mail, json_reply({"calls": [], "output": "done"}))
    done = dagplan(tmp_path, "agent", "email ada hi", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done" and "the agent's next steps act on the world" in done.stderr
    assert (tmp_path / "outbox.txt").read_text() == "ada@example.com: hi\n"


def test_preview_of_a_plan_file_speaks_of_the_user_s_tools_and_not_of_streaming(tmp_path):
    """Items of round five: "To run it" repeats the --tools given (none when the configuration names them);
    a hand-written plan's preview says nothing of streamed plans; the local model is free, said once."""
    import shutil
    import subprocess
    import sys

    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "tools.py")
    (tmp_path / ".git").mkdir()
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: w, tool: detectLanguage, args: {text: Bonjour}, output: $state.w}\n"
                                     "  - {id: s, llm: 'Say #w', model: local, output: $state.s}\n")  # fmt: skip
    run = lambda *a: subprocess.run([sys.executable, "-m", "dagplan", *a], cwd=tmp_path, capture_output=True,
                                    text=True, timeout=60)  # noqa: E731  # fmt: skip
    shown = run("preview", "p.yaml", "--tools", "tools.py").stdout
    assert "To run it: dagplan run p.yaml --tools tools.py" in shown, shown
    assert "Streamed" not in shown
    assert shown.count("free (the local model, on this machine)") == 1 and "price unknown" not in shown, shown
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    assert "To run it: dagplan run p.yaml\n" in run("preview", "p.yaml").stdout + "\n"
