"""Plan tests (issue 13): mocks, expectations, cassettes, coverage, untested paths, cost before running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import dagplan
from dagplan.interpreter.core.config import load_config
from as_user import run_dagplan, run_dagplan_s, with_example_tools
import shutil
import xml.etree.ElementTree as ElementTree

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def dagplan_cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=180)  # fmt: skip


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def line_of(path: Path, text: str) -> int:
    """The line of ``path`` holding ``text`` (1-based)."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def run_file(path: Path):
    return dagplan.test([path], config=load_config(path.parent))


PAY = """
inputs:
  amount: {type: number}
steps:
  - id: pay
    tool: charge
    args: {amount: †input.amount, card: {number: "4242", cvc: "123"}}
    output: †state.receipt || †state.error
    retry: {limit: 2, backoff: 30s}
  - id: thank
    llm: "Thank the customer for receipt †state.receipt.id"
    output: †state.note
  - id: sorry
    tool: apologize
    args: {error: †state.error}
    output: †state.note
result: †state.note
"""


# --- mocks and expectations --------------------------------------------------------------------


def test_mocks_answer_tools_by_args_sequence_and_error_and_retries_do_not_wait(tmp_path):
    write(tmp_path, "pay.yaml", PAY)
    test = write(
        tmp_path,
        "pay.test.yaml",
        """
        plan: pay.yaml
        cases:
          - name: a timeout, then a receipt, thanked by the model
            inputs: {amount: 30}
            mocks:
              tools:
                charge:
                  - args: {amount: 30, card: {number: "4242"}}
                    sequence:
                      - error: {type: TimeoutError, message: slow}
                      - result: {id: ch_1}
              llm:
                thank:
                  - prompt: {$regex: ch_1}
                    text: Thank you!
            expect:
              result: Thank you!
              state: {receipt.id: ch_1}
              steps:
                pay: {status: completed, attempts: 2}
                sorry: {status: skipped}
              calls: {charge: 2, thank: 1, apologize: 0}
          - name: a declined card is apologized for
            inputs: {amount: 30}
            mocks:
              tools:
                charge: {error: {type: CardDeclined, message: no funds}}
                apologize:
                  - args: {error: {type: CardDeclined}}
                    result: sorry
            expect:
              result: sorry
              steps:
                pay: {status: handled, attempts: 1, error: {type: CardDeclined, message: {$regex: funds}}}
    """,
    )
    report = run_file(test)
    assert [r.failures for r in report.results] == [[], []]
    assert report.duration < 25  # the retry's 30 s backoff was not waited (a loose bound, not a timing test)


def test_a_failed_expectation_is_reported_at_its_line(tmp_path):
    write(tmp_path, "pay.yaml", PAY)
    test = write(
        tmp_path,
        "pay.test.yaml",
        """
        plan: pay.yaml
        cases:
          - name: wrong
            inputs: {amount: 1}
            mocks:
              tools:
                charge: {result: {id: ch_1}}
              llm:
                thank: {text: Thanks}
            expect:
              result: {$regex: "^Merci"}
              state: {receipt.id: ch_2, nowhere: 1}
              steps:
                pay: {attempts: {$not: 1}}
    """,
    )
    (result,) = run_file(test).results
    lines: dict[int, list[str]] = {}
    for f in result.failures:
        lines.setdefault(f.span.line, []).append(f.message)
    at = lambda text: lines[line_of(test, text)]  # noqa: E731
    assert at("result: {$regex")[0].startswith("result:") and "does not match /^Merci/" in at("result: {$regex")[0]
    assert 'state.receipt.id: expected "ch_2", got "ch_1"' in at("state: {receipt.id")[0]
    assert at("state: {receipt.id")[1].startswith("state.nowhere: not written (state has: note, receipt)")
    assert "steps.pay.attempts: expected anything but 1" in at("pay: {attempts")[0]


