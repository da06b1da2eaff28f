"""Every performance figure of the README in one table, floors and peers measured in the same run.

    python -m benchmarks.report [--repeat 7] [--max-scale 100000] [--skip postgres,scale]

Rows (medians; a ratio is always against a figure measured here, now):
* `dagplan check` of one small plan in a fresh process, against `python -c pass`, and `yamllint` and
  `check-jsonschema` with our published schema when they are installed (`pip install yamllint
  check-jsonschema`, or `--peers DIR` holding them): what pre-commit users already run;
* the engine through the public API (`dagplan.arun` on a loaded plan): a chain of 1,000 and a fan-out
  of 100 no-op async tools against a hand-written asyncio floor, and 100 steps sleeping 50 ms;
* durability: a 1,000-step chain with a file journal against one fsync per step, and on PostgreSQL
  (Debian's binaries, a server of its own) against the file journal;
* `check` of a 10,000-step plan, JSON and YAML, against `json.loads` and libyaml's events;
* scale curves, each point in a fresh process: time per step and peak memory per step (tracemalloc,
  a second pass) of `check`, a run with the memory journal and with the file journal, `resume` of a
  run stopped at 90%, and a `for_each` fan-out, at 1k, 10k and 100k steps or items; beside `check`, its
  floor (`json.loads` of the same plan, collections paused as `check` pauses them), whose own curve is
  what the caches alone do to a per-step cost as the data outgrows them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROWS: list[tuple[str, str, str, str]] = []  # figure, floor or peer, dagplan, goal


def row(figure: str, floor: str, ours: str, goal: str) -> None:
    ROWS.append((figure, floor, ours, goal))
    print(f"  {figure}: {ours}  [{floor}]  goal {goal}", file=sys.stderr, flush=True)


def median(fn, repeat: int, warm: bool = True) -> float:
    if warm:
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def verdict(ok: bool) -> str:
    return "met" if ok else "not met"


# --- start-up -----------------------------------------------------------------------------------


def installed_copy(root: Path) -> Path:
    """A python with dagplan installed as ``pip install .`` installs it (pre-commit's hook environments
    too): a bare venv whose packages are this one's, reached through a path entry, so no ``.pth`` of
    theirs runs (the editable install's finder among them), and dagplan copied into its own
    site-packages, not found through the checkout."""
    venv = root / "installed"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "deps.pth").write_text(ours + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(ROOT)], check=True, capture_output=True)  # fmt: skip
    return venv / "bin" / "python"


def startup(repeat: int, peers: Path | None) -> None:
    plan = ROOT / "examples" / "refund.yaml"
    env = {**os.environ}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode: so does this one
    quiet = {"env": env, "capture_output": True, "check": False, "cwd": ROOT}
    schema = ROOT / "schemas" / "plan.schema.json"
    with tempfile.TemporaryDirectory() as tmp:
        installed = installed_copy(Path(tmp))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "dagplan check": [sys.executable, "-m", "dagplan", "check", str(plan)],
            # -P: the working directory (this checkout) is not on sys.path, as for a console script
            "installed": [str(installed), "-P", "-m", "dagplan", "check", str(plan)],
            "installed python -c pass": [str(installed), "-P", "-c", "pass"],
        }
        _startup_rows(commands, quiet, repeat, peers, plan, schema)


def _startup_rows(commands: dict, quiet: dict, repeat: int, peers: Path | None, plan: Path, schema: Path) -> None:
    profile = str(ROOT / "examples" / "profile.json")
    peer_args = {"yamllint": ["-d", "relaxed", str(plan)], "check-jsonschema": ["--schemafile", str(schema), profile]}
    for name, argv in peer_args.items():
        found = shutil.which(name, path=str(peers) if peers else None) or shutil.which(name)
        if found:
            commands[name] = [found, *argv]
    times: dict[str, list[float]] = {name: [] for name in commands}
    for name, argv in commands.items():
        warm = subprocess.run(argv, **quiet)  # bytecode written, caches warm
        if name not in peer_args and warm.returncode != 0:  # never time a failure of ours
            raise SystemExit(f"{name} failed: {warm.stderr.decode(errors='replace')[-2000:]}")
    for _ in range(repeat):  # alternated: a noisy moment falls on every command alike
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, **quiet)
            times[name].append(time.perf_counter() - start)
    took = {name: statistics.median(t) for name, t in times.items()}
    base, lint = took["python -c pass"], took.get("yamllint")
    peers_took = [(n, took[n]) for n in peer_args if n in took]
    peer_text = "; ".join(f"`{n}` {t * 1e3:.0f} ms ({t / base:.1f}x)" for n, t in peers_took)
    floor = f"`python -c pass` {base * 1e3:.0f} ms" + (f"; {peer_text}" if peer_text else "; peers not installed")
    for name, label in (("dagplan check", "editable install (`pip install -e .`, this checkout)"),
                        ("installed", "installed (`pip install .`, as pre-commit installs a hook)")):  # fmt: skip
        ours = took[name]
        goal_ok = ours <= lint if lint else ours / base <= 6
        row(f"`dagplan check` of one plan (refund), fresh process, {label}", floor,
            f"{ours * 1e3:.0f} ms = {ours / base:.1f}x" + (f", {ours / lint:.2f}x yamllint" if lint else ""),
            f"faster than yamllint (<= 6x): {verdict(goal_ok)}")  # fmt: skip
    bare = took["installed python -c pass"]
    print(
        f"  (the installed copy's bare `python -c pass`: {bare * 1e3:.0f} ms; the editable finder's share of"
        f" every start: {(base - bare) * 1e3:.0f} ms)",
        file=sys.stderr,
    )


# --- the engine ----------------------------------------------------------------------------------


def engine(repeat: int) -> None:
    """Against the done-callback floor (a node's task started by its last dependency's completion: the least
    an executor must do), with the earlier floor (every task created up front, awaiting its parents) beside it."""
    from benchmarks import bench_engine as be

    fn = be.anoop.__wrapped__ if hasattr(be.anoop, "__wrapped__") else be.anoop
    for label, doc, size, goal in (("chain of 1,000 no-op tool steps", be.chain_doc(1000, "anoop"), 1000, 1.2),
                                   ("fan-out of 100", be.fan_doc(100, "anoop"), 100, 1.5)):  # fmt: skip
        times = repeat * 1000 // size
        floor = median(be.floor_callbacks(doc, fn), times) / size * 1e6
        tasks = median(be.floor(doc, fn), times) / size * 1e6
        ours = median(be.ours(doc, max_concurrency=size), times) / size * 1e6
        row(f"{label}, public API (`dagplan.arun`)",
            f"done-callback floor {floor:.1f} us/step (tasks up front: {tasks:.1f}, {ours / tasks:.2f}x)",
            f"{ours:.1f} us/step = {ours / floor:.2f}x", f"<= {goal}x: {verdict(ours / floor <= goal)}")  # fmt: skip
    doc = be.fan_doc(100, "nap")
    floor_eff = 0.05 / median(be.floor_callbacks(doc, be.nap), repeat)
    ours_eff = 0.05 / median(be.ours(doc, max_concurrency=100), repeat)
    row("100 x 50 ms sleeps, parallel efficiency", f"done-callback floor {floor_eff:.1%}", f"{ours_eff:.1%}",
        f">= floor - 1 point: {verdict(ours_eff >= floor_eff - 0.01)}")  # fmt: skip


# --- durability -----------------------------------------------------------------------------------


def durability(repeat: int, root: Path) -> None:
    from benchmarks import bench_durability as bd

    n = 1000
    floor = bd.fsync_floor(root)
    mem = median(lambda: bd.engine_run(bd.chain_doc(n), None), repeat) / n
    dur = median(lambda: bd.engine_run(bd.chain_doc(n), bd.fresh(root)), repeat) / n
    row("durable chain of 1,000 (file journal)", f"one fsync {floor * 1e6:.0f} us/step",
        f"{dur * 1e6:.0f} us/step = {dur / floor:.2f}x (durability alone {(dur - mem) / floor:.2f}x)",
        f"<= 1.5x: {verdict(dur / floor <= 1.5)}")  # fmt: skip


def postgres(repeat: int, root: Path) -> None:
    from benchmarks import bench_postgres as bp
    from tests.pg_server import start_postgres

    n = 1000
    try:
        _, stop, socket_url = start_postgres()
    except Exception as exc:  # noqa: BLE001 - no binaries here: say so, measure the rest
        row("durable chain on PostgreSQL", "the file journal", f"not measured ({exc})", "<= 1.5x")
        return
    try:
        plan = bp.chain(n)
        files = bp.per_step(plan, n, repeat, durable=True, state_dir=root / "files")
        pg = bp.per_step(plan, n, repeat, durable=True, state_dir=socket_url)
        alone = _one_insert(socket_url, n)
        row(f"durable chain of {n:,} on PostgreSQL (local socket)",
            f"file journal {files * 1e6:.0f} us/step; one INSERT committed alone {alone * 1e6:.0f} us",
            f"{pg * 1e6:.0f} us/step = {pg / files:.2f}x ({pg / alone:.2f}x the INSERT alone)",
            f"<= 1.5x: {verdict(pg / files <= 1.5)}")  # fmt: skip
        workers(socket_url, root, bp)
    finally:
        stop()


def _one_insert(url: str, n: int) -> float:
    """The database's own price of a durable step: one journal-sized row INSERTed and committed (autocommit,
    fsync on), one connection, median over ``n``: what no client can go under."""
    import psycopg

    body = json.dumps({"type": "plan_step_completed", "step": "s1", "output": 2, "attempts": 1, "pad": "x" * 120})
    times = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_alone (id serial PRIMARY KEY, body jsonb)")
        for _ in range(n):
            start = time.perf_counter()
            conn.execute("INSERT INTO bench_alone (body) VALUES (%s)", (body,))
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def workers(url: str, root: Path, bp: object) -> None:
    """The worker pool: 100 queued 20-step runs drained by 1 and 2 ``dagplan worker`` processes, their
    start-up (a worker draining an empty queue, measured here) taken out; against the database alone:
    one connection committing a journal-sized row per transaction, as many transactions as a run makes."""
    import psycopg

    folder = root / "pool"
    folder.mkdir(exist_ok=True)
    env = {**os.environ, "DAGPLAN_STATE": url}
    subprocess.run([sys.executable, "-m", "dagplan", "db", "upgrade"], cwd=folder, env=env, capture_output=True)

    def empty() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM dagplan_runs")
        subprocess.run([sys.executable, "-m", "dagplan", "worker", "--drain"], cwd=folder, env=env, check=True,
                       capture_output=True)  # fmt: skip

    startup = median(empty, 3)
    per_run = 22  # transactions of a 20-step run: its start, one per step (durable before a dependent), its end
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id serial PRIMARY KEY, body jsonb)")
        body = json.dumps({"type": "plan_step_completed", "step": "s1", "output": 2, "attempts": 1, "pad": "x" * 120})
        count = 100 * per_run

        def commits() -> None:
            for _ in range(count):
                conn.execute("INSERT INTO bench_floor (body) VALUES (%s)", (body,))

        floor = count / median(commits, 3) / per_run  # runs per second the database alone allows, one connection
    rates = {n: 100 / max(1e-3, bp.pool(url, folder, n) - startup) for n in (1, 2)}  # type: ignore[attr-defined]
    row("worker pool: 100 queued runs of 20 steps (start-up excluded)",
        f"the database alone: {floor:.0f} runs/s ({per_run} commits a run, one connection)",
        f"1 worker {rates[1]:.0f} runs/s ({rates[1] / floor:.0%} of it), 2 workers {rates[2]:.0f} runs/s "
        f"({rates[2] / floor:.0%}; worker start-up {startup * 1000:.0f} ms)",
        f"2 workers >= 80% of the database alone: {verdict(rates[2] / floor >= 0.8)}")  # fmt: skip


# --- check of a large plan ------------------------------------------------------------------------


def large_check(repeat: int) -> None:
    from benchmarks import bench_check as bc

    from dagplan.dsl import check

    data = bc.generate(10_000)
    for kind, text in (("JSON", json.dumps(data, ensure_ascii=False)), ("YAML", bc.to_yaml(data))):
        floor = bc.median_time(lambda: bc._read_only(kind.lower(), text), repeat)
        ours = bc.median_time(lambda: check(text=text, name=f"big.{kind.lower()}"), repeat)
        row(f"10,000-step plan, `check`, {kind}", f"{bc._FLOOR[kind.lower()]} {floor * 1e3:.0f} ms",
            f"{ours * 1e3:.0f} ms = {ours / floor:.1f}x", f"< 300 ms: {verdict(ours < 0.3)}")  # fmt: skip


# --- latency where people wait ----------------------------------------------------------------------


def latency(repeat: int) -> None:
    """The language server while typing in a 1,000-step plan, and `dagplan mcp` checking a 10,000-step plan
    while a client asks it something else (checks run off the event loop in both)."""
    from benchmarks import bench_lsp, bench_mcp

    from dagplan.lsp import DEBOUNCE

    wait, floor = asyncio.run(bench_lsp.measure(1000, max(10, 3 * repeat)))
    total = wait + DEBOUNCE
    row("language server, 1,000-step plan: didChange to publishDiagnostics",
        f"`check` in-process {floor * 1e3:.0f} ms", f"{total * 1e3:.0f} ms (debounce {DEBOUNCE * 1e3:.0f} ms included)",
        f"< 150 ms: {verdict(total < 0.15)}")  # fmt: skip
    found = bench_mcp.check_while_asked(10_000, max(2, repeat // 2))
    row("`dagplan mcp` over stdio: `check_plan` of a 10,000-step JSON plan, and another request meanwhile",
        f"the same request on an idle server {found['idle'] * 1e3:.1f} ms",
        f"check {found['check'] * 1e3:.0f} ms; the longest wait of a request during it "
        f"{found['longest wait during'] * 1e3:.0f} ms", f"not blocked (< 100 ms): "
        f"{verdict(found['longest wait during'] < 0.1)}")  # fmt: skip


# --- scale curves -----------------------------------------------------------------------------------

SHAPES = ("check", "json.loads", "run memory", "run file", "resume", "fan-out")
FLOORS = {"check": "json.loads"}  # a shape's floor, measured on the same input in the same way: its curve is
# what the memory hierarchy alone does to per-step cost (100k steps do not fit the caches that 1k fit)
QUICK = ("check", "json.loads")  # seconds at 100,000 steps: the median of 3 processes there too


def scale(max_scale: int) -> None:
    sizes = [s for s in (1_000, 10_000, 100_000) if s <= max_scale]
    print("\nscale curves (each point a fresh process, the median of 3 up to 10,000, and at 100,000 for check and "
          "its floor; per step or item; peak = tracemalloc, a second pass)")  # fmt: skip
    print("| shape | " + " | ".join(f"{s:,}" for s in sizes) + " | largest / smallest |")
    print("| --- | " + " | ".join("---" for _ in sizes) + " | --- |")
    curves: dict[str, float] = {}
    for shape in SHAPES:
        points = []
        for size in sizes:
            found = [_point_process(shape, size) for _ in range(3 if size <= 10_000 or shape in QUICK else 1)]
            good = sorted((p for p in found if "us" in p), key=lambda p: p["us"])
            points.append(good[len(good) // 2] if good else found[0])  # the median process
        cells = [f"{p['us']:.1f} us, {p['bytes']:,.0f} B" if "us" in p else p["error"][:40] for p in points]
        ok = [p for p in points if "us" in p]
        ratio = f"{ok[-1]['us'] / ok[0]['us']:.2f}x" if len(ok) > 1 else ""
        if len(ok) > 1:
            curves[shape] = ok[-1]["us"] / ok[0]["us"]
        label = "floor of `check`: `json.loads` of its plan" if shape == "json.loads" else shape
        print(f"| {label} | " + " | ".join(cells) + f" | {ratio} |", flush=True)
    for shape, floor in FLOORS.items():
        if shape in curves and floor in curves:
            print(f"{shape}'s curve against its floor's ({floor}, same sizes, same run): "
                  f"{curves[shape] / curves[floor]:.2f}x", flush=True)  # fmt: skip


def _point_process(shape: str, size: int) -> dict:
    """One scale point measured in a fresh process (caches and heap as a user's first call finds them)."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.report", "--point", shape, str(size)],
                         capture_output=True, text=True, cwd=ROOT, check=False)  # fmt: skip
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}


