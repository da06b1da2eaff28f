"""The durable run store: log integrity, artifacts, spills, group commit, locks, resume analysis."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
import textwrap

import pytest

from dagplan.dsl.errors import RunError
from dagplan.interpreter.stores import store as store_mod
from dagplan.interpreter.stores import wal
import dagplan
from dagplan.dsl import check
from dagplan.interpreter.stores.journal import GroupCommit, StepMemo, clear_from
from dagplan.interpreter.engine.resume import resume_plan
from dagplan.interpreter.stores.store import INLINE_LIMIT, RunStore
from dagplan.interpreter.core.vocabulary import Event, EventType
from as_user import run_dagplan_s

DOC = {
    "steps": [
        {"id": "a", "tool": "t"},
        {"id": "b", "tool": "t", "purity": "side_effect"},
        {"id": "c", "tool": "t", "purity": "idempotent"},
        {"id": "d", "tool": "t"},
    ]
}


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "state")


def new_run(store, **kw):
    run = store.create(plan_doc=DOC, plan_name="p.yaml", inputs={"x": 1}, **kw)
    run.acquire()
    return run


def complete(run, step, output="ok"):
    return run.record(
        Event(
            EventType.STEP_COMPLETED,
            run.id,
            step,
            duration=0.01,
            data={"output": output, "attempts": 1, "replayed": False},
        )
    )


def finish(run, step, output="ok"):
    run.append({"type": "plan_step_started", "step": step})
    return complete(run, step, output)


def plan_of(doc):
    found = check(text=json.dumps(doc), name="p.json")
    assert found.ok, found.diagnostics
    return found.plan


def codes(excinfo):
    return excinfo.value.code


# --- log lines ---------------------------------------------------------------------------


def test_line_roundtrip_and_checksum():
    line = wal.encode_line({"type": "x", "seq": 1, "text": "é\udc80"})
    assert line.isascii() and line.endswith(b"}\n")
    assert wal.decode_line(line) == {"type": "x", "seq": 1, "text": "é\udc80"}
    assert wal.decode_line(line.replace(b'"x"', b'"y"')) is None
    assert wal.decode_line(line[:-5]) is None


def test_default_state_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("DAGPLAN_STATE_DIR", str(tmp_path / "s"))
    assert RunStore().state_dir == tmp_path / "s"
    monkeypatch.delenv("DAGPLAN_STATE_DIR")
    assert str(store_mod.default_state_dir()) == ".dagplan"


def test_run_ids_are_sortable_and_file_safe(store):
    ids = [store.create(plan_doc=DOC, plan_name="p", inputs={}).id for _ in range(3)]
    assert len(set(ids)) == 3
    for run_id in ids:
        assert run_id.replace("-", "").isalnum() and len(run_id) == 20


# --- reopening ---------------------------------------------------------------------------


def test_progress_survives_reopen(store):
    run = new_run(store)
    run.append({"type": "plan_started"})
    finish(run, "a", {"n": 1})
    run.append({"type": "plan_step_started", "step": "b"})
    run.append({"type": "plan_step_failed", "step": "c", "error": {"type": "E", "message": "m"}, "attempts": 3})
    run.append({"type": "plan_step_skipped", "step": "d", "reason": "branch"})
    run.commit_sync()
    run.release()
    progress = store.open(run.id).progress()
    assert progress.status == "interrupted"
    assert {s: p.status for s, p in progress.steps.items()} == {
        "a": "completed",
        "b": "interrupted",
        "c": "failed",
        "d": "skipped",
    }
    assert progress.steps["a"].output == {"n": 1}
    assert progress.steps["c"].error == {"type": "E", "message": "m"} and progress.steps["c"].attempts == 3
    assert progress.done == 3


def test_uncommitted_events_are_not_on_disk(store):
    run = new_run(store)
    finish(run, "a")
    assert list(store.open(run.id).events()) == []
    run.commit_sync()
    assert [e.seq for e in store.open(run.id).events()] == [1, 2]


def test_replayed_completion_keeps_recorded_output(store):
    run = new_run(store)
    finish(run, "a", "first")
    run.append({"type": "plan_step_completed", "step": "a", "replayed": True, "duration": 0.0})
    run.commit_sync()
    assert store.open(run.id).step_output("a") == "first"


@pytest.mark.parametrize("room", [b"", b"\0" * 4096], ids=["at the end", "inside the reserved room"])
def test_torn_last_line_is_dropped_and_cut_on_acquire(store, room):
    run = new_run(store)
    finish(run, "a")
    run.commit_sync()
    run.release()
    log = run.dir / "wal.jsonl"
    whole = log.read_bytes()
    with open(log, "ab") as f:  # a crash in the middle of writing a line (into the room reserved ahead, or not)
        f.write(wal.encode_line({"type": "plan_step_started", "step": "b", "seq": 3})[:-9] + room)
    found = wal.scan(log)
    assert (len(found.events), found.end, found.torn) == (2, len(whole), True)
    reopened = store.open(run.id)
    assert [e.seq for e in reopened.events()] == [1, 2]
    reopened.acquire()
    assert log.read_bytes() == whole
    finish(reopened, "b")
    reopened.commit_sync()
    assert [e.seq for e in store.open(run.id).events()] == [1, 2, 3, 4]


def _can_reserve(folder) -> bool:
    """Whether this file system reserves room (posix_fallocate); where it cannot, the log grows as it is written."""
    probe = folder / "probe"
    with open(probe, "wb") as f:
        try:
            os.posix_fallocate(f.fileno(), 0, 4096)
            return True
        except (AttributeError, OSError):
            return False


def test_the_log_reserves_room_while_written_and_a_crash_leaves_zeros_readers_stop_at(store, tmp_path):
    """A commit writes into room reserved ahead (its size unchanged, an fdatasync is enough): while the
    run is written, and after a crash, the file ends in zeros; readers take the whole lines before them
    as the log (no torn tail, no corruption), the next owner cuts them, and a run let go has none."""
    run = new_run(store)
    finish(run, "a")
    run.commit_sync()
    log = run.dir / "wal.jsonl"
    live = log.read_bytes()
    lines = live.rstrip(b"\0")
    if _can_reserve(tmp_path):
        assert len(live) >= wal.ROOM and live.endswith(b"\0") and lines.endswith(b"\n")
    found = wal.scan(log)
    assert (len(found.events), found.end, found.torn, found.corrupt_line) == (2, len(lines), False, None)
    assert [e.seq for e in store.open(run.id).events()] == [1, 2]
    run.release()
    assert log.read_bytes() == lines  # let go: whole lines only

    log.write_bytes(live)  # as a kill -9 leaves it
    again = store.open(run.id)
    assert again.notice is None and [e.seq for e in again.events()] == [1, 2]
    again.acquire()
    assert log.read_bytes().rstrip(b"\0") == lines  # the zeros a crash left were cut before appending
    finish(again, "b")
    again.commit_sync()
    again.release()
    assert [e.seq for e in store.open(run.id).events()] == [1, 2, 3, 4]
    assert b"\0" not in log.read_bytes()


def test_last_line_with_bad_checksum_is_dropped(store):
    run = new_run(store)
    finish(run, "a")
    run.commit_sync()
    run.release()
    log = run.dir / "wal.jsonl"
    data = log.read_bytes()
    flipped = b"1" if data[-4:-3] != b"1" else b"2"
    log.write_bytes(data[:-4] + flipped + b'"}\n')
    assert store.open(run.id).progress().steps["a"].status == "interrupted"


def test_corrupt_middle_line_names_run_and_line(store):
    run = new_run(store)
    for step in "abc":
        finish(run, step)
    run.commit_sync()
    run.release()
    log = run.dir / "wal.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"b"', b'"z"')
    log.write_bytes(b"".join(lines))
    with pytest.raises(RunError) as excinfo:
        store.open(run.id)
    assert codes(excinfo) == "corrupt-log"
    assert run.id in str(excinfo.value) and "line 3" in str(excinfo.value)
    [info] = store.list()  # list() reports it, never raises
    assert info.notice and "line 3" in info.notice


def test_missing_artifact(store):
    run = new_run(store)
    run.release()
    (run.dir / "plan.json").unlink()
    with pytest.raises(RunError) as excinfo:
        store.open(run.id)
    assert codes(excinfo) == "missing-artifact"
    assert f"dagplan discard {run.id}" in excinfo.value.hint
    [info] = store.list()
    assert info.status == "discarded" and "missing" in info.notice


@pytest.mark.parametrize("damage", [lambda b: b[:-30], lambda b: b.replace(b"p.yaml", b"q.yaml"), lambda b: b"{}"])
def test_corrupt_artifact(store, damage):
    run = new_run(store)
    run.release()
    artifact = run.dir / "plan.json"
    artifact.write_bytes(damage(artifact.read_bytes()))
    with pytest.raises(RunError) as excinfo:
        store.open(run.id)
    assert codes(excinfo) == "corrupt-artifact"
    assert "discard" in excinfo.value.hint


def test_unknown_and_prefix_run_ids(store):
    run = new_run(store)
    assert store.open(run.id[:-2]).id == run.id
    with pytest.raises(RunError) as excinfo:
        store.open("nope")
    assert codes(excinfo) == "unknown-run"
    with pytest.raises(RunError) as excinfo:
        store.open("")
    assert codes(excinfo) == "unknown-run"


# --- spills ------------------------------------------------------------------------------

TEXTS = [
    "x" * (INLINE_LIMIT + 1),
    ("line\r\nnext\n\x00\x1b[31m" + "é😀" + "\udc80\udcff") * 4000,  # surrogateescape'd bytes, CRLF, NUL
]


@pytest.mark.parametrize("text", TEXTS)
def test_large_text_spills_byte_identical(store, text):
    run = new_run(store)
    event = finish(run, "a", text)
    run.commit_sync()
    assert event["spill"] == "step_results/a.txt" and "output" not in event
    assert (run.dir / "step_results/a.txt").read_bytes() == text.encode("utf-8", "surrogatepass")
    assert store.open(run.id).step_output("a") == text


def test_large_json_spills_and_round_trips(store):
    value = {"rows": [{"i": i, "f": i / 7, "s": "é" * 3} for i in range(2000)], "n": None}
    run = new_run(store)
    event = finish(run, "a", value)
    run.commit_sync()
    assert event["spill"] == "step_results/a.json"
    assert store.open(run.id).step_output("a") == value
    assert (run.dir / event["spill"]).read_bytes() == wal.dumps(value).encode()


def test_output_at_the_limit_stays_inline(store):
    text = "y" * (INLINE_LIMIT - 2)  # its JSON (with quotes) is exactly the limit
    run = new_run(store)
    assert "output" in finish(run, "a", text)


def test_damaged_spill_is_detected(store):
    run = new_run(store)
    finish(run, "a", "z" * (INLINE_LIMIT + 10))
    run.commit_sync()
    (run.dir / "step_results/a.txt").write_bytes(b"z" * 10)
    with pytest.raises(RunError) as excinfo:
        store.open(run.id).step_output("a")
    assert codes(excinfo) == "corrupt-spill"


def test_memo_inline_and_spilled(store):
    run = new_run(store)
    memo = StepMemo(run, "a")
    memo.memo_put("k1", {"answer": 42})
    memo.memo_put("k/2", "w" * (INLINE_LIMIT + 5))
    run.commit_sync()
    reopened = store.open(run.id)
    assert reopened.memo_get("k1") == (True, {"answer": 42})
    assert reopened.memo_get("k/2") == (True, "w" * (INLINE_LIMIT + 5))
    assert reopened.memo_get("k3") == (False, None)


# --- group commit ------------------------------------------------------------------------


def test_group_commit_shares_fsyncs(store, monkeypatch):
    run = new_run(store)
    calls = []
    real = os.fdatasync  # the log's commit syncs its data (its size does not change: see wal.reserve)
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd))[1])

    async def one(i):
        complete(run, f"s{i}", i)
        await run.commit()

    async def main():
        await asyncio.gather(*(one(i) for i in range(100)))

    asyncio.run(main())
    assert 1 <= len(calls) <= 3  # 100 completions landing together: one fsync, two at most
    assert len(list(store.open(run.id).events())) == 100


def test_commit_waits_for_later_appends(store):
    """A caller arriving during an fsync is not released by that fsync: it gets the next."""
    run = new_run(store)

    async def main():
        run.append({"type": "x"})
        first = asyncio.ensure_future(run.commit())
        await asyncio.sleep(0)  # the first flush is now in flight
        run.append({"type": "y"})
        await run.commit()
        assert run._durable_seq == 2
        await first

    asyncio.run(main())
    assert [e.type for e in store.open(run.id).events()] == ["x", "y"]


def test_commit_sync_one_fsync_per_commit(store, monkeypatch):
    run = new_run(store)
    calls = []
    monkeypatch.setattr(os, "fdatasync", lambda fd: calls.append(fd))
    for i in range(10):
        finish(run, f"s{i}")
        run.commit_sync()
    assert len(calls) == 10
    run.commit_sync()  # nothing new: no fsync
    assert len(calls) == 10


# --- compaction --------------------------------------------------------------------------


def test_compaction_spacing_doubles_and_reopen_uses_snapshot(store, monkeypatch):
    monkeypatch.setattr(store_mod, "COMPACT_MIN", 8)
    run = new_run(store)
    snapshots = []
    real = run.compact
    monkeypatch.setattr(run, "compact", lambda: (snapshots.append(run._seq), real())[1])
    for i in range(200):
        finish(run, f"s{i}", i)
        run.commit_sync()
    assert snapshots == [8, 16, 32, 64, 128, 256][: len(snapshots)] and len(snapshots) >= 5
    reopened = store.open(run.id)
    assert reopened.step_output("s199") == 199 and reopened.step_output("s0") == 0
    assert len(list(reopened.events())) == 400  # compaction never drops log lines


def test_corrupt_snapshot_falls_back_to_the_log(store):
    run = new_run(store)
    finish(run, "a", "A")
    run.compact()
    finish(run, "b", "B")
    run.commit_sync()
    (run.dir / "snapshot.json").write_bytes(b"garbage")
    reopened = store.open(run.id)
    assert reopened.step_output("a") == "A" and reopened.step_output("b") == "B"


# --- locks and processes -----------------------------------------------------------------


def test_lock_contention(store):
    run = new_run(store)
    other = RunStore(store.state_dir).open(run.id)
    with pytest.raises(RunError) as excinfo:
        other.acquire()
    assert codes(excinfo) == "run-locked" and str(os.getpid()) in str(excinfo.value)
    run.release()
    other.acquire()
    other.release()


def test_append_requires_the_lock(store):
    run = store.create(plan_doc=DOC, plan_name="p", inputs={})
    with pytest.raises(RunError) as excinfo:
        run.append({"type": "x"})
    assert codes(excinfo) == "run-not-acquired"


def test_lock_of_a_killed_process_is_free(store, tmp_path):
    run = store.create(plan_doc=DOC, plan_name="p", inputs={})
    code = f"""
        import os
        from dagplan.interpreter.stores.store import RunStore
        run = RunStore({str(store.state_dir)!r}).open({run.id!r})
        run.acquire()
        run.append({{"type": "plan_started"}})
        run.commit_sync()
        os._exit(9)  # like kill -9: no release, no finally
    """
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False)
    [info] = store.list()
    assert info.status == "interrupted" and info.pid is None
    reopened = store.open(run.id)
    reopened.acquire()
    reopened.release()


WRITER = """
import sys
from dagplan.interpreter.stores.store import RunStore
from dagplan.interpreter.core.vocabulary import Event, EventType
store = RunStore(sys.argv[1])
run = store.open(sys.argv[2])
run.acquire()
for i in range(300):
    run.append({"type": "plan_step_started", "step": f"s{i}"})
    run.record(Event(EventType.STEP_COMPLETED, run.id, f"s{i}",
                     data={"output": sys.argv[2] + "-" + str(i) * (i % 7 * 9000), "attempts": 1}))
    run.commit_sync()
