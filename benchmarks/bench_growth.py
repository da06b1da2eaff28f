"""How each reader's cost grows with its input: time at 8n against n (issue 61).

    python benchmarks/bench_growth.py [--scale 1] [--repeat 3]

Every place that reads text we did not write gets adversarial inputs of size n: a long run of one character
(blanks, ``$``, ``#``, ``\\``, ``[``, ``{``, quotes), many keys, many lines, many placeholders. For each
case it prints the best of ``--repeat`` times at n and at 8n and their ratio: a linear reader stays near 8,
a quadratic one near 64. ``tests/test_growth.py`` runs the same cases and fails a ratio over 24.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Case:
    name: str
    n: int  # the small size (the large one is 8n)
    make: Callable[[int], str]  # the input of size about n
    read: Callable[[str], object]  # the reader, as the CLI calls it
    loops: int = 1  # reads a timing (a reader bounded by a limit reads little: it is read many times)


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
]


def _forget() -> None:
    """Empty the readers' caches of parsed strings (each timed call reads its text anew)."""
    from dagplan.dsl import expr

    for value in vars(expr).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


def best_time(case: Case, size: int, repeat: int) -> float:
    text = case.make(size)
    best = float("inf")
    for _ in range(repeat):
        elapsed = 0.0
        for _ in range(case.loops):
            _forget()
            start = time.perf_counter()
            case.read(text)
            elapsed += time.perf_counter() - start
        best = min(best, elapsed)
    return best


def growth(case: Case, repeat: int = 3, scale: float = 1.0) -> tuple[float, float, float]:
    """(seconds at n, seconds at 8n, their ratio), each the best of ``repeat``."""
    n = max(1, int(case.n * scale))
    best_time(case, n, 1)  # warm: imports, caches
    small, large = best_time(case, n, repeat), best_time(case, 8 * n, repeat)
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
