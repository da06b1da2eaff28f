"""The price of durability, measured in one run against the floor of one fsync.

    .venv/bin/python benchmarks/bench_durability.py [--steps 1000] [--repeat 5]

Prints medians of:
- the fsync floor: write a ~200-byte line and fsync it, in the same directory;
- the store alone, with the engine's write pattern: a 1,000-step chain
  (append started, record the completion, commit, then the next) and a 1,000-wide fan-out
  (all complete together; each awaits its own commit, so they share fsyncs);
- the engine (if it runs here): durable vs in-memory on the same chain and fan-out,
  every completed step durable before its dependents start;
- resuming a 1,000-step run interrupted at 90%: open + progress + classify (store),
  and the engine's resume if ``dagplan.aresume`` runs;
- journal bytes per step, excluding the outputs themselves.

Targets (issue 4): chain within 1.5x of one fsync per step, fan-out well below one
fsync per step, resume at 90% under 0.2 s, journal bytes per step under 1 KB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from dagplan.interpreter.stores import wal  # noqa: E402
import dagplan  # noqa: E402
from dagplan.interpreter.engine.resume import Replay  # noqa: E402
from dagplan.interpreter.stores.store import RunStore  # noqa: E402
from dagplan.interpreter.core.vocabulary import Event, EventType  # noqa: E402


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fsync_floor(folder: Path, n: int = 300) -> float:
    """Median seconds of appending one log-sized line and fsyncing it."""
    line = b"x" * 200 + b"\n"
    fd = os.open(folder / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    times = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
    return statistics.median(times)


def chain_doc(n: int) -> dict:
    steps = [{"id": "s0", "tool": "noop", "args": {"x": 0}, "output": "†state.s0"}]
    steps += [
        {"id": f"s{i}", "tool": "noop", "args": {"x": f"†state.s{i - 1}"}, "output": f"†state.s{i}"}
        for i in range(1, n)
    ]
    return {"dagplan": 1, "summary": "chain", "steps": steps, "result": f"†state.s{n - 1}"}


def fanout_doc(n: int) -> dict:
    steps = [{"id": f"s{i}", "tool": "noop", "args": {"x": i}, "output": f"†state.s{i}"} for i in range(n)]
    return {"dagplan": 1, "summary": "fan-out", "steps": steps}


# --- the store alone -----------------------------------------------------------------------


def store_chain(folder: Path, n: int) -> Path:
    run = RunStore(folder).create(plan_doc=chain_doc(n), plan_name="chain", inputs={})
    run.acquire()

    async def main():
        run.append({"type": "plan_started", "run_id": run.id})
        await run.commit()
        for i in range(n):
            run.append({"type": "plan_step_started", "run_id": run.id, "step": f"s{i}", "duration": None})
            run.record(
                Event(
                    EventType.STEP_COMPLETED,
                    run.id,
                    f"s{i}",
                    duration=0.0001,
                    data={"output": i, "attempts": 1, "replayed": False, "alternative": 0},
                )
            )
            await run.commit()
        run.append({"type": "plan_completed", "run_id": run.id, "status": "completed", "had_errors": False})
        await run.commit()

    asyncio.run(main())
    run.release()
    return run.dir


def store_fanout(folder: Path, n: int) -> Path:
    run = RunStore(folder).create(plan_doc=fanout_doc(n), plan_name="fanout", inputs={})
    run.acquire()

    async def step(i: int):
        run.append({"type": "plan_step_started", "run_id": run.id, "step": f"s{i}", "duration": None})
        await asyncio.sleep(0)
        run.record(
            Event(
                EventType.STEP_COMPLETED,
                run.id,
                f"s{i}",
                duration=0.0001,
                data={"output": i, "attempts": 1, "replayed": False, "alternative": 0},
            )
        )
        await run.commit()

    async def main():
        await asyncio.gather(*(step(i) for i in range(n)))

    asyncio.run(main())
    run.release()
    return run.dir


def count_fsyncs(fn) -> int:
    """Syncs of a file's data or whole (the log's commit is an fdatasync: see wal.reserve)."""
    calls = 0
    real = {name: getattr(os, name) for name in ("fsync", "fdatasync")}

    def counting(name):
        def sync(fd):
            nonlocal calls
            calls += 1
            real[name](fd)

        return sync

    for name in real:
        setattr(os, name, counting(name))
    try:
        fn()
    finally:
        for name, fn_ in real.items():
            setattr(os, name, fn_)
    return calls


# --- the engine ----------------------------------------------------------------------------


def engine_available() -> bool:
    try:
        import dagplan

        dagplan.load(text=json.dumps(chain_doc(2)), tools={"noop": noop})
        return True
    except Exception as exc:  # noqa: BLE001 - report and go on with the store alone
        print(f"(engine not measured: {type(exc).__name__}: {exc})")
        return False


async def noop(x: object) -> object:
    return x


def engine_run(doc: dict, folder: Path | None) -> None:
    """A run of the plan (loaded once per shape, as the engine and PostgreSQL rows load it: a 1,000-step
    plan's check, ~27 us a step once warm, is not what durability costs)."""
    import dagplan

    plan = _plan_of(doc)
    result = dagplan.run(
        plan, tools={"noop": noop}, durable=folder is not None, state_dir=folder, max_concurrency=len(doc["steps"])
    )
    assert result.status == "completed", result.status


# --- resume --------------------------------------------------------------------------------


def interrupted_run(folder: Path, n: int, done: float = 0.9) -> str:
    """A chain whose first 90% completed and whose next step was running when the process died."""
    run = RunStore(folder).create(plan_doc=chain_doc(n), plan_name="chain", inputs={})
    run.acquire()
    run.append({"type": "plan_started", "run_id": run.id})
    for i in range(int(n * done)):
        run.append({"type": "plan_step_started", "run_id": run.id, "step": f"s{i}", "duration": None})
        run.record(
            Event(
                EventType.STEP_COMPLETED,
                run.id,
                f"s{i}",
                duration=0.0001,
                data={"output": i, "attempts": 1, "replayed": False, "alternative": 0},
            )
        )
        run.commit_sync()
    run.append({"type": "plan_step_started", "run_id": run.id, "step": f"s{int(n * done)}"})
    run.commit_sync()
    os.close(run._fd)  # like kill -9: the lock goes with the process, nothing else is written
    os.close(run._lock_fd)
    return run.id


def store_resume(folder: Path, run_id: str) -> None:
    """What a resume does before the engine starts: open, take the lock, decide every unit, let go."""
    run = RunStore(folder).open(run_id)
    run.acquire()
    replay = Replay.of(run, _plan_of(run.plan_doc), {}, None, None)
    assert replay.get("s0") is not None
    run.release()


_PLANS: dict[str, object] = {}


def _plan_of(doc: dict):
    key = json.dumps(doc)
    if key not in _PLANS:  # checking the plan is not the journal's cost: once per shape
        _PLANS[key] = dagplan.load(text=key, tools={"noop": noop})
    return _PLANS[key]


def journal_bytes_per_step(run_dir: Path, n: int) -> float:
    """Log bytes per step minus the JSON of the outputs themselves."""
    total = (run_dir / "wal.jsonl").stat().st_size
    outputs = sum(len(wal.dumps(e["output"])) for e in _events(run_dir) if "output" in e)
    return (total - outputs) / n


def _events(run_dir: Path):
    return wal.scan(run_dir / "wal.jsonl").events


def newest_run(folder: Path) -> Path:
    return max((folder / "runs").iterdir(), key=lambda p: p.name)


# --- report --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary dir; use a real disk)")
    args = parser.parse_args()
    n = args.steps
    root = Path(tempfile.mkdtemp(prefix="dagplan-bench-", dir=args.dir))
    try:
        report(root, n, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fresh(root: Path) -> Path:
    folder = Path(tempfile.mkdtemp(dir=root))
    return folder


def report(root: Path, n: int, repeat: int) -> None:
    floor = fsync_floor(root)
    us = lambda s: f"{s * 1e6:8.1f} us"  # noqa: E731
    print(f"dagplan durability benchmark: {n} steps, median of {repeat}, in {root}")
    print(f"fsync floor (append ~200 B + fsync):            {us(floor)}")

    chain = median_time(lambda: store_chain(fresh(root), n), repeat) / n
    fan = median_time(lambda: store_fanout(fresh(root), n), repeat) / n
    fan_syncs = count_fsyncs(lambda: store_fanout(fresh(root), n))
    chain_syncs = count_fsyncs(lambda: store_chain(fresh(root), n))
    print("store alone (the engine's write pattern):")
    print(f"  chain   per step {us(chain)}   {chain / floor:5.2f}x fsync   ({chain_syncs} fsyncs)")
    print(f"  fan-out per step {us(fan)}   {fan / floor:5.2f}x fsync   ({fan_syncs} fsyncs for {n} steps)")

    if engine_available():
        print("engine, durable vs in-memory (no-op async tool):")
        for name, doc in (("chain", chain_doc(n)), ("fan-out", fanout_doc(n))):
            mem = median_time(lambda: engine_run(doc, None), repeat) / n
            dur = median_time(lambda: engine_run(doc, fresh(root)), repeat) / n
            extra = dur - mem
            print(
                f"  {name:7} in-memory {us(mem)}  durable {us(dur)}  durability {us(extra)}"
                f" = {extra / floor:5.2f}x fsync"
            )
        folder = fresh(root)
        engine_run(chain_doc(n), folder)
        print(
            f"journal bytes per step (engine chain, outputs excluded): "
            f"{journal_bytes_per_step(newest_run(folder), n):.0f} B"
        )

    store_dir = fresh(root)
    store_chain(store_dir, n)
    print(
        f"journal bytes per step (store chain, outputs excluded):  "
        f"{journal_bytes_per_step(newest_run(store_dir), n):.0f} B"
    )

    folders = [fresh(root) for _ in range(repeat)]
    ids = [interrupted_run(f, n) for f in folders]
    pairs = iter(zip(folders, ids))
    took = median_time(lambda: store_resume(*next(pairs)), repeat)
    print(f"resume at 90% (open + progress + classify + lock): {took * 1000:8.2f} ms")
    resume_with_engine(root, n, repeat)


def resume_with_engine(root: Path, n: int, repeat: int) -> None:
    import dagplan

    if not hasattr(dagplan, "aresume"):
        return
    try:
        folders = [fresh(root) for _ in range(repeat)]
        ids = [interrupted_run(f, n) for f in folders]
        pairs = iter(zip(folders, ids))

        def go():
            folder, run_id = next(pairs)
            dagplan.resume(run_id, tools={"noop": noop}, state_dir=folder, max_concurrency=n)

        took = median_time(go, repeat)
    except Exception as exc:  # noqa: BLE001
        print(f"(engine resume not measured: {type(exc).__name__}: {exc})")
        return
    print(f"resume at 90% through the engine (replay 900, run 100): {took * 1000:8.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