run.release()
"""


def test_two_processes_on_two_runs(store):
    runs = [store.create(plan_doc=DOC, plan_name=f"p{i}", inputs={}) for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.state_dir), r.id]) for r in runs]
    listings = []
    while any(p.poll() is None for p in procs):
        listings.append(store.list())  # reads concurrently, never raises
    assert all(p.wait() == 0 for p in procs)
    for r in runs:
        reopened = store.open(r.id)
        assert [e.seq for e in reopened.events()] == list(range(1, 601))
        for i in range(300):
            assert reopened.step_output(f"s{i}") == r.id + "-" + str(i) * (i % 7 * 9000)
    assert {i.status for i in store.list()} == {"interrupted"}


def test_discard_cancels_the_owner_and_removes_state(store):
    run = store.create(plan_doc=DOC, plan_name="p", inputs={})
    code = f"""
        import signal, sys, time
        from dagplan.interpreter.stores.store import RunStore
        run = RunStore({str(store.state_dir)!r}).open({run.id!r})
        run.acquire()
        def stop(*_):
            run.append({{"type": "plan_run_interrupted"}})
            run.release()
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(30)
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    assert store.list()[0].status == "running" and store.list()[0].pid == proc.pid
    store.discard(run.id)
    assert proc.wait(timeout=10) == 0
    assert store.list() == [] and not run.dir.exists()
    [audit] = [json.loads(line) for line in (store.state_dir / "discarded.jsonl").read_text().splitlines()]
    assert audit["type"] == "plan_aborted" and audit["run"] == run.id


