"""The guide a small model plans with (interpreter/llm/guide.py): clauses, retrieval, and the schema built
from them (the local model's own run is in test_local_model.py)."""

from __future__ import annotations

import json
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
        ("Read the commits of the repository at ., format them as a changelog, then write it to CHANGELOG.md", 3),
        ("Book a flight from Rome to Berlin, Germany, then email Ada", 2),  # a comma inside a thing to do
        ("Find a park near the lake, the river or the sea", 1),  # a list of objects, no sequence
        ("Clean the rows of ./raw/users.csv after reading it", 2),  # "X after Y": Y, then X
    ],
)
def test_a_request_is_split_into_the_clauses_it_states_in_order(task, parts):
    assert len(clauses(task)) == parts, clauses(task)


def test_values_keep_urls_paths_file_names_and_this_folder_whole():
    assert request_values("Read the commits of the repository at ., then write them to CHANGELOG.md") == [
        ".", "CHANGELOG.md"]  # fmt: skip
    assert request_values("Caption https://example.org/a/cat.jpg, then save it to ./out/cat.txt.") == [
        "https://example.org/a/cat.jpg", "./out/cat.txt"]  # fmt: skip
    assert request_values("Email it to bob@example.org") == ["bob@example.org"]  # an email is no file name


def test_a_url_or_a_path_asks_for_the_tools_that_take_one():
    """'Describe the picture at https://...' names no download: the link does (recall@1 on the media catalog:
    60.2 -> 74.8, bench_planning --recall)."""
    assert "downloadMedia" in rank("Describe the picture at https://example.org/cat.jpg", TOOLS["media"], 2)
    assert positions("Describe the picture at https://example.org/cat.jpg", TOOLS["media"], per_clause=1) == [
        ["downloadMedia"], ["captionImage"]]  # fmt: skip
    assert rank("Read ./houses.csv", TOOLS["pipeline"], 1) == ["loadCsv"]


def test_flow_passes_the_step_befores_output_to_what_can_carry_it():
    """With `flow`, from the second step on an argument that can carry data (a list, an object, a text named as
    data) takes the step before it's output; a place's name takes the request's places; each position its
    clause's values; a chain has exactly its clauses' steps."""
    from dagplan.dsl.ir import ToolSpec

    def tool(name: str, **params: str) -> ToolSpec:
        return ToolSpec(name, name, {"type": "object", "properties": {k: {"type": v} for k, v in params.items()},
                                     "required": list(params)}, "pure")  # fmt: skip

    tools = {t.name: t for t in (tool("read_commits", repository="string"), tool("format_commits", commits="array"),
                                 tool("write_file", path="string", text="string"))}  # fmt: skip
    task = "Read the commits of the repository at ., format them as a changelog, then write it to CHANGELOG.md"
    guide = positions(task, tools, per_clause=1)
    assert guide == [["read_commits"], ["format_commits"], ["write_file"]]
    own = [request_values(c, words=True) for c in clauses(task)]
    schema = catalog_schema(tools, state_references=False, guide=guide, values=request_values(task, words=True),
                            flow=True, clause_values=own)  # fmt: skip
    first, second, third = schema["properties"]["steps"]["prefixItems"]

    def args(position: dict, name: str) -> dict:
        found = next(v for v in position["anyOf"] if v["properties"].get("tool", {}).get("const") == name)
        return found["properties"]["args"]["properties"]

    assert args(first, "read_commits")["repository"] == {"enum": ["."]}  # its clause's place, never a word
    assert args(second, "format_commits")["commits"] == {"enum": ["$state.s1"]}
    assert args(third, "write_file")["text"] == {"enum": ["$state.s2"]}
    assert args(third, "write_file")["path"] == {"enum": ["CHANGELOG.md"]}
    plain = catalog_schema(tools, state_references=False, guide=guide, values=request_values(task, words=True))
    assert "$state.s1" not in str(args(plain["properties"]["steps"]["prefixItems"][1], "format_commits"))


