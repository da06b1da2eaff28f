"""One canonical JSON digest (issue 62): approvals, MCP locks, step fingerprints and memo keys hash with
``interpreter/core/digest.py``; no other module hashes a ``json.dumps`` of its own."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import dagplan
from dagplan.interpreter.core.digest import canonical, digest
from dagplan.interpreter.llm.conversation import MemoryMemo, memo_key, recall

ROOT = Path(dagplan.__file__).resolve().parent.parent


def test_a_lone_surrogate_and_a_set_are_hashed_the_same_way_every_time():
    value = {"b": {"z", "y", "x"}, "a": "broken \udc80 text", "c": (1, 2)}
    assert canonical(value) == '{"a":"broken \udc80 text","b":["x","y","z"],"c":[1,2]}'
    assert digest(value) == digest({"c": [1, 2], "b": ["x", "y", "z"], "a": "broken \udc80 text"})
    assert memo_key("tool", "s", "m", {"text": "\udc80"}).startswith("llm:")  # raised UnicodeEncodeError before


def test_a_memo_written_under_the_old_key_is_still_found():
    """A run interrupted under the spaced-JSON key resumes without calling (or acting) again."""
    memo = MemoryMemo()
    key = memo_key("tool", "pay", "m", {"call": {"id": 1}})
    memo.memo_put(key.legacy, "paid once")
    assert key != key.legacy and recall(memo, key) == (True, "paid once")
    memo.memo_put(key, "new")
    assert recall(memo, key) == (True, "new") and recall(None, key) == (False, None)


def test_no_module_hashes_json_of_its_own():
    found = []
    for path in [
        *(ROOT / "interpreter").rglob("*.py"),
        *(ROOT / "dagplan").rglob("*.py"),
        *(ROOT / "dsl").rglob("*.py"),
    ]:
        if path.name == "digest.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "memo_key":
                calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
                names = {(getattr(c.func.value, "id", None), c.func.attr) for c in calls}
                if ("hashlib", "sha256") in names and ("json", "dumps") in names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not found, found


def test_an_approval_hash_is_the_one_digest():
    from dagplan.interpreter.ops.approval import _hash

    assert _hash({"b": 1, "a": [1]}) == "sha256:" + digest(json.loads('{"a": [1], "b": 1}'))