def test_discard_broken_run(store):
    run = new_run(store)
    run.release()
    (run.dir / "plan.json").unlink()
    store.discard(run.id)
    assert store.list() == []


# --- status and resume -------------------------------------------------------------------


@pytest.mark.parametrize(
    "events, status",
    [
        ([{"type": "plan_started"}], "interrupted"),
        ([{"type": "plan_started"}, {"type": "plan_run_interrupted"}], "interrupted"),
        ([{"type": "plan_waiting"}], "waiting"),
        ([{"type": "plan_completed", "status": "completed", "had_errors": True}], "completed"),
        ([{"type": "plan_completed", "status": "failed"}], "failed"),
        ([{"type": "plan_aborted"}], "aborted"),
    ],
)
def test_run_status(store, events, status):
    run = new_run(store)
    for event in events:
        run.append(event)
    run.release()
    assert store.list()[0].status == status


def test_resume_plan_follows_purity_policy(store):
    run = new_run(store)
    finish(run, "a")
    for step in "bcd":
        run.append({"type": "plan_step_started", "step": step})
    run.release()
    progress = store.open(run.id).progress()
    plan = resume_plan(progress, plan_of(DOC))
    assert plan.classes == {"a": "completed", "b": "interrupted", "c": "interrupted", "d": "interrupted"}
    # a tool that declares nothing acts (the one rule, dsl.ir.can_act), and a step's `purity:` never makes it
    # laxer: without the tools, every interrupted step is a side effect whose fate a person decides
    assert plan.actions == {"a": "replay", "b": "ask", "c": "ask", "d": "ask"}
    assert plan.asking() == ["b", "c", "d"]
    adopted = resume_plan(progress, plan_of(DOC), None, {"side_effect": "adopt", "undeclared": "retry"})
    assert adopted.actions == {"a": "replay", "b": "adopt", "c": "adopt", "d": "adopt"}
    from dagplan.interpreter.tools.catalog import Tool

    pure = {"t": Tool("t", lambda: None, purity="pure")}  # the tool's word: only the step's own makes it stricter
    known = resume_plan(progress, plan_of(DOC), pure)
    assert known.actions == {"a": "replay", "b": "ask", "c": "retry", "d": "retry"}