def test_the_compact_form_leaves_what_a_position_implies_to_be_written_in():
    """`compact`: the model writes each step's tool and arguments only; its id, output, the step it follows and
    the plan's summary are written in after (positioned), so the plan checked is the same canonical plan."""
    import json

    from dagplan.dsl import check
    from dagplan.interpreter.llm.constrained import positioned

    task = "Get the news about football, then summarize it, then post it to #sports"
    guide = positions(task, TOOLS["everyday"], per_clause=1)
    schema = catalog_schema(TOOLS["everyday"], state_references=False, guide=guide, values=request_values(task),
                            flow=True, implied=True)  # fmt: skip
    assert "summary" not in schema["properties"] and schema["required"] == ["steps"]
    for position in schema["properties"]["steps"]["prefixItems"]:
        for variant in position["anyOf"]:
            assert not {"id", "output", "deps", "description"} & set(variant["properties"]), variant
            assert not {"id", "output", "deps"} & set(variant["required"])
    written = json.dumps({"steps": [{"tool": name, "args": {}} for [name] in guide]})
    whole = json.loads(positioned(written, task, len(guide)))
    assert whole["summary"] == task
    assert [(s["id"], s["output"], s.get("deps")) for s in whole["steps"]] == [
        ("s1", "$state.s1", None), ("s2", "$state.s2", ["s1"]), ("s3", "$state.s3", ["s2"])]  # fmt: skip
    assert check(text=json.dumps(whole), name="p").plan is not None  # a canonical plan (its args aside)
    assert positioned("not json {", task, 3) == "not json {"  # what is no plan is left for check to say so
    one = json.loads(positioned(json.dumps({"steps": [{"llm": "hi"}, {"llm": "ho"}]}), task, 0))
    assert [s.get("deps") for s in one["steps"]] == [None, None]  # no chain: no order implied


def test_one_thing_asked_is_one_step_unless_its_place_needs_fetching_first():
    """A request of one clause plans one step (with `flow`), not two to five; one that gives a place its tool
    cannot take (a link to describe) gets the tool that takes it first."""
    assert clauses("Clean the rows of ./raw/users.csv after reading it")[0] == "reading it"
    task = "Translate 'good morning' into Japanese"
    schema = catalog_schema(TOOLS["everyday"], state_references=False, guide=positions(task, TOOLS["everyday"], per_clause=1),
                            values=request_values(task, words=True), flow=True)  # fmt: skip
    assert schema["properties"]["steps"]["maxItems"] == 1
    assert positions("Describe the picture at https://example.org/cat.jpg", TOOLS["media"], per_clause=1) == [
        ["downloadMedia"], ["captionImage"]]  # fmt: skip
    assert positions("Generate an image of a red fox", TOOLS["media"], per_clause=1)[0][0] == "generateImage"


def test_retrieval_finds_the_tools_a_clause_is_about():
    assert rank("translate 'good morning' into Japanese", TOOLS["everyday"], 1) == ["translateText"]
    assert rank("what is the price of AAPL stock", TOOLS["everyday"], 1) == ["getStockPrice"]
    assert rank("plan it", TOOLS["examples"], 1) == ["planner"]
    # by meaning, where the request shares no word with any tool (the words alone find none)
    assert rank("will it rain in Oslo tomorrow", TOOLS["everyday"], 2) == ["getForecast", "getWeather"]
    assert rank("how much is one dollar in euros", TOOLS["everyday"], 1) == ["convertCurrency"]


def test_without_wordllama_retrieval_is_by_the_words_alone(monkeypatch):
    from dagplan.interpreter.llm import guide

    monkeypatch.setattr(guide, "_EMBEDDER", [False])  # as if not installed
    assert rank("zzz qqq", TOOLS["everyday"], 3) == []  # no word shared: none
    assert rank("translate 'good morning' into Japanese", TOOLS["everyday"], 1) == ["translateText"]


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


