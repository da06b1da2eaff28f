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

Then **the work of one run** and **scaling** (``--runs`` queued runs of a 20-step chain of no-op tools, every
completion durable, drained by ``dagplan worker --drain``): per run, the statements (``pg_stat_statements``), the
commits (``pg_stat_database``), the WAL bytes, and the time the server spent writing and syncing the WAL
(``pg_stat_wal`` with ``track_wal_io_timing``); the throughput with 1, 2 and 4 workers (each drain's time less a
drain of an empty queue: a worker's start and stop); and the throughput predicted for 8 and 16 workers, by two
models, each said with what it was fitted to:

- **Amdahl**, with the serial fraction measured: the WAL is one file written and synced in order, so its write
  and sync time per run is the part no worker can share (an upper bound: concurrent commits share a sync);
  ``f = serial time per run / one worker's time per run``, efficiency ``1 / (1 + f (N - 1))``;
- **the universal scalability law** (Gunther), ``X(N) = X(1) N / (1 + s (N - 1) + k N (N - 1))``, ``s`` and ``k``
  fitted by least squares to the throughputs measured. On a machine with fewer cores than workers (two here),
  what it fits is mostly the CPUs running out, not the pool: read it as a floor.
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


CHAIN = {"steps": [{"id": f"s{i}", "tool": "noop", "args": {"x": f"†state.v{i - 1}" if i else 0},
                    "output": f"†state.v{i}"} for i in range(20)]}  # fmt: skip
STATISTICS = "-c shared_preload_libraries=pg_stat_statements -c track_wal_io_timing=on"


def drain(url: str, folder: Path, workers: int, runs: int) -> float:
    """Seconds for ``workers`` worker processes to drain ``runs`` queued runs of :data:`CHAIN` (the queue
    emptied first; start-up included: see :func:`throughput`)."""
    import psycopg

    import dagplan

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM dagplan_runs")
    (folder / "chain20.json").write_text(json.dumps(CHAIN))
    if not (folder / "tools.py").exists():  # the scaling's folder may hold tools of another purity (--purity)
        (folder / "tools.py").write_text(TOOLS)
    plan = dagplan.load(folder / "chain20.json")
    for _ in range(runs):
        dagplan.submit(plan, tool_sources=[str(folder / "tools.py")], state_dir=url)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DAGPLAN_STATE": url}
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "dagplan", "worker", "--drain", "--concurrency", "4"], cwd=folder,
                              env=env, stderr=subprocess.DEVNULL) for _ in range(workers)]  # fmt: skip
    for proc in procs:
        if proc.wait(600) != 0:
            raise SystemExit(f"a worker stopped with {proc.returncode}")
    return time.perf_counter() - start


def throughput(url: str, folder: Path, workers: int, runs: int, repeat: int) -> float:
    """Runs a second with ``workers`` workers: the median drain, less the median drain of an empty queue (the
    workers' start and stop, which a long-lived pool pays once)."""
    empty = statistics.median(drain(url, folder, workers, 0) for _ in range(repeat))
    full = statistics.median(drain(url, folder, workers, runs) for _ in range(repeat))
    return runs / max(full - empty, 1e-9)


