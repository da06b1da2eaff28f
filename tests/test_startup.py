"""Start-up guards: what `dagplan check` imports in a fresh process, so its figure cannot regress
silently (issue 27; the time itself is measured by `python -m benchmarks.report`, never here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagplan.dsl import check
from dagplan.dsl.schema import surely_valid_schema

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# What a check of a plan with plain input schemas may load of ours: the pipeline, the configuration
# reader, the model preflight and the cost estimate (an LLM step), the renderers. Nothing that runs.
MAY_LOAD = {
    "dagplan", "dagplan.api", "dagplan._pipeline", "dagplan._doors", "dagplan.project", "dagplan.cli", "dagplan.cli.checking", "dagplan.cli.common", "dagplan.render",
    "dagplan.dsl", "dagplan.dsl.compose", "dagplan.dsl.condition", "dagplan.dsl.dialects", "dagplan.dsl.errors",
    "dagplan.dsl.expr", "dagplan.dsl.files", "dagplan.dsl.ir", "dagplan.dsl.record", "dagplan.dsl.load", "dagplan.dsl.parse",
    "dagplan.dsl.refschema", "dagplan.dsl.schedule", "dagplan.dsl.schema", "dagplan.dsl.source", "dagplan.dsl.validate",
    "dagplan.dsl.validate_tools", "dagplan.dsl.yaml_reader", "dagplan.schemas",
    "dagplan.interpreter", "dagplan.interpreter.core", "dagplan.interpreter.core.config",
    "dagplan.interpreter.core.patterns",  # one context variable: the project's redact patterns, set by its door
    "dagplan.interpreter.llm", "dagplan.interpreter.llm.estimate", "dagplan.interpreter.llm.local",
    "dagplan.interpreter.llm.preflight",
}  # fmt: skip
# Of what is not the standard library, only the YAML reader: `check` runs before click is imported
# (dagplan/cli/checking.py), and the DSL's classes are records, not dataclasses (dsl/record.py).
THIRD_PARTY = {"yaml"}
NOT_FOR_CHECK = {"click", "dataclasses", "inspect"}  # milliseconds each, and nothing check needs
SITE_HOOKS = {"sitecustomize", "usercustomize", "org", "_distutils_hack"}  # `org`: copy's probe for Jython
# Each of these costs milliseconds to import and none is needed to check a plan.
HEAVY = {
    "asyncio", "jsonschema", "referencing", "lark", "litellm", "starlette", "uvicorn", "psycopg", "ray",
    "opentelemetry", "mcp", "pydantic", "httpx", "anyio", "llama_cpp", "pygls", "tempfile", "subprocess",
    "socket", "ssl", "concurrent", "logging", "zipfile", "importlib.resources", "decimal",
}  # fmt: skip


def _imported(*args: str, cwd: Path = ROOT) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules a fresh `python -m dagplan ARGS` imports, read from `-X importtime`."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "dagplan", *args],
                         capture_output=True, text=True, env=env, cwd=cwd)  # fmt: skip
    names = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return names - {"imported package"}, out


def _heavy(names: set[str]) -> set[str]:
    return {n for n in names if n in HEAVY or n.split(".")[0] in HEAVY}


@pytest.mark.parametrize("plan", ["refund.yaml", "weather.yaml", "pet_hotel.yaml", "profile.json"])
def test_check_of_a_plan_imports_only_what_checking_needs(plan):
    names, out = _imported("check", str(EXAMPLES / plan))
    assert out.returncode == 0, out.stdout + out.stderr
    assert not _heavy(names), sorted(_heavy(names))
    assert not names & NOT_FOR_CHECK, sorted(names & NOT_FOR_CHECK)
    ours = {n for n in names if n.startswith("dagplan")}
    assert ours <= MAY_LOAD, sorted(ours - MAY_LOAD)
    others = {n.split(".")[0] for n in names if not n.startswith("__editable__")}  # an editable install's finder
    others -= set(sys.stdlib_module_names) | SITE_HOOKS
    assert others <= {"dagplan", *THIRD_PARTY}, sorted(others - {"dagplan", *THIRD_PARTY})


def test_the_fixture_would_see_a_heavy_import(tmp_path):
    """The guard can fail: `run` does import the event loop and the engine (its runs kept out of the checkout)."""
    names, out = _imported("run", str(EXAMPLES / "weather.yaml"), "--tools", str(EXAMPLES / "tools.py"),
                           "--input", "city=Paris", "--state", str(tmp_path))  # fmt: skip
    assert "asyncio" in _heavy(names), out.stderr[-2000:]
    assert "dagplan.interpreter.engine.execution" in names


def test_an_input_schema_the_fast_check_doubts_gets_the_meta_schema_s_verdict():
    for schema, ok in [
        ("{type: strin}", False),
        ("{type: string, minLength: -1}", False),
        ("{type: [string, string]}", False),
        ("{type: object, properties: {a: {type: integer}}, patternProperties: {'^x': {type: string}}}", True),
        ("{$ref: '#/$defs/a', $defs: {a: {type: string}}}", True),
        ("{type: array, prefixItems: [{type: string}], contains: {const: 1}}", True),
    ]:
        result = check(text=f"inputs: {{x: {schema}}}\nsteps: [{{id: a, tool: t, args: {{x: †input.x}}}}]")
        bad = [d for d in result.diagnostics if d.code == "bad-schema"]
        assert (not bad) is ok, (schema, [d.message for d in bad])


_PLAIN = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["string", "integer", "number", "object", "array", "boolean", "null", "text"])
            | st.lists(st.sampled_from(["string", "null", "integer"]), max_size=3),
            "minLength": st.integers(-2, 5),
            "maxItems": st.integers(-1, 3) | st.floats(0, 2),
            "multipleOf": st.integers(-1, 3),
            "required": st.lists(st.sampled_from(["a", "b"]), max_size=3),
            "enum": st.lists(st.integers(), max_size=2) | st.just("x"),
            "uniqueItems": st.booleans() | st.just(1),
            "description": st.text(max_size=3) | st.just(3),
            "unknownKeyword": st.just(1),
        },
    ),
    lambda inner: st.fixed_dictionaries(
        {},
        optional={
            "items": inner | st.booleans(),
            "properties": st.dictionaries(st.sampled_from("ab"), inner),
            "anyOf": st.lists(inner, max_size=2),
            "not": inner | st.just(1),
        },
    ),  # fmt: skip
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(_PLAIN)
def test_what_the_fast_check_calls_valid_the_meta_schema_calls_valid(schema):
    """Sound, never a guess: "surely valid" implies valid for jsonschema's Draft 2020-12 meta-schema."""
    from jsonschema import Draft202012Validator

    if surely_valid_schema(schema):
        assert Draft202012Validator(Draft202012Validator.META_SCHEMA).is_valid(schema), schema


