"""Hostile input, kept by the suite: mutated plans never raise out of `check`, and `fmt` never changes a value.

Bounded so CI stays fast (about 200 examples each); for a longer run:

    DAGPLAN_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz.py
"""

from __future__ import annotations

import asyncio
import io
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dagplan
from dagplan.dsl import check
from dagplan.dsl.errors import DagplanError
from dagplan.dsl.load import load_text

EXAMPLES = int(os.environ.get("DAGPLAN_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ODD_TEXT = st.sampled_from(
    [
        "\u2028", "\u2029", "\x85", "\r", "\x1f", "\ufeff", "\udc80", "\t", " ", "#", "$", "\u2020", "\\", ":", "- ",
        "{", "}", "[", "]", '"', "'", "!!int ", "!!python/object/apply:os.system ", "&a ", "*a", "<<: ",
        "9" * 5000, "[" * 200, "```json\n", "```", "\n", "\u2020state[\"\\u\"]", "#E1.head=" + "9" * 40,
        "\u2020state.y[" + "9" * 30 + "]", '{"a": 1, "a": 2}', "when: ", "catch: ",
    ]
)  # fmt: skip

NAMES = st.sampled_from(["a", "b", "fetch", "E1", "x-y", "sum"])
REFS = st.sampled_from(["\u2020state.a", "\u2020input.city", "$state.b.c[0]", "#a", "#b.head=20", "plain"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), REFS, st.text(max_size=8))


@st.composite
def plans(draw) -> dict:
    """Documents near the language: steps with tools or prompts, references, outputs, conditions."""
    steps = []
    for i in range(draw(st.integers(1, 4))):
        step = {"id": draw(NAMES) + str(i), draw(st.sampled_from(["tool", "llm"])): draw(NAMES)}
        if draw(st.booleans()):
            step["args"] = draw(st.dictionaries(NAMES, SCALARS, max_size=3))
        if draw(st.booleans()):
            step["output"] = draw(st.sampled_from(["\u2020state.a", "\u2020state.b || \u2020state.err", "$state.c"]))
        if draw(st.booleans()):
            step["when"] = draw(
                st.sampled_from(['\u2020state.a == "x"', "not \u2020state.b", "len(\u2020state.a) > 1"])
            )
        steps.append(step)
    doc: dict = {"steps": steps}
    if draw(st.booleans()):
        doc["inputs"] = {"city": {"type": draw(st.sampled_from(["string", "number", "banana"]))}}
    return doc


def as_text(doc: dict, yaml: bool) -> str:
    if not yaml:
        return json.dumps(doc, ensure_ascii=False)
    from io import StringIO

    from ruamel.yaml import YAML

    out = StringIO()
    YAML().dump(doc, out)
    return out.getvalue()


@st.composite
def mutated(draw) -> str:
    text = as_text(draw(plans()), draw(st.booleans()))
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "flip", "splice"]))
        if action == "insert":
            text = text[:where] + draw(ODD_TEXT) + text[where:]
        elif action == "delete":
            text = text[:where] + text[where + draw(st.integers(1, 20)) :]
        elif action == "flip" and text:
            i = min(where, len(text) - 1)
            text = text[:i] + chr((ord(text[i]) ^ (1 << draw(st.integers(0, 6)))) or 32) + text[i + 1 :]
        else:
            text = text[:where] + text[draw(st.integers(0, len(text))) :]
    if draw(st.booleans()):  # a model's answer: prose around a fence
        text = f"Here is the plan:\n```{draw(st.sampled_from(['json', 'yaml', '']))}\n{text}\n```\nHope it helps {{x}}"
    return text


@FUZZ
@given(mutated())
def test_check_never_raises(text):
    result = check(text=text, name="fuzz.yaml")  # any exception here is the failure
    for diag in result.diagnostics:
        assert diag.code and diag.message
        diag.format()


@FUZZ
@given(mutated())
def test_check_of_bytes_never_raises(text):
    check(text=text.encode("utf-8", "surrogatepass"), name="fuzz.json")