def test_the_retrieval_benchmark_reports_every_catalog_with_its_held_out_half():
    """bench_planning --recall (no model): recall@k and what the guide offers first, per catalog, the held-out
    tasks apart; the catalogs of other kinds have 40 tasks each, half held out."""
    from benchmarks.bench_planning import OTHER_KINDS, recall, shape

    rows = recall()
    assert [row.split(" | ")[0].strip("| ") for row in rows[2:]] == ["everyday", "examples", "media", "pipeline"]
    assert all(row.split(" | ")[1] == "40" for row in rows[4:])
    from dagplan.interpreter.testing.evaluate import read_tasks

    for name, (reference, held) in OTHER_KINDS.items():
        tasks = [read_tasks(str(ROOT / "benchmarks" / "planning" / f)) for f in (reference, held)]
        assert [len(t) for t in tasks] == [20, 20], name
        assert {shape(t) for half in tasks for t in half} == {"single", "chain", "graph"}, name
        assert set(TOOLS[name]) >= {tool for half in tasks for t in half for tool in t.tools}  # the catalog's own


def test_and_before_a_parameters_name_joins_two_values_of_one_thing():
    """BFCL's simple requests (issue 65): "a base of 10 and height of 5" is one thing to do, with the catalog's
    parameters to tell; "find a restaurant and reserve a table" stays two."""
    from dagplan.dsl.ir import ToolSpec

    area = {"area": ToolSpec("area", "Area of a triangle.", {"type": "object", "properties": {
        "base": {"type": "integer"}, "height": {"type": "integer"}}})}  # fmt: skip
    task = "Find the area of a triangle with a base of 10 units and height of 5 units."
    assert len(clauses(task)) == 2 and len(clauses(task, area)) == 1
    assert len(clauses("Find a restaurant in Rome and reserve a table", TOOLS["everyday"])) == 2


def test_one_tool_asked_two_things_at_once_is_one_step_but_two_things_to_do_stay_two():
    """Requests others wrote (BFCL's non-live simple and multiple, issue 65): "and" between two things one tool
    gives at once, a time after "after", and a second sentence asking the same tool stay one thing to do; two
    things two tools do, and a sentence that starts with "Then", stay two (the reference tasks keep theirs)."""
    from dagplan.dsl.ir import ToolSpec

    def spec(name: str, description: str, *params: str) -> ToolSpec:
        return ToolSpec(name, description, {"type": "object", "properties": {p: {"type": "string"} for p in params}})

    science = {s.name: s for s in (
        spec("get_boiling_melting_points", "Boiling and melting points of a substance at a sea level.", "substance",
             "sea_level"),
        spec("calculate_final_velocity", "Final velocity of an object thrown up after a time.", "initial_velocity",
             "time"),
        spec("convert_currency", "Convert an amount of money from one currency to another.", "amount", "base",
             "target"),
        spec("get_weather", "Current weather in a city.", "city"),
    )}  # fmt: skip
    for task in ("Find the boiling point and melting point of water under the sea level of 5000m.",
                 "Find the final velocity of an object thrown up at 40 m/s after 6 seconds.",
                 "I have 100 euro. How much is it in USD?"):  # fmt: skip
        assert len(clauses(task, science)) == 1, (task, clauses(task, science))
        assert len(positions(task, science)) == 1
    assert len(clauses("Find the boiling point and melting point of water")) == 2  # no catalog: no way to tell
    # the same tool asked twice, each time with values of its own: two calls (BFCL's parallel requests)
    flights = {"book_flight": spec("book_flight", "Book a flight from a city to another on a date.", "origin",
                                   "destination", "date")}  # fmt: skip
    twice = "Book a flight from Rome to Oslo on May 3 and another flight from Oslo to Bergen on May 9."
    assert len(clauses(twice, flights)) == 2, clauses(twice, flights)
    for task, parts in (("Find a restaurant in Rome and reserve a table", 2),
                        ("Get the weather in Paris. Then email it to Bob", 2),
                        ("Search flights, then book one, then email it", 3)):  # fmt: skip
        assert len(clauses(task, TOOLS["everyday"])) == parts, clauses(task, TOOLS["everyday"])


