"""`dagplan runs` over a big history pages (issue 64): the newest 50 unless asked, and only the runs listed are
read, on the file store, in memory and on PostgreSQL alike."""

from __future__ import annotations

import json

import pytest

import dagplan
from as_user import run_dagplan
from dagplan.interpreter.stores.registry import open_registry

PLAN = '{"steps": [{"id": "a", "tool": "one", "output": "$state.a"}]}'


def one() -> int:
    return 1


def _runs(state, count: int) -> list[str]:
    plan = dagplan.load(text=PLAN, name="one.json", tools={"one": one})
    return [dagplan.run(plan, tools={"one": one}, durable=True, state_dir=state).run_id for _ in range(count)]


def test_the_file_store_reads_only_the_runs_it_lists(tmp_path, monkeypatch):
    ids = _runs(tmp_path / "state", 12)
    read = []
    registry = open_registry(tmp_path / "state")
    cls = type(registry)
    original = cls._info
    monkeypatch.setattr(cls, "_info", lambda self, d: read.append(d.name) or original(self, d))
    newest = registry.list(5)
    assert [i.id for i in newest] == ids[::-1][:5] and sorted(read) == sorted(ids[-5:])
    assert [i.id for i in dagplan.runs(tmp_path / "state", limit=3)] == ids[::-1][:3]
    assert len(dagplan.runs(tmp_path / "state")) == 12


def test_memory_and_status_filters_page_until_enough_match():
    memory = dagplan.MemoryRegistry()
    ids = _runs(memory, 7)
    assert [i.id for i in memory.list(2)] == ids[::-1][:2]
    assert [i.id for i in dagplan.runs(memory, limit=3, statuses=["completed"])] == ids[::-1][:3]
    assert dagplan.runs(memory, limit=3, statuses=["waiting"]) == []


def test_the_cli_shows_the_newest_50_and_says_how_to_see_more(tmp_path):
    ids = _runs(tmp_path / "state", 53)
    shown = run_dagplan(tmp_path, "runs", "--format", "json", state="state")
    assert shown.returncode == 0, shown.stderr
    assert [r["id"] for r in json.loads(shown.stdout)] == ids[::-1][:50]
    assert "the newest 50 runs shown; more with --limit N, or --all" in shown.stderr
    every = run_dagplan(tmp_path, "runs", "--all", "--format", "json", state="state")
    assert len(json.loads(every.stdout)) == 53 and "newest" not in every.stderr
    few = run_dagplan(tmp_path, "runs", "--limit", "2", state="state")
    assert few.returncode == 0 and ids[-1] in few.stdout and ids[-3] not in few.stdout
    bad = run_dagplan(tmp_path, "runs", "--limit", "0", state="state")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.usefixtures("postgres")
def test_postgres_lists_the_newest_and_reads_only_their_events(postgres):
    ids = _runs(postgres, 6)
    registry = open_registry(postgres)
    newest = registry.list(4)
    assert [i.id for i in newest] == ids[::-1][:4] and all(i.status == "completed" and i.done == 1 for i in newest)
    assert len(registry.list()) == 6
