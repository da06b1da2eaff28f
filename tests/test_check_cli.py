"""`dagplan check / fmt / graph / schema`: exit codes, formats, globs, and a light import path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dagplan.cli import cli
from as_user import run_dagplan, with_example_tools
import re
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def plans(tmp_path):
    (tmp_path / "good.yaml").write_text("steps:\n  - id: a\n    tool: t\n    output: †state.a\n", encoding="utf-8")
    (tmp_path / "bad.yaml").write_text("steps:\n  - id: a\n    tool: t\n    args: {x: †state.nope}\n", encoding="utf-8")
    (tmp_path / "warn.yaml").write_text(
        "steps:\n  - id: a\n    tool: t\n    output: †state.x\n  - id: b\n    tool: t\n    output: †state.y\n"
        "result: †state.y\n",
        encoding="utf-8",
    )
    return tmp_path


def test_valid_file_exits_0(plans):
    r = invoke("check", str(plans / "good.yaml"))
    assert r.exit_code == 0, r.output
    assert "1 file checked: 1 valid, 0 invalid (0 errors, 0 warnings)" in r.stderr


def test_invalid_file_exits_1_with_compiler_style_text(plans):
    r = invoke("check", str(plans / "bad.yaml"))
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert (
        lines[0]
        == f"{plans / 'bad.yaml'}:4:15: error unwritten-state: †state.nope is read but no step writes it and it is not in initial_state"
    )
    assert lines[1] == "        args: {x: †state.nope}"
    assert lines[2] == "    " + " " * 14 + "^"
    assert lines[3].startswith("    hint: ")


def test_warnings_pass_unless_strict(plans):
    assert invoke("check", str(plans / "warn.yaml")).exit_code == 0
    assert invoke("check", "--strict", str(plans / "warn.yaml")).exit_code == 1


def test_many_files_globs_and_dirs(plans):
    r = invoke("check", str(plans / "*.yaml"))
    assert r.exit_code == 1
    assert "3 files checked: 2 valid, 1 invalid (1 error, 1 warning)" in r.stderr
    r = invoke("check", str(plans))
    assert "3 files checked" in r.stderr


def test_missing_file_and_empty_glob_exit_2(plans):
    assert invoke("check", str(plans / "nope.yaml")).exit_code == 2
    assert invoke("check", str(plans / "*.nothing")).exit_code == 2
    assert invoke("check").exit_code == 2


def test_json_format(plans):
    r = invoke("check", "--format", "json", str(plans / "good.yaml"), str(plans / "bad.yaml"))
    data = json.loads(r.stdout)
    assert r.exit_code == 1
    assert data["summary"] == {"files": 2, "valid": 1, "invalid": 1, "errors": 1, "warnings": 0}
    bad = data["files"][1]
    assert bad["valid"] is False and bad["diagnostics"][0]["code"] == "unwritten-state"
    assert (bad["diagnostics"][0]["line"], bad["diagnostics"][0]["col"]) == (4, 15)


def test_github_format(plans):
    r = invoke("check", "--format", "github", str(plans / "bad.yaml"))
    assert r.stdout.startswith(f"::error file={plans / 'bad.yaml'},line=4,col=15,title=unwritten-state::†state.nope")


def test_tools_option_validates_tool_names(plans):
    (plans / "tools.py").write_text(
        "import dagplan\n@dagplan.tool\ndef t(x: str = '') -> str:\n    return x\n", encoding="utf-8"
    )
    (plans / "typo.yaml").write_text("steps:\n  - id: a\n    tool: tt\n", encoding="utf-8")
    assert invoke("check", "--tools", str(plans / "tools.py"), str(plans / "good.yaml")).exit_code == 0
    r = invoke("check", "--tools", str(plans / "tools.py"), str(plans / "typo.yaml"))
    assert r.exit_code == 1 and "unknown-tool" in r.output and "did you mean 't'?" in r.output
    assert invoke("check", "--tools", str(plans / "missing.py"), str(plans / "good.yaml")).exit_code == 2


def test_graph_mermaid_labels_branches():
    r = invoke("graph", str(EXAMPLES / "weather.yaml"))
    assert r.exit_code == 0
    assert r.stdout.startswith("graph TD\n")
    assert '-- "sunny" -->' in r.stdout and '-- "notSunny" -->' in r.stdout


def test_graph_dot():
    r = invoke("graph", "--format", "dot", str(EXAMPLES / "payment.yaml"))
    assert r.exit_code == 0
    assert '"pay" -> "confirm" [label="receipt"];' in r.stdout
    assert '"pay" -> "report" [label="error"];' in r.stdout


def test_graph_of_invalid_plan_exits_1(plans):
    assert invoke("graph", str(plans / "bad.yaml")).exit_code == 1


def test_schema_prints_json():
    r = invoke("schema")
    assert r.exit_code == 0
    assert "properties" in json.loads(r.stdout)


def test_fmt_check_and_write(plans, tmp_path):
    target = tmp_path / "plan.yaml"
    target.write_text("steps:\n- {id: a, tool: t, args: {x: $input.x}}\n", encoding="utf-8")
    assert invoke("fmt", "--check", str(target)).exit_code == 1
    printed = invoke("fmt", str(target)).stdout
    assert "$input.x" in printed  # the author's spelling stays (fmt --dagger converts)
    assert "†input.x" in invoke("fmt", "--dagger", str(target)).stdout
    assert invoke("fmt", "-w", str(target)).exit_code == 0
    assert target.read_text(encoding="utf-8") == printed
    assert invoke("fmt", "--check", str(target)).exit_code == 0


def _env():
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_check_never_imports_litellm_or_the_interpreter():
    """Only the configuration reader (`check` reads the configuration `run` reads) and nothing heavy."""
    code = (
        "import sys\n"
        "from dagplan.cli import cli\n"
        "try:\n"
        f"    cli(['check', {str(EXAMPLES / 'weather.yaml')!r}], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'rich', 'jinja2', 'openai')"
        " or (m.startswith('dagplan.interpreter.') and m.count('.') > 2 and m not in ("
        "'dagplan.interpreter.llm.preflight', 'dagplan.interpreter.core.config',"
        " 'dagplan.interpreter.core.patterns')))\n"  # room packages: docstrings; patterns: one context variable
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def test_lark_is_imported_only_for_strings_the_fast_paths_do_not_read():
    # lark costs ~45 ms of the 300 ms budget of one `dagplan check`; common references never need it.
    code = (
        "import sys\n"
        "from dagplan.dsl import check\n"
        f"assert check({str(EXAMPLES / 'weather.yaml')!r}).ok\n"
        "print('lark' in sys.modules)\n"
        'check(text=\'steps: [{id: a, tool: t, args: {x: "$state[\\\\"a b\\\\"]"}}]\')\n'
        "print('lark' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr


def test_module_entry_point_exit_code():
    out = subprocess.run(
        [sys.executable, "-m", "dagplan", "check", str(EXAMPLES / "invalid" / "cycle.yaml")],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    assert out.returncode == 1 and "error cycle: dependency cycle: plan -> code -> test -> plan" in out.stdout


def test_json_output_carries_the_worst_case_of_composed_plans(monkeypatch):
    monkeypatch.chdir(ROOT)
    r = invoke("check", "examples/review_prs.yaml", "examples/weather.yaml", "--format", "json")
    files = {f["file"]: f for f in json.loads(r.output)["files"]}
    bound = files["examples/review_prs.yaml"]["worst_case"]
    assert bound["steps"] > 1 and bound["llm_steps"] >= 0
    assert "worst_case" not in files["examples/weather.yaml"]  # nothing repeats: no bound to show


def test_check_of_a_folder_leaves_its_other_yaml_alone_and_a_named_file_stays_strict(tmp_path):
    """`dagplan check .` in a repository: its CI workflow and package.json are not plans (said, not errors);
    a file named on its own is checked as a plan whatever it holds."""
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text(
        "name: ci\non: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n"
    )
    (tmp_path / "package.json").write_text('{"name": "x", "scripts": {"test": "jest"}}\n')
    (tmp_path / "compose.yaml").write_text("services:\n  web:\n    image: nginx\n")
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "p.yaml").write_text("steps:\n  - {id: a, tool: t, output: $state.a}\n")
    run = lambda *args: subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=tmp_path, capture_output=True,
                                       text=True, timeout=60)  # noqa: E731  # fmt: skip
    folder = run("check", ".")
    assert folder.returncode == 0, folder.stdout + folder.stderr
    said = folder.stdout + folder.stderr
    assert "1 file checked: 1 valid" in said and "2 other YAML/JSON files left alone (not plans)" in said, said
    (tmp_path / ".venv" / "lib").mkdir(parents=True)  # installed code below a project: never walked
    (tmp_path / ".venv" / "lib" / "broken.yaml").write_text("steps: [{tool: t}\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "x.json").write_text('{"steps": [')
    assert run("check", ".").returncode == 0
    named = run("check", "package.json")
    assert named.returncode == 1 and "unknown-dialect" in named.stdout
    empty = run("check", ".github")
    assert empty.returncode == 2 and "no plan among 1 YAML/JSON file" in empty.stdout + empty.stderr


def test_messages_quote_references_as_the_author_wrote_them(tmp_path):
    """The dagger is on no keyboard: a plan written with `$state` reads `$state` in its diagnostics."""
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: t, output: $state.summary}\n"
                                     "  - {id: b, tool: t, args: {x: $state.summry}, output: $state.b}\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "dagplan", "check", "p.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert "error unwritten-state: $state.summry is read" in done.stdout, done.stdout
    assert "did you mean '$state.summary'?" in done.stdout and "\u2020" not in done.stdout.split("hint:")[0]
    (tmp_path / "p.yaml").write_text((tmp_path / "p.yaml").read_text().replace("$", "\u2020"))
    dagger = subprocess.run([sys.executable, "-m", "dagplan", "check", "p.yaml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert "\u2020state.summry is read" in dagger.stdout  # and the dagger where the author wrote it


WORKFLOW = """on: push
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: make test
"""


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
        return run_dagplan(project, *entry[1:], *hook_files(hook, files))
    assert any(Path(f).suffix == ".py" for f in files) and hook["types"] == ["python"]
    return run_dagplan(project, *entry[1:])


def hook_files(hook: dict, files: list[str]) -> list[str]:
    """The files pre-commit hands the hook: its `types_or` (yaml, json: by extension, as `identify` tags
    them), minus its `exclude`."""
    kinds = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}
    wanted = set(hook.get("types_or") or hook.get("types") or ())
    chosen = [f for f in files if kinds.get(Path(f).suffix) in wanted]
    if hook.get("files"):
        chosen = [f for f in chosen if re.search(hook["files"], f)]
    return [f for f in chosen if not re.search(hook.get("exclude", "^$"), f)]


COMPOSE = "services:\n  web: {image: nginx}\n"


BROKEN_PLAN = """steps:
  - id: get
    tool: fetchIssue
    args: {n: 1}
    output: $state.issue
  - id: label
    tool: closeIsue
    args: {issue: $state.isue}