def test_a_request_no_tool_is_about_is_said_before_the_model_is_asked():
    """A small model calls some tool whatever it is asked: the planner says none fits (no shared word, no
    meaning near: BFCL's irrelevance requests), and plans as before where one does."""
    import asyncio

    from dagplan.dsl.ir import ToolSpec
    from dagplan.interpreter.llm.guide import unrelated
    from dagplan.interpreter.llm.planner import PlanningFailed, aplan

    distance = {"distance_calculator.calculate": ToolSpec("distance_calculator.calculate",
                "Calculate the distance between two geographical coordinates.",
                {"type": "object", "properties": {"coordinate_1": {"type": "array"},
                                                  "coordinate_2": {"type": "array"}}})}  # fmt: skip
    why = unrelated("Solve for the roots of the equation 3x^2 - 2x - 5.", distance)
    assert why and "none of the 1 tool(s) is about this request" in why
    assert unrelated("Check the weather in Berlin", TOOLS["examples"]) is None
    assert unrelated("How far is Paris from Rome, by their coordinates?", distance) is None
    with pytest.raises(PlanningFailed) as failed:
        asyncio.run(aplan("Solve for the roots of the equation 3x^2 - 2x - 5.", tools=distance, model="local"))
    assert failed.value.headline.code == "no-tool-fits" and not failed.value.attempts  # the model was not asked


@pytest.mark.parametrize(
    "task, arguments, bound",
    [
        ("Find the area of a triangle with a base of 10 units and height of 5 units.", ["base", "height", "unit"],
         {"base": "10", "height": "5"}),  # "units and height of 5": another argument's name comes first
        ("What are the roots of the quadratic equation where a=2, b=5 and c=3 ?", ["a", "b", "c"],
         {"a": "2", "b": "5", "c": "3"}),
        ("Train a forest on dataset my_data with maximum depth of trees as 5, and number of estimators as 100.",
         ["dataset", "max_depth", "n_estimators"], {"dataset": "my_data", "max_depth": "5", "n_estimators": "100"}),
        ("Retrieve the sequence of DNA molecule with id `DNA123`.", ["DNA_id", "format"], {"DNA_id": "DNA123"}),
        ("Find the highest common factor of 36 and 24.", ["number1", "number2"], {}),  # named by neither
    ],
)  # fmt: skip
def test_an_argument_named_with_its_value_takes_that_value(task, arguments, bound):
    from dagplan.interpreter.llm.guide import named_values

    assert dict(named_values(task, arguments, request_values(task, words=True)).bound) == bound


def test_an_optional_argument_with_a_default_the_request_never_names_is_not_offered():
    from dagplan.dsl.ir import ToolSpec

    light = {"light_travel_time": ToolSpec("light_travel_time", "Time for light to travel a distance.", {
        "type": "object", "required": ["distance_in_light_years"], "properties": {
            "distance_in_light_years": {"type": "integer"},
            "speed_of_light": {"type": "integer", "description": "The speed of light. Default is 299792458."},
            "medium": {"type": "string"}}})}  # fmt: skip
    task = "How much time will it take for the light to reach earth from a star 4 light years away?"
    guide = positions(task, light, per_clause=1)
    schema = catalog_schema(light, state_references=False, guide=guide, values=request_values(task, words=True),
                            flow=True, request=task)  # fmt: skip
    args = schema["properties"]["steps"]["prefixItems"][0]["anyOf"][0]["properties"]["args"]["properties"]
    assert "speed_of_light" not in args and "medium" in args  # no default said: still offered
    assert args["distance_in_light_years"] == {"enum": [4]}


