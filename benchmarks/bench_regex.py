"""Every regular expression of ours, against runs of the characters it names: time at 8n against n (issue 61).

    python benchmarks/bench_regex.py

dagplan's own patterns run on Python's backtracking ``re`` and see text from outside (plans, model answers,
ReWOO lines, answer files); patterns a user writes (a plan test's ``matches:``) run on google-re2, which is
linear by construction (``interpreter/testing/expect.py``). That is the one choice, and this is what holds the
first half of it: each pattern is found where it is written (a module's compiled pattern, or a literal given
to ``re.match``/``re.search``/...), used the way the code uses it (``match``, ``search``, ``finditer``...),
and given a run of each character it names (and blanks, letters, digits, line breaks), then a character that
makes it fail: the classic shapes of catastrophic backtracking. A linear pattern takes about 8x the time at
8n; one that is quadratic in such a run takes about 64x. ``tests/test_regex_growth.py`` fails any over 12.

Two it found: ``dsl/expr._DEFAULT`` searched for ``|| literal`` from every blank (an argument of 40,000
blanks before ``||``: 4.4 s), and ``dsl/load._FENCE`` looked for a closing fence from each opening one
(4,000 lines of ```` ```a ````: 1.7 s; 32,000: about 110 s); both now read in one pass.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dsl", "interpreter", "dagplan")
METHODS = ("match", "fullmatch", "search", "finditer", "findall", "split", "sub", "subn")
SUFFIXES = ("", "\x00", "\n\x00")  # nothing, then a character no pattern wants, then one after a line break
GENERIC = " \t\na0"  # runs every pattern gets besides the characters it names
SIZES = (800, 6_400, 20_000)  # the lengths a run is tried at, each only while the one before was fast
SUSPECT = 0.05  # seconds on a run past which a pattern's growth is measured


@dataclass(frozen=True)
class Found:
    where: str  # module and name (or line) of the pattern
    pattern: re.Pattern
    method: str

    @property
    def name(self) -> str:
        return f"{self.where} ({self.method})"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts if parts[0] == "dagplan" else ["dagplan", *parts])


def _literal_calls(tree: ast.AST) -> list[tuple[int, str, str, int]]:
    """``re.<method>("literal", ..., flags)`` and ``re.compile("literal")`` written inside functions."""
    found = []
    inside = [n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)]
    for node in dict.fromkeys(inside):  # a module's own compiled patterns are read as objects (and their methods)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if ast.unparse(node.func.value) != "re" or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        if not isinstance(node.args[0].value, str) or node.func.attr not in (*METHODS, "compile"):
            continue
        flags = 0
        for arg in [*node.args[2:], *(k.value for k in node.keywords if k.arg == "flags")]:
            try:
                flags |= eval(compile(ast.Expression(arg), "<flags>", "eval"), {"re": re})  # re.M | re.S
            except Exception:  # noqa: BLE001 - not a flag (a count, a string)
                continue
        method = "search" if node.func.attr == "compile" else node.func.attr
        found.append((node.lineno, node.args[0].value, method, flags))
    return found


def _methods_used(tree: ast.AST, names: set[str]) -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            if node.attr in METHODS:
                used.setdefault(node.value.id, set()).add(node.attr)
    return used


def patterns() -> tuple[list[Found], list[str]]:
    """Every pattern of the packages, with each method the code calls on it (``search`` where the pattern is
    handed elsewhere); and the modules that could not be imported (the test says which)."""
    found: list[Found] = []
    unread: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = _module_name(path)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for line, text, method, flags in _literal_calls(tree):
                found.append(Found(f"{name}:{line}", re.compile(text, flags), method))
            try:
                module = importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - said by the test
                unread.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            compiled = {k: v for k, v in vars(module).items() if isinstance(v, re.Pattern)}
            compiled = {k: v for k, v in compiled.items() if getattr(module, "__name__", "") == name}
            used = _methods_used(tree, set(compiled))
            for attr, pattern in sorted(compiled.items()):
                if attr not in ast.unparse(tree):  # imported from elsewhere: counted where it is written
                    continue
                for method in sorted(used.get(attr) or {"search"}):
                    found.append(Found(f"{name}.{attr}", pattern, method))
    unique = {(f.pattern.pattern, f.pattern.flags, f.method): f for f in found}  # one pattern written twice
    return list(unique.values()), unread


def _caller(found: Found) -> Callable[[str], Any]:
    pattern, method = found.pattern, found.method
    if method == "finditer":
        return lambda text: list(pattern.finditer(text))
    if method in ("sub", "subn"):
        return lambda text: pattern.sub("", text)
    return getattr(pattern, method)


def _runs(found: Found) -> list[Any]:
    """The runs' characters: those the pattern names (as written), and the generic ones (bytes for a pattern of
    bytes)."""
    written = found.pattern.pattern
    text = written.decode("latin-1") if isinstance(written, bytes) else written
    chars = sorted({c for c in text if c.isprintable() and not c.isalnum()} | set(GENERIC))
    return [c.encode("latin-1") for c in chars if ord(c) < 256] if isinstance(written, bytes) else chars


def _timed(call: Callable[[Any], Any], text: Any, loops: int = 1) -> float:
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(loops):
            call(text)
        return time.perf_counter() - start
    finally:
        gc.enable()


def suspects(found: Found, sizes: tuple[int, ...] = SIZES, limit: float = SUSPECT) -> list[tuple[Any, Any, int]]:
    """The runs (character, suffix, size) the pattern takes longer than ``limit`` seconds on: each run is tried
    at growing sizes, up to 20,000 characters (a linear pattern reads those in well under a millisecond; a
    quadratic one takes seconds, a cubic one hours: the first size past the limit is kept, the rest not tried).
    Only a screen: each suspect's growth is then measured (:func:`growth`), so a slow machine measures more,
    never fails more."""
    call = _caller(found)
    found_runs = []
    for char in _runs(found):
        for suffix in SUFFIXES:
            end = suffix.encode() if isinstance(char, bytes) else suffix
            for size in sizes:
                if _timed(call, char * size + end) > limit:
                    found_runs.append((char, end, size))
                    break
    return found_runs


def growth(found: Found, run: tuple[Any, Any, int], repeat: int = 3) -> float:
    """Time at the run's size against time at an eighth of it, on a run of one character then a suffix, the
    best of ``repeat`` tries each, the two sizes taking turns."""
    call, (char, suffix, size) = _caller(found), run
    small, large = char * (size // 8) + suffix, char * size + suffix
    best_small = best_large = float("inf")
    for _ in range(repeat):
        best_small = min(best_small, _timed(call, small))
        best_large = min(best_large, _timed(call, large))
    return best_large / max(best_small, 1e-9)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    found, unread = patterns()
    started = time.perf_counter()
    rows = [(f, run, growth(f, run)) for f in found for run in suspects(f)]
    print(
        f"{len(found)} patterns x methods, {len(unread)} modules not importable here; screened and measured in "
        f"{time.perf_counter() - started:.1f} s; {len(rows)} runs took over {SUSPECT * 1000:.0f} ms"
    )
    print(f"{'pattern':64} {'8n/n':>6}  run")
    for f, (char, suffix, size), ratio in sorted(rows, key=lambda r: -r[2]):
        print(f"{f.name[:64]:64} {ratio:>6.1f}  {char!r} * {size} + {suffix!r}")


if __name__ == "__main__":
    main()