"""


CLOUDBUILD = "steps:\n  - name: gcr.io/cloud-builders/docker\n    id: build\n    args: [build, .]\n"


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


def test_strict_counts_a_file_with_warnings_as_invalid(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "p.yaml").write_text("steps:\n  - {id: w, tool: presentSuggestion, args: {suggestion: Rome}, output: †state.w}\n"
                                 "  - {id: x, tool: presentSuggestion, args: {suggestion: Oslo}, output: †state.x}\n"
                                 "result: †state.w\n")  # fmt: skip
    loose = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py")
    assert loose.returncode == 0 and "1 valid, 0 invalid (0 errors, 1 warning)" in loose.stderr
    strict = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py", "--strict")
    assert strict.returncode == 1 and "0 valid, 1 invalid (0 errors, 1 warning)" in strict.stderr


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


def test_the_hook_snippet_names_a_commit_every_clone_of_main_has(tmp_path):
    """`rev:` names a commit of main, not a tag (a tag made on a developer's machine does not travel with main,
    and pre-commit then fails with `pathspec 'v0.1.0' did not match`): a clone without tags checks it out,
    as pre-commit does, and finds the hooks there. `scripts/release` tags the version, refuses a snippet
    whose rev the history lacks, and refuses a second tag of one version (issue 58)."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    (snippet,) = re.findall(r"```yaml\n- repo: .*?```", (ROOT / "docs" / "guide" / "checking.md").read_text(), re.S)
    (rev,) = re.findall(r"^  rev: ([0-9a-f]{40})\b", snippet, re.M)
    assert "id: dagplan-check" in snippet
    assert json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())["version"] == version
    copy = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-tags", str(ROOT), str(copy)], check=True)
    git = ["git", "-C", str(copy)]
    assert subprocess.run([*git, "tag", "-l"], capture_output=True, text=True).stdout == ""
    hooks = subprocess.run([*git, "show", f"{rev}:.pre-commit-hooks.yaml"], capture_output=True, text=True)
    assert hooks.returncode == 0 and "id: dagplan-check\n" in hooks.stdout, hooks.stderr
    for path in ("docs/guide/checking.md", "CHANGELOG.md", "pyproject.toml", "editors/vscode/package.json",
                 "scripts/release"):  # fmt: skip
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_bytes((ROOT / path).read_bytes())  # this tree's, committed or not
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    env = {**os.environ, **who}  # a fresh machine has no git identity
    subprocess.run([*git, "commit", "-qam", "release", "--allow-empty"], check=True, env=env)
    first = subprocess.run(["bash", str(copy / "scripts" / "release")], capture_output=True, text=True, env=env)
    assert first.returncode == 0 and f"tagged v{version}" in first.stdout, first.stderr
    assert subprocess.run([*git, "tag", "-l"], capture_output=True, text=True).stdout.split() == [f"v{version}"]
    again = subprocess.run(["bash", str(copy / "scripts" / "release")], capture_output=True, text=True, env=env)
    assert again.returncode == 2 and "exists already" in again.stderr
    checking = copy / "docs" / "guide" / "checking.md"
    checking.write_text(checking.read_text().replace(rev, "0" * 40))
    subprocess.run([*git, "commit", "-qam", "a rev nobody has"], check=True, env=env)
    subprocess.run([*git, "tag", "-d", f"v{version}"], check=True, capture_output=True)
    stranger = subprocess.run(["bash", str(copy / "scripts" / "release")], capture_output=True, text=True, env=env)
    assert stranger.returncode == 2 and "a clone of main would not have it" in stranger.stderr, stranger.stderr