def test_clear_from_keeps_earlier_results_and_drops_memo(store):
    run = new_run(store)
    for step in "abcd":
        finish(run, step, step.upper())
        StepMemo(run, step).memo_put(f"m{step}", step)
    cleared = clear_from(run, "c", ["a", "b", "c", "d"])
    run.commit_sync()
    run.release()
    assert cleared == ["c", "d"]
    reopened = store.open(run.id)
    plan = resume_plan(reopened.progress(), plan_of(DOC))
    assert plan.actions == {"a": "replay", "b": "replay", "c": "run", "d": "run"}
    assert reopened.memo_get("mb") == (True, "b") and reopened.memo_get("mc") == (False, None)


def test_resume_rejections(store):
    run = new_run(store)
    run.release()
    tools = {"t": lambda: "ok"}
    with pytest.raises(RunError) as excinfo:
        dagplan.resume(run.id, tools=tools, from_step="zz", state_dir=store.state_dir)
    assert codes(excinfo) == "no-such-step" and excinfo.value.hint == "valid step ids: a, b, c, d"
    with pytest.raises(RunError) as excinfo:
        dagplan.resume("2099", tools=tools, state_dir=store.state_dir)
    assert codes(excinfo) == "unknown-run"
    (run.dir / "plan.json").unlink()
    with pytest.raises(RunError) as excinfo:
        dagplan.resume(run.id, tools=tools, from_step="b", state_dir=store.state_dir)
    assert codes(excinfo) == "missing-artifact" and "dagplan discard" in excinfo.value.hint


