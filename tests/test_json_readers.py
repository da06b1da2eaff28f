"""JSON from outside is read one way (issue 61: depth is limited the same way on every path).

``dagplan.dsl.jsontext.loads`` refuses nesting past one limit as a ``ValueError``; every ``json.loads`` of text
dagplan did not write goes through it, or is one of the readers listed below that hold their own limit at a
position (the plan loader, ReWOO, JSON-RPC frames). The source walk fails a new ``json.loads`` elsewhere; each
reader moved here is then given ``[[[[...`` 100,000 deep and must say so the way it says "not JSON", never with
a ``RecursionError``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import dagplan
from dagplan.dsl import jsontext

ROOT = Path(dagplan.__file__).resolve().parent.parent
PACKAGES = ("dsl", "interpreter", "dagplan")
DEEP = "[" * 100_000 + "]" * 100_000
OPEN = "[" * 100_000  # never closed: json's C scanner recurses before it sees the end

# json.loads on text dagplan wrote itself, or a reader that holds its own limit where it can say the position
OWN = {
    ("dsl/jsontext.py", "loads"): "the one reader",
    ("dsl/jsontext.py", "raw_decode"): "the one reader",
    ("dsl/load.py", "_json_line"): "JSON Lines: RecursionError -> too-deep at its line (Limits.max_depth)",
    ("dsl/load.py", "_parse"): "plans: RecursionError and _Shape -> too-deep with the file's limits",
    ("dsl/load.py", "_inline_json"): "JSON inside a YAML line: RecursionError -> read as YAML, which says where",
    ("dsl/rewoo.py", "_arguments"): "ReWOO JSON arguments: RecursionError -> a diagnostic at the call",
    ("dsl/rewoo.py", "_key_offsets"): "positions of the keys of arguments _arguments has read already",
    ("dsl/rewoo.py", "_literal"): "one ReWOO value: RecursionError -> read as text",
    ("dsl/ir.py", "literal_value"): "a quoted string literal: a JSON string does not nest",
    ("dsl/expr_grammar.py", "quoted_key"): "a quoted key of a reference: a JSON string does not nest",
    ("dsl/schema.py", "_schema"): "our schema file",
    ("interpreter/testing/plantest.py", "test_schema"): "our schema file",
    ("interpreter/engine/inputs.py", "_problems"): "an example our schema code wrote",
    ("interpreter/llm/estimate.py", "cost_map"): "litellm's price table, a file of the installed package",
    ("interpreter/stores/journal.py", "json_copy"): "a copy of a value through our own encoder",
    ("interpreter/stores/wal.py", "decode_line"): "our journal's line, read once its checksum matched",
    ("interpreter/stores/pgstore.py", "*"): "our journal lines, from our database",
    ("interpreter/stores/store.py", "*"): "our artifacts (written by the store)",
    ("dagplan/framing.py", "screen"): "JSON-RPC frames: depth and lone surrogates in one walk, a -32700 answer",
}


def _calls(path: Path) -> list[tuple[str, int, str]]:
    """(function, line, call) of each json.loads / json.load / raw_decode in a module, by the function holding it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                called = ast.unparse(child.func)
                copy = (
                    child.args
                    and isinstance(child.args[0], ast.Call)
                    and ast.unparse(child.args[0].func) == "json.dumps"
                )
                if called in ("json.loads", "json.load") or called.endswith(".raw_decode"):
                    if not copy:  # json.loads(json.dumps(x)): a copy of our own value
                        found.append((function, child.lineno, called))
            visit(child, name)

    visit(tree, "<module>")
    return found


def test_every_json_read_from_outside_goes_through_the_one_reader():
    stray = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for function, line, called in _calls(path):
                if (rel, function) not in OWN and (rel, "*") not in OWN:
                    stray.append(f"{rel}:{line} {function}() calls {called}")
    assert stray == []


def test_the_walk_sees_a_new_read():
    path = ROOT / "build" / "walk-probe.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        "import json\n\ndef f(text):\n    return json.loads(text)\n\ndef g(x):\n    return json.loads(json.dumps(x))\n"
    )
    try:
        assert _calls(path) == [("f", 4, "json.loads")]
    finally:
        path.unlink()


@pytest.mark.parametrize("text", [DEEP, OPEN, '{"a": ' * 70_000 + "1" + "}" * 70_000])
def test_the_one_reader_refuses_deep_text_as_a_value_error(text):
    with pytest.raises(jsontext.TooDeep, match="nests deeper than 64 levels"):
        jsontext.loads(text)


def test_the_limit_is_exact_and_the_walk_counts_levels():
    assert jsontext.loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(ValueError):
        jsontext.loads("[" * 65 + "]" * 65)
    assert [jsontext.depth(v) for v in (1, [], [[1]], {"a": [{}]}, [1, [2, [3]]])] == [0, 1, 2, 3, 3]
    assert jsontext.depth(json.loads("[" * 500 + "]" * 500), limit=10) == 11  # counted up to the limit + 1


def test_a_models_answer_that_nests_without_end_is_no_json_value():
    from dagplan.interpreter.llm.conversation import NOT_JSON, parse_json

    assert parse_json("here: " + OPEN) is NOT_JSON
    assert parse_json("here: " + DEEP) is NOT_JSON
    assert parse_json('prose [1, 2 and then ```json\n{"ok": [1, 2]}\n```') == {"ok": [1, 2]}  # the first value
    assert parse_json('```json\n{"ok": [1, 2]}\n```') == {"ok": [1, 2]}


def test_a_tool_call_whose_arguments_nest_without_end_is_told_to_the_model():
    import asyncio

    from dagplan.interpreter.llm.conversation import _run_tool

    async def echo(**kwargs):
        return kwargs

    said = asyncio.run(_run_tool({"function": {"name": "echo", "arguments": OPEN}}, {"echo": echo}))
    assert said.startswith("error: arguments are not valid JSON") and "nests deeper" in said


def test_a_local_models_choice_that_nests_without_end_is_cut_short_not_a_crash():
    from dagplan.interpreter.llm.local import Truncated, _tool_message

    with pytest.raises(Truncated):
        _tool_message(OPEN, structured=False)


def test_an_answer_file_that_nests_without_end_is_ignored(tmp_path):
    from dagplan.interpreter.ops.asking import _read

    path = tmp_path / "gate.answer.json"
    path.write_text('{"value": ' + OPEN + "}")
    assert _read(path) is None  # not an answer: the person asked at the terminal still answers
    path.write_text('{"value": [1, 2], "channel": "answer", "who": "ann"}')
    assert _read(path).value == [1, 2]


def test_an_mcp_lock_that_nests_without_end_is_a_tools_lock_error(tmp_path):
    from dagplan.dsl.errors import RunError
    from dagplan.interpreter.tools import mcp

    lock = tmp_path / "dagplan.lock"
    lock.write_text(DEEP)
    with pytest.raises(RunError) as caught:
        mcp.read_lock(lock)
    assert caught.value.diagnostics[0].code == "tools-lock"


def test_a_word_value_keeps_its_limit():
    from dagplan.interpreter.core.values import MAX_WORD_DEPTH, word_value

    with pytest.raises(ValueError, match=f"deeper than {MAX_WORD_DEPTH}"):
        word_value(OPEN)
    assert word_value("not json [") == "not json ["
