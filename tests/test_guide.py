"""The guide a small model plans with (interpreter/llm/guide.py): clauses, retrieval, and the schema built
from them (the local model's own run is in test_local_model.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dagplan.interpreter.llm.constrained import catalog_schema
from dagplan.interpreter.llm.guide import clauses, positions, rank, request_values

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.bench_planning import catalogs  # noqa: E402

TOOLS = catalogs()


@pytest.mark.parametrize(
    "task, parts",
    [
        ("Search flights, then book one, then email it", 3),
        ("Track the package and once it is delivered, email the shop", 2),
        ("After getting the price of MSFT, post it", 2),
        ("What's the weather in Paris today?", 1),
        ("Get the forecast; summarize it. Then email it", 3),
    ],
)
def test_a_request_is_split_into_the_clauses_it_states_in_order(task, parts):
    assert len(clauses(task)) == parts, clauses(task)


def test_retrieval_finds_the_tools_a_clause_is_about():
    assert rank("translate 'good morning' into Japanese", TOOLS["everyday"], 1) == ["translateText"]
    assert rank("what is the price of AAPL stock", TOOLS["everyday"], 1) == ["getStockPrice"]
    assert rank("plan it", TOOLS["examples"], 1) == ["planner"]
    assert rank("zzz qqq", TOOLS["everyday"], 3) == []


def test_the_values_a_request_gives():
    assert request_values("Book a flight from Rome to Berlin on 2026-12-01 for Ada Lovelace") == [
        "Rome", "Berlin", "2026-12-01", "Ada Lovelace"]  # fmt: skip
    assert request_values("Refund payment p77 and order o-1234, 'quoted text', USD 100") == [
        "p77", "o-1234", "quoted text", "USD", "100"]  # fmt: skip


def test_the_guided_schema_holds_each_position_to_its_clause_and_order():
    task = "Get the news about football, then summarize it, then post it to #sports"
    guide = positions(task, TOOLS["everyday"])
    schema = catalog_schema(TOOLS["everyday"], state_references=False, guide=guide, values=request_values(task))
    steps = schema["properties"]["steps"]
    assert steps["minItems"] == 3 and steps["maxItems"] == 4 and steps["items"] is False
    for number, position in enumerate(steps["prefixItems"][:3], 1):
        offered = {v["properties"]["tool"]["const"] for v in position["anyOf"] if "tool" in v["properties"]}
        assert offered == set(guide[number - 1])
        for variant in position["anyOf"]:
            assert variant["properties"]["id"] == {"const": f"s{number}"}
            if number > 1:
                assert variant["properties"]["deps"] == {"const": [f"s{number - 1}"]} and "deps" in variant["required"]
    news = next(
        v for v in steps["prefixItems"][0]["anyOf"] if v["properties"].get("tool", {}).get("const") == "getNews"
    )
    assert news["properties"]["args"]["properties"]["topic"] == {"enum": ["\\#sports"]}  # request_values(), escaped
    with_words = catalog_schema(TOOLS["everyday"], state_references=False, guide=guide,
                                values=request_values(task, words=True))  # fmt: skip
    news = next(v for v in with_words["properties"]["steps"]["prefixItems"][0]["anyOf"]
                if v["properties"].get("tool", {}).get("const") == "getNews")  # fmt: skip
    assert "football" in news["properties"]["args"]["properties"]["topic"]["enum"]


def test_a_value_the_request_gives_is_offered_as_the_plan_must_write_it():
    """`#dev` in "post to #dev" is a channel: offered escaped, it loads as the text itself (it was read as a
    placeholder of a step `dev`, and the local model's plan failed check)."""
    import json

    import dagplan

    task = "Post 'standup in 5' to #dev"
    schema = catalog_schema(TOOLS["everyday"], state_references=False, guide=positions(task, TOOLS["everyday"]),
                            values=request_values(task, words=True))  # fmt: skip
    slack = next(v for v in schema["properties"]["steps"]["prefixItems"][0]["anyOf"]
                 if v["properties"].get("tool", {}).get("const") == "postSlack")  # fmt: skip
    channel = slack["properties"]["args"]["properties"]["channel"]["enum"]
    assert "\\#dev" in channel
    plan = dagplan.load(text=json.dumps({"steps": [{"id": "s1", "tool": "postSlack",
                                                    "args": {"channel": "\\#dev", "text": "standup in 5"}}]}))  # fmt: skip
    assert plan.steps[0].args["channel"] == "#dev"


def test_a_question_gets_a_solver_step_reading_every_step_and_nothing_else_does():
    from dagplan.interpreter.llm.guide import asks, solver_step

    steps = [{"id": "s1", "tool": "getWeather", "description": "Weather in #Paris"}, {"id": "s2", "tool": "findPark"}]
    step = solver_step("Is it a good day for a park in $input.city?", steps)
    assert step is not None and step["id"] == "answer" and step["output"] == "$state.answer"
    assert "#s1.head=1000" in step["llm"] and "#s2.head=1000" in step["llm"]
    # the request's and descriptions' own `$input` / `#Paris` are text, escaped: the prompt loads as written
    assert "\\$input.city" in step["llm"] and "\\#Paris" in step["llm"]
    assert solver_step("Book a flight to Rome, then email Bob", steps) is None  # asks nothing
    assert solver_step("What is the weather?", [*steps, {"id": "s3", "llm": "compose"}]) is None  # answered already
    assert solver_step("What is the weather?", [{"id": "answer", "tool": "getWeather"}]) is None  # id taken
    assert [asks(t) for t in ("what's on today", "Tell me the rate", "Email Bob the rate", "Rome?")] == [
        True, True, False, True]  # fmt: skip