# --- the commands ------------------------------------------------------------------------


def cli(*args, state_dir):
    from click.testing import CliRunner

    from dagplan.cli import cli as group

    return CliRunner().invoke(group, [*args], env={"DAGPLAN_STATE_DIR": str(state_dir)}, catch_exceptions=False)


@pytest.fixture
def interrupted(store):
    run = new_run(store)
    run.append({"type": "plan_started"})
    finish(run, "a", "x" * (INLINE_LIMIT + 100))
    run.append({"type": "plan_step_started", "step": "b"})
    run.release()
    return run


def test_cli_runs_lists(store, interrupted):
    out = cli("runs", state_dir=store.state_dir)
    assert out.exit_code == 0
    header, row = out.output.splitlines()
    assert header.split() == ["id", "plan", "status", "done/total", "started"]
    assert row.split()[:4] == [interrupted.id, "p.yaml", "interrupted", "1/4"]
    [entry] = json.loads(cli("runs", "--format", "json", state_dir=store.state_dir).output)
    assert entry["id"] == interrupted.id and entry["status"] == "interrupted"


def test_cli_runs_show(store, interrupted):
    out = cli("runs", "show", interrupted.id[:-1], state_dir=store.state_dir)
    assert out.exit_code == 0
    assert out.output.splitlines()[0] == f"Run {interrupted.id}: interrupted"
    assert "(spilled)" in out.output
    report = json.loads(cli("runs", "show", interrupted.id, "--format", "json", state_dir=store.state_dir).output)
    assert report["steps"]["a"]["output"] == "x" * (INLINE_LIMIT + 100)
    assert [s["status"] for s in report["steps"].values()] == ["completed", "interrupted", "pending", "pending"]