@FUZZ
@given(plans(), st.booleans(), st.lists(ODD_TEXT, max_size=2))
def test_fmt_preserves_every_value_and_is_idempotent(doc, yaml, odd):
    if odd:  # odd characters inside string values: the hardest part for YAML
        doc["steps"][0]["description"] = "".join(odd) + "\nsecond line" + "".join(odd)
    try:
        loaded = load_text(as_text(doc, yaml), "p.yaml")
    except DagplanError:
        return  # not loadable to begin with: nothing to format
    try:
        text = dagplan.format_document(loaded)
    except DagplanError as exc:
        assert exc.code == "cannot-format"  # refused, never a changed value
        return
    again = load_text(text, "p.yaml")
    assert again.data["steps"] == json.loads(json.dumps(loaded.data["steps"])) or _only_rewritten(loaded, again)
    assert dagplan.format_document(again) == text
    before, after = check(text=as_text(doc, yaml), name="p.yaml"), check(text=text, name="p.yaml")
    if before.analysis is not None:
        assert after.analysis is not None
        assert (before.analysis.order, before.analysis.groups) == (after.analysis.order, after.analysis.groups)


def _only_rewritten(before, after) -> bool:
    """fmt's one intended change: references spelled canonically ($state -> †state); the IR is the same."""
    a, b = check(text=json.dumps(before.data), name="p"), check(text=json.dumps(after.data), name="p")
    return a.plan is not None and b.plan is not None and a.plan.steps == b.plan.steps


# --- round two: the surfaces added since (test files, cassettes, configuration, the viewer, secrets) ------

import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
WEATHER_TEST = (EXAMPLES_DIR / "weather.test.yaml").read_text(encoding="utf-8")
_WORK = Path(tempfile.mkdtemp(prefix="dagplan-fuzz-"))
for _name in ("weather.yaml", "tools.py"):
    shutil.copy(EXAMPLES_DIR / _name, _WORK / _name)


def _mutate(draw, text: str, odd=ODD_TEXT) -> str:
    for _ in range(draw(st.integers(0, 5))):
        where = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "splice"]))
        if action == "insert":
            text = text[:where] + draw(odd) + text[where:]
        elif action == "delete":
            text = text[:where] + text[where + draw(st.integers(1, 30)) :]
        else:
            text = text[:where] + text[draw(st.integers(0, len(text))) :]
    return text


MATCHER_TEXT = st.sampled_from(
    ["{$regex: '^(a+)+$'}", "{$regex: '('}", "{$len: '3'}", "{$any: false}", "{$type: strng}", "{$not: {$len: -1}}",
     "{$contains: [1]}", "{$subset: 3}", "NaN", ".nan", "!!binary x", "{$regex: 'a{99999999999}'}"]
)  # fmt: skip


@st.composite
def plan_test_files(draw) -> str:
    text = WEATHER_TEST
    if draw(st.booleans()):
        where = text.index('result: "Today: Villa Borghese"\n      state')
        text = text[:where] + "result: " + draw(MATCHER_TEXT) + "\n      state" + text[where + 38 :]
    return _mutate(draw, text, st.one_of(ODD_TEXT, MATCHER_TEXT))


@FUZZ
@given(plan_test_files())
def test_check_and_test_of_a_mutated_test_file_never_raise(text):
    path = _WORK / "fuzz.test.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    started = time.monotonic()
    (result,) = dagplan.check_files([str(path)])
    for diag in result.diagnostics:
        assert diag.code and diag.message
        diag.format()
    report = dagplan.test([str(path)], coverage=False)  # any exception here is the failure
    assert report.passed + report.failed + len(report.errors) >= 1
    assert time.monotonic() - started < 60  # a bound on a hang (a backtracking $regex), not a timing test


CASSETTE = {
    "dagplan_cassette": 1,
    "plan": "weather.yaml",
    "inputs": {"city": "Rome"},
    "calls": [
        {"kind": "tool", "step": "weather", "name": "getWeather", "args": {"city": "Rome"}, "result": {"sky": "sunny"},
         "alternative": 1},
        {"kind": "gate", "step": "ok", "value": "approve"},
        {"kind": "model", "step": "m", "model": "x", "request": {"messages": []}, "response": {"message": {}}},
    ],
}  # fmt: skip
CASSETTE_ODD = st.sampled_from([1, "x", None, [], {}, 1.5, True, "\ud800", [1], {"type": 1}, "NaN"])


