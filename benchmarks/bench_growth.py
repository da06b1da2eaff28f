"""How each reader's cost grows with its input: time at 8n against n (issue 61).

    python benchmarks/bench_growth.py [--scale 1] [--repeat 3]

Every place that reads text we did not write gets adversarial inputs of size n: a long run of one character
(blanks, ``$``, ``#``, ``\\``, ``[``, ``{``, quotes), many keys, many lines, many placeholders. For each
case it prints the best of ``--repeat`` times at n and at 8n and their ratio: a linear reader stays near 8,
a quadratic one near 64. ``tests/test_growth.py`` runs the same cases and fails a ratio over 12.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Case:
    name: str
    n: int  # the small size (the large one is 8n)
    make: Callable[[int], str]  # the input of size about n
    read: Callable[[str], object]  # the reader, as the CLI calls it
    loops: int = 1  # reads a timing (a reader bounded by a limit reads little: it is read many times)
    extra: str | None = None  # the optional dependency its reader needs (the suite's core runs without it)


def _check(name: str) -> Callable[[str], object]:
    def read(text: str) -> object:
        from dagplan.dsl import check

        return check(text=text, name=name)

    return read


def _json_prompt(unit: str) -> Callable[[int], str]:
    return lambda n: json.dumps({"steps": [{"id": "a", "llm": unit * n, "output": "$state.a"}]})


def _yaml_many_keys(n: int) -> str:
    args = "".join(f"      k{i}: v{i}\n" for i in range(n))
    return f"steps:\n  - id: a\n    tool: t\n    args:\n{args}    output: \u2020state.a\n"


def _json_lines(text: str) -> object:
    import tempfile
    from pathlib import Path

    from dagplan.dsl.load import read_json_lines

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "each.jsonl"
        path.write_text(text)
        return list(read_json_lines(path))


def _condition(text: str) -> object:
    from dagplan.dsl.condition import parse_condition
    from dagplan.dsl.errors import Span

    try:
        return parse_condition(text, Span())
    except Exception as exc:  # noqa: BLE001 - a refusal is an answer too; its time is what is measured
        return exc


def _template(text: str) -> object:
    from dagplan.dsl.expr import parse_template

    try:
        return parse_template(text)
    except Exception as exc:  # noqa: BLE001 - as above
        return exc


def _in_file(name: str, read: Callable[[Path], object]) -> Callable[[str], object]:
    """A reader of files: the text written to ``name`` in a fresh folder, then read."""

    def reading(text: str) -> object:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            path.write_text(text)
            try:
                return read(path)
            except Exception as exc:  # noqa: BLE001 - a refusal is an answer too
                return exc

    return reading


def _steps_yaml(n: int) -> str:
    """A chain of n steps, each reading the one before it."""
    lines = ["initial_state: {v0: start}", "steps:"]
    for i in range(1, n + 1):
        lines.append(f"  - {{id: s{i}, tool: t, args: {{x: \u2020state.v{i - 1}}}, output: \u2020state.v{i}}}")
    return "\n".join(lines) + "\n"


def _fmt(text: str) -> object:
    from dagplan.dsl.fmt import format_document
    from dagplan.dsl.load import load_text

    return format_document(load_text(text, "p.yaml"))


def _diff(text: str) -> object:
    import dagplan
    from dagplan.dsl.diff import diff

    before = dagplan.load(text=text, name="a.yaml")
    after = dagplan.load(text=text.replace("tool: t,", "tool: u,", 1), name="b.yaml")
    return diff(before, after)


def _streamed(text: str) -> object:
    from dagplan.dsl.stream import StepStream

    stream, found = StepStream(), 0
    for at in range(0, len(text), 4):  # a model's tokens: a few characters each
        found += len(stream.feed(text[at : at + 4]))
    return found


def _model_answer(text: str) -> object:
    from dagplan.interpreter.llm.conversation import parse_json

    return parse_json(text)


def _answer_file(path: Path) -> object:
    from dagplan.interpreter.ops.asking import _read

    return _read(path)


def _recognized(text: str) -> object:
    from dagplan import _doors

    return _doors.is_ours(text, "compose.yaml")


def _output_path(text: str) -> object:
    from dagplan.dsl.expr import parse_output

    try:
        return parse_output(text)
    except Exception as exc:  # noqa: BLE001 - a refusal is an answer too
        return exc


_EDITOR: dict[str, Any] = {}


def _lsp_edit(text: str) -> object:
    """What the language server does for one keystroke at the far end of a document: the client's change
    applied to its copy (pygls), the steps indexed, the text checked as ``check`` would."""
    import tempfile

    import dagplan
    from dagplan import lsp
    from lsprotocol import types as t
    from pygls.workspace import TextDocument

    if "project" not in _EDITOR:
        _EDITOR["project"] = dagplan.Project(tempfile.mkdtemp(prefix="bench-lsp-"))
    document = TextDocument("file:///plan.yaml", text, version=1)
    last = len(document.lines) - 1
    at = t.Position(line=last, character=len(document.lines[last]))
    document.apply_change(t.TextDocumentContentChangePartial(range=t.Range(start=at, end=at), text="#"))
    lsp.index(document.source)
    return _EDITOR["project"].check_text(document.source, "plan.yaml")


def _compose(n: int) -> str:
    """A compose file of n services (YAML a folder of plans holds beside them; never a plan)."""
    services = "".join(f"  s{i}:\n    image: app:{i}\n    ports: ['{8000 + i}:80']\n" for i in range(n))
    return "version: '3'\nservices:\n" + services


def _argument(text: str) -> object:
    from dagplan.dsl.expr import classify

    try:
        return classify(text)
    except Exception as exc:  # noqa: BLE001 - a refusal is an answer too
        return exc


def _in_plans_folder(text: str) -> object:
    from dagplan import _doors

    return _doors.is_ours(text, "plans/p.yaml")


def _clauses(text: str) -> object:
    from dagplan.interpreter.llm.guide import clauses

    return clauses(text)


def _clauses_with_tools(text: str) -> object:
    """The guide's clauses with a catalog: each "and" and each new sentence asks whether one tool does both."""
    from dagplan.dsl.ir import ToolSpec
    from dagplan.interpreter.llm.guide import clauses

    tools = {name: ToolSpec(name, f"{name} of a thing", {"type": "object", "properties": {"x": {"type": "string"}}})
             for name in ("area", "perimeter", "weather")}  # fmt: skip
    return clauses(text, tools)


