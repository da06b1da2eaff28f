"""Loading: JSON/YAML, documents inside prose, syntax errors, duplicate keys, positions."""

from __future__ import annotations

import importlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagplan.dsl.errors import Limits, LoadError, Span
from dagplan.dsl.yaml_reader import Index
from as_user import run_dagplan_s

load = importlib.import_module("dagplan.dsl.load")

PLAN_YAML = """\
summary: x
steps:
  - id: a
    tool: t
    args: {x: "$state.q", y: 'it''s $state.z'}
    output: †state.b
  - id: b
    llm: |
      hello
      world #a
"""


def locate(doc, *path, offset=0):
    span = doc.source_map.locate(Span(path=tuple(path), offset=offset))
    return span.line, span.col


def load_error(text) -> LoadError:
    with pytest.raises(LoadError) as info:
        load.load_text(text, "f")
    return info.value


def test_yaml_loads_as_plain_data_with_core_schema_scalars():
    doc = load.load_text("steps: []\nflag: yes\nn: 3\nf: 1.5\nz: ~\nt: true\nd: 2024-01-01\n")
    assert doc.data == {"steps": [], "flag": "yes", "n": 3, "f": 1.5, "z": None, "t": True, "d": "2024-01-01"}
    assert doc.dialect == "canonical"


def test_json_loads_with_stdlib():
    doc = load.load_text('{"steps": [{"id": "a", "tool": "t"}]}', "p.json")
    assert doc.source_map.syntax == "json"
    assert doc.data["steps"][0]["id"] == "a"
    assert doc.name == "p.json"


@pytest.mark.parametrize(
    "path, offset, where",
    [
        (("steps", 0, "args", "x"), 0, (5, 15)),  # the node: its opening quote
        (("steps", 0, "args", "x"), 1, (5, 17)),  # inside a double-quoted string
        (("steps", 0, "args", "y"), 5, (5, 37)),  # after a '' escape in a single-quoted one
        (("steps", 0, "output"), 0, (6, 13)),
        (("steps", 1, "llm"), 7, (10, 8)),  # second line of a | block
        (("steps", 1, "nope"), 0, (7, 5)),  # a missing key: the mapping that lacks it
        (("steps", 1), 0, (7, 5)),
    ],
)
def test_yaml_positions(path, offset, where):
    assert locate(load.load_text(PLAN_YAML), *path, offset=offset) == where


def test_json_positions_and_offsets():
    text = '{\n  "steps": [\n    {"id": "a", "tool": "t", "args": {"x": "ab\\"c $state.q"}}\n  ]\n}'
    doc = load.load_text(text)
    assert locate(doc, "steps", 0, "tool") == (3, 25)
    assert locate(doc, "steps", 0, "args", "x") == (3, 44)
    assert locate(doc, "steps", 0, "args", "x", offset=5) == (3, 51)  # \" counts once


def test_fenced_document_in_prose_keeps_original_positions():
    text = (
        "Here is the plan:\n```json\n"
        '[{"_tool": "a", "x": 1, "_outputPath": "†state.a"},\n {"_tool": "b", "y": "†state.a"}]\n'
        '```\nThanks! {not json} and {"a": 1}\n'
    )
    doc = load.load_text(text)
    assert doc.dialect == "calls"
    assert locate(doc, "steps", 1, "args", "y") == (4, 22)
    assert locate(doc, "steps", 0, "output") == (3, 40)


def test_yaml_fence_in_prose():
    text = "Sure.\n\n```yaml\nsteps:\n  - id: a\n    tool: t\n```\nHope {this} helps"
    doc = load.load_text(text)
    assert doc.data == {"steps": [{"id": "a", "tool": "t"}]}
    assert locate(doc, "steps", 0, "tool") == (6, 11)


def test_inline_json_in_prose_with_braces_after():
    text = 'The plan is {"steps": [{"id": "a", "llm": "hi"}]} -- note {braces} and [brackets] after.'
    doc = load.load_text(text)
    assert doc.data["steps"][0]["llm"] == "hi"
    assert locate(doc, "steps", 0, "llm") == (1, 43)


def test_two_plausible_documents_are_ambiguous():
    text = '```json\n{"steps": []}\n```\nor\n```json\n{"steps": [1]}\n```\n'
    err = load_error(text)
    assert err.code == "ambiguous-document"
    assert "line 2 col 1" in err.diagnostics[0].message and "line 6 col 1" in err.diagnostics[0].message


def test_plan_with_a_fence_inside_a_block_scalar_is_the_whole_text():
    text = 'steps:\n  - id: a\n    llm: |\n      ```json\n      {"steps": []}\n      ```\n'
    assert load.load_text(text).data["steps"][0]["id"] == "a"