@pytest.mark.parametrize(
    "task, values",
    [
        ("Book a flight for March 10th, 2023 and another on May 12, 2022.", ["March 10th, 2023", "May 12, 2022"]),
        ("Concert details for next month (April 2022), or 04/27/2022.", ["April 2022", "04/27/2022"]),
        ("Two notes of 440Hz and 880Hz, a wall 20ft high.", ["440", "880", "20"]),
        ("A car that travels 12,000 miles a year.", ["12,000"]),
        ("Roots of a quadratic with a=1, b=-3, c=2, between -5.5 and 5.", ["1", "-3", "2", "-5.5", "5"]),
        ("Pages 10-20 of it, the x - 3 case, cust_42-7.", ["10", "20", "3", "cust_42", "7"]),  # dashes, not minuses
        ("The dataset in path C:/data/cars.csv please.", ["C:/data/cars.csv"]),
        ("When did the Treaty of Tordesillas take place?", ["Treaty of Tordesillas"]),
        ("Where do the Golden State Warriors stand in the 2022-2023 season?", ["Golden State Warriors", "2022-2023"]),
    ],
)  # fmt: skip
def test_dates_numbers_with_their_units_and_names_of_several_words_are_values_whole(task, values):
    assert request_values(task) == values


def _args(tools, task, position=0):
    """The arguments a one-tool guided plan offers at ``position`` for ``task``."""
    guide = positions(task, tools, per_clause=1)
    schema = catalog_schema(tools, state_references=False, guide=guide, values=request_values(task, words=True),
                            flow=True, request=task)  # fmt: skip
    return schema["properties"]["steps"]["prefixItems"][position]["anyOf"][0]["properties"]["args"]


def _tool(name, properties, required=None):
    from dagplan.dsl.ir import ToolSpec

    schema = {"type": "object", "properties": properties, "required": required or list(properties)}
    return {name: ToolSpec(name, name.replace("_", " "), schema)}


@pytest.mark.parametrize(
    "task, properties, wanted",
    [
        # the numbers in the request's order to the number arguments no value is named of, in the tool's order
        ("Find the highest common factor of 36 and 24.", {"number1": {"type": "integer"}, "number2": {"type": "integer"}},
         {"number1": [36], "number2": [24]}),
        ("Calculate the final temperature when 20 kg of water at 30 degree Celsius is mixed with 15 kg of water at "
         "60 degree Celsius.", {"mass1": {"type": "integer"}, "temperature1": {"type": "integer"},
                                "mass2": {"type": "integer"}, "temperature2": {"type": "integer"}},
         {"mass1": [20], "temperature1": [30], "mass2": [15], "temperature2": [60]}),
        # not as many: the model chooses among them
        ("Roll a 6 twice with 2 dice, 3 times.", {"desired": {"type": "integer"}, "rolls": {"type": "integer"}},
         {"desired": [6, 2, 3], "rolls": [6, 2, 3]}),
        # "from X to Y": where something comes from and where it goes
        ("Book a direct flight from San Francisco to London for 2022-04-27 afternoon",
         {"departure_location": {"type": "string"}, "destination_location": {"type": "string"},
          "date": {"type": "string"}},
         {"departure_location": ["San Francisco"], "destination_location": ["London"], "date": ["2022-04-27"]}),
        ("Copy the file from ./a.txt to ./b.txt.", {"source": {"type": "string"}, "destination": {"type": "string"}},
         {"source": ["./a.txt"], "destination": ["./b.txt"]}),  # a place's own dots are kept, a sentence's not
        ("Convert 12,000 JPY to USD", {"from_currency": {"type": "string"}, "to_currency": {"type": "string"},
                                       "amount": {"type": "integer"}},
         {"from_currency": ["12,000", "JPY", "USD", "Convert"], "to_currency": ["USD"], "amount": [12000]}),
    ],
)  # fmt: skip
def test_the_values_an_argument_is_offered_follow_the_requests_order_and_roles(task, properties, wanted):
    args = _args(_tool("the_tool", properties), task)
    assert {name: schema.get("enum") for name, schema in args["properties"].items()} == wanted