def test_cli_events(store, interrupted):
    out = cli("events", interrupted.id, "--filter", "plan_step_completed", state_dir=store.state_dir)
    assert out.exit_code == 0
    [line] = out.output.splitlines()
    assert "plan_step_completed  a  fresh  10.0ms" in line
    found = json.loads(cli("events", interrupted.id, "--format", "json", state_dir=store.state_dir).output)
    assert [e["seq"] for e in found] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "args, code, exit_code",
    [
        (["runs", "show", "nope"], "unknown-run", 2),
        (["events", "nope"], "unknown-run", 2),
        (["discard", "nope"], "unknown-run", 2),
        (["resume", "nope"], "unknown-run", 2),
    ],
)
def test_cli_unknown_run(store, interrupted, args, code, exit_code):
    out = cli(*args, state_dir=store.state_dir)
    assert out.exit_code == exit_code and f"error {code}:" in out.output


def test_cli_resume_rejects_unknown_step(store, interrupted):
    out = cli("resume", interrupted.id, "--from", "zz", state_dir=store.state_dir)
    assert out.exit_code == 2
    assert "error no-such-step" in out.output and "valid step ids: a, b, c, d" in out.output


def test_cli_resume_rejects_missing_artifact(store, interrupted):
    (interrupted.dir / "plan.json").unlink()
    out = cli("resume", interrupted.id, "--from", "a", state_dir=store.state_dir)
    assert out.exit_code == 1
    assert "error missing-artifact" in out.output and f"dagplan discard {interrupted.id}" in out.output


