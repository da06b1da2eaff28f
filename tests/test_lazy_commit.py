"""What a run makes durable before it goes on, and what it only writes (issue 64; the note DURABLE in
``interpreter/stores/journal.py``).

A durable commit is an fsync (the file journal) or a synchronous commit (PostgreSQL): the one part of a run no
worker can share. A run makes durable a step's intent before it may act and its completion once it may have
acted, a memo and its lifecycle; the completion of a step that cannot act is only written (a resume after a
``kill -9`` of the writer finds it; a crash of the machine may lose it, and those steps run again, which is
safe because they cannot act). The property: whatever the plan, when a tool that may act is called,
everything recorded before its intent is durable; and a chain of pure steps syncs a few times, not once a step.
"""

from __future__ import annotations

import json
import random

import pytest

import dagplan
from dagplan.interpreter.stores import pgstore, store, wal

_CURRENT: list = []  # the journal of the run in progress (one run at a time here)


def _spy(monkeypatch, cls) -> list:
    """Every acting call's (step, durable seq of the run's journal when it was called); the journal noted as
    it records."""
    original = cls.record

    def record(self, event):
        if not _CURRENT or _CURRENT[-1] is not self:
            _CURRENT.append(self)
        return original(self, event)

    monkeypatch.setattr(cls, "record", record)
    return []


def _tools(calls: list) -> list:
    @dagplan.tool(purity="pure")
    async def double(x: int = 1) -> int:
        return 2 * x

    @dagplan.tool  # no purity declared: it may act
    async def send(x: int = 1, step: str = "") -> int:
        calls.append((step, _CURRENT[-1]._durable_seq))
        return x + 1

    return [double, send]


def _random_plan(rng: random.Random, size: int) -> dict:
    steps = []
    for i in range(size):
        before = [f"s{j}" for j in range(i) if rng.random() < 0.3]
        acts = rng.random() < 0.4
        step = {"id": f"s{i}", "tool": "send" if acts else "double", "output": f"†state.s{i}"}
        step["args"] = {"x": f"†state.{before[0]}" if before else 1}
        if acts:
            step["args"]["step"] = f"s{i}"
        if len(before) > 1:
            step["deps"] = before[1:]
        steps.append(step)
    return {"steps": steps}


def _plan(doc: dict):
    return dagplan.load(text=json.dumps(doc))


def _started_seq(run, step: str) -> int:
    return next(e["seq"] for e in run.lines() if e.get("type") == "plan_step_started" and e.get("step") == step)


def test_whatever_the_plan_a_tool_that_may_act_is_called_only_once_everything_before_its_intent_is_durable(
    tmp_path, monkeypatch
):
    calls = _spy(monkeypatch, store.Run)
    rng = random.Random(64)
    checked = 0
    for n in range(25):
        calls.clear()
        plan = _random_plan(rng, rng.randint(3, 14))
        result = dagplan.run(_plan(plan), tools=_tools(calls), durable=True, state_dir=tmp_path / f"p{n}")
        assert result.status == "completed", result.message
        run = store.RunStore(tmp_path / f"p{n}").open(result.run_id)
        for step, durable in calls:
            assert durable >= _started_seq(run, step), (plan, step)  # its intent, and all before it
            checked += 1
    assert checked > 40  # the plans did call tools that may act


def _syncs(monkeypatch) -> list:
    counted: list = []
    real = wal.sync_data

    def sync_data(fd):
        counted.append(fd)
        real(fd)

    monkeypatch.setattr(wal, "sync_data", sync_data)
    return counted


def _chain(tool: str, size: int = 20) -> dict:
    steps = [{"id": "s0", "tool": tool, "args": {"x": 1}, "output": "†state.s0"}]
    steps += [{"id": f"s{i}", "tool": tool, "args": {"x": f"†state.s{i - 1}"}, "output": f"†state.s{i}"}
              for i in range(1, size)]  # fmt: skip
    return {"steps": steps}


def test_a_chain_of_pure_steps_syncs_a_few_times_a_run_and_one_that_may_act_twice_a_step(tmp_path, monkeypatch):
    calls = _spy(monkeypatch, store.Run)
    syncs = _syncs(monkeypatch)
    pure = dagplan.run(_plan(_chain("double")), tools=_tools(calls), durable=True, state_dir=tmp_path / "pure")
    assert pure.status == "completed" and pure.state["s19"] == 2**20
    pure_syncs = len(syncs)
    syncs.clear()
    acting = dagplan.run(_plan(_chain("send")), tools=_tools(calls), durable=True, state_dir=tmp_path / "acts")
    assert acting.status == "completed" and acting.state["s19"] == 21
    assert pure_syncs <= 4, pure_syncs  # the run's start, its end, its release: not one a step
    assert len(syncs) >= 40, len(syncs)  # each step's intent before its call, and its completion after
    # what was only written is in the journal all the same: another process reads every completion
    run = store.RunStore(tmp_path / "pure").open(pure.run_id)
    assert [e["step"] for e in run.lines() if e.get("type") == "plan_step_completed"] == [f"s{i}" for i in range(20)]


def test_over_postgresql_too_an_acting_call_finds_everything_before_its_intent_durable(tmp_path, monkeypatch, postgres):
    calls = _spy(monkeypatch, pgstore.PgRun)
    rng = random.Random(65)
    for _ in range(8):
        calls.clear()
        plan = _random_plan(rng, rng.randint(4, 12))
        result = dagplan.run(_plan(plan), tools=_tools(calls), durable=True, state_dir=postgres)
        assert result.status == "completed", result.message
        run = pgstore.PgRegistry(postgres).open(result.run_id)
        seqs = {line["step"]: line["seq"] for line in map(json.loads, run._lines_after(0))
                if line.get("type") == "plan_step_started"}  # fmt: skip
        for step, durable in calls:
            assert durable >= seqs[step], (plan, step)


def test_a_lazy_insert_commits_its_own_transaction_without_waiting_for_the_wal_and_leaves_the_session_as_it_was(
    postgres,
):
    import psycopg

    pgstore.upgrade(postgres)
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("INSERT INTO dagplan_runs (id, plan_name, created, artifact) VALUES ('r', 'p', 0, '{}')")
        lazy = conn.execute(pgstore._insert_sql(2, durable=False), ["r", 1, "{}", "r", 2, "{}"]).fetchall()
        assert lazy == [("off",), ("off",)]  # set inside the INSERT's own transaction, read when it commits
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)  # and for it alone
        assert conn.execute("SELECT count(*) FROM dagplan_events WHERE run_id = 'r'").fetchone() == (2,)
        assert "set_config" not in pgstore._insert_sql(2)


@pytest.mark.parametrize("durable", [False, True])
def test_a_durable_commit_after_lazy_ones_makes_them_durable_even_with_nothing_new(tmp_path, monkeypatch, durable):
    """The file journal: a durable commit with nothing buffered still syncs what was only written before."""
    import asyncio

    from dagplan.interpreter.core.vocabulary import Event, EventType

    syncs = _syncs(monkeypatch)
    registry = store.RunStore(tmp_path)
    run = registry.create(plan_doc={"steps": []}, plan_name="p", inputs={})
    run.acquire()
    run.record(Event(EventType.PLAN_STARTED, run.id, None, 0.0))

    async def go():
        await run.commit(durable=False)
        assert run._written_seq == run._seq > run._durable_seq
        syncs.clear()
        await run.commit(durable=durable)

    asyncio.run(go())
    assert (run._durable_seq == run._seq) is durable
    assert len(syncs) == int(durable)
    run.release()
