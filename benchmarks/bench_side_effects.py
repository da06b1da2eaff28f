"""The kill harness of side effects at benchmark size: 100 seeds a store (file journal, PostgreSQL, and
PostgreSQL under workers: a ``dagplan worker`` killed, another one finishing the run).

    python benchmarks/bench_side_effects.py [--seeds 100]

Each seed kills ``dagplan run`` with SIGKILL at a seeded point (before the side effect's intent, after the
intent before the call, after the call before its result is journaled, after), then resumes it without a
terminal with a seeded policy (default: nobody decides; ``adopt --output``; ``retry``), and counts the lines
the side effect and the step after it wrote (tests/side_effect_harness.py says what each case must give).
Prints, per store, the count of trials by point and policy, the calls of the side effect, and every
trial that broke the promise (there should be none). Starts a PostgreSQL server of its own.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pg_server import start_postgres  # noqa: E402
from side_effect_harness import seeded, trial, trial_workers  # noqa: E402


def fresh_database(server: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


def run_store(name: str, seeds: int, state_of, run_trial=trial) -> list:
    outcomes, broken, started = [], [], time.perf_counter()
    for seed in range(seeds):
        point, policy = seeded(seed)
        with tempfile.TemporaryDirectory() as tmp:
            outcome = run_trial(Path(tmp) / "w", state_of(seed, Path(tmp)), point, policy)
        outcomes.append(outcome)
        if outcome.problems():
            broken.append((seed, outcome, outcome.problems()))
    elapsed = time.perf_counter() - started
    by_case = Counter((o.point, o.policy) for o in outcomes)
    calls = Counter(len(o.posted) for o in outcomes)
    decided = sum(1 for o in outcomes if o.status == "needs_decision")
    print(f"{name}: {seeds} seeds in {elapsed:.0f} s; broken: {len(broken)}")
    print(f"  side-effect calls per trial: {dict(sorted(calls.items()))}; stopped in needs_decision: {decided}")
    for (point, policy), count in sorted(by_case.items()):
        calls_here = Counter(len(o.posted) for o in outcomes if (o.point, o.policy) == (point, policy))
        print(f"  {point:14} {policy:8} x{count:3}  calls {dict(sorted(calls_here.items()))}")
    for seed, outcome, problems in broken:
        print(f"  BROKEN seed {seed}: {outcome.point} {outcome.policy}: {problems}")
    return broken


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    broken = run_store("file journal", args.seeds, lambda seed, tmp: str(tmp / "state"))
    server, stop, _ = start_postgres()
    try:
        broken += run_store("PostgreSQL", args.seeds, lambda seed, tmp: fresh_database(server, f"se_{seed}"))
        broken += run_store("PostgreSQL, workers", args.seeds, lambda seed, tmp: fresh_database(server, f"sw_{seed}"),
                            trial_workers)  # fmt: skip
    finally:
        stop()
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
