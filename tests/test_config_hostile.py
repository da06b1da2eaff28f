"""Configuration and state URLs as hostile input: unknown keys with did-you-mean, every problem at its
line, state URLs that cannot be a run store refused instead of becoming directories of those names."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from as_user import run_dagplan, run_dagplan_s, with_example_tools


def _cli(cwd, *args, **env):
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env})  # fmt: skip


@pytest.mark.parametrize(
    "toml, where, words",
    [
        ('[resume]\nside_efect = "adopt"\n', "dagplan.toml:2:1", "did you mean 'side_effect'?"),
        ("[pool]\nmax_running = 0\n", "dagplan.toml:2:1", "pool.max_running must be an integer of at least 1, not 0"),
        ("[pool]\nmax_runing = 5\n", "dagplan.toml:2:1", "did you mean 'max_running'?"),
        ("[pool.per_plan]\nnightly = -1\n", "dagplan.toml:2:1", "pool.per_plan.nightly must be an integer"),
        ("pool = 5\n", "dagplan.toml:1:1", "pool must be a table"),
        ('state = "mysql://db/runs"\n', "dagplan.toml:1:1", "state must be"),
        ('state = "postgresql:/db"\n', "dagplan.toml:1:1", "state must be"),
    ],
)
def test_configuration_problems_are_errors_at_their_line(tmp_path, toml, where, words):
    (tmp_path / "dagplan.toml").write_text(toml)
    proc = _cli(tmp_path, "runs")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{where}: error config" in proc.stderr and words in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "state",
    ["postgresql://[::1", "postgresql://u@h:99999/db", "postgresql://u@h/d%zz", "postgresql:/db", "mysql://x/y",
     "sqlite:///x.db"],
)  # fmt: skip
def test_a_state_that_cannot_be_a_run_store_is_refused_and_makes_no_directory(tmp_path, state):
    proc = _cli(tmp_path, "runs", "--state", state)
    assert proc.returncode == 2 and "error config" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_state_under_home_is_expanded(tmp_path):
    proc = _cli(tmp_path, "runs", "--state", "~/runs-here", HOME=str(tmp_path / "home"))
    assert proc.returncode == 0 and not (tmp_path / "~").exists(), proc.stderr


def test_a_password_in_a_state_url_is_never_printed(tmp_path):
    proc = _cli(tmp_path, "runs", "--state", "mysql://ada:hunter2@db/x")
    assert "hunter2" not in proc.stderr and "ada:***@db" in proc.stderr


def test_a_dagplan_key_written_after_the_llm_table_is_caught_at_its_line(tmp_path):
    with_example_tools(tmp_path)
    (tmp_path / "dagplan.toml").write_text('model = "x"\n[llm]\napi_base = "http://h"\nstate = "/tmp/s"\n')
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: w, tool: getWeather, args: {city: Rome}}\n")
    done = run_dagplan(tmp_path, "check", "p.yaml")
    assert done.returncode == 2
    assert (
        "dagplan.toml:4:1: error config: 'state' is a dagplan setting, but it is inside the [llm] table" in done.stderr
    )


def test_a_configuration_nested_thousands_deep_is_a_config_error(tmp_path):
    (tmp_path / "dagplan.toml").write_text("a = " + "[" * 3000 + "]" * 3000 + "\n")
    (tmp_path / "p.yaml").write_text("steps: [{id: a, tool: t}]\n")
    proc = run_dagplan_s(tmp_path, "check", "p.yaml")
    assert proc.returncode == 2 and "dagplan.toml:1:1: error config" in proc.stderr


def test_variable_forms_that_work(monkeypatch):
    from dagplan.interpreter.core.config import expand_env

    monkeypatch.setenv("A", "x")
    monkeypatch.delenv("B", raising=False)
    assert expand_env("k", "${A}/${B:-dflt}/$${A}/${B:-}") == "x/dflt/${A}/"
