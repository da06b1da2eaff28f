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
