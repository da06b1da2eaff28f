"""Every regular expression of ours is linear in runs of the characters it names (issue 61).

Our patterns run on Python's backtracking ``re`` and read text from outside; a user's patterns run on
google-re2 (``interpreter/testing/expect.py``). This holds the first half of that choice for every pattern, found
where it is written (benchmarks/bench_regex.py says how): runs of each character the pattern names, then a
character that makes it fail, are timed at growing sizes; a run that takes over 50 ms is measured at 8n against
n, and a ratio over 12 fails (linear: about 8; quadratic: 64; the round's worst, a file of blank lines read by
the recognizer, was cubic: 5,000 lines took 72 s). A new pattern is covered without being listed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_regex  # noqa: E402

FOUND, UNREAD = bench_regex.patterns()
BOUND = 12.0
TRIES = 3


def test_every_module_is_read_and_the_patterns_are_found():
    assert UNREAD == []
    names = {f.where for f in FOUND}
    assert len(FOUND) >= 100
    for fixed in ("dagplan.dsl.expr._DEFAULT", "dagplan.dsl.load._FENCE", "dagplan.dsl.recognize._TOP_STEPS",
                  "dagplan.interpreter.llm.guide.CLAUSES", "dagplan.interpreter.llm.score._FILE"):  # fmt: skip
        assert fixed in names, fixed


def test_the_screen_sees_a_quadratic_pattern():
    """The check can fail: the pattern `_DEFAULT` was (a search from every blank of a run) is flagged."""
    import re

    old = bench_regex.Found("old _DEFAULT", re.compile(r"\s*\|\|\s*(true|false|null)\s*\Z"), "search")
    runs = bench_regex.suspects(old)
    assert runs and max(bench_regex.growth(old, run) for run in runs) > BOUND


@pytest.mark.parametrize("found", FOUND, ids=lambda f: f.name)
def test_the_pattern_is_linear_in_runs_of_its_characters(found):
    for run in bench_regex.suspects(found):
        ratios = [bench_regex.growth(found, run)]
        while ratios[-1] > BOUND and len(ratios) < TRIES:  # a busy machine slows one side: look again
            ratios.append(bench_regex.growth(found, run, repeat=5))
        char, suffix, size = run
        assert min(ratios) <= BOUND, f"{char!r} * {size} + {suffix!r}: 8x the run took {ratios}x the time"