def test_cli_discard(store, interrupted):
    out = cli("discard", interrupted.id, state_dir=store.state_dir)
    assert out.exit_code == 0 and f"run {interrupted.id} discarded" in out.output
    assert store.list() == []


def test_a_log_line_is_the_encoder_s_json_and_a_cycle_is_refused_as_json_refuses_it():
    """Log lines are encoded by a C encoder built once, without a check for cycles; a cycle still gets
    json's own error (ValueError), never a RecursionError from deep inside."""
    value = {"a": [1, 2.5, None, True, {"b": "x\u00e9\ud800"}], "c": "\u2020state.x"}
    assert wal.dumps(value) == json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    cyclic: dict = {}
    cyclic["self"] = [cyclic]
    with pytest.raises(ValueError, match="Circular reference"):
        wal.dumps(cyclic)


def test_where_room_cannot_be_reserved_the_log_grows_as_it_is_written(store, monkeypatch):
    """A file system without posix_fallocate (or refusing it): nothing reserved, every line still lands."""

    def refuse(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", refuse)
    run = new_run(store)
    for step in "abc":
        finish(run, step)
        run.commit_sync()
    log = run.dir / "wal.jsonl"
    assert b"\0" not in log.read_bytes()
    assert [e.seq for e in store.open(run.id).events()] == [1, 2, 3, 4, 5, 6]
    run.release()
    assert [e.seq for e in store.open(run.id).events()] == [1, 2, 3, 4, 5, 6]


def test_a_watch_reports_at_least_what_it_polled_when_the_run_moves_between(store):
    """The viewer's run page: a watch opened, then the run written on by its owner, then polled. The report
    read after the poll must hold what the poll returned (it was the watch's opening: the page showed the
    completion in its log, `running` in its header, and its stream began after the completion: stale)."""
    from dagplan.interpreter.ops.runs import Watch

    run = new_run(store)
    run.append({"type": "plan_step_started", "step": "a"})
    run.commit_sync()
    watch = Watch(run.id, store)  # opened while step a runs
    complete(run, "a", "done")  # the owner goes on before the page polls
    run.commit_sync()
    events = watch.poll()
    assert [e.step for e in events if e.type == "plan_step_completed"] == ["a"]
    assert watch.report().steps["a"].status == "completed"
    run.release()


class _Journal(GroupCommit):
    """A group-committing journal whose durable write waits for ``gate`` and notes the thread it ran on."""

    def __init__(self, gate):
        self._seq, self._durable_seq, self._written_seq, self._inflight, self.gate, self.on_main = (
            1,
            0,
            0,
            None,
            gate,
            [],
        )

    def _write(self, durable):
        import threading

        self.on_main.append(threading.current_thread() is threading.main_thread())
        assert self.gate.wait(10)
        self._durable_seq = self._written_seq = self._seq


def test_a_commit_does_not_block_the_loop_while_another_run_s_write_is_in_a_thread():
    """Two runs in one loop (a worker's): while one run's write is in a thread, the other's commit goes
    to a thread too, though the loop looks idle; written inline, it would hold every other run's steps
    (measured: a worker's 100 queued 20-step runs, 15.4 -> 14.1 ms a run)."""
    import threading

    async def main():
        slow, fast = _Journal(threading.Event()), _Journal(threading.Event())
        fast.gate.set()
        slow._inflight = asyncio.ensure_future(slow._write_in_thread())
        await asyncio.sleep(0.05)  # the slow write is in its thread, the loop idle
        await asyncio.wait_for(fast.commit(), 5)
        slow.gate.set()
        await slow.commit()
        return slow.on_main, fast.on_main

    slow, fast = asyncio.run(main())
    assert slow == [False] and fast == [False]


def test_a_lone_run_s_commit_is_written_inline():
    """A chain's commit with nothing else in flight: inline (the hop to a thread and back costs as much)."""
    import threading

    async def main():
        journal = _Journal(threading.Event())
        journal.gate.set()
        await journal.commit()
        return journal.on_main

    assert asyncio.run(main()) == [True]


def test_a_disk_that_fills_up_during_a_run_stops_it_cleanly_and_the_run_resumes(weather_project):
    """A write of the journal fails (here RLIMIT_FSIZE stands for a full disk): one clean error saying what
    is kept and how to go on, no traceback; the torn tail is cut; resume completes the run."""
    import resource
    import signal

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1200, 1200))

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    args = [sys.executable, "-m", "dagplan", "run", "weather.yaml", "--tools", "tools.py", "-i", "city=Rome",
            "--state", "fs"]  # fmt: skip
    full = subprocess.run(args, cwd=weather_project, env=env, capture_output=True, text=True, timeout=60,
                          preexec_fn=small_files)  # fmt: skip
    assert full.returncode == 2 and "Traceback" not in full.stderr, full.stderr
    assert "error io: cannot write the journal" in full.stderr and "everything committed before is kept" in full.stderr
    (run_id,) = os.listdir(weather_project / "fs" / "runs")
    assert f"dagplan resume {run_id}" in full.stderr
    resumed = run_dagplan_s(weather_project, "resume", run_id, "--state", "fs")
    assert resumed.returncode == 0 and "biggest park" in resumed.stdout, resumed.stderr


