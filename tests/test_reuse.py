"""Iterating on a plan: `dagplan run --reuse RUN` re-runs only what an edit changed (step fingerprints,
interpreter/engine/reuse.py), `preview --reuse` / `diff --against` say what would run again and why, and
every LLM step's prompt keeps where each part of it came from (`runs show --step S --prompt`, the viewer).

Through the CLI as a user types it; the model is the stub OpenAI server (it counts the calls), the tools count
theirs in a file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

TOOLS = """import os
import dagplan

def note(name):
    with open(os.environ["CALLS"], "a") as f:
        f.write(name + "\\n")

@dagplan.tool(purity="pure")
def fetch(q: str) -> str:
    note("fetch")
    return "All about " + q + ".\\nMore lines."

"""

# the acting tool in a file of its own: a tool's code identity is its module's file and the project's modules
# that file uses, so an edit of posting.py re-runs post's steps and leaves fetch's alone
POSTING = """import dagplan
from tools import note

@dagplan.tool(purity="side_effect")
def post(title: str, tags: str) -> str:
    note("post")
    return "posted " + title
"""

PLAN = """inputs:
  topic: {type: string}
steps:
  - id: fetch
    tool: fetch
    args: {q: $input.topic}
    output: $state.doc
  - id: summary
    llm: "Summarize #fetch.head=200"
    output: $state.summary
  - id: title
    llm: "A title for: #summary"
    output: $state.title
  - id: tags
    llm: "Tags for #fetch.summary, about $input.topic"
    output: $state.tags
  - id: post
    tool: post
    args: {title: $state.title, tags: $state.tags}
    output: $state.posted