@st.composite
def cassettes(draw) -> str:
    doc = json.loads(json.dumps(CASSETTE))
    for _ in range(draw(st.integers(1, 4))):
        calls = doc.get("calls")
        index = draw(st.integers(0, 2))
        inner = isinstance(calls, list) and index < len(calls) and draw(st.booleans())
        target = calls[index] if inner else doc
        if isinstance(target, dict):
            key = draw(st.sampled_from(sorted(target) + ["calls", "kind", "args", "error", "step"]))
            target[key] = draw(CASSETTE_ODD)
    text = json.dumps(doc, ensure_ascii=False)
    return _mutate(draw, text) if draw(st.booleans()) else text


@FUZZ
@given(cassettes())
def test_a_mutated_cassette_is_read_or_refused_never_a_traceback(text):
    from dagplan.interpreter.testing.cassette import CassetteCalls, read

    path = _WORK / "fuzz.cassette.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        data = read(path)
    except DagplanError as exc:
        exc.headline.format()
        return
    tools = dagplan.load_tools([str(_WORK / "tools.py")])
    result = dagplan.run(str(_WORK / "weather.yaml"), tools=tools, inputs={"city": "Rome"}, cassette=data)
    assert result.status is not None
    CassetteCalls(data).recorded_model()


TOML_ODD = st.sampled_from(
    ["[resume]\nside_efect = 'adopt'\n", "state = 'postgresql://[::1'\n", "state = 'mysql://x'\n", "[pool]\nmax_running = 0\n",
     "a = " + "[" * 3000 + "]" * 3000 + "\n", "redact = ['(']\n", "max_items = -1\n", "\x00", "model = 3\n", "[[x]]\n",
     "state = \"postgresql://u@h:99999/d\"\n", "tools = ['nope.py']\n"]
)  # fmt: skip


@FUZZ
@given(st.lists(TOML_ODD, min_size=1, max_size=3), st.booleans())
def test_a_hostile_configuration_is_a_config_error_never_a_traceback(parts, mutate):
    folder = Path(tempfile.mkdtemp(dir=_WORK))
    (folder / "dagplan.toml").write_text("".join(parts), encoding="utf-8")
    try:
        dagplan.load_config(folder)
    except DagplanError as exc:
        assert exc.code == "config"
        exc.headline.format()


SECRET = "s3cr3t-Pl4nted-Value"
SECRET_KEYS = st.sampled_from(["token", "apiKey", "password", "Authorization", "credentials", "client_secret"])
PLAIN_KEYS = st.sampled_from(["a", "name", "value", "url", "header", "items"])


@st.composite
def holding_a_secret(draw, depth: int = 0):
    """A JSON value with the planted secret somewhere a rule says it is one."""
    kind = draw(st.sampled_from(["key", "pair", "header", "url", "query", "bearer", "nest"] if depth < 3 else ["key"]))
    secret_value = draw(st.sampled_from([SECRET, {"inner": SECRET}, [SECRET], 31415926535]))
    if kind == "key":
        return {draw(SECRET_KEYS): secret_value}
    if kind == "pair":
        return {"name": draw(SECRET_KEYS), "value": SECRET}
    if kind == "header":
        return [[draw(SECRET_KEYS), f"Basic {SECRET}"]]
    if kind == "url":
        return f"https://user:{SECRET}@example.org/x"
    if kind == "query":
        return f"https://example.org/cb?access_token={SECRET}&page=1"
    if kind == "bearer":
        return f"Authorization was Bearer {SECRET}"
    return {draw(PLAIN_KEYS): draw(holding_a_secret(depth + 1)), "other": draw(SCALARS)}


@FUZZ
@given(holding_a_secret())
def test_a_planted_secret_never_survives_redaction(value):
    from dagplan.interpreter.core.redact import redact

    shown = json.dumps(redact(value), ensure_ascii=False)
    assert SECRET not in shown and "31415926535" not in shown