def per_run(url: str, folder: Path, runs: int) -> dict[str, float]:
    """The database's work for one run (submitted, claimed, its 20 completions, finished), from the server's
    statistics around one worker draining ``runs`` runs."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("DELETE FROM dagplan_runs")

        def counters() -> tuple:
            commits = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            wal = conn.execute("SELECT pg_current_wal_lsn(), wal_write_time, wal_sync_time, wal_sync FROM pg_stat_wal")
            return (commits.fetchone()[0], *wal.fetchone())

        conn.execute("SELECT pg_stat_statements_reset()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        before = counters()
        drain(url, folder, 1, runs)
        time.sleep(0.6)  # the statistics collector's last report (PostgreSQL 15 flushes them every ~0.5 s)
        conn.execute("SELECT pg_stat_clear_snapshot()")
        after = counters()
        statements = conn.execute(
            "SELECT sum(calls), sum(total_exec_time) FROM pg_stat_statements WHERE query NOT ILIKE '%pg_stat%' "
            "AND query NOT ILIKE '%pg_current_wal_lsn%' AND query NOT ILIKE 'DELETE FROM dagplan_runs'"
        ).fetchone()
        wal_bytes = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (after[1], before[1])).fetchone()[0]
    return {
        "statements": float(statements[0] or 0) / runs,
        "statement ms": float(statements[1] or 0) / runs,
        "commits": (after[0] - before[0]) / runs,
        "WAL bytes": float(wal_bytes) / runs,
        "WAL syncs": (after[4] - before[4]) / runs,
        "WAL write+sync ms": (after[2] - before[2] + after[3] - before[3]) / runs,
    }


def usl_fit(points: dict[int, float]) -> tuple[float, float]:
    """The universal scalability law's contention ``s`` and coherency ``k`` fitted to ``{workers: runs/s}`` (least
    squares on ``N X(1) / X(N) - 1 = s (N - 1) + k N (N - 1)``, both kept >= 0)."""
    one = points[1]
    rows = [(n - 1, n * (n - 1), n * one / x - 1) for n, x in points.items() if n > 1]
    saa = sum(a * a for a, _, _ in rows)
    sbb = sum(b * b for _, b, _ in rows)
    sab = sum(a * b for a, b, _ in rows)
    say = sum(a * y for a, _, y in rows)
    sby = sum(b * y for _, b, y in rows)
    det = saa * sbb - sab * sab
    s, k = ((say * sbb - sby * sab) / det, (saa * sby - sab * say) / det) if det else (say / saa, 0.0)
    if k < 0:  # no coherency cost seen: contention alone
        s, k = say / saa, 0.0
    if s < 0:
        s, k = 0.0, max(0.0, sby / sbb)
    return s, k


def predicted(one: float, workers: int, serial: float = 0.0, s: float = 0.0, k: float = 0.0) -> float:
    """Runs a second with ``workers`` workers: Amdahl's law with the serial fraction ``serial``, or the universal
    scalability law with ``s`` and ``k``."""
    n = workers
    return one * n / (1 + (serial or s) * (n - 1) + k * n * (n - 1))


def scaling(url: str, runs: int, repeat: int, purity: str | None = None) -> dict:
    """The work of one run, the throughput with 1, 2 and 4 workers and the predictions for 8 and 16. ``purity``:
    the chain's tool declares it (``pure``: nothing to make durable before a call, and its completion only
    written, made durable by the run's end; undeclared, as here by default, a step may act, so its intent is
    made durable before the call and its completion after: two synchronous commits a step). The rule:
    DURABLE in interpreter/stores/journal.py."""
    folder = Path(tempfile.mkdtemp(prefix="dagplan-pool-"))
    if purity:
        (folder / "tools.py").write_text(TOOLS.replace("@dagplan.tool\n", f"@dagplan.tool(purity={purity!r})\n"))
    work = per_run(url, folder, runs)
    measured = {n: throughput(url, folder, n, runs, repeat) for n in (1, 2, 4)}
    serial = work["WAL write+sync ms"] / 1e3 * measured[1]  # the serial part of one worker's time per run
    s, k = usl_fit(measured)
    rows = []
    for n in (1, 2, 4, 8, 16):
        row = {"workers": n, "measured": measured.get(n), "amdahl": predicted(measured[1], n, serial=serial),
               "usl": predicted(measured[1], n, s=s, k=k)}  # fmt: skip
        rows.append(row)
    return {"per run": work, "serial fraction": serial, "usl": {"s": s, "k": k}, "rows": rows}


def print_scaling(found: dict, runs: int) -> None:
    work = found["per run"]
    print(f"one run of 20 steps ({runs} runs, 1 worker): {work['statements']:.1f} statements "
          f"({work['statement ms']:.2f} ms in them), {work['commits']:.1f} commits, {work['WAL bytes'] / 1024:.1f} KiB "
          f"of WAL, {work['WAL syncs']:.1f} WAL syncs taking {work['WAL write+sync ms']:.2f} ms")  # fmt: skip
    usl = found["usl"]
    print(f"serial fraction (WAL write+sync / one worker's time per run): {found['serial fraction']:.3f}; "
          f"USL fitted to 1, 2, 4 workers: s = {usl['s']:.3f}, k = {usl['k']:.4f}")  # fmt: skip
    one = found["rows"][0]["measured"]
    print(f"{'workers':>8} | {'measured runs/s':>16} | {'Amdahl runs/s (eff.)':>22} | {'USL runs/s (eff.)':>20}")
    for row in found["rows"]:
        n = row["workers"]
        got = f"{row['measured']:7.1f} ({row['measured'] / (n * one):4.0%})" if row["measured"] else "-"
        amdahl = f"{row['amdahl']:7.1f} ({row['amdahl'] / (n * one):4.0%})"
        usl_cell = f"{row['usl']:7.1f} ({row['usl'] / (n * one):4.0%})"
        print(f"{n:>8} | {got:>16} | {amdahl:>22} | {usl_cell:>20}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", default="0,10000,100000,400000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--idle-workers", type=int, default=16)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=100, help="queued runs a scaling drain takes (0: none)")
    parser.add_argument("--purity", default=None, help="the chain's tool declares it (pure: one lazy commit a step)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.history.split(",")]
    from dagplan.interpreter.stores.pgstore import PgRegistry

    _, stop, url = start_postgres(STATISTICS)
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
        found = scaling(url, args.runs, 3, args.purity) if args.runs else None
        if found is not None:
            print_scaling(found, args.runs)
        print(json.dumps({"history": table, "scaling": found}))
    finally:
        stop()


if __name__ == "__main__":
    main()
