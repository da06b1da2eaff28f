"""Every reader's cost grows linearly with its input (issue 61): each case of benchmarks/bench_growth.py is read
at n and at 8n, and the ratio of the best times must stay far below the 64 a quadratic reader takes.

A ratio, not a time: the machine's speed cancels out. A loaded machine can still slow one side, so a ratio
over the bound is measured again (best of more tries) before it fails; a quadratic reader fails every time.
Two readers this found, which the round-five reproducers had not: a string's diagnostics placed from its start
one by one (a JSON prompt of 3,000 unknown placeholders took 1.8 s, 24,000 took 111 s), and the reference
spelling of a document read again for each diagnostic (4,000 ReWOO calls: 0.7 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_growth  # noqa: E402

BOUND = 24.0  # linear: about 8; quadratic: about 64


@pytest.mark.parametrize("case", bench_growth.CASES, ids=lambda c: c.name)
def test_the_reader_is_linear_in_its_input(case):
    _, _, ratio = bench_growth.growth(case, repeat=2)
    if ratio > BOUND:  # a busy machine: look again, more carefully, before saying it grows faster
        _, _, ratio = bench_growth.growth(case, repeat=5)
    assert ratio <= BOUND, f"{case.name}: 8x the input took {ratio:.1f}x the time"


def test_the_growth_bench_names_what_it_reads():
    names = [case.name.split(":")[0] for case in bench_growth.CASES]
    for reader in ("template", "JSON plan", "YAML plan", "ReWOO", "when", "JSON Lines"):
        assert reader in names, reader