def _offered_values(text: str) -> object:
    """What the guide offers a tool's arguments for a request (its values, the arguments it names, "from X to Y",
    its numbers in order, the yes-or-no ones it names): the planner's schema of one position."""
    from dagplan.dsl.ir import ToolSpec
    from dagplan.interpreter.llm.constrained import catalog_schema
    from dagplan.interpreter.llm.guide import request_values

    properties = {"source": {"type": "string"}, "destination": {"type": "string"}, "start_date": {"type": "string"},
                  "number1": {"type": "integer"}, "number2": {"type": "integer"},
                  "direct_flight": {"type": "boolean", "default": False}}  # fmt: skip
    tools = {"book": ToolSpec("book", "book a flight", {"type": "object", "properties": properties})}
    return catalog_schema(tools, state_references=False, guide=[["book"]], values=request_values(text, words=True),
                          flow=True, request=text)  # fmt: skip


def _calls_dialect(n: int) -> str:
    """The calls dialect (seed 004): a list of calls, each reading the one before it."""
    calls = [{"_tool": "t", "x": f"$E{i}" if i else "start", "_outputPath": f"$state.v{i + 1}"} for i in range(n)]
    return json.dumps(calls)


def _steps_dialect(n: int) -> str:
    """The steps dialect (seed 003): agents and tasks with deps, and their parallel groups."""
    steps = [{"id": f"E{i}", "agent": "search", "task": f"look at #E{i - 1}" if i > 1 else "start",
              **({"deps": [f"E{i - 1}"]} if i > 1 else {})} for i in range(1, n + 1)]  # fmt: skip
    return json.dumps({"task_summary": "x", "steps": steps, "parallel_groups": [[s["id"]] for s in steps]})