def point(shape: str, size: int) -> dict:
    """One scale point, in this (fresh) process: seconds per unit, then peak bytes per unit."""
    import gc
    import tracemalloc

    work = _work(shape, size, Path(tempfile.mkdtemp(prefix="dagplan-scale-")))
    gc.collect()
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    gc.collect()
    tracemalloc.start()
    work()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"us": seconds / size * 1e6, "bytes": peak / size}


def _work(shape: str, size: int, folder: Path):
    import dagplan
    from benchmarks import bench_check as bc
    from benchmarks import bench_durability as bd
    from benchmarks import bench_engine as be

    from dagplan.dsl import check

    if shape == "json.loads":  # check's floor: reading the same text at all, collections paused as check
        from dagplan.dsl import no_gc_pauses  # pauses them (peak: the parsed data)

        text = json.dumps(bc.generate(size))

        def read() -> None:
            with no_gc_pauses():
                json.loads(text)

        return read
    if shape == "check":
        from dagplan.dsl.errors import Limits

        path = folder / "big.json"
        path.write_text(json.dumps(bc.generate(size)), encoding="utf-8")
        roomy = Limits(max_bytes=1 << 30, max_nodes=100_000_000, max_steps=10_000_000)  # past the defaults' 16 MB

        def checked() -> None:
            result = check(path, limits=roomy)
            assert result.ok, result.diagnostics[:2]

        return checked
    if shape == "fan-out":
        plan = dagplan.load(text=json.dumps(be.items_doc(size, "anoop")), tools=be.TOOLS)
        return lambda: asyncio.run(dagplan.arun(plan, tools=be.TOOLS, max_concurrency=64))
    if shape == "resume":
        bd._plan_of(bd.chain_doc(size))
        runs = iter([(f, bd.interrupted_run(f, size)) for f in (bd.fresh(folder), bd.fresh(folder))])

        def resume() -> None:
            where, run_id = next(runs)
            dagplan.resume(run_id, tools={"noop": bd.noop}, state_dir=where)

        return resume
    plan = dagplan.load(text=json.dumps(bd.chain_doc(size)), tools={"noop": bd.noop})
    durable = shape == "run file"
    return lambda: dagplan.run(plan, tools={"noop": bd.noop}, durable=durable,
                               state_dir=bd.fresh(folder) if durable else None)  # fmt: skip