VIEWER_PATHS = st.sampled_from(
    ["/", "/runs/x", "/runs/..%2f..%2fetc", "/runs/20990101-000000-abcd/stream", "/runs/x/steps/a/output", "/plan",
     "/plan?file=weather.yaml", "/plan?file=%00", "/plan?file=../../etc/passwd", "/runs/%ff%fe", "/plan?file=" + "a" * 5000]
)  # fmt: skip
VIEWER_HEADERS = st.dictionaries(
    st.sampled_from(["host", "origin", "sec-fetch-site", "cookie", "content-type", "authorization"]),
    st.sampled_from(["127.0.0.1", "evil.example", "same-origin", "cross-site", "dagplan_token=\u00e9", "", "x" * 3000,
                     "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "Bearer t"]),
    max_size=3,
)  # fmt: skip
FORMS = st.dictionaries(
    st.sampled_from(["csrf", "step", "value", "file", "inputs"]),
    st.sampled_from(["", "weather.yaml", "[" * 3000, '{"city": "Rome"}', "\u00e9\ud800", "approve", "x" * 100000]),
    max_size=4,
)
_VIEWER: list = []


def _viewer():
    if not _VIEWER:
        from starlette.testclient import TestClient

        from dagplan.web.app import Viewer

        viewer = Viewer(_WORK / ".dagplan", root=_WORK, token="t")
        _VIEWER.append((viewer, TestClient(viewer.app, base_url="http://127.0.0.1", raise_server_exceptions=False)))
    return _VIEWER[0]


@settings(max_examples=max(EXAMPLES // 2, 20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VIEWER_PATHS, VIEWER_HEADERS, FORMS, st.booleans(), st.booleans(), st.booleans())
def test_the_viewer_answers_every_request_without_a_500(path, headers, form, post, with_token, with_csrf):
    viewer, client = _viewer()
    if with_csrf:
        form = {**form, "csrf": viewer.csrf}
    params = {"token": "t"} if with_token else {}
    safe = {k: v.encode("utf-8", "surrogatepass") for k, v in headers.items()}  # bytes: sent as they are
    if post:
        target = path.split("?")[0].rstrip("/") + ("/answer" if path.startswith("/runs/") else "/run")
        data = {k: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for k, v in form.items()}
        response = client.post(target, params=params, data=data, headers=safe)
    elif path.endswith("/stream"):
        return  # an event stream never ends by itself; its cursor is fuzzed in test_viewer
    else:
        response = client.get(path, params=params, headers=safe)
    assert response.status_code < 500, (path, response.status_code, response.text[:300])


# --- JSON Lines (`submit --each`): one reader, `\n` lines, UTF-8 or a `binary` refusal -------------------

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(alphabet=st.sampled_from(
        ["a", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\r", "\u00e9", '"', "\\", " "]), max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8,
)  # fmt: skip


@FUZZ
@given(st.lists(JSON_VALUES, min_size=1, max_size=6), st.booleans())
def test_json_lines_read_back_every_value_on_its_own_line(values, crlf):
    """What `json.dumps` writes one a line (separators inside strings left raw) is read back, line by line."""
    from dagplan.dsl.load import read_json_lines

    path = Path(tempfile.mkdtemp(dir=_WORK)) / "inputs.jsonl"
    path.write_bytes(("\r\n" if crlf else "\n").join(json.dumps(v, ensure_ascii=False) for v in values).encode())
    assert list(read_json_lines(path)) == list(enumerate(values, 1))


@FUZZ
@given(st.binary(max_size=200), st.lists(st.sampled_from([b"\n", b"{", b"}", b"[" * 80, b"\xe9", b"\x00", b'"a"',
                                                          b"\xe2\x80\xa8", b"NaN", b"9" * 5000]), max_size=6))  # fmt: skip
def test_json_lines_of_any_bytes_are_values_or_errors_at_their_lines(raw, pieces):
    from dagplan.dsl.load import read_json_lines

    path = Path(tempfile.mkdtemp(dir=_WORK)) / "inputs.jsonl"
    data = raw + b"".join(pieces)
    path.write_bytes(data)
    try:
        rows = list(read_json_lines(path))
    except DagplanError as exc:  # the whole file: not UTF-8, a NUL byte
        assert exc.code == "binary" and exc.span.line >= 1, exc
        return
    lines = data.decode("utf-8-sig").split("\n")
    for number, value in rows:
        assert 1 <= number <= len(lines) and lines[number - 1].strip()
        if isinstance(value, DagplanError):
            value.headline.format()
            assert value.span.line == number


# --- the plan recognizer (check --plans-only, the language server) --------------------------------------

CI_STEP_KEYS = st.sampled_from(["name", "image", "run", "uses", "with", "script", "commands", "env", "settings",
                                "when", "depends_on", "id", "shell", "working-directory"])  # fmt: skip
CI_VALUES = st.one_of(st.text(alphabet="abc :-/.", max_size=12), st.booleans(),
                      st.dictionaries(st.sampled_from(["plan", "tool", "agent", "gate", "loop", "llm", "apply"]),
                                      st.one_of(st.booleans(), st.text(alphabet="abc", max_size=4)), max_size=3))  # fmt: skip


@st.composite
def repository_files(draw) -> str:
    """YAML a repository holds besides plans: CI pipelines (one or more documents, steps with settings that
    may be called plan/tool), compose files, Kubernetes manifests, package manifests."""
    from ruamel.yaml import YAML

    kind = draw(st.sampled_from(["ci", "compose", "k8s", "package"]))
    if kind == "ci":
        doc = {"kind": "pipeline", "steps": draw(st.lists(st.dictionaries(CI_STEP_KEYS, CI_VALUES, min_size=1,
                                                                          max_size=4), min_size=1, max_size=3))}  # fmt: skip
    elif kind == "compose":
        doc = {"services": {"web": {"image": "nginx", "command": draw(st.text(alphabet="abc ", max_size=8))}}}
    elif kind == "k8s":
        doc = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "a", "image": "b"}]}}
    else:
        doc = {"name": "x", "scripts": {"plan": "terraform plan", "tool": "x"}}
    out = io.StringIO()
    YAML().dump(doc, out)
    text = out.getvalue()
    documents = draw(st.integers(1, 3))
    broken = draw(st.sampled_from(["", "!reference [a]\n", "key: 1\nkey: 2\n"]))
    return "\n---\n".join([text] * documents) + broken


@FUZZ
@given(repository_files())
def test_what_a_repository_holds_besides_plans_is_left_alone(text):
    from dagplan.dsl.recognize import is_plan

    assert not is_plan(text, "ci.yml"), text


@FUZZ
@given(st.lists(st.sampled_from(["tool", "llm", "gate", "plan", "loop", "agent"]), min_size=1, max_size=3),
       st.booleans(), st.sampled_from(["drop-comma", "drop-id", "tab", "unclosed", "none"]))  # fmt: skip
def test_a_plan_is_recognised_however_it_is_broken(kinds, as_json, breakage):
    """False negatives are the defect a hook must not have: a broken plan is still checked."""
    from dagplan.dsl.recognize import is_plan

    steps = [{"id": f"s{i}", kind: "x", "output": f"$state.s{i}"} for i, kind in enumerate(kinds)]
    if as_json:
        text = json.dumps({"summary": "s", "steps": steps}, indent=2)
        text = {"drop-comma": text.replace("},", "}", 1), "drop-id": text.replace('"id": "s0",', ""),
                "unclosed": text[:-2], "tab": text.replace("  ", "\t", 1), "none": text}[breakage]  # fmt: skip
    else:
        body = "".join(f"  - id: s{i}\n    {kind}: x\n    output: $state.s{i}\n" for i, kind in enumerate(kinds))
        text = "summary: s\nsteps:\n" + body
        text = {"drop-comma": text + "  - {id: y, tool: [\n", "drop-id": text.replace("  - id: s0\n    ", "  - "),
                "unclosed": text + "result: '\n", "tab": text.replace("    ", "\t", 1), "none": text}[breakage]  # fmt: skip
    assert is_plan(text, "plan-file.json" if as_json else "plan-file.yaml"), text


# --- what tools do: every exception class, every output channel ----------------------------------------


class _LibraryTimeout(BaseException):
    """What gevent.Timeout, pytest's Failed, trio.Cancelled are: a BaseException that is no Exception."""


RAISED = st.sampled_from([ValueError("v"), asyncio.CancelledError(), GeneratorExit(), _LibraryTimeout("5 s"),
                          SystemExit(3), StopIteration(), RecursionError(), MemoryError(), None])  # fmt: skip
WRITTEN = st.lists(st.tuples(st.sampled_from(["print", "stderr", "bytes"]),
                             st.sampled_from(["hi", "\x1b]0;title\x07", "\x1b[2J", "é", "x" * 70000, "\udc80"])),
                   max_size=4)  # fmt: skip


@FUZZ
@given(RAISED, WRITTEN, st.sampled_from(["sync", "async", "async-awaits"]))
def test_a_tool_ends_its_step_whatever_it_raises_or_writes(raised, written, kind):
    """The run ends (no hang, no traceback out of the engine); what the tool raised is its step's failure;
    what it wrote is kept with the step, bounded, and never reaches the real streams."""
    import contextlib
    import sys as system

    from dagplan.interpreter.core.printed import MAX_CHARS

    def act() -> str:
        for channel, text in written:
            if channel == "print":
                print(text)
            elif channel == "stderr":
                system.stderr.write(text)
            else:
                system.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
        if raised is not None:
            raise raised
        return "done"

    async def act_async() -> str:
        if kind == "async-awaits":
            await asyncio.sleep(0)
        return act()

    fn = act if kind == "sync" else act_async
    fn.__name__ = "act"
    tool = dagplan.tool(purity="pure")(fn)
    seen: list = []
    real = io.BytesIO()
    streams = io.TextIOWrapper(real, encoding="utf-8", errors="backslashreplace", write_through=True)
    plan = dagplan.load(text='{"steps": [{"id": "a", "tool": "act", "output": "$state.a"}]}', tools=[tool])
    with contextlib.redirect_stdout(streams), contextlib.redirect_stderr(streams):
        result = asyncio.run(asyncio.wait_for(dagplan.arun(plan, tools=[tool], subscribers=[seen.append]), 20))
    step = result.steps["a"]
    assert str(step.status) == ("completed" if raised is None else "failed"), step
    assert b"\x1b" not in real.getvalue()  # nothing a tool wrote reached the stream raw
    printed = [e.data["text"] for e in seen if str(e.type) == "plan_step_printed"]
    assert all(len(text) <= MAX_CHARS + 64 for text in printed)


# --- streamed answers of every length: the prefixes offered do not depend on how the answer is cut ------


@FUZZ
@given(st.integers(0, 300), st.integers(1, 4), st.lists(st.integers(1, 200), min_size=1, max_size=40),
       st.booleans())  # fmt: skip
def test_a_streamed_answer_offers_the_same_steps_however_it_is_cut(prose, steps, cuts, yaml):
    from dagplan.dsl.stream import StepStream

    plan = {"steps": [{"id": f"s{i}", "tool": "t", "output": f"$state.s{i}"} for i in range(steps)]}
    body = ("steps:\n" + "".join(f"  - id: s{i}\n    tool: t\n    output: $state.s{i}\n" for i in range(steps))
            if yaml else json.dumps(plan))  # fmt: skip
    answer = "".join(f"Thinking {i}: - maybe\n" for i in range(prose)) + "```\n" + body + "\n```\n"

    def offered(pieces: list[str]) -> tuple:
        stream = StepStream()
        found = [p for piece in pieces for p in stream.feed(piece)]
        return tuple(p.steps for p in found if p.steps > 0), stream.end().text == answer

    whole = offered([answer])
    at, pieces = 0, []
    for cut in cuts:
        pieces.append(answer[at : at + cut])
        at += cut
    pieces.append(answer[at:])
    cut_up = offered(pieces)
    assert cut_up[1] and whole[1]
    if not yaml:  # JSON: every step offered once, in order, however the answer is cut
        assert cut_up[0] == tuple(range(1, steps + 1)), cut_up
    one_by_one = offered(list(answer)) if len(answer) < 3000 else cut_up
    assert len(one_by_one[0]) <= steps + 1  # prose costs no check: at most a prefix per step (and the end)


# --- ReWOO texts that form real lines (issue 61: structured, not random bytes) ---------------------------------

REWOO_TOOLS = {
    name: dagplan.ToolSpec(name, parameters={"type": "object", "properties": props, "required": list(props)[:1]})
    for name, props in {
        "search": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "write": {"path": {"type": "string"}, "text": {"type": "string"}},
        "Wikipedia": {"query": {"type": "string"}},
    }.items()
}
REWOO_ODD = st.sampled_from(
    ["", "]", "[", "[[", "{", "}", '"', "\\", "\\u", "#E", "#E0", "#E99", "#E1.head=", "#E1.head=9" + "9" * 30,
     "#E1.summary", "=", ",", ", k=", "\u2020state.a", "$state.b", "#tag", "```", "\u2028", "\r", "\t", " " * 50,
     "[" * 80, "{" * 80, '"\\u006b": 1', "Plan:", "**", "- ", "1. ", "\x00", "\udc80", "LLM[", "#E1 = search["]
)  # fmt: skip


@st.composite
def rewoo_texts(draw) -> str:
    """A ReWOO plan as a model writes one: Plan: lines, #En = Tool[...] calls whose arguments are one text,
    name=value pairs or a JSON object, references to earlier (and later) steps; then a few insertions of odd
    text at random places, a cut, or prose and a code fence around it."""
    lines = []
    count = draw(st.integers(1, 5))
    for n in range(1, count + 1):
        if draw(st.booleans()):
            lines.append(f"Plan: {draw(st.text(max_size=20))}")
        ref = f"#E{draw(st.integers(0, count + 1))}" + draw(st.sampled_from(["", ".summary", ".head=20", ".x"]))
        tool = draw(st.sampled_from(["search", "write", "Wikipedia", "LLM", "nope"]))
        kind = draw(st.sampled_from(["text", "pairs", "json", "ref"]))
        if kind == "text":
            args = draw(st.sampled_from(["Colorado orogeny", f"what is in {ref}?", "x, y", "a=b"]))
        elif kind == "pairs":
            args = f'query="{draw(st.text(max_size=6))}", limit={draw(st.integers(-2, 5))}, path=a.md, text={ref}'
        elif kind == "json":
            args = json.dumps({"query": draw(st.text(max_size=6)), "text": ref, "list": [ref, 1]})
            args = args.replace(f'"{ref}"', ref) if draw(st.booleans()) else args  # #En unquoted in JSON
        else:
            args = ref
        bullet = draw(st.sampled_from(["", "- ", "1. ", "**"]))
        lines.append(f"{bullet}#E{n} = {tool}[{args}]")
    text = "\n".join(lines)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(REWOO_ODD) + text[at:]
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    if draw(st.booleans()):
        text = f"Here is my plan.\n```\n{text}\n```\nDone."
    return text


@FUZZ
@given(rewoo_texts(), st.booleans())
def test_a_rewoo_text_is_a_plan_or_located_diagnostics_never_a_traceback(text, with_tools):
    """Whatever a model writes in ReWOO's lines: check answers (a plan, or diagnostics each at a line and column
    inside the text); a valid one formats to a plan that checks valid again and formats to itself."""
    from dagplan.dsl.fmt import format_document

    tools = REWOO_TOOLS if with_tools else None
    result = check(text=text, name="plan.rewoo", tools=tools)
    lines = text.split("\n")
    for d in result.diagnostics:
        assert d.span.file == "plan.rewoo"
        if d.span.line:
            assert 1 <= d.span.line <= len(lines) + 1, d.format()
    if not result.ok or result.document is None or result.document.dialect != "rewoo":
        return
    from dagplan.dsl.errors import LoadError

    try:
        if with_tools:
            from dagplan.dsl import bind_document

            document, _ = bind_document(result.document, tools)
            written = format_document(document, tools=tools, bound=True)
        else:
            written = format_document(result.document)
    except LoadError as exc:  # fmt leaves the file as it is and says why: Tool[text] without a catalog (issue
        # 62), a lone surrogate YAML cannot write; never a traceback, never a changed value
        assert [d.code for d in exc.diagnostics] == ["cannot-format"], exc.diagnostics
        return
    again = check(text=written, name="plan.yaml", tools=tools)
    assert again.ok, (written, [d.format() for d in again.diagnostics])
    assert [s.id for s in again.plan.steps] == [s.id for s in result.plan.steps]
    assert format_document(load_text(written, "plan.yaml")) == written


JSON_PIECES = st.sampled_from(['{"a": ', "[", "]", "{", "}", '"x"', "1", ",", ":", "```json\n", "```", " prose ", "\\",
                               '"\\ud800"', "NaN", "[" * 300, "9" * 5000, "\n", '"value"', '"channel"', '"who"'])  # fmt: skip


@FUZZ
@given(st.lists(JSON_PIECES, max_size=30))
def test_a_models_answer_or_an_answer_file_is_a_value_or_nothing_never_a_traceback(pieces):
    """The two readers of JSON someone else wrote that issue 61 moved to the one reader: a model's answer gives
    its first JSON value or none; a gate's answer file gives an answer or is ignored."""
    import tempfile
    from pathlib import Path

    from dagplan.interpreter.llm.conversation import parse_json
    from dagplan.interpreter.ops.asking import _read

    text = "".join(pieces)
    parse_json(text)  # a value, or NOT_JSON: what it returns is the caller's to judge; it returns
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gate.answer.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        found = _read(path)
        assert found is None or found.channel is not None