def _plan_tool_dialect(n: int) -> str:
    """The plan-tool dialect (seed 000): a goal and described steps with depends_on."""
    steps = [{"id": f"s{i}", "description": f"do {i}", "tools": ["t"],
              "depends_on": [f"s{i - 1}"] if i > 1 else []} for i in range(1, n + 1)]  # fmt: skip
    return json.dumps({"goal": "x", "steps": steps})


def _cassette(path: Path) -> object:
    from dagplan.interpreter.testing.cassette import read

    return read(path)


def _cassette_text(n: int) -> str:
    calls = [{"unit": f"s{i}", "kind": "tool", "name": "t", "args": {"x": i}, "output": i} for i in range(n)]
    return json.dumps({"dagplan_cassette": 1, "calls": calls})


def _config(path: Path) -> object:
    from dagplan.interpreter.core.config import load_config

    return load_config(path.parent)


def _catalog(path: Path) -> object:
    from dagplan.interpreter.tools.described import described_tools

    return described_tools(path)


def _catalog_text(n: int, bad: bool = False) -> str:
    """A BFCL-style list of ``n`` functions (Python's type names), each ``bad`` one without a name (every entry
    an error to place at its line)."""
    entry = {"description": "d", "parameters": {"type": "dict", "properties": {"x": {"type": "float"}}}}
    return json.dumps([{**entry, **({} if bad else {"name": f"t{i}"})} for i in range(n)], indent=1)


def _suite(path: Path) -> object:
    from dagplan.interpreter.core.config import load_config
    from dagplan.interpreter.testing.plantest import check_suite

    (path.parent / "p.yaml").write_text("steps:\n  - {id: a, tool: t, output: \u2020state.a}\n")
    return check_suite(path, load_config(path.parent))