# --- the table --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--max-scale", type=int, default=100_000)
    sections = "startup,engine,durability,postgres,check,latency,scale,planning,agent,reuse"
    parser.add_argument("--skip", default="", help=f"comma-separated: {sections}")
    parser.add_argument("--planning-tasks", type=int, default=40, help="reference tasks the local model plans")
    parser.add_argument("--agent-tasks", type=int, default=10, help="tasks of the plan-first / ReAct table")
    parser.add_argument("--peers", type=Path, help="a bin folder holding yamllint and check-jsonschema")
    parser.add_argument("--point", nargs=2, metavar=("SHAPE", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:
        print(json.dumps(point(args.point[0], int(args.point[1]))))
        return
    skip = set(filter(None, args.skip.split(",")))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; medians of {args.repeat}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="dagplan-report-") as tmp:
        root = Path(tmp)
        steps = [("startup", lambda: startup(args.repeat, args.peers)), ("engine", lambda: engine(args.repeat)),
                 ("durability", lambda: durability(args.repeat, root)), ("postgres", lambda: postgres(3, root)),
                 ("check", lambda: large_check(args.repeat)), ("latency", lambda: latency(args.repeat))]  # fmt: skip
        for name, step in steps:
            if name not in skip:
                step()
    print("| figure | floor or peer, same run | dagplan | goal |")
    print("| --- | --- | --- | --- |")
    for figure, floor, ours, goal in ROWS:
        print(f"| {figure} | {floor} | {ours} | {goal} |")
    if "scale" not in skip:
        scale(args.max_scale)
    if "planning" not in skip:
        planning(args.planning_tasks)
    if "agent" not in skip:
        agent(args.agent_tasks)
    if "reuse" not in skip:
        from benchmarks import bench_reuse

        print("\n" + "\n".join(bench_reuse.table(bench_reuse.measure(0.2, args.repeat), 0.2)))


def planning(count: int) -> None:
    """Graph scores of the local model's plans on the reference tasks, with and without each guide."""
    from benchmarks.bench_planning import GRAPH_HEADER, graph_scores, print_graph_scores

    print(f"\nplanning: SmolLM2-135M in-process, {count} reference tasks (benchmarks/planning), each guide in turn")
    print(GRAPH_HEADER)
    for guide in ((), ("order",), ("order", "values"), ("order", "values", "narrow")):
        print_graph_scores(graph_scores("local", count, 2, guide=guide))


def agent(count: int) -> None:
    """Plan-first against ReAct on the local model (benchmarks/bench_agent.py)."""
    from benchmarks import bench_agent

    rows = bench_agent.compare(count, "local", 0.3)
    print(f"\nplan-first against ReAct: SmolLM2-135M in-process, {count} tasks that state an order, tools of 0.3 s")
    print("\n".join(bench_agent.summary(rows)))


if __name__ == "__main__":
    main()
