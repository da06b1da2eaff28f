"""Catalogs other people wrote, given to ``--tools`` (interpreter/tools/described.py).

A JSON or YAML file describing tools, in the forms they come in (OpenAI's tools list, a functions list as BFCL
writes it, MCP's tools/list, Anthropic's, dagplan's own mapping), is a catalog: ``check``, ``plan``,
``preview`` and ``dagplan test`` with mocks work on it as on a tools file; a real run calling a described tool
is refused before anything runs. It failed with ``AssertionError:`` and nothing else (stop 71, trying
``dagplan plan TASK --tools catalog.json`` as the issue's measure was described).
"""

from __future__ import annotations

import json

import pytest

from as_user import run_dagplan_s

SEARCH = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
SEND = {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}, "required": ["to"]}

FORMS = {
    "openai-tools.json": [
        {"type": "function", "function": {"name": "search", "description": "Search the web", "parameters": SEARCH}},
        {"type": "function", "function": {"name": "send_email", "description": "Send an email", "parameters": SEND}},
    ],
    "bfcl-functions.json": [  # BFCL writes Python's "dict" for an object
        {"name": "search", "description": "Search the web", "parameters": {**SEARCH, "type": "dict"}},
        {"name": "send_email", "description": "Send an email", "parameters": {**SEND, "type": "dict"}},
    ],
    "mcp-list.json": {
        "tools": [
            {"name": "search", "description": "Search", "inputSchema": SEARCH, "annotations": {"readOnlyHint": True}},
            {"name": "send_email", "description": "Send an email", "inputSchema": SEND},
        ]
    },
    "anthropic.json": [
        {"name": "search", "description": "Search the web", "input_schema": SEARCH},
        {"name": "send_email", "description": "Send an email", "input_schema": SEND},
    ],
    "own.json": {
        "search": {"description": "Search the web", "parameters": SEARCH, "purity": "pure"},
        "send_email": {"description": "Send an email", "parameters": SEND, "purity": "side_effect"},
    },
}

PLAN = """\
steps:
  - id: find
    tool: search
    args: {query: dagplan}
    output: $state.found
  - id: mail
    tool: send_email
    args: {to: a@example.com, body: "#find"}
    output: $state.sent
"""


