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
        " 'dagplan.interpreter.core.configured')))\n"  # room packages are docstrings; configured: one tuple
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