CASES = [
    Case("template: a run of $", 20_000, lambda n: "$ " * n, _template),
    Case("template: a run of #", 20_000, lambda n: "# " * n, _template),
    Case("template: escapes", 20_000, lambda n: "\\$\\#" * n, _template),
    Case("template: placeholders", 5_000, lambda n: "see #a.head=3 " * n, _template),
    Case("JSON plan: a prompt of $", 100_000, _json_prompt("$ "), _check("p.json")),
    Case("JSON plan: a prompt of # and \\", 3_000, _json_prompt("#x \\\\ "), _check("p.json")),
    Case("JSON plan: a prompt of [ and {", 200_000, _json_prompt("[{"), _check("p.json")),
    Case("JSON plan: a prompt of quotes", 150_000, _json_prompt("\"'"), _check("p.json")),
    Case(
        "YAML plan: a prompt of blanks",
        400_000,
        lambda n: "steps:\n  - id: a\n    llm: 'x" + " " * n + "y'\n",
        _check("p.yaml"),
    ),  # fmt: skip
    Case("YAML plan: many keys", 2_000, _yaml_many_keys, _check("p.yaml")),
    Case(
        "ReWOO: a Plan: line of blanks",
        200_000,
        lambda n: "Plan: a" + " " * n + "b\n#E1 = Search[x]\n",
        _check("p.txt"),
    ),  # fmt: skip
    Case(
        "ReWOO: a diagnostic after many #words",
        10_000,
        lambda n: "Plan: answer.\n#E1 = LLM[" + "see #a " * n + "and #E9]\n",
        _check("p.txt"),
    ),  # fmt: skip
    Case(
        "ReWOO: JSON arguments, many escaped keys",
        3_000,
        lambda n: "#E1 = Search[{" + ", ".join(f'"\\u006b{i}": 1' for i in range(n)) + "}]\n",
        _check("p.txt"),
    ),  # fmt: skip
    Case(
        "ReWOO: name=value arguments, many pairs",
        3_000,
        lambda n: "#E1 = Search[" + ", ".join(f"k{i}=v" for i in range(n)) + "]\n",
        _check("p.txt"),
    ),  # fmt: skip
    Case(
        "ReWOO: many calls", 500, lambda n: "".join(f"#E{i} = Search[q{i}]\n" for i in range(1, n + 1)), _check("p.txt")
    ),  # fmt: skip
    Case(
        "when: a long condition (2,000 characters at most)",
        10,
        lambda n: " and ".join(f'\u2020state.x{i} == "v"' for i in range(n)),
        _condition,
        loops=50,
    ),  # fmt: skip
    Case("JSON Lines: many lines", 5_000, lambda n: '{"name": "x"}\n' * n, _json_lines),
    Case("YAML plan: many steps", 300, _steps_yaml, _check("p.yaml")),
    Case("calls dialect: many calls", 300, _calls_dialect, _check("p.json")),
    Case("steps dialect: many agents' tasks", 300, _steps_dialect, _check("p.json")),
    Case("plan-tool dialect: many described steps", 300, _plan_tool_dialect, _check("p.json")),
    Case("fmt: many steps", 40, _steps_yaml, _fmt),
    Case("diff: many steps", 200, _steps_yaml, _diff),
    Case(
        "streamed plan: a model's tokens",
        1_000,
        lambda n: json.dumps({"steps": [{"id": f"s{i}", "tool": "t", "args": {"x": i}} for i in range(n)]}),
        _streamed,
    ),
    Case("cassette: many calls", 2_000, _cassette_text, _in_file("c.json", _cassette)),
    Case("model answer: brackets never closed", 20_000, lambda n: "the plan: " + "[1, " * n, _model_answer),
    Case("model answer: prose of [x] then JSON", 20_000, lambda n: "see [x] " * n + '{"a": 1}', _model_answer),
    Case(
        "model answer: a long JSON answer",
        2_000,
        lambda n: "```json\n" + json.dumps({"steps": [{"id": f"s{i}", "tool": "t"} for i in range(n)]}) + "\n```",
        _model_answer,
    ),  # fmt: skip
    Case(
        "answer file: a long value",
        50_000,
        lambda n: json.dumps({"value": "x" * n, "channel": "answer"}),
        _in_file("a.answer.json", _answer_file),
    ),  # fmt: skip
    Case(
        "answer file: brackets never closed",
        50_000,
        lambda n: '{"value": ' + "[" * n,
        _in_file("a.answer.json", _answer_file),
    ),  # fmt: skip
    Case("recognizer: a compose file of many services", 500, _compose, _recognized),
    Case("recognizer: a long run of blanks", 200_000, lambda n: "services:" + " " * n + "\n", _recognized),
    Case(
        "references: an output of many alternatives",
        300,
        lambda n: " || ".join(f"\u2020state.v{i}" for i in range(n)),
        _output_path,
    ),  # fmt: skip
    Case("references: a long path", 16_000, lambda n: "\u2020state.k" + ".k".join(map(str, range(n))), _output_path),
    Case("language server: a keystroke at the far end", 150, _steps_yaml, _lsp_edit, extra="lsp"),
    Case(
        "references: blanks before a || and no default",
        20_000,
        lambda n: "\u2020state.a" + " " * n + "|| \u2020state.b x",
        _argument,
    ),  # fmt: skip
    Case("recognizer: blank lines in a plans folder", 2_000, lambda n: "x: [\n" + "\n" * n + "steps", _in_plans_folder),
    Case("YAML plan: code fences that never close", 2_000, lambda n: "Here:\n" + "```a\n" * n, _check("p.md")),
    Case("planner: a request of blanks", 20_000, lambda n: "find it" + " " * n + "x", _clauses),
    Case(
        "planner: many things joined by and, and sentences",
        100,
        lambda n: "Find the area and perimeter of it. " * n + "Then say it",
        _clauses_with_tools,
        extra="local",  # the guide's retrieval: rank-bm25 (and wordllama), the local extra
    ),  # fmt: skip
    Case(
        "planner: the values a long request gives its tool's arguments",
        200,
        lambda n: "Book a direct flight " + "from Rome to Oslo on May 3, 2026 for 12 and 7, " * n + "please",
        _offered_values,
    ),  # fmt: skip
    Case(
        "YAML plan: deep nesting (refused by the limit)",
        20_000,
        lambda n: "steps:\n  - id: a\n    tool: t\n    args: {x: " + "[" * n + "]" * n + "}\n",
        _check("p.yaml"),
    ),  # fmt: skip
    Case(
        "configuration: many redact patterns",
        2_000,
        lambda n: "redact = [" + ", ".join(f'"acct_{i}[0-9]+"' for i in range(n)) + "]\n",
        _in_file("dagplan.toml", _config),
    ),  # fmt: skip
    Case("tool catalog: many tools", 2_000, _catalog_text, _in_file("c.json", _catalog)),
    Case(
        "tool catalog: many entries, each an error",
        2_000,
        lambda n: _catalog_text(n, True),
        _in_file("c.json", _catalog),
    ),
    Case(
        "tool catalog: a tool of many parameters",
        2_000,
        lambda n: json.dumps(
            [
                {
                    "name": "t",
                    "parameters": {
                        "type": "dict",
                        "properties": {f"p{i}": {"type": "list", "items": {"type": "float"}} for i in range(n)},
                    },
                }
            ]
        ),
        _in_file("c.json", _catalog),
    ),  # fmt: skip
    Case(
        "plan test file: many cases",
        300,
        lambda n: "plan: p.yaml\ncases:\n" + "".join(f"  - name: case {i}\n    mocks: {{t: {i}}}\n" for i in range(n)),
        _in_file("p.test.yaml", _suite),
    ),  # fmt: skip
]