def test_an_unmocked_call_fails_the_case_with_step_tool_and_arguments_and_stops_the_run(tmp_path):
    write(tmp_path, "pay.yaml", PAY)
    test = write(
        tmp_path,
        "pay.test.yaml",
        """
        plan: pay.yaml
        cases:
          - name: forgot the tool
            inputs: {amount: 5}
            mocks:
              llm: {thank: {text: x}}
    """,
    )
    (result,) = run_file(test).results
    assert not result.passed
    first = result.failures[0].message
    assert first.startswith('unmocked call: step pay called tool charge with {"amount": 5, "card"')
    assert "add mocks.tools.charge" in first
    assert result.status == "aborted"  # nothing ran after it: no cascade of failures
    assert not any(f.message.startswith(("status:", "had_errors:")) for f in result.failures)


def test_llm_mocks_json_checked_against_output_schema_tool_calls_and_branches(tmp_path):
    write(
        tmp_path,
        "p.yaml",
        """
        steps:
          - id: classify
            llm: "Is this spam? †input.text"
            tools: [lookup]
            output_schema: {type: object, required: [spam], properties: {spam: {type: boolean}}}
            output: †state.verdict
          - id: route
            llm: "Where does #classify go?"
            output: †state.inbox || †state.junk
        result: †state.verdict
    """,
    )
    test = write(
        tmp_path,
        "p.test.yaml",
        """
        plan: p.yaml
        cases:
          - name: the model looks the sender up, then answers; routing picks junk
            inputs: {text: buy now}
            mocks:
              tools:
                lookup:
                  - args: {sender: {$regex: "@"}}
                    result: {reputation: bad}
              llm:
                classify:
                  sequence:
                    - tool_calls: [{name: lookup, arguments: {sender: a@b.c}}]
                    - json: {spam: true}
                route: {text: "to the junk folder", alternative: "†state.junk"}
            expect:
              result: {spam: true}
              state: {junk: to the junk folder}
              calls: {lookup: 1, classify: 2}
          - name: an answer off the schema fails the step
            inputs: {text: hi}
            mocks:
              llm:
                classify: {json: {spam: "maybe"}}
                route: {text: x}
            expect:
              had_errors: true
              steps:
                classify: {status: failed, error: {type: LLMStepError, message: {$regex: output_schema}}}
    """,
    )
    results = run_file(test).results
    assert [r.failures for r in results] == [[], []]


def test_gates_real_tools_raises_and_child_steps(tmp_path):
    write(
        tmp_path,
        "tools.py",
        """
        import dagplan

        @dagplan.tool
        def double(x: int) -> int:
            return 2 * x
    """,
    )
    write(
        tmp_path,
        "p.yaml",
        """
        inputs:
          xs: {type: array}
        steps:
          - id: ok
            gate: {question: "Double †input.xs?", choices: [yes, no]}
          - id: each
            for_each: †input.xs
            max_items: 10
            tool: double
            args: {x: †item}
            deps: [ok]
            output: †state.doubled
        result: †state.doubled
    """,
    )
    test = write(
        tmp_path,
        "p.test.yaml",
        """
        plan: p.yaml
        tools: [tools.py]
        cases:
          - name: the real tool runs once the gate says yes
            inputs: {xs: [1, 2]}
            real: [double]
            mocks: {gates: {ok: "yes"}}
            expect:
              result: [2, 4]
              steps:
                "each[1]": {status: completed, output: 4}
          - name: an unanswered gate fails the case
            inputs: {xs: [1]}
            real: [double]
          - name: a missing input stops the run before it starts
            expect:
              raises: {code: missing-input}
    """,
    )
    results = run_file(test).results
    assert results[0].failures == [] and results[2].failures == []
    assert results[1].failures[0].message.startswith("unmocked call: gate ok asked")