def test_a_full_disk_while_spilling_a_large_output_stops_the_run_and_keeps_what_was_committed(tmp_path, monkeypatch):
    """The journal's own writes already stopped a run on a full disk; a large output spilled to its own file
    did not (OSError: No space left on device). Now both stop the run the same way, and a resume finishes."""
    import errno

    import dagplan
    from dagplan.interpreter.stores import wal

    @dagplan.tool(purity="pure")
    def small() -> int:
        return 1

    @dagplan.tool(purity="pure")
    def blob(n: int) -> str:
        return "x" * 40_000 + str(n)  # spilled beside the journal (over its inline limit)

    plan = dagplan.load(text="steps:\n  - {id: a, tool: small, output: †state.a}\n"
                             "  - {id: b, tool: blob, args: {n: †state.a}, output: †state.b}\nresult: †state.b\n",
                        tools=[small, blob])  # fmt: skip
    real = wal.atomic_write

    def full(path, data):
        if "step_results" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(wal, "atomic_write", full)
    created: list[str] = []
    with pytest.raises(dagplan.DagplanError) as stopped:
        dagplan.run(plan, tools=[small, blob], durable=True, state_dir=tmp_path / "s", on_run_created=created.append)
    assert stopped.value.headline.code == "io" and "No space left" in stopped.value.headline.message
    monkeypatch.setattr(wal, "atomic_write", real)  # space is free again
    resumed = dagplan.resume(created[0], tools=[small, blob], state_dir=tmp_path / "s")
    assert resumed.status == "completed" and resumed.result.endswith("1")
