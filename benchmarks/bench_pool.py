"""The pool's database work against its history: what a claim costs as finished runs pile up (issue 64).

    python benchmarks/bench_pool.py [--history 0,10000,100000,400000] [--repeat 7] [--idle-workers 16]

Starts a PostgreSQL server of its own (Debian's binaries, as tests/pg_server.py does; fsync on) and talks to it
over its Unix socket, as a worker beside its database would. For each history size the run table is filled with
that many finished pooled runs (one INSERT ... SELECT, then ANALYZE), and it measures, medians of ``--repeat``:

- **idle claim**: ``PgRegistry.claim()`` with nothing queued (what every idle worker did every 0.2 s);
- **claimable()**: the count ``worker --drain`` asks;
- **claim of one queued run**: one run submitted, claimed, handed back;

then, with the history at its largest, **idle workers**: ``--idle-workers`` ``dagplan worker`` processes left
idle for ``--idle-seconds``, and the database server's CPU time over that while (from /proc: its processes'
utime + stime), as a share of one core.

The table prints each latency and its ratio to the empty table's (goal: within 1.2x at 400,000 finished runs;
the idle load under 1% of one core).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pg_server import start_postgres  # noqa: E402

PLAN = {"steps": [{"id": "s0", "tool": "noop", "output": "†state.v"}]}
TOOLS = "import dagplan\n\n@dagplan.tool\nasync def noop(x: int = 0) -> int:\n    return x + 1\n"


def fill(url: str, upto: int, have: int) -> None:
    """Finished pooled runs ``have`` .. ``upto`` - 1 in the run table (completed, failed, cancelled)."""
    import psycopg

    if upto <= have:
        return
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO dagplan_runs (id, plan_name, created, artifact, pooled, queue) SELECT "
            "'hist-' || g, 'p' || (g %% 7), g, '{}'::jsonb, true, "
            "(ARRAY['completed','failed','cancelled'])[1 + g %% 3] "
            "FROM generate_series(%s::bigint, %s::bigint) g",
            (have, upto - 1),
        )
        conn.execute("ANALYZE dagplan_runs")


def timed(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(registry, repeat: int) -> dict[str, float]:
    idle = timed(lambda: registry.claim(), repeat)
    count = timed(lambda: registry.claimable(), repeat)

    def one() -> None:
        registry.submit(plan_doc=PLAN, plan_name="bench", inputs={}, meta={})
        run = registry.claim()
        assert run is not None
        run.release()
        registry.connection().execute("UPDATE dagplan_runs SET queue = 'completed' WHERE id = %s", (run.id,))

    queued = timed(one, repeat)
    return {"idle claim": idle, "claimable()": count, "claim of one queued run": queued}


def server_cpu(folder: str) -> float:
    """CPU seconds (user + system) of every process of the server whose data folder is ``folder``."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"postgres" not in cmdline:
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            continue
    return total


def idle_load(url: str, workers: int, seconds: float) -> float:
    """The database server's CPU share of one core while ``workers`` idle workers wait for work (``workers`` 0:
    the server alone, its own background work: checkpointer, autovacuum, statistics)."""
    folder = Path(tempfile.mkdtemp(prefix="dagplan-pool-"))
    (folder / "tools.py").write_text(TOOLS)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DAGPLAN_STATE": url}
    procs = [subprocess.Popen([sys.executable, "-m", "dagplan", "worker"], cwd=folder, env=env,
                              stdout=subprocess.DEVNULL, stderr=open(folder / f"worker{n}.log", "w"))
             for n in range(workers)]  # fmt: skip
    try:
        time.sleep(8 if workers else 1)  # every worker started, connected and idle
        gone = [n for n, proc in enumerate(procs) if proc.poll() is not None]
        if gone:
            raise SystemExit(f"worker {gone[0]} stopped: {(folder / f'worker{gone[0]}.log').read_text()[-2000:]}")
        before, start = server_cpu(""), time.perf_counter()
        time.sleep(seconds)
        used, took = server_cpu("") - before, time.perf_counter() - start
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
    return used / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", default="0,10000,100000,400000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--idle-workers", type=int, default=16)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()
    sizes = [int(n) for n in args.history.split(",")]
    from dagplan.interpreter.stores.pgstore import PgRegistry

    _, stop, url = start_postgres()
    try:
        registry = PgRegistry(url)
        registry.connection()  # the schema
        have, rows = 0, []
        for size in sizes:
            fill(url, size, have)
            have = max(have, size)
            rows.append((size, measure(registry, args.repeat)))
        base = rows[0][1]
        print(f"{'finished runs':>14} | " + " | ".join(f"{name:>24}" for name in base))
        for size, found in rows:
            cells = [f"{found[k] * 1e3:8.2f} ms ({found[k] / base[k]:4.2f}x)" for k in base]
            print(f"{size:>14,} | " + " | ".join(f"{c:>24}" for c in cells))
        if args.idle_workers:
            alone = idle_load(url, 0, args.idle_seconds)
            share = idle_load(url, args.idle_workers, args.idle_seconds)
            print(f"{args.idle_workers} idle workers, {have:,} finished runs: the database used {share:.2%} of one "
                  f"core over {args.idle_seconds:.0f} s; alone (no worker) {alone:.2%}: the workers' part "
                  f"{max(0.0, share - alone):.2%}")  # fmt: skip
        table = [{"finished": s, **{k: round(v * 1e3, 3) for k, v in f.items()}} for s, f in rows]
        print(json.dumps({"history": table}))
    finally:
        stop()


if __name__ == "__main__":
    main()