def test_test_files_are_checked_with_positions_and_did_you_mean(tmp_path):
    write(tmp_path, "pay.yaml", PAY)
    test = write(
        tmp_path,
        "pay.test.yaml",
        """
        plan: pay.yaml
        cases:
          - name: typos
            mocks:
              tools:
                charg: {result: 1}
                apologize: {reslt: 1}
              llm:
                thnk: {text: x}
            expect:
              steps: {py: {status: completed}}
              result: {$regexp: x}
    """,
    )
    report = run_file(test)
    assert report.results == [] and len(report.errors) == 1
    text = [d.format() for d in report.errors[0][1].diagnostics]
    assert any(
        ":7:" in t and "unknown key 'reslt' in cases[0].mocks.tools.apologize" in t and "did you mean 'result'" in t
        for t in text
    ), text
    proc = dagplan_cli("check", "pay.test.yaml", cwd=tmp_path)  # check knows test files too
    assert proc.returncode == 1 and "did you mean 'result'" in proc.stdout + proc.stderr
    fixed = test.read_text().replace("reslt", "result")
    test.write_text(fixed)
    found = {d.message: d for d in run_file(test).errors[0][1].diagnostics}
    assert found["'charg' is not one of the plan's tools"].hint == "did you mean 'charge'?"
    assert found["'charg' is not one of the plan's tools"].span.line == 6
    assert found["'thnk' is not one of the plan's LLM steps"].hint == "did you mean 'thank'?"
    assert found["'py' is not one of the plan's steps"].hint == "did you mean 'pay'?"
    assert found["'$regexp' is not a matcher"].hint == "did you mean '$regex'?"


# --- the command -------------------------------------------------------------------------------


def test_cli_exit_codes_junit_github_and_json(tmp_path):
    write(tmp_path, "pay.yaml", PAY)
    good = """
        plan: pay.yaml
        cases:
          - name: ok
            inputs: {amount: 1}
            mocks:
              tools: {charge: {result: {id: c}}}
              llm: {thank: {text: hi}}
            expect: {result: hi}
    """
    write(tmp_path, "t/good.test.yaml", good.replace("plan: pay.yaml", "plan: ../pay.yaml"))
    assert dagplan_cli("test", "t", cwd=tmp_path).returncode == 0
    write(
        tmp_path,
        "t/bad.test.yaml",
        good.replace("plan: pay.yaml", "plan: ../pay.yaml").replace("result: hi}", "result: ho}"),
    )
    proc = dagplan_cli("test", "--format", "junit", "-o", "junit.xml", cwd=tmp_path)
    assert proc.returncode == 1
    suites = ET.parse(tmp_path / "junit.xml").getroot()
    assert suites.get("tests") == "2" and suites.get("failures") == "1"
    failure = suites.find(".//testcase/failure")
    assert failure is not None and 'result: expected "ho", got "hi"' in (failure.text or "")
    github = dagplan_cli("test", "t/bad.test.yaml", "--format", "github", cwd=tmp_path).stdout
    assert "::error file=t/bad.test.yaml,line=8,col=" in github and "title=dagplan test%3A ok" in github
    report = json.loads(dagplan_cli("test", "t", "--format", "json", "--coverage", cwd=tmp_path).stdout)
    assert (report["passed"], report["failed"]) == (1, 1) and report["coverage"][0]["total"] > 0
    write(tmp_path, "t/broken.test.yaml", "plan: nowhere.yaml\ncases: [{name: x}]\n")
    assert (
        dagplan_cli("test", "t", cwd=tmp_path).returncode == 1
    )  # a test file that names no plan: a finding, as `check` says
    assert dagplan_cli("test", "empty", cwd=tmp_path).returncode == 2  # nothing to run


