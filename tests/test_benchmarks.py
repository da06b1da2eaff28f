"""The benchmarks stay runnable: each module imports (one pointed at a module moved by a refactor before),
and a point of the report's scale curves runs (the figures themselves are never asserted here)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_every_benchmark_module_imports(name, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    importlib.import_module(f"benchmarks.{name}")


@pytest.mark.parametrize("shape", ["check", "json.loads", "run memory", "fan-out"])
def test_a_point_of_the_report_s_scale_curves_runs(shape):
    out = subprocess.run([sys.executable, "-m", "benchmarks.report", "--point", shape, "1000"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    point = json.loads(out.stdout.strip().splitlines()[-1])
    assert point["us"] > 0 and point["bytes"] > 0


def test_the_report_s_start_up_rows_time_the_editable_and_the_installed_package():
    """The start-up rows run: `dagplan check` from this checkout and from a copy installed as
    `pip install .` installs it (what a pre-commit hook gets), each of which must check the plan."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.report", "--repeat", "1",
                          "--skip", "engine,durability,postgres,check,latency,scale,planning,agent,reuse"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| `dagplan check`")]
    assert [("editable install" in r, "installed (`pip install .`" in r) for r in rows] == [
        (True, False),
        (False, True),
    ]
    assert "the editable finder's share of every start" in out.stderr


def test_the_report_s_engine_and_latency_rows_measure_against_their_floors():
    """Issue 43's rows: the engine against the done-callback floor (the earlier floor beside it), the language
    server's didChange-to-diagnostics and `dagplan mcp` answering while it checks a 10,000-step plan."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.report", "--repeat", "1", "--skip",
                          "startup,durability,postgres,check,scale,planning,agent,reuse"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 5, rows
    assert all("done-callback floor" in r for r in rows[:3]) and "tasks up front" in rows[0]
    assert "didChange to publishDiagnostics" in rows[3] and "check_plan" in rows[4]
    assert all(r.rstrip(" |").endswith(("met", "not met")) for r in rows), rows


def test_plan_first_and_react_run_on_the_same_tasks_and_are_scored_alike(stub):
    """bench_agent's two ways, each on a stubbed model: ReAct calls one tool a turn then answers; the plan runs
    its steps; both are scored by dagplan eval's rule on what was actually called."""
    import asyncio

    sys.path.insert(0, str(ROOT))
    from llm_stub import json_reply

    from benchmarks import bench_agent
    from benchmarks.bench_planning import catalogs

    tools = catalogs()["examples"]
    (catalog, task), *_ = [(c, t) for c, t in bench_agent.chains(40) if t.id == "chain-lisbon-park"]
    kwargs = stub.kwargs()
    stub.script(json_reply({"call": "getWeather", "arguments": {"city": "Lisbon"}}),
                json_reply({"call": "findPark", "arguments": {"weather": {"city": "Lisbon"}}}),
                json_reply({"call": "presentSuggestion", "arguments": {"suggestion": "a park"}}),
                json_reply({"answer": "done"}))  # fmt: skip
    reacted = asyncio.run(bench_agent.react(task, tools, "openai/gpt-4o-mini", 0.0, completion_kwargs=kwargs))
    assert reacted["calls"] == 4 and reacted["nodes"] == (3, 0, 0) and reacted["edges"] == (2, 0, 0)
    assert reacted["values"] == (1, 1) and reacted["first_tool"] is not None
    plan = {"steps": [
        {"id": "w", "tool": "getWeather", "args": {"city": "Lisbon"}, "output": "$state.sunny || $state.rainy"},
        {"id": "p", "tool": "findPark", "args": {"weather": "$state.sunny"}, "output": "$state.park"},
        {"id": "s", "tool": "presentSuggestion", "args": {"suggestion": "$state.park"}, "output": "$state.told"}]}  # fmt: skip
    stub.script(json_reply(plan))
    planned = asyncio.run(bench_agent.plan_first(task, tools, "openai/gpt-4o-mini", 0.0, completion_kwargs=kwargs))
    assert planned["calls"] == 1 and planned["nodes"] == (3, 0, 0) and planned["edges"] == (2, 0, 0), planned
    # streamed: the stub holds the rest of the plan until the first tool (getWeather, pure) was called
    import threading

    from llm_stub import streamed

    called = threading.Event()
    real_call = bench_agent.FakeTools.call

    async def noting(self, name, args):
        called.set()
        return await real_call(self, name, args)

    bench_agent.FakeTools.call = noting  # type: ignore[method-assign]
    try:
        stub.script(streamed(json.dumps(plan), hold_after='"$state.sunny || $state.rainy"}', hold=called))
        flowing = asyncio.run(bench_agent.streamed(task, tools, "openai/gpt-4o-mini", 0.0, completion_kwargs=kwargs))
    finally:
        bench_agent.FakeTools.call = real_call  # type: ignore[method-assign]
    assert flowing["calls"] == 1 and flowing["nodes"] == (3, 0, 0) and flowing["edges"] == (2, 0, 0), flowing
    assert flowing["before_written"] is True
    lines = bench_agent.summary({"ReAct": [reacted], "plan-first": [planned], "plan-first, streamed": [flowing]})
    assert lines[2].startswith("| ReAct | 4 |") and "| 100.0 | 100.0 | 100.0% |" in lines[2]
    assert lines[3].startswith("| plan-first | 1 |") and lines[4].startswith("| plan-first, streamed | 1 |"), lines
    assert lines[-1].endswith("in 1 of 1 tasks"), lines


