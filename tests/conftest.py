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