def test_coverage_fail_under_and_paths_draft_the_missing_cases(tmp_path):
    write(tmp_path, "pay.yaml", PAY)
    write(
        tmp_path,
        "pay.test.yaml",
        """
        plan: pay.yaml
        cases:
          - name: only the happy path
            inputs: {amount: 1}
            mocks:
              tools: {charge: {result: {id: c}}}
              llm: {thank: {text: hi}}
    """,
    )
    proc = dagplan_cli("test", "pay.test.yaml", "--coverage", "--fail-under", "100", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "missed: pay -> †state.error" in proc.stdout and "missed: sorry runs" in proc.stdout
    assert "under --fail-under 100" in proc.stderr
    drafted = dagplan_cli("test", "pay.test.yaml", "--paths", "pay.yaml", cwd=tmp_path).stdout
    assert "1 of 2 branch combinations have no case" in drafted
    assert "charge: {result: TODO, alternative: 1}" in drafted and "apologize: {result: TODO}" in drafted


def test_every_bundled_example_is_tested_with_full_branch_coverage():
    plans = {p.name for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".json", ".rewoo") and ".test." not in p.name
             and "invalid" not in p.parts and "parts" not in p.parts}  # fmt: skip
    report = dagplan.test([EXAMPLES], config=load_config(EXAMPLES))
    assert report.errors == [] and report.failed == 0, [(r.name, r.failures) for r in report.results]
    covered = {Path(c.plan).name: c.percent for c in report.coverage()}
    assert set(covered) == plans
    assert all(percent == 100.0 for percent in covered.values()), covered