def test_the_hook_leaves_a_manifest_in_a_plans_folder_alone(tmp_path):
    """Issue 63: a docker-compose.yml under examples/ and a Kubernetes manifest under plans/ are not plans: the
    hook passes them (it failed ordinary commits with unknown-dialect), and still checks the plan beside them."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "plans").mkdir()
    (tmp_path / "examples" / "docker-compose.yml").write_text(COMPOSE)
    (tmp_path / "plans" / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n"
                                                 "spec:\n  containers: [{name: web, image: nginx}]\n")  # fmt: skip
    assert run_hook(tmp_path).returncode == 0
    (tmp_path / "plans" / "triage.yaml").write_text(BROKEN_PLAN)
    broken = run_hook(tmp_path)
    assert broken.returncode == 1 and "plans/triage.yaml" in broken.stdout and "compose" not in broken.stdout
    assert "pod.yaml" not in broken.stdout, broken.stdout


def test_the_hook_says_so_when_a_project_has_no_plan(tmp_path):
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    (tmp_path / "package.json").write_text("{}")
    done = run_hook(tmp_path)
    assert done.returncode == 0
    assert "no plan among 2 YAML/JSON files: nothing to check" in done.stderr, done.stderr


def test_plans_are_recognised_by_folder_name_modeline_and_shape():
    from dagplan.dsl.recognize import is_plan

    assert is_plan("{}", "a/b/c.plan.json")  # a name that says so
    # a folder where plans live makes the recognizer readier for a broken plan, never takes a manifest for one
    assert not is_plan("anything: at all\n", "plans/x.yaml") and not is_plan(COMPOSE, "examples/compose.yaml")
    assert is_plan("steps:\n  - {id: a, tol: x}\n", "plans/typo.yaml")
    assert not is_plan("steps:\n  - {id: a, tol: x}\n", "ci/typo.yaml")
    assert is_plan("# yaml-language-server: $schema=../schemas/plan.schema.json\nsteps: []\n", "x.yaml")
    assert is_plan(json.dumps([{"_tool": "a", "_outputPath": "$state.x"}]), "calls.json")
    assert is_plan(json.dumps({"steps": [{"id": "E1", "agent": "search", "task": "x"}]}), "x.json")
    assert is_plan("steps:\n  - id: a\n    tool: t\n    args: {x: [unclosed\n", "broken.yaml")  # judged by text
    assert not is_plan(WORKFLOW, ".github/workflows/ci.yml") and not is_plan(COMPOSE, "compose.yaml")
    assert not is_plan(CLOUDBUILD, "cloudbuild.yaml") and not is_plan('{"steps": 3}', "package.json")


def test_graph_labels_a_condition_once_on_its_step_not_on_every_edge():
    out = run_dagplan(ROOT, "graph", "examples/ci_triage.yaml").stdout
    assert out.count("†state.ci.status == #quot;failed#quot; and †input.attempt < 3") == 2  # triage, page_owner
    assert not any("-->|" in line and "when" in line for line in out.splitlines()), out


def test_check_reports_the_errors_of_every_stage_a_file_reaches_in_one_round(tmp_path):
    """A schema error (an unknown key) no longer hides the placeholder, dependency and state errors after it:
    each is reported at its line and column, in one run of check."""
    (tmp_path / "p.yaml").write_text(SIX_MISTAKES)
    done = run_dagplan(tmp_path, "check", "p.yaml")
    assert done.returncode == 1
    for where in ("p.yaml:6:5: error schema: unknown key 'retries'", "p.yaml:9:19: error unknown-step",
                  "p.yaml:10:12: error unknown-step", "p.yaml:14:19: error unwritten-state"):  # fmt: skip
        assert where in done.stdout, done.stdout
    assert "(4 errors, 0 warnings)" in done.stderr
    # a refused key later stages lean on (a misspelt output) holds them back: no errors that are its echoes
    misspelt = SIX_MISTAKES.replace("    output: $state.issue\n", "    ouput: $state.issue\n")
    (tmp_path / "q.yaml").write_text(misspelt.replace("    retries: 3\n", ""))
    held = run_dagplan(tmp_path, "check", "q.yaml")
    assert "unknown key 'ouput'" in held.stdout and "unknown-step" not in held.stdout, held.stdout
