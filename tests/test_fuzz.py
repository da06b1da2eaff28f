"""Hostile input, kept by the suite: mutated plans never raise out of `check`, and `fmt` never changes a value.

Bounded so CI stays fast (about 200 examples each); for a longer run:

    DAGPLAN_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz.py
"""

from __future__ import annotations

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
