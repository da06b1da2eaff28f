"""Runs in PostgreSQL (issue 15, the journal): a real server, every command, the kill harness."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import dagplan
from dagplan.interpreter.stores import pgstore
from dagplan.interpreter.stores.registry import open_registry
from dagplan.interpreter.core.vocabulary import EventType, StepStatus
from as_user import run_dagplan_s

HERE = Path(__file__).parent
EXAMPLES = HERE.parent / "examples"
KILLS = 12


def cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_every_command_works_against_the_database(tmp_path, postgres):
    for name in ("weather.yaml", "approve_refund.yaml", "tools.py"):
        shutil.copy(EXAMPLES / name, tmp_path)
    from dagplan.interpreter.stores.pgstore import SCHEMA_VERSION

    assert f"schema version {SCHEMA_VERSION} (was 0)" in cli("db", "upgrade", "--state", postgres, cwd=tmp_path).stderr
    assert "up to date" in cli("db", "upgrade", "--state", postgres, cwd=tmp_path).stderr
    (tmp_path / "dagplan.toml").write_text(f'state = "{postgres}"\ntools = ["tools.py"]\n')
    done = cli("run", "weather.yaml", "-i", "city=Rome", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    listed = json.loads(cli("runs", "--format", "json", cwd=tmp_path).stdout)
    assert [(r["id"], r["status"], r["done"]) for r in listed] == [(run_id, "completed", 4)]
    shown = json.loads(cli("runs", "show", run_id[:12], "--format", "json", cwd=tmp_path).stdout)
    assert shown["steps"]["present"]["output"].startswith("Today I suggest")
    events = cli("events", run_id, "--filter", "tool_called", cwd=tmp_path).stdout
    assert events.count("tool_called") == 3 and '"city": "Rome"' in events

    waiting = cli("run", "approve_refund.yaml", "-i", "customerId=c1", "-i", "amount=5", "--no-input", cwd=tmp_path)
    assert waiting.returncode == 3, waiting.stderr
    gated = json.loads(cli("runs", "--format", "json", cwd=tmp_path).stdout)[0]
    assert gated["status"] == "waiting" and gated["waiting"][0]["step"] == "approve"
    assert cli("answer", gated["id"], "approve", "approve", cwd=tmp_path).returncode == 0
    resumed = cli("resume", gated["id"], "--format", "json", cwd=tmp_path)
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["status"] == "completed", resumed.stderr
    assert cli("discard", gated["id"], cwd=tmp_path).returncode == 0
    assert [r["id"] for r in json.loads(cli("runs", "--format", "json", cwd=tmp_path).stdout)] == [run_id]
    export = cli("runs", "export", run_id, cwd=tmp_path)
    assert [c["name"] for c in json.loads(export.stdout)["calls"]] == ["getWeather", "findPark", "presentSuggestion"]


def test_the_environment_names_the_database_and_one_writer_holds_a_run(tmp_path, postgres):
    shutil.copy(EXAMPLES / "weather.yaml", tmp_path)
    shutil.copy(EXAMPLES / "tools.py", tmp_path)
    done = cli("run", "weather.yaml", "--tools", "tools.py", "-i", "city=Oslo", "--format", "json", cwd=tmp_path,
               env={"DAGPLAN_STATE": postgres})  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = open_registry(postgres).open(json.loads(done.stdout)["run_id"])
    run.acquire()
    try:
        again = open_registry(postgres).open(run.id)
        with pytest.raises(dagplan.RunError) as caught:
            again.acquire()
        assert caught.value.headline.code == "run-locked" and str(os.getpid()) in caught.value.headline.message
        assert open_registry(postgres).open(run.id).progress().status == "completed"
    finally:
        run.release()
    again.acquire()  # free again once released
    again.release()


def test_a_released_run_s_connection_serves_the_next_run_with_no_lock_left(tmp_path, postgres):
    """A worker going from run to run reuses its writer connection (no new backend each run); what it
    held of the last run is released first: another process takes that run at once."""
    import psycopg

    shutil.copy(EXAMPLES / "weather.yaml", tmp_path)
    shutil.copy(EXAMPLES / "tools.py", tmp_path)
    ids = []
    for city in ("Oslo", "Rome"):
        done = cli("run", "weather.yaml", "--tools", "tools.py", "-i", f"city={city}", "--format", "json",
                   cwd=tmp_path, env={"DAGPLAN_STATE": postgres})  # fmt: skip
        ids.append(json.loads(done.stdout)["run_id"])
    registry = open_registry(postgres)
    first = registry.open(ids[0])
    first.acquire()
    conn = first._writer
    first.release()
    with psycopg.connect(postgres, autocommit=True) as other:  # nothing of the first run is held any more
        sql = "SELECT pg_try_advisory_lock(%s, hashtext(%s))"
        assert other.execute(sql, (pgstore.LOCK_CLASS, ids[0])).fetchone()[0] is True
        other.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (pgstore.LOCK_CLASS, ids[0]))
    second = registry.open(ids[1])
    second.acquire()
    try:
        assert second._writer is conn  # the same connection, not a new one
    finally:
        second.release()


def test_completions_that_land_together_share_one_transaction(postgres):
    import psycopg

    steps = [{"id": f"s{i}", "tool": "noop", "output": f"†state.v{i}"} for i in range(100)]
    plan = dagplan.load(text=json.dumps({"steps": steps}))

    async def noop() -> int:
        return 1

    registry = open_registry(postgres)
    registry.connection()  # the schema, before counting

    def commits() -> int:
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_force_next_flush()")
            return conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()[0]

    before = commits()
    result = dagplan.run(plan, tools={"noop": noop}, durable=True, state_dir=postgres)
    assert result.status == "completed"
    assert len(list(open_registry(postgres).open(result.run_id).events({EventType.STEP_COMPLETED}))) == 100
    assert commits() - before < 60  # 100 completions (and 300 events) in far fewer transactions


def test_a_submitted_run_is_queued_by_the_one_statement_that_writes_it(postgres):
    """A submit interrupted half-way must not leave a run that no worker will take up: the run's row is
    written already queued (one INSERT, no UPDATE after it)."""
    import psycopg

    registry = open_registry(postgres)
    conn = registry.connection()  # the schema first: its statements are not the submit's
    run_id = registry.submit(plan_doc={"steps": [{"id": "a", "tool": "t"}]}, plan_name="p", inputs={})
    conn.execute("SELECT pg_stat_force_next_flush()")  # this session's counts, flushed before it answers
    with psycopg.connect(postgres, autocommit=True) as other:
        written = other.execute(
            "SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'dagplan_runs'"
        ).fetchone()
    assert written == (1, 0)
    assert registry.claimable() == 1 and registry.list()[0].status == "queued" and registry.list()[0].id == run_id


@pytest.mark.parametrize("rows", [1, 3, pgstore._INSERT_MAX, pgstore._INSERT_MAX + 1, 500])
def test_a_commit_of_any_size_lands_whole_in_one_transaction(postgres, rows):
    """A few events go in one INSERT, many by COPY: either way every event of the commit is stored, in
    order, text as written (quotes, newlines, non-ASCII), and the commit is one transaction."""
    import psycopg

    from dagplan.interpreter.core.vocabulary import Event

    registry = open_registry(postgres)
    run = registry.create(plan_doc={"steps": [{"id": "a", "tool": "t"}]}, plan_name="p", inputs={})
    run.acquire()
    try:
        run.record(Event(EventType.PLAN_STARTED, run.id))
        run.commit_sync()
        texts = [f'line {i}: "quoted"\n\u00e9\u4e2d {"x" * (i % 7)}' for i in range(rows)]
        for text in texts:
            run.record(Event(EventType.TOOL_CALLED, run.id, "a", data={"name": "t", "args": {"text": text}}))
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_force_next_flush()")
            query = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            before = conn.execute(query).fetchone()[0]
            run.commit_sync()
            conn.execute("SELECT pg_stat_force_next_flush()")
            after = conn.execute(query).fetchone()[0]
    finally:
        run.release()
    stored = [e.data["args"]["text"] for e in open_registry(postgres).open(run.id).events({EventType.TOOL_CALLED})]
    assert stored == texts
    assert after - before <= 3  # the commit, and this connection's own two reads


# --- the kill harness, against the database --------------------------------------------------

sys.path.insert(0, str(HERE))
from test_durability import STEP_IDS, plan20  # noqa: E402


class PgCase:
    def __init__(self, folder: Path, url: str):
        self.folder, self.url = folder, url
        self.plan = folder / "plan.json"
        self.plan.write_text(json.dumps(plan20(), ensure_ascii=False), encoding="utf-8")
        self.journal = folder / "journal.txt"
        self.journal.touch()
        self.env = {**os.environ, "DAGPLAN_TEST_JOURNAL": str(self.journal), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                    "DAGPLAN_STATE": url}  # fmt: skip

    def command(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "dagplan",
            *args,
            "--tools",
            str(HERE / "durability_tools.py"),
            "--format",
            "json",
        ]

    def start(self) -> subprocess.Popen:
        return subprocess.Popen(self.command("run", str(self.plan)), cwd=self.folder, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip

    def runs(self) -> Counter:
        return Counter(self.journal.read_text(encoding="utf-8").split())

    def outputs(self, run_id: str) -> dict:
        run = open_registry(self.url).open(run_id)
        return {sid: run.step_output(sid) for sid in STEP_IDS}


@pytest.fixture
def pg_baseline(tmp_path, postgres):
    (tmp_path / "baseline").mkdir()
    case = PgCase(tmp_path / "baseline", postgres)
    proc = case.start()
    t0 = time.perf_counter()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    run_id = json.loads(out)["run_id"]
    return {"outputs": case.outputs(run_id), "took": time.perf_counter() - t0}


def test_kill_9_at_seeded_points_then_resume_loses_nothing_and_repeats_nothing(tmp_path, postgres, pg_baseline):
    for seed in range(KILLS):
        (tmp_path / f"kill{seed}").mkdir()
        case = PgCase(tmp_path / f"kill{seed}", postgres)
        proc = case.start()
        line = proc.stderr.readline()
        assert line.startswith("run "), line
        run_id = line.split()[1]
        time.sleep(random.Random(seed).uniform(0, pg_baseline["took"] * 1.1))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        progress = open_registry(postgres).open(run_id).progress()
        done_before = set(progress.by_status(StepStatus.COMPLETED))
        if progress.status != "completed":
            resumed = subprocess.run(case.command("resume", run_id, "--yes"), cwd=case.folder, env=case.env,
                                     capture_output=True, text=True, timeout=120)  # fmt: skip
            assert resumed.returncode == 0, resumed.stderr
            assert json.loads(resumed.stdout)["status"] == "completed"
        assert case.outputs(run_id) == pg_baseline["outputs"], f"seed {seed}"
        runs = case.runs()
        assert set(runs) == set(STEP_IDS)
        for step_id in done_before:
            assert runs[step_id] == 1, f"seed {seed}: {step_id} completed before the kill but ran {runs[step_id]} times"


def test_processes_meeting_a_new_database_at_once_create_its_schema_once(postgres):
    """A worker and a submit starting together on an empty database: every one of them upgrades it, none fails
    (CREATE TABLE IF NOT EXISTS is no lock of its own: two at once collide in the catalog)."""
    import threading

    from dagplan.interpreter.stores.pgstore import SCHEMA_VERSION, upgrade

    start, found, failed = threading.Barrier(6), [], []

    def meet() -> None:
        start.wait()
        try:
            found.append(upgrade(postgres))
        except Exception as exc:  # noqa: BLE001 - the race this test is about
            failed.append(repr(exc))

    threads = [threading.Thread(target=meet) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failed == [] and len(found) == 6, failed
    assert sorted(before for before, _ in found)[0] == 0 and {after for _, after in found} == {SCHEMA_VERSION}
    assert sum(1 for before, _ in found if before == 0) == 1  # migrated once; the others found it done


def test_a_run_whose_database_goes_away_ends_with_state_unavailable_and_resumes(tmp_path, postgres):
    import psycopg

    (tmp_path / "t.py").write_text(
        "import dagplan, os, time\n"
        "@dagplan.tool(purity='pure')\ndef hold() -> int:\n"
        "    open('started', 'w').close()\n"
        "    while not os.path.exists('go'):\n        time.sleep(0.02)\n    return 1\n"
        "@dagplan.tool(purity='pure')\ndef inc(n: int) -> int:\n    return n + 1\n"
    )
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: hold, output: †state.a}\n"
                                     "  - {id: b, tool: inc, args: {n: †state.a}, output: †state.b}\nresult: †state.b\n")  # fmt: skip
    name = postgres.rsplit("/", 1)[1]
    admin = postgres.rsplit("/", 1)[0] + "/postgres"
    assert run_dagplan_s(tmp_path, "db", "upgrade", "--state", postgres).returncode == 0
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    run = subprocess.Popen([sys.executable, "-m", "dagplan", "run", "p.yaml", "--tools", "t.py", "--state", postgres],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # a bound on waiting for the first step, not a timing assertion
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and run.poll() is None, run.communicate()
            time.sleep(0.05)
        with psycopg.connect(admin, autocommit=True) as conn:  # the database goes away under the run
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        (tmp_path / "go").touch()
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 2 and "state-unavailable" in out + err and "Traceback" not in out + err, err
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    listed = run_dagplan_s(tmp_path, "runs", "--state", postgres, "--format", "json")
    run_id = json.loads(listed.stdout)[0]["id"]
    resumed = run_dagplan_s(tmp_path, "resume", run_id, "--tools", "t.py", "--state", postgres)
    assert resumed.returncode == 0, resumed.stderr