result: $state.posted
"""


@pytest.fixture
def project(tmp_path, stub):
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "posting.py").write_text(POSTING)
    (tmp_path / "plan.yaml").write_text(PLAN)
    (tmp_path / "dagplan.toml").write_text(
        f'tools = ["tools.py", "posting.py"]\nmodel = "openai/gpt-4o-mini"\n[llm]\napi_base = "{stub.url}"\napi_key = "x"\n'
    )
    return tmp_path


def dagplan(project, *args: str, code: int | None = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CALLS": str(project / "calls.txt")}
    env.pop("DAGPLAN_MODEL", None)
    done = subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    if code is not None:
        assert done.returncode == code, done.stdout + done.stderr
    return done


def tool_calls(project) -> list[str]:
    path = project / "calls.txt"
    return path.read_text().split() if path.exists() else []


def edit(project, old: str, new: str, name: str = "plan.yaml") -> None:
    path = project / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_an_edit_of_one_prompt_reruns_that_step_and_its_dependents_only(project, stub):
    dagplan(project, "run", "plan.yaml", "-i", "topic=owls")
    assert stub.count == 3 and tool_calls(project) == ["fetch", "post"]
    edit(project, "Summarize #fetch.head=200", "Summarize in one line: #fetch.head=200")
    shown = dagplan(project, "preview", "plan.yaml", "--reuse", "@last")
    assert re.search(r"reuse\s+fetch", shown.stdout) and re.search(r"run\s+summary\s+changed: llm", shown.stdout)
    assert re.search(r"run\s+title\s+summary runs again", shown.stdout) and re.search(r"reuse\s+tags", shown.stdout)
    assert "2 of 5 step(s) run again" not in shown.stdout  # post depends on title: it runs again too
    assert "3 of 5 step(s) run again: 2 model calls" in shown.stdout, shown.stdout
    assert stub.count == 3 and tool_calls(project) == ["fetch", "post"]  # the preview called nothing
    done = dagplan(project, "run", "plan.yaml", "-i", "topic=owls", "--reuse", "@last")
    assert stub.count == 3 + 2  # summary and title; tags was not paid again
    assert tool_calls(project) == ["fetch", "post", "post"]  # post depends on title: it runs (a new title)
    assert re.search(r"fetch\s+fetch\s+completed \(reused from \S+\)", done.stdout), done.stdout
    assert re.search(r"tags\s+llm\s+completed \(reused from \S+\)", done.stdout)
    assert "2 of 5 step(s) reused from" in done.stdout


def test_an_unchanged_plan_with_reuse_makes_no_call(project, stub):
    first = dagplan(project, "run", "plan.yaml", "-i", "topic=owls")
    run_id = re.search(r"Run (\S+):", first.stdout).group(1)
    again = dagplan(project, "run", "plan.yaml", "-i", "topic=owls", "--reuse", run_id, "--format", "json")
    assert stub.count == 3 and tool_calls(project) == ["fetch", "post"]
    steps = json.loads(again.stdout)["steps"]
    assert all(s["reused"] == run_id and s["attempts"] == 0 for s in steps.values()), steps
    other = dagplan(project, "run", "plan.yaml", "-i", "topic=bats", "--reuse", run_id)  # other input: all again
    assert "reused" not in other.stdout and stub.count == 6 and tool_calls(project).count("fetch") == 2


def test_an_edit_of_a_tools_code_reruns_its_steps(project, stub):
    dagplan(project, "run", "plan.yaml", "-i", "topic=owls")
    edit(project, 'return "posted " + title', 'return "posted: " + title', name="posting.py")
    shown = dagplan(project, "preview", "plan.yaml", "--reuse", "@last")
    assert re.search(r"run\s+post\s+its tool's code changed", shown.stdout), shown.stdout  # says which part moved
    cwd = os.getcwd()
    os.chdir(project)
    try:  # the API's prediction with other inputs: the step says what it reads changed, and which argument
        from dagplan import api

        other = api.rerun("plan.yaml", "@last", inputs={"topic": "bats"})
    finally:
        os.chdir(cwd)
    why = {row["id"]: row["why"] for row in other.steps}
    assert why["fetch"] == "what it reads changed (args.q)", why
    done = dagplan(project, "run", "plan.yaml", "-i", "topic=owls", "--reuse", "@last")
    assert stub.count == 3 and tool_calls(project) == ["fetch", "post", "post"]
    assert "posted: " in done.stdout


def test_a_changed_side_effect_step_is_not_reused_and_diff_against_a_run_says_why(project, stub):
    first = dagplan(project, "run", "plan.yaml", "-i", "topic=owls")
    run_id = re.search(r"Run (\S+):", first.stdout).group(1)
    shutil.copy(project / "plan.yaml", project / "before.yaml")
    edit(project, "args: {title: $state.title, tags: $state.tags}", "args: {title: $state.title, tags: 'fixed'}")
    shown = dagplan(project, "diff", "before.yaml", "plan.yaml", "--against", run_id, code=1)
    assert "post.args" in shown.stdout and re.search(r"run\s+post\s+changed: args", shown.stdout), shown.stdout
    assert "1 of 5 step(s) run again" in shown.stdout
    as_json = json.loads(dagplan(project, "diff", "before.yaml", "plan.yaml", "--against", run_id, "--format",
                                 "json", code=1).stdout)  # fmt: skip
    assert as_json["rerun"]["again"] == ["post"] and as_json["rerun"]["model_calls"]["saved"] == 3
    dagplan(project, "run", "plan.yaml", "-i", "topic=owls", "--reuse", run_id)
    assert stub.count == 3 and tool_calls(project) == ["fetch", "post", "post"]


def test_reuse_of_a_run_that_does_not_exist_is_a_usage_error(project):
    done = dagplan(project, "run", "plan.yaml", "-i", "topic=owls", "--reuse", "nope", code=2)
    assert "unknown-run" in done.stderr and tool_calls(project) == []


def test_an_mcp_tools_lock_entry_is_its_identity():
    """An MCP tool's fingerprint holds its lock entry's hash: a new listing (a re-lock after the server
    changed) re-runs its steps; the same listing reuses them."""
    from dagplan.interpreter.tools.mcp import Server, tool_hash, tools_of

    entry = {"name": "now", "description": "The time", "inputSchema": {"type": "object"}}
    entry["hash"] = tool_hash(entry)
    changed = {k: v for k, v in entry.items() if k != "hash"}
    changed["inputSchema"] = {"type": "object", "properties": {"zone": {"type": "string"}}}
    changed["hash"] = tool_hash(changed)
    server = Server("clock", command=sys.executable, args=("-c", "pass"))

    def identity(listed: dict) -> str:
        return tools_of(server, {"servers": {"clock": {"tools": [listed]}}})["clock.now"].identity

    assert identity(entry) == identity(dict(entry)) and identity(entry) != identity(changed)
    assert entry["hash"] in identity(entry)


PROVENANCE_PLAN = """steps:
  - id: fetch
    tool: fetch
    args: {q: owls}
    output: $state.doc || $state.trouble
  - id: summary
    llm: "Summarize #fetch.head=12 for $state.trouble || 'everyone'"
    output: $state.summary
  - id: ok
    gate:
      question: "Post it?"
      choices: [approve, reject]
    deps: [summary]
    output: $state.ok
  - id: post
    tool: post
    args: {title: $state.summary, tags: $state.ok}
    deps: [ok]
    output: $state.posted