def _folder(tmp_path, name: str, catalog) -> None:
    text = json.dumps(catalog, indent=2)
    (tmp_path / name).write_text(text)
    (tmp_path / "plan.yaml").write_text(PLAN)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_catalog_in_any_common_form_checks_previews_and_tests_a_plan(tmp_path, name):
    _folder(tmp_path, name, FORMS[name])
    checked = run_dagplan_s(tmp_path, "check", "plan.yaml", "--tools", name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the descriptions are used: an argument the catalog does not list is the usual error, at its position
    (tmp_path / "bad.yaml").write_text(PLAN.replace("{query: dagplan}", "{q: dagplan}"))
    bad = run_dagplan_s(tmp_path, "check", "bad.yaml", "--tools", name)
    assert bad.returncode == 1 and "bad.yaml:4:" in bad.stdout + bad.stderr and "query" in bad.stdout + bad.stderr
    preview = run_dagplan_s(tmp_path, "preview", "plan.yaml", "--tools", name)
    assert preview.returncode == 0 and "tool=send_email (acts on the world)" in preview.stdout
    assert "To run it: dagplan run plan.yaml --tools TOOLS.py" in preview.stdout  # a catalog runs nothing
    pure = "tool=search\n" in preview.stdout
    assert pure == (name in ("mcp-list.json", "own.json")), preview.stdout  # said pure (or read-only), else may act
    (tmp_path / "plan.test.yaml").write_text(
        f"plan: plan.yaml\ntools: [{name}]\ncases:\n  - name: sent\n    mocks:\n      tools:\n"
        "        search: {result: [{title: dagplan}]}\n        send_email: {result: {sent: true}}\n"
        "    expect:\n      result: {sent: true}\n"
    )
    tested = run_dagplan_s(tmp_path, "test", "plan.test.yaml")
    assert tested.returncode == 0 and "1 passed" in tested.stdout, tested.stdout + tested.stderr


def test_a_yaml_catalog_is_read_as_a_json_one(tmp_path):
    (tmp_path / "tools.yaml").write_text(
        "- name: search\n  description: Search the web\n  parameters:\n    type: object\n"
        "    properties: {query: {type: string}}\n- name: send_email\n  parameters: {type: object}\n"
    )
    (tmp_path / "plan.yaml").write_text(PLAN)
    assert run_dagplan_s(tmp_path, "check", "plan.yaml", "--tools", "tools.yaml").returncode == 0


def test_a_real_run_of_described_tools_is_refused_before_anything_runs(tmp_path):
    _folder(tmp_path, "tools.json", FORMS["openai-tools.json"])
    ran = run_dagplan_s(tmp_path, "run", "plan.yaml", "--tools", "tools.json", "--yes")
    said = ran.stdout + ran.stderr
    assert ran.returncode == 2, said  # it cannot start: the README's exit 2
    assert "error tool-not-runnable: tool 'search' is only described (by tools.json)" in said
    assert "error tool-not-runnable: tool 'send_email'" in said and "mock it" in said
    runs = run_dagplan_s(tmp_path, "runs")
    assert "no runs" in runs.stdout + runs.stderr  # refused before the run was made: nothing started


@pytest.mark.parametrize(
    "text, where, words",
    [
        (
            '[\n  {"name": "search",\n   "parameters": {"type": "object"},,\n  }\n]',
            ":3:",
            "error bad-catalog: Expecting property name",
        ),
        ('[\n  {"name": "search"},\n  {"description": "no name"}\n]', ":3:3", "has no name"),
        ('{"tools": [\n  {"name": "search", "purity": "harmless"}\n]}', ":2:", "purity 'harmless' is not one of"),
        ('[\n  {"name": "search", "parameters": "query: str"}\n]', ":2:", "its parameters are a JSON schema"),
        ('[\n  {"name": "search"},\n  {"name": "search"}\n]', ":3:3", "described twice"),
        ("[]", ":1:1", "describes no tool"),
        ('"search"', ":1:1", "not a mapping or list of tools"),
    ],
)
def test_a_bad_catalog_is_an_error_at_its_line_never_a_traceback(tmp_path, text, where, words):
    (tmp_path / "tools.json").write_text(text)
    (tmp_path / "plan.yaml").write_text(PLAN)
    proc = run_dagplan_s(tmp_path, "check", "plan.yaml", "--tools", "tools.json")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "tools.json" + where in said and words in said, said


def test_a_file_that_is_neither_python_nor_a_catalog_is_named_as_such(tmp_path):
    (tmp_path / "tools.txt").write_text("search(query)\n")
    (tmp_path / "plan.yaml").write_text(PLAN)
    proc = run_dagplan_s(tmp_path, "check", "plan.yaml", "--tools", "tools.txt")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "is not a Python file (.py) or a catalog of tools" in said, said
    assert "AssertionError" not in said


def test_python_s_type_names_in_a_catalog_are_json_schema_s_at_every_level(tmp_path):
    """BFCL's functions (and catalogs written from Python) name types as Python does: float, dict, tuple, any.
    Read as written, check would refuse 2.5 for a 'float'; they are JSON Schema's types, nested ones too."""
    from dagplan.interpreter.tools.described import json_schema

    given = {"type": "dict", "properties": {
        "radius": {"type": "float"}, "size": {"type": "tuple", "items": {"type": "int"}},
        "meta": {"type": "dict", "properties": {"tag": {"type": "str"}}}, "anything": {"type": "any"},
        "unit": {"type": "string", "enum": ["float", "dict"]}}}  # fmt: skip
    assert json_schema(given) == {"type": "object", "properties": {
        "radius": {"type": "number"}, "size": {"type": "array", "items": {"type": "integer"}},
        "meta": {"type": "object", "properties": {"tag": {"type": "string"}}}, "anything": {},
        "unit": {"type": "string", "enum": ["float", "dict"]}}}  # fmt: skip
    (tmp_path / "functions.json").write_text(json.dumps([{"name": "circle.area", "description": "Area of a circle",
                                                          "parameters": given}]))  # fmt: skip
    (tmp_path / "plan.yaml").write_text(
        "steps:\n  - id: a\n    tool: circle.area\n    args: {radius: 2.5, size: [1, 2]}\n"
    )
    assert run_dagplan_s(tmp_path, "check", "plan.yaml", "--tools", "functions.json").returncode == 0
    (tmp_path / "bad.yaml").write_text("steps:\n  - id: a\n    tool: circle.area\n    args: {radius: two}\n")
    bad = run_dagplan_s(tmp_path, "check", "bad.yaml", "--tools", "functions.json")
    assert bad.returncode == 1 and "argument 'radius' of tool 'circle.area' must be number, not string" in bad.stdout


def test_what_dagplan_tools_list_writes_reads_back_as_the_same_catalog(tmp_path):
    """``dagplan tools list --format json`` of a project's tools is a catalog: given to ``--tools`` it lists the
    same tools, with the same purity, destructiveness, outcomes and parameters (the examples' 30-odd tools)."""
    import shutil

    from as_user import ROOT

    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "tools.py")
    listed = run_dagplan_s(tmp_path, "tools", "list", "--tools", "tools.py", "--format", "json")
    assert listed.returncode == 0
    (tmp_path / "catalog.json").write_text(listed.stdout)
    again = run_dagplan_s(tmp_path, "tools", "list", "--tools", "catalog.json", "--format", "json")
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(listed.stdout)
    tools = json.loads(again.stdout)
    assert any(t.get("alternatives") for t in tools)


