"""The hostile command lines of issue "hostile input", one per numbered case: a diagnostic with its
position and an exit code, never a traceback, never a hang, never a silently changed value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIG = "9" * 5000


def dagplan(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def clean(proc: subprocess.CompletedProcess) -> str:
    """Everything the command said (check prints diagnostics on stdout), which has no traceback."""
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said, said[-3000:]
    return said


def put(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    return path


# 1. a truncated model answer
def test_a_truncated_answer_with_a_duplicate_key_is_a_json_syntax_error(tmp_path):
    put(tmp_path, "a.md", '```json\n{"steps": [{"id": "a", "tool": "t", "tool": "u"}], "summary": "cut off')
    err = clean(proc := dagplan("check", "a.md", cwd=tmp_path))
    assert proc.returncode == 1 and "a.md:2:63: error json-syntax: Unterminated string" in err


# 2. numbers past Python's digit limit
@pytest.mark.parametrize(
    "name, text, where",
    [
        ("n.json", '{"steps": [{"id": "a", "tool": "t", "args": {"x": %s}}]}' % BIG, "n.json:1:51: error too-large"),
        ("n.yaml", "steps:\n  - {id: a, tool: t, args: {x: %s}}\n" % BIG, "n.yaml:2:32: error too-large"),
        ("h.yaml", 'steps:\n  - {id: b, tool: t}\n  - {id: a, tool: t, args: {x: "#b.head=%s"}}\n' % BIG,
         "h.yaml:3:32: error syntax: #b.head= takes a length of at most 9 digits"),
        ("i.yaml", 'steps:\n  - {id: a, tool: t, args: {x: "\u2020state.y[%s]"}}\n' % BIG,
         "i.yaml:2:42: error syntax: invalid expression at"),
    ],
)  # fmt: skip
def test_huge_numbers_are_diagnostics_with_positions(tmp_path, name, text, where):
    put(tmp_path, name, text)
    proc = dagplan("check", name, cwd=tmp_path)
    assert proc.returncode == 1 and where in clean(proc)


# 3. a bad escape in a quoted key
def test_a_bad_escape_in_a_quoted_key_is_a_syntax_error(tmp_path):
    put(tmp_path, "p.yaml", "steps:\n  - {id: a, tool: t, args: {x: '\u2020state[\"\\u\"]'}}\n")
    err = clean(proc := dagplan("check", "p.yaml", cwd=tmp_path))
    assert proc.returncode == 1 and "p.yaml:2:40: error syntax: invalid expression" in err


# 4. a lone surrogate in a sub-plan path
def test_a_lone_surrogate_in_a_sub_plan_path_is_an_io_error(tmp_path):
    put(tmp_path, "p.json", '{"steps": [{"id": "a", "plan": "\\udfff"}]}')
    err = clean(proc := dagplan("check", "p.json", cwd=tmp_path))
    assert proc.returncode == 2 and "error io: cannot read '\\udfff': the path cannot be a file name" in err


# 5. prose with many JSON fragments (the figure is benchmarks/bench_hostile.py's)
def test_prose_with_many_json_fragments_is_answered(tmp_path):
    put(tmp_path, "big.md", 'say {"a": 1} and [1, 2] then ```json\n{ [ ' * 20000)
    err = clean(proc := dagplan("check", "big.md", cwd=tmp_path))
    assert proc.returncode == 1 and "big.md" in err


# 6. a FIFO, as the plan or as a sub-plan
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX thing")
@pytest.mark.parametrize("command", [["check"], ["fmt"], ["preview"]])
def test_a_fifo_is_refused_not_waited_on(tmp_path, command):
    os.mkfifo(tmp_path / "fifo.yaml")
    put(tmp_path, "parent.yaml", "steps:\n  - {id: a, plan: fifo.yaml}\n")
    for target in ("fifo.yaml", "parent.yaml") if command != ["fmt"] else ("fifo.yaml",):  # fmt reads one file
        proc = dagplan(*command, target, cwd=tmp_path, timeout=30)
        assert proc.returncode == 2 and "it is a FIFO, not a regular file" in clean(proc), proc.stderr


# 7. tags on collections
@pytest.mark.parametrize(
    "text, message",
    [
        ("steps: !!int [{id: a, tool: t}]\n", "1:8: error yaml-syntax: unsupported tag !!int on a list"),
        ("steps:\n  - !!python/object/apply:os.system {id: a, tool: t}\n",
         "2:5: error yaml-syntax: unsupported tag !!python/object/apply:os.system on a mapping"),
    ],
)  # fmt: skip
def test_tags_on_collections_are_refused(tmp_path, text, message):
    put(tmp_path, "p.yaml", text)
    for command in ("check", "fmt"):
        proc = dagplan(command, "p.yaml", cwd=tmp_path)
        assert proc.returncode == 1 and message in clean(proc)


# 8. a tools module that exits on import
@pytest.mark.parametrize("command", [["check", "p.yaml"], ["run", "p.yaml", "--ephemeral"]])
def test_a_tools_module_exiting_on_import_is_a_tools_import_error(tmp_path, command):
    put(tmp_path, "tools.py", "import sys\nsys.exit(0)\n")
    put(tmp_path, "p.yaml", "steps:\n  - {id: a, tool: t}\n")
    proc = dagplan(*command, "--tools", "tools.py", cwd=tmp_path)
    assert proc.returncode == 2 and "tools-import" in clean(proc) and "sys.exit(0)" in proc.stderr


# 9. fmt never changes a value
@pytest.mark.parametrize(
    "value",
    ["\u2029first\nsecond", "a\x85b", "a\rb", "c\x1fd", "multi\nline\x85x", "a\u2028b\nc", "\ufeffbom", "  lead\ntwo"],
)
def test_fmt_keeps_every_string_and_is_idempotent(tmp_path, value):
    put(tmp_path, "p.json", json.dumps({"steps": [{"id": "a", "tool": "t", "args": {"x": value}}]}))
    proc = dagplan("fmt", "p.json", cwd=tmp_path)
    assert proc.returncode == 0, clean(proc)
    put(tmp_path, "out.yaml", proc.stdout)
    again = dagplan("fmt", "out.yaml", cwd=tmp_path)
    assert again.stdout == proc.stdout
    from dagplan.dsl.load import load_file

    assert load_file(str(tmp_path / "out.yaml")).data["steps"][0]["args"]["x"] == value


def test_fmt_refuses_what_yaml_cannot_carry(tmp_path):
    put(tmp_path, "p.json", '{"steps": [{"id": "a", "tool": "t", "args": {"x": "lone \\udc80"}}]}')
    err = clean(proc := dagplan("fmt", "p.json", cwd=tmp_path))
    assert proc.returncode == 1 and "error cannot-format: fmt leaves p.json as it is" in err


# 10. input files
@pytest.mark.parametrize(
    "name, content, message",
    [
        ("bad.json", b'{"city": ', "bad.json:1:10: error json-syntax"),
        ("bytes.json", b"\xff\xfe{}", "error binary"),
        ("empty.json", b"", "error empty-data: empty.json is empty"),
        ("huge.json", b'{"city": ' + BIG.encode() + b"}", "huge.json:1:10: error too-large"),
        ("list.yaml", b"- a\n- b\n", "error bad-data: list.yaml holds list"),
    ],
)
def test_bad_input_files_are_input_errors_with_positions(tmp_path, name, content, message):
    put(
        tmp_path,
        "p.yaml",
        "inputs: {city: {type: string}}\nsteps:\n  - {id: a, tool: t, args: {c: \u2020input.city}}\n",
    )
    put(tmp_path, name, content)
    put(tmp_path, "tools.py", "import dagplan\n@dagplan.tool\ndef t(c: str) -> str:\n    return c\n")
    proc = dagplan("run", "p.yaml", "--tools", "tools.py", "--ephemeral", "--input-file", name, cwd=tmp_path)
    assert proc.returncode == 2 and message in clean(proc), proc.stderr


def test_an_input_file_with_a_byte_order_mark_and_yaml_is_read(tmp_path):
    put(tmp_path, "p.yaml", "inputs: {city: {type: string}}\nsteps:\n  - {id: a, tool: t, args: {c: \u2020input.city}, "
        "output: \u2020state.c}\nresult: \u2020state.c\n")  # fmt: skip
    put(tmp_path, "tools.py", "import dagplan\n@dagplan.tool\ndef t(c: str) -> str:\n    return c\n")
    for name, content in (("bom.json", b'\xef\xbb\xbf{"city": "Rome"}'), ("in.yaml", b"city: Oslo\n")):
        put(tmp_path, name, content)
        proc = dagplan("run", "p.yaml", "--tools", "tools.py", "--ephemeral", "--input-file", name, "--format", "json",
                       cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, clean(proc)
        assert json.loads(proc.stdout)["result"] in ("Rome", "Oslo")


def test_an_unknown_input_name_says_did_you_mean(tmp_path):
    put(
        tmp_path,
        "p.yaml",
        "inputs: {city: {type: string}}\nsteps:\n  - {id: a, tool: t, args: {c: \u2020input.city}}\n",
    )
    put(tmp_path, "tools.py", "import dagplan\n@dagplan.tool\ndef t(c: str) -> str:\n    return c\n")
    proc = dagplan("run", "p.yaml", "--tools", "tools.py", "--ephemeral", "--input", "ctiy=Rome", cwd=tmp_path)
    err = clean(proc)
    assert proc.returncode == 2 and "error extra-input: the plan has no input 'ctiy'" in err
    assert "did you mean 'city'?" in err


# 11. an object default
def test_an_object_default_is_given_to_the_run(tmp_path):
    put(tmp_path, "p.yaml", "inputs:\n  opts: {type: object, default: {a: 1}}\nsteps:\n"
        "  - {id: a, tool: t, args: {o: \u2020input.opts}, output: \u2020state.o}\nresult: \u2020state.o\n")  # fmt: skip
    put(tmp_path, "tools.py", "import dagplan\n@dagplan.tool\ndef t(o: dict) -> dict:\n    return o\n")
    proc = dagplan("run", "p.yaml", "--tools", "tools.py", "--ephemeral", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, clean(proc)
    assert json.loads(proc.stdout)["result"] == {"a": 1}


# 12. an invalid JSON Schema in inputs
def test_an_invalid_input_schema_is_a_check_error(tmp_path):
    put(
        tmp_path,
        "p.yaml",
        "inputs:\n  city: {type: banana}\nsteps:\n  - {id: a, tool: t, args: {c: \u2020input.city}}\n",
    )
    err = clean(proc := dagplan("check", "p.yaml", cwd=tmp_path))
    assert proc.returncode == 1
    assert "p.yaml:2:16: error bad-schema: the schema of input 'city' is not valid JSON Schema" in err
