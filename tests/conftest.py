"""Shared fixtures: the stub OpenAI-compatible server; litellm kept offline for the whole session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Before anything can import litellm: use its bundled cost map, never fetch one.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.pop("DAGPLAN_MODEL", None)

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # importlib mode: let tests `import llm_stub`
    sys.path.insert(0, str(TESTS))

import pytest  # noqa: E402

from llm_stub import StubLLM  # noqa: E402


@pytest.fixture
def stub():
    """A running stub server; script it with ``stub.script(text(...), tool_calls(...))``."""
    with StubLLM() as server:
        yield server


@pytest.fixture
def stub_model() -> str:
    """The model name that routes litellm to an OpenAI-compatible api_base."""
    return "openai/gpt-4o-mini"


# --- a headless chromium, for the viewer's pages -------------------------------------------------


@pytest.fixture
def browser():
    """A headless chromium driven by selenium (Debian's chromium and chromium-driver)."""
    import shutil

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    yield driver
    driver.quit()


# --- a real PostgreSQL, for the runs-in-a-database tests --------------------------------------


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server of its own for the session (tests/pg_server.py)."""
    from pg_server import start_postgres

    try:
        url, stop, _ = start_postgres()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield url
    stop()


@pytest.fixture
def postgres(postgres_server, request):
    """A fresh database of the session's server: its URL."""
    import re

    import psycopg

    name = "t_" + re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:50]
    with psycopg.connect(postgres_server + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{postgres_server}/{name}"


# --- the package as users install it ------------------------------------------------------------


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from this tree (what `pip install dagplan` would install)."""
    import subprocess

    out = tmp_path_factory.mktemp("dist")
    root = TESTS.parent
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return next(out.glob("dagplan-*.whl"))


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory) -> dict[str, str]:
    """The environment of a shell in which `dagplan` and `python -m dagplan` are the installed wheel, not
    this source tree (so a file missing from the package shows): its ``PATH`` and ``PYTHONPATH``."""
    import zipfile

    home = tmp_path_factory.mktemp("installed")
    site, bin_dir = home / "site", home / "bin"
    zipfile.ZipFile(wheel).extractall(site)
    bin_dir.mkdir()
    shim = bin_dir / "dagplan"
    shim.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(site)!r})\nfrom dagplan.cli import main\nmain()\n"
    )
    shim.chmod(0o755)
    for name in ("python", "python3"):  # this environment's Python by its own path (its site-packages
        # hold what the wheel depends on, for the processes it starts too: an MCP server gets no PYTHONPATH)
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        wrapper.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(site),
        "PYTHONUNBUFFERED": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_COLOR": "1",
        "COLUMNS": "120",
    }


@pytest.fixture
def tools_project(tmp_path):
    """A folder with the examples' tools in it (``tools.py``), where a test writes its plans."""
    from as_user import with_example_tools

    return with_example_tools(tmp_path)


@pytest.fixture
def weather_project(tmp_path):
    """A folder with the weather example and its tools."""
    from as_user import with_weather

    return with_weather(tmp_path)