def test_a_catalog_says_which_tools_destroy_as_dagplan_and_mcp_write_it(tmp_path):
    from dagplan.interpreter.tools.described import described_tools

    (tmp_path / "c.json").write_text(json.dumps([
        {"name": "drop", "parameters": SEND, "destructive": True},
        {"name": "wipe", "inputSchema": SEND, "annotations": {"destructiveHint": True}},
        {"name": "peek", "inputSchema": SEND, "annotations": {"destructiveHint": True, "readOnlyHint": True}},
        {"name": "send", "parameters": SEND},
    ]))  # fmt: skip
    found = described_tools(tmp_path / "c.json")
    assert {n: (t.destructive, t.purity) for n, t in found.items()} == {
        "drop": (True, None), "wipe": (True, "side_effect"), "peek": (False, "pure"), "send": (False, None)}  # fmt: skip


def test_a_catalog_named_in_the_configuration_is_the_projects_wherever_one_stands(tmp_path):
    """`tools = ["tools.json"]` is relative to dagplan.toml, as a tools file is (the one rule of a tool source that
    names a file, core/config.names_a_file): checked from a subfolder, and named relative on a test file."""
    _folder(tmp_path, "tools.json", FORMS["openai-tools.json"])
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.json"]\n')
    sub = tmp_path / "plans"
    sub.mkdir()
    (sub / "bad.yaml").write_text(PLAN.replace("{query: dagplan}", "{q: dagplan}"))
    bad = run_dagplan_s(sub, "check", "bad.yaml")
    assert bad.returncode == 1 and "tool 'search' has no argument 'q'" in bad.stdout, bad.stdout + bad.stderr
    (sub / "plan.yaml").write_text(PLAN)
    assert run_dagplan_s(sub, "check", "plan.yaml").returncode == 0
    (tmp_path / "dagplan.toml").unlink()
    (sub / "plan.test.yaml").write_text(
        "plan: plan.yaml\ntools: [../tools.json]\ncases:\n  - name: sent\n    mocks:\n      tools:\n"
        "        search: {result: []}\n        send_email: {result: {sent: true}}\n    expect:\n      result: {sent: true}\n"
    )
    tested = run_dagplan_s(tmp_path, "test", "plans/plan.test.yaml")
    assert tested.returncode == 0 and "1 passed" in tested.stdout, tested.stdout + tested.stderr
