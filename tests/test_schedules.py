"""Schedules (issue 42): `[schedule.NAME]` in dagplan.toml, fired by the workers of a real PostgreSQL, once at
each time whoever asks, the latest missed time only after an outage; `dagplan schedule` lists them. Time comes
from the engine's clock, moved by DAGPLAN_CLOCK_OFFSET: no test waits for a minute to pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from dagplan.interpreter.core.config import load_config
from dagplan.interpreter.ops.schedules import Schedule, Scheduler
from dagplan.interpreter.stores.pgstore import PgRegistry

TOOLS = """import dagplan

@dagplan.tool(purity="pure")
def greet(who: str) -> str:
    return "hello " + who
"""
PLAN = "inputs:\n  who: {type: string}\nsteps:\n  - {id: hi, tool: greet, args: {who: †input.who}, output: †state.hi}\n" \
       "result: †state.hi\n"  # fmt: skip
CONFIG = """tools = ["tools.py"]

[schedule.greeting]
plan = "plans/hello.yaml"
cron = "*/5 * * * *"
inputs = {who = "ada"}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "hello.yaml").write_text(PLAN)
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "dagplan.toml").write_text(CONFIG)
    return tmp_path


def dagplan(*args: str, cwd: Path, url: str = "", offset: float = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DAGPLAN_CLOCK_OFFSET": str(offset)}
    if url:
        env["DAGPLAN_STATE"] = url
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def fired_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "submitted by schedule greeting" in line]


def test_workers_fire_a_schedule_once_at_its_latest_time_and_run_it(project, postgres):
    assert dagplan("db", "upgrade", cwd=project, url=postgres).returncode == 0
    first = dagplan("worker", "--drain", cwd=project, url=postgres)  # the workers see it: it counts from now
    assert first.returncode == 0 and fired_lines(first.stderr) == [], first.stderr
    hour = dagplan("worker", "--drain", cwd=project, url=postgres, offset=3600)  # twelve of its times passed
    assert hour.returncode == 0, hour.stderr
    (line,) = fired_lines(hour.stderr)  # the latest only, not twelve
    run_id = line.split()[0]
    assert f"{run_id} completed" in hour.stderr
    run = PgRegistry(postgres).open(run_id)
    assert run.progress().status == "completed" and run.step_output("hi") == "hello ada"
    assert run.meta["schedule"] == "greeting"
    again = dagplan("worker", "--drain", cwd=project, url=postgres, offset=3600)  # the same moment: fired already
    assert fired_lines(again.stderr) == []
    listed = dagplan("schedule", "--format", "json", cwd=project, url=postgres, offset=3600)
    (row,) = json.loads(listed.stdout)["schedules"]
    assert row["name"] == "greeting" and row["last_run"] == run_id and row["cron"] == "*/5 * * * *"
    assert datetime.fromisoformat(row["next"]) > datetime.fromisoformat(row["last"])
    text = dagplan("schedule", cwd=project, url=postgres, offset=3600)
    assert text.returncode == 0 and f"(run {run_id})" in text.stdout and "plans/hello.yaml" in text.stdout


def test_two_workers_asking_at_once_submit_one_run(project, postgres):
    registry = PgRegistry(postgres)
    registry.connection()  # the schema
    config = load_config(project)
    start = datetime(2026, 11, 27, 10, 1, tzinfo=timezone.utc).timestamp()
    made = {"plan_doc": {"steps": []}, "plan_name": "plans/hello.yaml", "inputs": {}, "meta": {}}
    ready = threading.Barrier(4)
    fired: list = []

    def worker() -> None:
        scheduler = Scheduler(config, PgRegistry(postgres), lambda schedule: made)
        scheduler.tick(start)  # the first sight
        ready.wait(30)
        fired.extend(f for f in scheduler.tick(start + 600) if f.run_id)  # 10:05 and 10:10 passed

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(fired) == 1, fired
    assert datetime.fromtimestamp(fired[0].at, timezone.utc).strftime("%H:%M") == "10:10"
    assert registry.schedule_marks()["greeting"][1] == fired[0].run_id
    (count,) = registry.connection().execute("SELECT count(*) FROM dagplan_runs").fetchone()
    assert count == 1  # no run left behind by a worker that lost the race


def test_a_schedule_s_times_follow_its_time_zone_and_a_long_outage_fires_only_the_latest():
    paris = Schedule("s", Path("p.yaml"), "0 9 * * 1-5", {}, "Europe/Paris")
    friday = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc).timestamp()  # a Friday, 13:00 in Paris
    monday_9 = datetime.fromtimestamp(paris.next_after(friday), timezone.utc)
    assert monday_9.isoformat() == "2026-11-30T08:00:00+00:00"  # 09:00 in Paris, winter time
    summer = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc).timestamp()
    assert datetime.fromtimestamp(paris.next_after(summer), timezone.utc).hour == 7  # 09:00 in summer time
    every = Schedule("m", Path("p.yaml"), "* * * * *", {}, "UTC")
    year = 365 * 86400
    latest = every.due(friday - year, friday)  # a year of minutes missed: the last one, found quickly
    assert latest == friday
    assert every.due(friday, friday + 59) is None


def test_a_bad_schedule_is_a_configuration_error_at_its_line(project):
    (project / "dagplan.toml").write_text(CONFIG + '\n[schedule.odd]\nplan = "plans/hello.yaml"\ncron = "61 * * * *"\n'
                                          'timezone = "Mars/Olympus"\nevery = "day"\n')  # fmt: skip
    done = dagplan("schedule", cwd=project)
    assert done.returncode == 2
    assert "dagplan.toml:10:1: error config: schedule.odd.cron = '61 * * * *'" in done.stderr, done.stderr
    assert "dagplan.toml:11:1: error config: schedule.odd.timezone must be an IANA zone" in done.stderr
    assert "dagplan.toml:12:1: error config: schedule.odd: unknown key 'every'" in done.stderr
    assert dagplan("check", "plans/hello.yaml", cwd=project).returncode == 2  # every command reads the same file


def test_a_schedule_whose_plan_broke_is_said_by_the_worker_and_submits_nothing(project, postgres):
    assert dagplan("worker", "--drain", cwd=project, url=postgres).returncode == 0
    (project / "plans" / "hello.yaml").write_text(PLAN.replace("greet", "gret"))
    done = dagplan("worker", "--drain", cwd=project, url=postgres, offset=600)
    assert done.returncode == 0
    assert "schedule greeting could not submit its run of" in done.stderr and "unknown-tool" in done.stderr
    assert fired_lines(done.stderr) == []


@pytest.mark.parametrize("line", ["0 2 * * * *", "* * * * * *", "0 2 * *", "@hourly"])
def test_a_cron_line_of_other_than_five_fields_is_refused_at_its_line(project, line):
    """A sixth field is no seconds field here: `* * * * * *` would submit a run every second."""
    (project / "dagplan.toml").write_text(CONFIG + f'\n[schedule.odd]\nplan = "plans/hello.yaml"\ncron = "{line}"\n')
    done = dagplan("schedule", cwd=project)
    assert done.returncode == 2, done.stdout
    assert f"dagplan.toml:10:1: error config: schedule.odd.cron = {line!r}" in done.stderr, done.stderr
    assert "five fields" in done.stderr
