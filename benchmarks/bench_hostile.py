"""Checking hostile text takes time proportional to its size.

    python benchmarks/bench_hostile.py [--max-mb 16] [--repeat 3]

Texts of 1 KB to 16 MB (the size limit) of adversarial prose: a model's answer holding
thousands of small JSON fragments (each a candidate the loader must consider), unclosed
fences, and braces that open values which never close. For each size it prints the median
time of ``dagplan.check`` and the time per MB; the ratio of the largest per-MB time to the
smallest is the figure to watch (linear work keeps it near 1; the quadratic scanner this
replaced took 3 s for 120 KB and did not finish 16 MB in 300 s).
"""

from __future__ import annotations

import argparse
import statistics
import time

from dagplan.dsl import check

FRAGMENTS = (
    'Then call {"tool": "t", "n": 1} or [1, 2] ',
    '```json\n{"steps": [\n',  # a fence that never closes
    "{ [ { ",  # values that never close
    "some prose about {braces} and [brackets] \n",
)


def hostile(size: int) -> str:
    unit = "".join(FRAGMENTS)
    return (unit * (size // len(unit) + 1))[:size]


def median_time(text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = check(text=text, name="answer.md")
        times.append(time.perf_counter() - start)
        assert not result.ok  # no plan in there, and a diagnostic says so
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-mb", type=float, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [1 << 10, 16 << 10, 128 << 10, 1 << 20, 4 << 20, int(args.max_mb * (1 << 20))]
    sizes = sorted({s for s in sizes if s <= args.max_mb * (1 << 20)})
    per_mb = []
    print(f"{'size':>10} {'median':>10} {'per MB':>10}")
    for size in sizes:
        took = median_time(hostile(size), args.repeat if size < (4 << 20) else 1)
        mb = size / (1 << 20)
        per_mb.append(took / mb)
        print(f"{size:>10,} {took * 1000:>8.1f}ms {took / mb * 1000:>8.1f}ms")
    big = [p for s, p in zip(sizes, per_mb, strict=True) if s >= (1 << 20)]  # below 1 MB fixed costs dominate
    print(f"per-MB time, largest / smallest over 1 .. {sizes[-1] >> 20} MB: {max(big) / min(big):.2f}x")


if __name__ == "__main__":
    main()