def _both_ways(argv: list[str], cwd: Path) -> tuple[tuple, tuple]:
    """``dagplan ARGV`` as users run it (the fast path when it applies) and through click alone."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    fast = subprocess.run([sys.executable, "-m", "dagplan", *argv], capture_output=True, text=True, env=env, cwd=cwd)
    slow = subprocess.run([sys.executable, "-c", "import sys; from dagplan.cli.group import cli; "
                           "cli(sys.argv[1:], prog_name='dagplan')", *argv],
                          capture_output=True, text=True, env=env, cwd=cwd)  # fmt: skip
    return (fast.returncode, fast.stdout, fast.stderr), (slow.returncode, slow.stdout, slow.stderr)


@pytest.mark.parametrize("argv", [
    ["check", "refund.yaml"],
    ["-q", "check", "--strict", "refund.yaml", "weather.yaml"],
    ["-vv", "check", "--format=json", "pet_hotel.yaml"],
    ["check", "--format", "github", "--plans-only", "--", "profile.json", "tools.py"],
    ["check", "--tools", "tools.py", "weather.yaml", "invalid/cycle.yaml"],
    ["check", "--format", "sarif", "no-such-file.yaml"],
    ["check", "--format", "xml", "refund.yaml"],
    ["check", "--strikt", "refund.yaml"],
    ["check"],
    ["--verbose", "check", "-h"],
])  # fmt: skip
def test_check_answers_the_same_before_click_as_through_click(argv):
    """The fast path reads only what click would read the same way; the rest goes to click."""
    fast, slow = _both_ways(argv, EXAMPLES)
    assert fast == slow


def test_the_fast_path_knows_every_option_of_check():
    """check's click options and the fast path's tables are one list: a new option added to one fails here."""
    from dagplan.cli import checking
    from dagplan.cli.check import check as command
    from dagplan.cli.group import cli as group

    declared = {opt for p in command.params if p.param_type_name == "option" for opt in p.opts}
    assert declared == set(checking.FLAGS) | set(checking.VALUED)
    assert {p.name: set(p.opts) for p in group.params if p.name in ("quiet", "verbose")} == {
        "quiet": set(checking.QUIET), "verbose": set(checking.VERBOSE)}  # fmt: skip
    assert set(next(p for p in command.params if p.name == "fmt").type.choices) == set(checking.FORMATS)