def test_react_given_the_guides_help_is_held_to_the_tool_of_each_position_and_the_requests_values(stub):
    """bench_agent's like-for-like way: ReAct with the planner's help. Turn i's schema offers only the tool the
    guide offers at position i, text arguments only the values the request gives (one that carries data: the
    last observation), and after the last position only an answer; the tools shown are the guide's."""
    import asyncio

    sys.path.insert(0, str(ROOT))
    from llm_stub import json_reply

    from benchmarks import bench_agent
    from benchmarks.bench_planning import catalogs

    tools = catalogs()["examples"]
    (catalog, task), *_ = [(c, t) for c, t in bench_agent.chains(40) if t.id == "chain-lisbon-park"]
    turns, said, shown = bench_agent.guided_turns(task.request, tools)
    assert [sorted(turn) for turn in turns] == [["getWeather"], ["findPark"], ["presentSuggestion"]], turns
    assert "Do these in order:\n1. " in said and sorted(shown) == ["findPark", "getWeather", "presentSuggestion"]
    stub.script(json_reply({"call": "getWeather", "arguments": {"city": "Lisbon"}}),
                json_reply({"call": "findPark", "arguments": {"weather": "x"}}),
                json_reply({"call": "presentSuggestion", "arguments": {"suggestion": "a park"}}),
                json_reply({"answer": "done"}))  # fmt: skip
    found = asyncio.run(
        bench_agent.react_guided(task, tools, "openai/gpt-4o-mini", 0.0, completion_kwargs=stub.kwargs())
    )
    assert found["calls"] == 4 and found["nodes"] == (3, 0, 0) and found["edges"] == (2, 0, 0), found
    schemas = [json.dumps(body.get("response_format") or body.get("tools") or {}) for body in stub.requests]
    assert '"const": "getWeather"' in schemas[0] and "findPark" not in schemas[0] and '"Lisbon"' in schemas[0]
    assert '"const": "findPark"' in schemas[1] and "getWeather" not in schemas[1]
    assert "call" not in schemas[3] and '"answer"' in schemas[3]  # after the last position: only an answer


def test_the_reuse_benchmark_runs_only_the_edited_step_and_its_dependents():
    """bench_reuse's two ways (a model answering at once): a full re-run calls the model for all 10 summaries,
    `--reuse` for the edited 8th and the two after it."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import bench_reuse

    found = bench_reuse.measure(latency=0.0, repeat=1)
    assert found["full re-run"]["calls"] == 10 and found["--reuse"]["calls"] == 3, found
    lines = bench_reuse.table(found, 0.0)
    assert lines[-1].startswith("--reuse: 30% of the calls")


def test_the_pools_scaling_models_fit_what_they_were_made_from_and_predict_as_their_laws_say():
    """bench_pool's predictions: the universal scalability law fitted to throughputs made by the law gives its
    contention and coherency back; Amdahl's law with a serial fraction f gives 1 / (1 + f (N - 1)) efficiency."""
    from benchmarks import bench_pool

    for s, k in ((0.05, 0.0), (0.1, 0.01), (0.0, 0.02)):
        made = {n: bench_pool.predicted(100.0, n, s=s, k=k) for n in (1, 2, 4)}
        fitted = bench_pool.usl_fit(made)
        assert fitted == pytest.approx((s, k), abs=1e-9), (s, k, fitted)
    eight = bench_pool.predicted(50.0, 8, serial=0.05)
    assert eight / (8 * 50.0) == pytest.approx(1 / (1 + 0.05 * 7))
    # more workers never help past the law's peak: the coherency term makes it fall
    assert bench_pool.predicted(100.0, 16, s=0.05, k=0.01) < bench_pool.predicted(100.0, 8, s=0.05, k=0.01)


def test_the_pools_per_run_work_is_read_from_the_servers_statistics(tmp_path):
    """bench_pool on a server of its own, as its command does (statistics on): a 20-step run's statements,
    commits and WAL come out of the server's own counters, and a durable chain commits at least once a step."""
    from benchmarks import bench_pool
    from pg_server import start_postgres

    _, stop, url = start_postgres(bench_pool.STATISTICS)
    try:
        from dagplan.interpreter.stores.pgstore import PgRegistry

        PgRegistry(url).connection()  # the schema
        work = bench_pool.per_run(url, tmp_path, runs=3)
    finally:
        stop()
    assert work["commits"] >= 20 and work["statements"] >= 20 and work["WAL bytes"] > 0, work
    assert work["WAL syncs"] >= 1 and work["WAL write+sync ms"] > 0, work
