"""Hostile input ends in a clear LoadError within bounded time and memory, never a traceback."""

from __future__ import annotations

import importlib
import json
import os

import pytest

from dagplan.dsl.errors import Limits, LoadError

load = importlib.import_module("dagplan.dsl.load")

pytestmark = pytest.mark.timeout(60)


def code_of(text, limits=Limits(), name="f") -> str:
    with pytest.raises(LoadError) as info:
        load.load_text(text, name, limits)
    return info.value.code


def test_binary_and_invalid_utf8():
    assert code_of(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR") == "binary"
    assert code_of(b"steps: [\xff\xfe]") == "binary"
    assert code_of("steps: [\x00]") == "binary"


def test_too_large_text_is_refused_before_parsing():
    assert code_of("x" * 101, Limits(max_bytes=100)) == "too-large"


def test_huge_sparse_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as handle:
        handle.seek(500 * 1024 * 1024)  # 500 MB, sparse: nothing is written
        handle.write(b"\n")
    with pytest.raises(LoadError) as info:
        load.load_file(path)
    assert info.value.code == "too-large"
    assert "bytes" in info.value.diagnostics[0].message
    os.unlink(path)


def test_billion_laughs():
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    lines.append("steps: *a9")
    assert code_of("\n".join(lines)) == "too-many-nodes"


@pytest.mark.parametrize(
    "text",
    [
        "[" * 50_000 + "]" * 50_000,
        '{"a":' * 50_000 + "1" + "}" * 50_000,
        "steps: " + "[" * 50_000,
        "".join("  " * i + "- \n" for i in range(2000)),
        "- " * 50_000 + "x",
    ],
    ids=["json-list", "json-object", "yaml-flow-unclosed", "yaml-block", "yaml-inline-dashes"],
)
def test_deep_nesting(text):
    assert code_of(text) == "too-deep"


def test_deep_nesting_inside_prose():
    text = "Here:\n```json\n" + "[" * 50_000 + "]" * 50_000 + "\n```\n"
    assert code_of(text) == "too-deep"


def test_many_brackets_in_prose_are_bounded():
    assert code_of("[" * 200_000) in ("too-deep", "yaml-syntax", "json-syntax", "unknown-dialect")
    assert code_of("text { [ " * 20_000) in ("yaml-syntax", "unknown-dialect")


def test_huge_string():
    text = 'steps: [{id: a, tool: t, args: {x: "' + "y" * 5000 + '"}}]'
    assert code_of(text, Limits(max_string=1000)) == "too-large"
    assert code_of(
        text.replace("steps: [", '{"steps": [').replace("{id: a, tool: t, args: {x:", '{"id": "a", "args": {"x":')
        + "}",
        Limits(max_string=1000),
    ) in ("too-large",)


@pytest.mark.parametrize(
    "filler",
    ['\\"' * 1500, "y" * 1500 + '\\"' * 10, '\\"x' * 1000],  # quotes in it, all escaped: it is one string
)
def test_a_long_string_in_json_longer_than_the_limit_is_found_whatever_it_holds(filler):
    """A JSON text past `max_string` is read with a shortcut (a delimiting quote in every half-limit block
    means no string is too long); a long string of escaped quotes must still be found, as the full walk did."""
    small = [{"id": f"s{i}", "tool": "t", "args": {"x": "short"}} for i in range(200)]  # text well past the limit
    doc = json.dumps({"steps": [*small, {"id": "long", "tool": "t", "args": {"x": "FILL"}}]})
    text = doc.replace("FILL", filler)
    assert len(text) > 4 * 1000
    assert code_of(text, Limits(max_string=1000)) == "too-large"
    load.load_text(doc, "f", Limits(max_string=1000))  # many short strings in a long text pass


def test_unknown_alias():
    assert code_of("steps: *nope") == "yaml-syntax"


def test_complex_key():
    assert code_of("? [a, b]\n: 1\nsteps: []\n") == "yaml-syntax"