# every reader of text dagplan did not write, by the name its cases start with: a reader added without
# generators here fails tests/test_growth.py
READERS = (
    "template",
    "JSON plan",
    "YAML plan",
    "ReWOO",
    "calls dialect",
    "steps dialect",
    "plan-tool dialect",
    "when",
    "JSON Lines",
    "fmt",
    "diff",
    "streamed plan",
    "cassette",
    "model answer",
    "answer file",
    "recognizer",
    "references",
    "language server",
    "planner",
    "configuration",
    "plan test file",
    "tool catalog",
)


def _forget() -> None:
    """Empty the readers' caches of parsed strings (each timed call reads its text anew)."""
    from dagplan.dsl import expr

    for value in vars(expr).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


def best_time(case: Case, size: int, repeat: int) -> float:
    return _best(case, case.make(size), repeat)


def _best(case: Case, text: Any, repeat: int) -> float:
    """The best of ``repeat`` timings of reading ``text``, with Python's cyclic collector held off while the
    clock runs (as ``timeit`` does): a collection's cost follows the whole heap, not the reader's input."""
    import gc

    best = float("inf")
    for _ in range(repeat):
        elapsed = 0.0
        for _ in range(case.loops):
            _forget()
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter()
                case.read(text)
                elapsed += time.perf_counter() - start
            finally:
                gc.enable()
        best = min(best, elapsed)
    return best


def growth(case: Case, repeat: int = 3, scale: float = 1.0) -> tuple[float, float, float]:
    """(seconds at n, seconds at 8n, their ratio), each the best of ``repeat`` tries; the two sizes take turns
    try by try, so that a busy spell of the machine meets both, not only the one measured then."""
    n = max(1, int(case.n * scale))
    small_text, large_text = case.make(n), case.make(8 * n)
    _best(case, small_text, 1)  # warm: imports, caches
    small = large = float("inf")
    for _ in range(repeat):
        small = min(small, _best(case, small_text, 1))
        large = min(large, _best(case, large_text, 1))
    return small, large, large / max(small, 1e-6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="times each case's n")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'reader':48} {'n':>8} {'t(n)':>9} {'t(8n)':>9} {'ratio':>6}")
    for case in CASES:
        small, large, ratio = growth(case, args.repeat, args.scale)
        size = int(case.n * args.scale)
        print(f"{case.name:48} {size:>8} {small * 1000:>7.1f}ms {large * 1000:>7.1f}ms {ratio:>6.1f}")


if __name__ == "__main__":
    main()
