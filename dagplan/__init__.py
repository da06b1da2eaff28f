"""dagplan: a declarative plan language for LLM agents, and the interpreter that runs it.

    import dagplan

    @dagplan.tool
    def lookup(customerId: str) -> dict: ...

    plan = dagplan.load("examples/refund.yaml")
    print(dagplan.preview(plan).to_json()["order"])
    result = dagplan.run(plan, tools=[lookup], inputs={"customerId": "c1", "amount": 5})

Names resolve lazily so that ``import dagplan`` stays cheap (and never imports litellm).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # the pipeline
    "load": "dagplan.api",
    "check": "dagplan.dsl",
    "format_document": "dagplan.dsl.fmt",
    "plan_schema": "dagplan.dsl.schema",
    "check_files": "dagplan.api",
    "preview": "dagplan.api",
    "diff": "dagplan.api",
    "rerun": "dagplan.api",
    "estimate": "dagplan.api",
    "approve": "dagplan.api",
    "check_approval": "dagplan.api",
    "run": "dagplan.api",
    "arun": "dagplan.api",
    "resume": "dagplan.api",
    "aresume": "dagplan.api",
    "load_config": "dagplan.api",
    # recorded runs
    "runs": "dagplan.api",
    "run_report": "dagplan.api",
    "events": "dagplan.api",
    "watch": "dagplan.api",
    "answer": "dagplan.api",
    "discard": "dagplan.api",
    "stored_plan": "dagplan.api",
    "MemoryRegistry": "dagplan.interpreter.stores.journal",
    "submit": "dagplan.pool",
    "awork": "dagplan.pool",
    "worker_pool": "dagplan.pool",
    "schedules": "dagplan.pool",
    "db_upgrade": "dagplan.pool",
    # plan tests and cassettes
    "test": "dagplan.plantests",
    "atest": "dagplan.plantests",
    "Project": "dagplan.project",
    "RunSettings": "dagplan.settings",
    "find_tests": "dagplan.plantests",
    "load_tests": "dagplan.plantests",
    "run_test_case": "dagplan.plantests",
    "untested_paths": "dagplan.plantests",
    "export_cassette": "dagplan.plantests",
    "read_cassette": "dagplan.plantests",
    "TestReport": "dagplan.interpreter.testing.plantest",
    "test_schema": "dagplan.interpreter.testing.plantest",
    "CaseResult": "dagplan.interpreter.testing.plantest",
    # tools
    "tool": "dagplan.interpreter.tools.catalog",
    "load_tools": "dagplan.interpreter.tools.sources",
    "load_tool_specs": "dagplan.interpreter.tools.sources",
    "Tool": "dagplan.interpreter.tools.catalog",
    "Branch": "dagplan.interpreter.tools.catalog",
    "TransientError": "dagplan.interpreter.tools.catalog",
    # values
    "Plan": "dagplan.dsl.ir",
    "Step": "dagplan.dsl.ir",
    "ToolSpec": "dagplan.dsl.ir",
    "Diagnostic": "dagplan.dsl.errors",
    "Span": "dagplan.dsl.errors",
    "CheckResult": "dagplan.dsl",
    "RunResult": "dagplan.interpreter.engine.results",
    "StepReport": "dagplan.interpreter.engine.results",
    "Event": "dagplan.interpreter.core.vocabulary",
    "EventType": "dagplan.interpreter.core.vocabulary",
    "StepStatus": "dagplan.interpreter.core.vocabulary",
    "RunStatus": "dagplan.interpreter.core.vocabulary",
    "RunInfo": "dagplan.interpreter.core.progress",
    "RunReport": "dagplan.interpreter.ops.runs",
    "Preview": "dagplan.interpreter.engine.preview",
    # errors
    "DagplanError": "dagplan.dsl.errors",
    "LoadError": "dagplan.dsl.errors",
    "PlanInvalid": "dagplan.dsl.errors",
    "RunError": "dagplan.dsl.errors",
    # LLM
    "plan": "dagplan.planning",
    "aplan": "dagplan.planning",
    "should_plan_first": "dagplan.interpreter.llm.score",
    "agent_loop": "dagplan.interpreter.llm.agent",
    "durable_agent_loop": "dagplan.interpreter.llm.agent",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

# Names that were exported before 0.2 and have a home of their own now: still found here, with a warning
# saying where (they go in 0.3). Door-only helpers are not the interface (dagplan/_doors.py).
_MOVED = {
    "load_file": "dagplan.dsl.load",
    "load_text": "dagplan.dsl.load",
    "read_data": "dagplan.dsl.load",
    "worst_case": "dagplan.dsl.compose",
    "parse_assignments": "dagplan.interpreter.engine.inputs",
    "complexity_score": "dagplan.interpreter.llm.score",
    "score": "dagplan.interpreter.llm.score",
    "DEFAULT_THRESHOLD": "dagplan.interpreter.llm.score",
    "resume_tools": "dagplan._doors",
    "run_config": "dagplan._doors",
}


def _lazy(owner: str, table: dict[str, str]) -> Any:
    """A module's ``__getattr__`` that finds each name of ``table`` in its module when first asked for (the one
    way this package and dagplan._doors keep their imports lazy)."""

    def found(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        return getattr(importlib.import_module(table[name]), name)

    return found


_exported, _moved = _lazy("dagplan", _EXPORTS), _lazy("dagplan", _MOVED)


def __getattr__(name: str) -> Any:
    if name in _MOVED and name not in _EXPORTS:
        import warnings

        warnings.warn(f"dagplan.{name} is {_MOVED[name]}.{name} now; the old name goes in dagplan 0.3",
                      DeprecationWarning, stacklevel=2)  # fmt: skip
        return _moved(name)
    value = _exported(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
