"""Traces (issue 14): a run as an OpenTelemetry span tree, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent("""
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    import dagplan

    calls = {"n": 0}

    @dagplan.tool
    def flaky(x: int) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("slow")
        return x

    @dagplan.tool
    def double(x: int) -> int:
        return 2 * x

    plan = dagplan.load(text=sys.argv[1], tools=[flaky, double])
    result = dagplan.run(plan, tools=[flaky, double], inputs={"xs": [1, 2, 3]},
                         model="openai/gpt-4o-mini", completion_kwargs={"api_base": sys.argv[2], "api_key": "k"})
    assert result.status == "completed", result
    spans = [{
        "name": s.name, "id": s.context.span_id, "trace": s.context.trace_id,
        "parent": s.parent.span_id if s.parent else None, "status": s.status.status_code.name,
        "attributes": dict(s.attributes), "start": s.start_time, "end": s.end_time,
    } for s in exporter.get_finished_spans()]
    print(json.dumps(spans))
""")

PLAN = """
inputs:
  xs: {type: array}
steps:
  - id: first
    tool: flaky
    args: {x: 1}
    retry: {limit: 2, backoff: 0}
    output: †state.first
  - id: each
    for_each: †input.xs
    max_items: 5
    tool: double
    args: {x: †item}
    output: †state.doubled
  - id: say
    llm: "Say #first and #each"
    output: †state.said
result: †state.said
"""


def test_a_run_is_a_trace_of_steps_attempts_and_model_calls(stub):
    from llm_stub import text

    stub.script(text("done"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(TESTS)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, PLAN, stub.url], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    spans = json.loads(proc.stdout.strip().splitlines()[-1])
    by_name = {s["name"]: s for s in spans}
    assert len({s["trace"] for s in spans}) == 1  # one run, one trace
    run = next(s for s in spans if s["name"].startswith("invoke_agent "))
    assert run["parent"] is None and run["attributes"]["dagplan.run.status"] == "completed"
    assert run["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    for step in ("first", "each", "say"):
        assert by_name[f"dagplan.step {step}"]["parent"] == run["id"]
    each = by_name["dagplan.step each"]
    items = [s for s in spans if s["name"].startswith("dagplan.step each[")]
    assert len(items) == 3 and all(s["parent"] == each["id"] for s in items)
    assert items[0]["attributes"]["dagplan.step.parent"] == "each"
    first = by_name["dagplan.step first"]
    attempts = sorted((s for s in spans if s["name"].startswith("dagplan.attempt") and s["parent"] == first["id"]),
                      key=lambda s: s["start"])  # fmt: skip
    assert [a["status"] for a in attempts] == ["ERROR", "UNSET"]
    assert attempts[0]["attributes"]["error.type"] == "TimeoutError"
    tools = sorted((s for s in spans if s["name"].startswith("execute_tool ") and s["parent"] in
                    {a["id"] for a in attempts}), key=lambda s: s["start"])  # fmt: skip
    assert [(t["parent"], t["status"]) for t in tools] == [(attempts[0]["id"], "ERROR"), (attempts[1]["id"], "UNSET")]
    assert tools[0]["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert tools[0]["attributes"]["gen_ai.tool.name"] == tools[0]["name"].split(" ", 1)[1]
    assert first["attributes"]["dagplan.step.status"] == "completed"
    chat = by_name["chat openai/gpt-4o-mini"]
    say_attempt = next(
        s for s in spans if s["name"] == "dagplan.attempt 1" and s["parent"] == by_name["dagplan.step say"]["id"]
    )
    assert chat["parent"] == say_attempt["id"]
    attrs = chat["attributes"]
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "openai/gpt-4o-mini"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (11, 7)
    assert attrs["dagplan.cost_usd"] > 0
    assert all(s["start"] <= s["end"] for s in spans)


def test_without_configuration_nothing_is_imported():
    code = (
        "import sys, dagplan\n"
        "dagplan.run(dagplan.load(text='steps: [{id: a, tool: t, output: \\u2020state.a}]'), tools={'t': lambda: 1})\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stderr