def test_the_pytest_plugin_collects_plan_test_files(tmp_path):
    from importlib.metadata import entry_points

    assert any(ep.value == "dagplan.pytest_plugin" for ep in entry_points(group="pytest11"))
    write(tmp_path, "pay.yaml", PAY)
    write(
        tmp_path,
        "pay.test.yaml",
        """
        plan: pay.yaml
        cases:
          - name: thanked
            inputs: {amount: 1}
            mocks:
              tools: {charge: {result: {id: c}}}
              llm: {thank: {text: hi}}
            expect: {result: hi}
          - name: wrong
            inputs: {amount: 1}
            mocks:
              tools: {charge: {result: {id: c}}}
              llm: {thank: {text: hi}}
            expect: {result: bye}
    """,
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "pay.test.yaml"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout
    line = line_of(tmp_path / "pay.test.yaml", "expect: {result: bye}")
    assert f'pay.test.yaml:{line}:22: result: expected "bye", got "hi"' in proc.stdout


# --- cassettes ---------------------------------------------------------------------------------


TOOLS = """
import dagplan

@dagplan.tool(purity="pure")
def lookup(customer: str, api_key: str) -> dict:
    return {"customer": customer, "plan": "gold", "note": "Bearer abcdefghijklmnop0123"}
"""

ASK = """
inputs:
  customer: {type: string}
steps:
  - id: find
    tool: lookup
    args: {customer: †input.customer, api_key: "sk-live-0123456789abcdefghij"}
    output: †state.found
  - id: write
    llm: "Write to †state.found.customer on the †state.found.plan plan"
    output: †state.letter
result: †state.letter
"""


def test_record_export_and_replay_offline_with_secrets_kept_out(tmp_path, stub, stub_model):
    from llm_stub import text

    write(tmp_path, "tools.py", TOOLS)
    write(tmp_path, "ask.yaml", ASK)
    (tmp_path / "dagplan.toml").write_text(
        f'model = "{stub_model}"\nredact = ["gold"]\n[llm]\napi_base = "{stub.url}"\napi_key = "sk-test"\n'
    )
    stub.script(text("Dear ada, welcome."))
    env = {"ACME_API_KEY": "acme-secret-value-42"}
    recorded = dagplan_cli("run", "ask.yaml", "--tools", "tools.py", "-i", "customer=ada", "--record", "c.json",
                           cwd=tmp_path, env=env)  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    assert stub.count == 1 and "2 calls recorded in c.json" in recorded.stderr
    saved = (tmp_path / "c.json").read_text()
    for secret in ("sk-live-0123456789abcdefghij", "abcdefghijklmnop0123", "gold", "sk-test"):
        assert secret not in saved
    cassette = json.loads(saved)
    assert [c["kind"] for c in cassette["calls"]] == ["tool", "model"]
    assert cassette["calls"][1]["tokens"] == 18 and cassette["calls"][1]["step"] == "write"

    run_id = cassette["run_id"]
    exported = dagplan_cli("runs", "export", run_id, "-o", "again.json", cwd=tmp_path)
    assert exported.returncode == 0 and json.loads((tmp_path / "again.json").read_text()) == cassette

    stub.reset()
    replayed = dagplan_cli("run", "ask.yaml", "--tools", "tools.py", "-i", "customer=ada", "--replay", "c.json",
                           "--format", "json", cwd=tmp_path)  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["result"] == "Dear ada, welcome." and stub.count == 0

    missed = dagplan_cli("run", "ask.yaml", "--tools", "tools.py", "-i", "customer=bob", "--replay", "c.json",
                         cwd=tmp_path)  # fmt: skip
    assert missed.returncode == 1 and stub.count == 0
    assert "has no recording of tool lookup called by step find" in missed.stdout + missed.stderr
    shown = missed.stdout + missed.stderr
    assert '- "customer": "ada"' in shown and '+ "customer": "bob"' in shown  # the closest call, the difference
    assert "sk-live" not in shown  # an error message shows no more of a secret than a cassette


def test_a_case_replays_a_cassette(tmp_path, stub, stub_model):
    from llm_stub import text

    write(tmp_path, "tools.py", TOOLS)
    write(tmp_path, "ask.yaml", ASK)
    config = f'model = "{stub_model}"\n[llm]\napi_base = "{stub.url}"\napi_key = "sk-test"\n'
    (tmp_path / "dagplan.toml").write_text(config)
    stub.script(text("Dear ada."))
    assert dagplan_cli("run", "ask.yaml", "--tools", "tools.py", "-i", "customer=ada", "--record", "c.json",
                       cwd=tmp_path).returncode == 0  # fmt: skip
    (tmp_path / "dagplan.toml").unlink()  # offline: no model, no endpoint
    stub.reset()
    write(
        tmp_path,
        "ask.test.yaml",
        """
        plan: ask.yaml
        tools: [tools.py]
        cases:
          - name: the recorded run replays
            inputs: {customer: ada}
            cassette: c.json
            expect: {result: Dear ada.}
          - name: another customer is not in the cassette
            inputs: {customer: bob}
            cassette: c.json
    """,
    )
    results = run_file(tmp_path / "ask.test.yaml").results
    assert results[0].failures == [] and stub.count == 0
    assert "has no recording of tool lookup" in results[1].failures[0].message
    by = {row["step"]: row["by"] for row in results[1].steps}
    assert by["find"] == "cassette (miss)", results[1].steps  # issue 63: it said `real`
    assert {row["by"] for row in results[0].steps} <= {"cassette", ""}, results[0].steps


# --- cost before running -----------------------------------------------------------------------


COSTLY = """
inputs:
  topic: {type: string, maxLength: 200}
steps:
  - id: outline
    llm: "Outline an essay about †input.topic"
    output_schema: {type: object, additionalProperties: false,
                    properties: {points: {type: array, maxItems: 5, items: {type: string, maxLength: 300}}}}
    output: †state.outline
  - id: write
    for_each: †state.outline.points
    max_items: 5
    llm: "Write a paragraph about #outline.head=2000"
    output: †state.paragraphs
  - id: judge
    llm: "Judge #write"
    output: †state.verdict
"""


def test_check_and_preview_estimate_the_worst_case_and_max_cost_is_enforced(tmp_path):
    write(tmp_path, "essay.yaml", COSTLY)
    (tmp_path / "dagplan.toml").write_text('model = "gpt-4o-mini"\n')
    proc = dagplan_cli("check", "essay.yaml", cwd=tmp_path)
    assert proc.returncode == 0
    assert "essay.yaml: worst case 7 steps, 7 LLM steps, 7 model calls, input tokens unbounded (#write)" in proc.stderr
    bounded = COSTLY.replace('"Judge #write"', '"Judge #write.head=500"')
    write(tmp_path, "essay.yaml", bounded)
    found = dagplan.estimate(tmp_path / "essay.yaml", config=load_config(tmp_path))
    assert (found.steps, found.model_calls) == (7, 7) and found.cost is not None and found.cost > 0
    outline = found.llm[0]
    assert outline.input_tokens is not None and outline.input_tokens < 300  # 200 characters of topic, bounded
    assert found.llm[1].times == 5
    preview = dagplan_cli("preview", "essay.yaml", cwd=tmp_path).stdout
    assert "Cost (worst case): 7 model calls, <= " in preview and "input tokens, <= $" in preview
    (tmp_path / "dagplan.toml").write_text('model = "gpt-4o-mini"\nmax_cost = 0.001\n')
    proc = dagplan_cli("check", "essay.yaml", cwd=tmp_path)
    assert proc.returncode == 1 and "error too-expensive: this plan could cost $" in proc.stdout
    write(tmp_path, "essay.yaml", COSTLY)
    proc = dagplan_cli("check", "essay.yaml", cwd=tmp_path)
    assert "warning unbounded-cost" in proc.stdout and "'judge' (#write)" in proc.stdout


def test_a_prompt_over_the_context_window_is_a_warning_naming_its_placeholder(tmp_path):
    write(
        tmp_path,
        "big.yaml",
        """
        steps:
          - id: fetch
            tool: fetch
            output: †state.page
          - id: read
            llm: "Summarize: #fetch.head=900000"
            output: †state.summary
    """,
    )
    (tmp_path / "dagplan.toml").write_text('model = "gpt-4o-mini"\n')
    proc = dagplan_cli("check", "big.yaml", cwd=tmp_path)
    assert "warning context-window" in proc.stdout and "most of it is #fetch.head=900000" in proc.stdout


@pytest.mark.parametrize(
    "expected,actual,ok",
    [
        ({"$subset": {"a": 1}}, {"a": 1, "b": 2}, True),
        ({"$subset": [1, 3]}, [1, 2, 3], True),
        ({"$subset": [3, 1]}, [1, 2, 3], False),
        ({"$regex": "^a.c$"}, "abc", True),
        ({"$type": "integer"}, True, False),
        ({"$contains": {"$regex": "x"}}, ["a", "box"], True),
        ({"$len": 2}, {"a": 1, "b": 2}, True),
        (1, 1.0, True),
        (True, 1, False),
        ({"a": {"$any": True}}, {"a": None}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
    ],
)
def test_matchers(expected, actual, ok):
    from dagplan.interpreter.testing.expect import matches

    assert matches(expected, actual) is ok


REACH = """inputs:
  tier: {type: string}
  attempt: {type: integer}
steps:
  - {id: gold, when: '†input.tier == "gold" and †input.attempt < 3', tool: presentSuggestion,
     args: {suggestion: gold}, output: †state.gold}
  - {id: also_gold, when: '†input.tier == "gold" and †input.attempt < 3', tool: presentSuggestion,
     args: {suggestion: "†state.gold again"}, output: †state.again}
  - {id: other, when: '†input.tier != "gold"', tool: presentSuggestion, args: {suggestion: other},
     output: †state.other}
  - {id: each, for_each: [a, b], tool: presentSuggestion, args: {suggestion: †item}, output: †state.each}
result: †state.each
"""


ONE = 'steps:\n  - id: history\n    tool: checkBillingHistory\n    args: {customerId: "c1"}\n    output: †state.h\n'


def test_a_test_file_s_own_mocks_are_every_case_s_defaults_and_its_typos_get_a_did_you_mean(tmp_path):
    root = with_example_tools(tmp_path)
    shutil.copy(ROOT / "examples" / "weather.yaml", root / "weather.yaml")
    tests = """plan: weather.yaml
tools: [tools.py]
mocks:
  tools:
    getWeather: {result: {city: Rome, sky: sunny}}
    findPark: {result: the park}
    presentSuggestion: {result: done}
cases:
  - name: sunny by default
    inputs: {city: Rome}
    expect: {steps: {park: {status: completed, output: the park}, movie: {status: skipped}}}
  - name: a case overrides a default by name
    inputs: {city: Oslo}
    mocks:
      tools:
        getWeather: {alternative: 1, result: {city: Oslo, sky: rainy}}
        findMovie: {result: a film}
    expect: {steps: {movie: {status: completed, output: a film}, park: {status: skipped}}}
"""
    (root / "weather.test.yaml").write_text(tests, encoding="utf-8")
    ran = run_dagplan(root, "test", "weather.test.yaml")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    typos = tests.replace("inputs: {city: Oslo}", "inputs: {citty: Oslo}\n    real: [getWeathr]")
    (root / "weather.test.yaml").write_text(typos, encoding="utf-8")
    checked = run_dagplan(root, "check", "weather.test.yaml")
    assert checked.returncode == 1
    assert "weather.test.yaml:13:14: error test-file: input 'citty' is not one of the plan's inputs" in checked.stdout
    assert "did you mean 'city'?" in checked.stdout and "did you mean 'getWeather'?" in checked.stdout
    (root / "weather.test.yaml").write_text(tests.replace("    findPark: {result", "    findPak: {result"))
    assert "'findPak' is not one of the plan's tools" in run_dagplan(root, "check", "weather.test.yaml").stdout


def test_a_failing_case_shows_what_each_step_did_and_who_answered(tmp_path):
    root = with_example_tools(tmp_path)
    shutil.copy(ROOT / "examples" / "weather.yaml", root / "weather.yaml")
    text = (ROOT / "examples" / "weather.test.yaml").read_text(encoding="utf-8")
    (root / "weather.test.yaml").write_text(text.replace('result: "Today: Villa Borghese"\n', 'result: "Today"\n', 1))
    done = run_dagplan(root, "test", "weather.test.yaml")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    head = lines.index(next(line for line in lines if line.split() == ["step", "call", "by", "status", "output"]))
    rows = [line.split(None, 4) for line in lines[head + 1 : head + 5]]
    assert [r[:4] for r in rows] == [["weather", "getWeather", "mock", "completed"],
                                     ["movie", "findMovie", "-", "skipped"], ["park", "findPark", "mock", "completed"],
                                     ["present", "presentSuggestion", "mock", "completed"]], done.stdout  # fmt: skip
    assert rows[1][4].startswith("†state.notSunny was never written") and rows[3][4] == "Today: Villa Borghese"
    assert "step" not in done.stdout.split("1 failed")[1]  # the passing case shows none
    as_json = json.loads(run_dagplan(root, "test", "weather.test.yaml", "--format", "json").stdout)
    case = next(c for c in as_json["cases"] if c["case"] == "a rainy day goes to the movies")
    assert {s["step"]: s["by"] for s in case["steps"]}["present"] == "real"


def test_a_test_file_s_problems_come_all_at_once_in_check_s_words(tmp_path):
    root = with_example_tools(tmp_path)
    shutil.copy(ROOT / "examples" / "weather.yaml", root / "weather.yaml")
    (root / "bad.test.yaml").write_text(
        "plan: weather.yaml\ntools: [tools.py]\ncases:\n  - name: one\n    inputs: {city: Rome}\n"
        "    expectt: {result: x}\n  - name: 5\n    inputs: [1]\n    expect: {status: 3}\n", encoding="utf-8"
    )  # fmt: skip
    for command in ("test", "check"):
        done = run_dagplan(root, command, "bad.test.yaml")
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        said = done.stdout + done.stderr
        assert "bad.test.yaml:6:5: error test-file: unknown key 'expectt' in cases[0]" in said, said
        assert "did you mean 'expect'?" in said
        assert "bad.test.yaml:7:11: error test-file: cases[1].name must be a string, not a number" in said
        assert "cases[1].inputs must be a mapping, not a list" in said
        assert "cases[1].expect.status must be one of completed, failed" in said
        assert "Additional properties" not in said and "is not of type" not in said


def test_paths_propose_only_what_some_input_reaches_with_those_inputs(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "p.yaml").write_text(REACH, encoding="utf-8")
    (root / "p.test.yaml").write_text("plan: p.yaml\ntools: [tools.py]\ncases:\n  - name: silver\n"
                                      "    inputs: {tier: silver, attempt: 1}\n    real: [presentSuggestion]\n"
                                      "    expect: {result: {$any: true}}\n", encoding="utf-8")  # fmt: skip
    done = run_dagplan(root, "test", "p.test.yaml", "--paths", "p.yaml", "--format", "json")
    found = json.loads(done.stdout)
    # 2 x 2 x 2 `when:` outcomes x 2 fan-out outcomes = 16 combinations; 3 can happen: other / gold (then
    # also_gold, which reads gold's output) / gold's condition false on a gold tier (attempt >= 3)
    assert found["combinations"] == 3, found
    drafted = {tuple(u["path"]): u["case"] for u in found["untested"]}
    assert len(drafted) == 2 and all("over zero items" not in " ".join(p) for p in drafted), drafted
    both = next(case for path, case in drafted.items() if any("also_gold" in p for p in path))
    assert both["inputs"] == {"tier": "gold", "attempt": 2}  # values that take this way, not TODOs
    assert done.returncode == 0
    covered = run_dagplan(root, "test", "p.test.yaml", "--coverage", "--format", "json")
    plan = json.loads(covered.stdout)["coverage"][0]
    missed = {m["key"] for m in plan["missed"]}
    assert "fanout:each:zero" not in missed and "step:also_gold" in missed, missed  # no gap that cannot happen


def test_junit_output_is_well_formed_xml_whatever_the_names_and_outputs_hold(weather_project):
    name = "weird \x01\x1b[31m \ufffe name"
    (weather_project / "w.test.yaml").write_text(json.dumps({"plan": "weather.yaml", "tools": ["tools.py"], "cases": [
        {"name": name, "inputs": {"city": "Rome"}, "expect": {"result": "\x07 never"}}]}))  # fmt: skip
    proc = run_dagplan_s(weather_project, "test", "w.test.yaml", "--format", "junit")
    assert proc.returncode == 1
    tree = ElementTree.fromstring(proc.stdout)
    (case,) = tree.iter("testcase")
    assert case.get("name").startswith("weird \\u0001\\u001b[31m")


def test_a_missing_tools_file_of_a_test_file_is_shown_at_its_entry(weather_project):
    (weather_project / "m.test.yaml").write_text("plan: weather.yaml\ntools: [tools.py, nope.py]\ncases: [{name: x}]\n")
    proc = run_dagplan_s(weather_project, "check", "m.test.yaml")
    assert "m.test.yaml:2:19: error tools-import" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_a_missing_tools_file_of_a_test_is_reported_at_its_line(tools_project):
    (tools_project / "w.yaml").write_text(ONE)
    (tools_project / "w.test.yaml").write_text("plan: w.yaml\ntools: [nope.py]\ncases:\n  - name: x\n")
    proc = run_dagplan_s(tools_project, "check", "w.test.yaml")
    assert proc.returncode == 2 and "w.test.yaml:2:9: error tools-import" in proc.stdout, proc.stdout