@pytest.mark.parametrize(
    "text, code, line, col",
    [
        ('{"steps": [1,}', "json-syntax", 1, 14),
        ("steps:\n  - id: a\n   tool: b\n", "yaml-syntax", 3, 4),
        ("steps: [\n  - a", "yaml-syntax", 2, 3),
        ("a: 1\nsteps: []\na: 2\n", "duplicate-key", 3, 1),
        ('{"a": 1, "steps": [], "a": 2}', "duplicate-key", 1, 23),
        ("steps: []\n---\nsteps: []\n", "yaml-syntax", 2, 1),
        ("steps: !!python/object:os.system x\n", "yaml-syntax", 1, 8),
        ("hello world", "unknown-dialect", 1, 1),
        ('{"a": 1}', "unknown-dialect", 0, 0),
    ],
)
def test_errors_have_codes_and_positions(text, code, line, col):
    err = load_error(text)
    assert err.code == code
    assert (err.span.line, err.span.col) == (line, col)
    assert err.hint


@pytest.mark.parametrize(
    "text",
    [
        '{"steps": [{"id": "a", "args": {"x": 1, "x": 2}}]}',  # nested
        '{"steps": [], "a" : 1, "a": 2}',  # a blank before the colon
        '{"steps": ["a\\":"], "a": 1, "a": 2}',  # `":` inside a string
        '{"steps": [], "a": {"b": 1}, "a": {"b": 1}}',
    ],
)
def test_json_duplicate_keys_found_whatever_the_spelling(text):
    assert load_error(text).code == "duplicate-key"


@pytest.mark.parametrize("text", ['{"steps": [{"id": "a:\\": 1"}], "b" : {"c": "d"}}', '{"steps": [], "x": "\\":"}'])
def test_json_without_duplicates_loads_whatever_the_spelling(text):
    assert load.load_text(text).data == json.loads(text)


def test_broken_fence_reports_its_own_error_at_original_line():
    err = load_error('Plan:\n```json\n{"steps": [\n  {"id": "a" "tool": 1}\n]}\n```\n')
    assert err.code in ("json-syntax", "yaml-syntax")
    assert err.span.line == 4


def test_load_file_and_io_error(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("steps:\n  - id: a\n    tool: t\n", encoding="utf-8")
    doc = load.load_file(path)
    assert doc.name == str(path)
    assert locate(doc, "steps", 0, "tool")[0] == 3
    with pytest.raises(LoadError) as info:
        load.load_file(tmp_path / "missing.yaml")
    assert info.value.code == "io"


def test_bom_and_crlf():
    doc = load.load_text(b"\xef\xbb\xbfsteps:\r\n  - id: a\r\n    tool: t\r\n")
    assert doc.data["steps"][0]["tool"] == "t"
    assert locate(doc, "steps", 0, "tool") == (3, 11)


def test_aliases_share_values():
    doc = load.load_text("x-args: &a {k: 1}\nsteps:\n  - id: s\n    tool: t\n    args: *a\n")
    assert doc.data["steps"][0]["args"] == {"k": 1}


def test_errors_pickle():
    import pickle

    err = load_error('{"steps": [1,}')
    again = pickle.loads(pickle.dumps(err))
    assert again.diagnostics == err.diagnostics


YAML_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "yes", "1.5", "~", "x: y", "", "-"])
)
YAML_DATA = st.recursive(
    YAML_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["k", "l", "m"]), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(YAML_DATA, st.sampled_from([False, True, None]))
def test_yaml_builder_fast_path_agrees_with_the_indexed_one_and_pyyaml(data, flow):
    import yaml

    # The same object twice: PyYAML writes an anchor and aliases (when it is a collection).
    text = yaml.safe_dump({"steps": [data, [data]], "again": data}, default_flow_style=flow, sort_keys=False)
    fast = load._read_yaml(text, "t", Limits())
    indexed = load._read_yaml(text, "t", Limits(), Index())
    assert fast == indexed == yaml.safe_load(text)


def test_alias_sizes_count_inside_nested_collections():
    text = "a: &a [1, 2, 3]\nb: &b {x: [*a, *a], y: *a}\nc: [*b, *b]\nsteps: []\n"
    assert load.load_text(text).data["c"][1]["x"][0] == [1, 2, 3]
    with pytest.raises(LoadError) as info:
        load.load_text(text, "f", Limits(max_nodes=58))
    assert info.value.code == "too-many-nodes"
    load.load_text(text, "f", Limits(max_nodes=59))  # keys count too; an alias counts its whole value


def test_reading_a_small_plan_allocates_about_its_size_not_the_limit(tmp_path):
    """read(n) allocates n bytes first: asking for the 16 MB limit cost 16 MB for a 100-byte plan."""
    import tracemalloc

    from dagplan.dsl.load import read_file

    path = tmp_path / "p.yaml"
    path.write_text("steps: [{id: a, tool: t}]\n")
    tracemalloc.start()
    try:
        assert read_file(path) == path.read_bytes()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_in_json_test_files_and_plans_is_a_diagnostic_at_its_place(weather_project, constant):
    text = '{"plan": "weather.yaml", "cases": [{"name": "x", "inputs": {"city": %s}}]}' % constant
    (weather_project / "a.test.json").write_text(text)
    proc = run_dagplan_s(weather_project, "test", "a.test.json")
    assert proc.returncode == 1 and f"a.test.json:1:{text.index(constant) + 1}: error json-syntax" in proc.stdout
    (weather_project / "p.json").write_text('{"steps": [{"id": "a", "tool": "t", "args": {"x": %s}}]}' % constant)
    assert "error json-syntax" in run_dagplan_s(weather_project, "check", "p.json").stdout