@pytest.mark.parametrize(
    "task, direct",
    [("Book a direct flight from Rome to Oslo.", True), ("Book a flight from Rome to Oslo, not direct.", False),
     ("Book a flight from Rome to Oslo without a direct connection.", False)],
)  # fmt: skip
def test_a_yes_or_no_argument_the_request_names_is_written_and_said(task, direct):
    args = _args(_tool("book_flight", {"origin": {"type": "string"}, "destination": {"type": "string"},
                                       "direct_flight": {"type": "boolean", "default": False}},
                       ["origin", "destination"]), task)  # fmt: skip
    assert args["properties"]["direct_flight"] == {"enum": [direct]}
    assert "direct_flight" in args["required"]  # named: written, though optional
    assert args["properties"]["origin"] == {"enum": ["Rome"]} and args["properties"]["destination"] == {
        "enum": ["Oslo"]
    }


def test_a_date_goes_to_the_argument_that_takes_one_and_to_no_place():
    task = "Book a single room in Hotel Paradise, Las Vegas for 3 nights starting from May 12, 2022."
    args = _args(_tool("book_hotel", {"hotel_name": {"type": "string"}, "start_date": {"type": "string"},
                                      "location": {"type": "string"}, "nights": {"type": "integer"}}), task)  # fmt: skip
    assert args["properties"]["start_date"] == {"enum": ["May 12, 2022"]}
    assert "May 12, 2022" not in args["properties"]["location"]["enum"]
    assert "May 12, 2022" in args["properties"]["hotel_name"]["enum"]  # a name may be anything
    assert args["properties"]["nights"] == {"enum": [3]}  # the date's day and year are no count


def test_a_channel_is_offered_the_requests_channels_and_the_text_still_everything():
    """A channel is written #name: the argument named for one is offered those (a small model wrote `channel:
    paid` for "post 'paid' to #finance", bench_agent's chain-invoice-slack); the message may be anything."""
    task = "Post 'paid' to #finance"
    args = _args(_tool("post_slack", {"channel": {"type": "string"}, "text": {"type": "string"}}), task)
    assert args["properties"]["channel"] == {"enum": ["\\#finance"]}  # as a plan writes it to mean itself
    assert set(args["properties"]["text"]["enum"]) >= {"paid", "\\#finance"}
    none = _args(_tool("post_slack", {"channel": {"type": "string"}, "text": {"type": "string"}}), "Post 'paid'")
    assert "paid" in none["properties"]["channel"]["enum"]  # no #name given: every value, as before


def test_a_step_s_output_is_offered_only_where_the_argument_check_will_take_it():
    """The planner's grammar and the argument check judge by one rule (``output_fits``): a model held to the grammar
    wrote `message: $state.s2` after a tool returning an object, and every attempt failed the check (`bad-argument`,
    8 of 40 example tasks planned nothing)."""
    from dagplan.dsl import check
    from dagplan.dsl.ir import ToolSpec

    def tool(name, returns, param=None):
        properties = {param: {"type": "string"}} if param else {}
        return ToolSpec(name, name, {"type": "object", "properties": properties, "required": list(properties)},
                        output_schema=returns)  # fmt: skip

    for returns, offered in (({"type": "object"}, False), ({"type": "string"}, True), (None, True)):
        tools = {"confirmOrder": tool("confirmOrder", returns), "notify": tool("notify", None, "message")}
        task = "Confirm the order, then notify the customer"
        guide = [["confirmOrder"], ["notify"]]
        schema = catalog_schema(tools, state_references=False, guide=guide, values=request_values(task, words=True),
                                flow=True, request=task)  # fmt: skip
        message = schema["properties"]["steps"]["prefixItems"][1]["anyOf"][0]["properties"]["args"]["properties"]
        assert ("$state.s1" in message["message"].get("enum", [])) is offered, returns
        plan = {
            "steps": [
                {"id": "s1", "tool": "confirmOrder", "args": {}, "output": "$state.s1"},
                {"id": "s2", "tool": "notify", "args": {"message": "$state.s1"}, "output": "$state.s2"},
            ]
        }
        result = check(json.dumps(plan), tools=tools)
        assert any(d.code == "bad-argument" for d in result.diagnostics) is not offered, returns