"""


def test_where_each_word_of_a_prompt_came_from_survives_resume_and_shows_in_runs_show_and_the_viewer(
    project, stub, browser
):
    (project / "prov.yaml").write_text(PROVENANCE_PLAN)
    waiting = dagplan(project, "run", "prov.yaml", "--no-input", code=3)
    run_id = re.search(r"run (\S+)", waiting.stderr).group(1)
    dagplan(project, "answer", run_id, "ok", "approve")
    dagplan(project, "resume", run_id, "--no-input")
    shown = dagplan(project, "runs", "show", run_id, "--step", "summary", "--prompt")
    assert "Summarize [1: All about ow…] for [2: everyone]" in shown.stdout, shown.stdout  # kept from before the wait
    event = int(re.search(r"\[1\] #fetch\.head=12: step fetch's output \(journal event (\d+)\)", shown.stdout)[1])
    assert '[2] †state.trouble || "everyone": the plan\'s default (nothing was written)' in shown.stdout
    log = dagplan(project, "events", run_id).stdout
    assert re.search(rf"^\s*{event}\s.*plan_step_completed\s+fetch\s+fresh", log, re.M), log  # the output it read
    as_json = json.loads(dagplan(project, "runs", "show", run_id, "--step", "summary", "--format", "json").stdout)
    spans = as_json["prompt"]["spans"]
    assert [(s["source"], s.get("step"), s["default"]) for s in spans] == [
        ("#fetch.head=12", "fetch", False), ('†state.trouble || "everyone"', None, True)]  # fmt: skip
    text = as_json["prompt"]["prompt"]
    assert text[spans[0]["start"] : spans[0]["end"]] == "All about ow…"
    missing = dagplan(project, "runs", "show", run_id, "--step", "fetch", "--prompt", code=1)
    assert "sent no prompt" in missing.stderr

    server = subprocess.Popen([sys.executable, "-m", "dagplan", "serve", "--port", "0"], cwd=project,
                              env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        url = re.search(r"(http://\S+)", server.stderr.readline()).group(1)
        base, query = url.split("/?", 1)
        browser.get(f"{base}/runs/{run_id}?{query}")
        browser.execute_script("document.getElementById('step-summary').open = true")
        marks = browser.find_elements("css selector", "#step-summary mark.prov")
        assert [m.text for m in marks] == ["All about ow…", "everyone"]
        assert marks[0].get_attribute("title") == "#fetch.head=12 from step fetch"
        assert marks[1].get_attribute("title") == '†state.trouble || "everyone" from the plan\'s default'

        from selenium.webdriver.common.action_chains import ActionChains

        before = marks[0].value_of_css_property("background-color")
        ActionChains(browser).move_to_element(marks[0]).perform()
        assert marks[0].value_of_css_property("background-color") != before  # highlighted on hover
    finally:
        server.terminate()
        server.wait(10)


FAN_OUT = """inputs:
  words: {type: array}
steps:
  - id: each
    tool: shout
    for_each: $input.words
    max_items: 10
    args: {word: $item}
    output: $state.loud
  - id: joined
    tool: join
    args: {parts: $state.loud}
    output: $state.line
result: $state.line
"""

SHOUT = """import os
import dagplan

def note(name):
    with open(os.environ["CALLS"], "a") as f:
        f.write(name + "\\n")

@dagplan.tool(purity="side_effect")
def shout(word: str) -> str:
    note("shout:" + word)
    return word.upper()

@dagplan.tool(purity="pure")
def join(parts: list) -> str:
    note("join")
    return " ".join(parts)
"""


def test_a_fan_out_takes_each_item_it_has_seen_and_runs_only_the_new_ones(tmp_path):
    """Per-item reuse (as Make or Prefect's cache do): a list that grew by one item runs that item; the others
    are taken by their own fingerprint (what the item reads), wherever they sit in the list."""
    (tmp_path / "tools.py").write_text(SHOUT)
    (tmp_path / "plan.yaml").write_text(FAN_OUT)
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    dagplan(tmp_path, "run", "plan.yaml", "-i", 'words=["a", "b"]')
    assert tool_calls(tmp_path) == ["shout:a", "shout:b", "join"]
    grown = dagplan(tmp_path, "run", "plan.yaml", "-i", 'words=["b", "c", "a"]', "--reuse", "@last")
    assert tool_calls(tmp_path)[3:] == ["shout:c", "join"], tool_calls(tmp_path)  # a and b were not called again
    assert re.search(r"each\s+shout\s+completed \(2 of 3 items reused from \S+\)", grown.stdout), grown.stdout
    assert "B C A" in grown.stdout
    # everything seen: the preview says the fan-out is taken whole, and the run calls nothing for it
    shown = dagplan(tmp_path, "preview", "plan.yaml", "--reuse", "@last")
    assert re.search(r"reuse\s+each\s+each of its 3 item\(s\), reading the same values", shown.stdout), shown.stdout
    same = dagplan(tmp_path, "run", "plan.yaml", "-i", 'words=["b", "c", "a"]', "--reuse", "@last", "--format", "json")
    steps = json.loads(same.stdout)["steps"]
    assert steps["each"]["items_reused"]["count"] == 3 and steps["joined"]["reused"], steps
    assert tool_calls(tmp_path)[5:] == []
    # an item's result is its own: another value runs, and the preview counts it
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        from dagplan import api

        other = api.rerun("plan.yaml", "@last", inputs={"words": ["a", "d"]})
    finally:
        os.chdir(cwd)
    row = next(r for r in other.steps if r["id"] == "each")
    assert row["action"] == "run" and row["why"].startswith("1 of its 2 items run"), row
    dagplan(tmp_path, "run", "plan.yaml", "-i", 'words=["a", "d"]', "--reuse", "@last")
    assert tool_calls(tmp_path)[5:] == ["shout:d", "join"]
