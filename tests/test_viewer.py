"""The run viewer (issue 14): pages driven in a real headless browser, and its safety cases."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from as_user import run_dagplan
import json

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

SLOW_TOOLS = """
import asyncio
import dagplan


@dagplan.tool(purity="pure")
async def checkBillingHistory(customerId: str) -> dict:
    await asyncio.sleep(2.5)  # long enough for the page to be open before the gate
    return {"customerId": customerId, "orders": 3}


@dagplan.tool(purity="side_effect")
async def issueRefund(customerId: str, amount: float) -> dict:
    return {"confirmationId": "refund_1", "amount": amount, "note": "<script>window.pwned = 1</script>"}
"""


def env() -> dict:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@pytest.fixture
def project(tmp_path):
    shutil.copy(EXAMPLES / "approve_refund.yaml", tmp_path)
    (tmp_path / "slow_tools.py").write_text(SLOW_TOOLS)
    return tmp_path


@pytest.fixture
def server(project):
    proc = subprocess.Popen([sys.executable, "-m", "dagplan", "serve", "--port", "0"], cwd=project, env=env(),
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    line = proc.stderr.readline()
    match = re.search(r"(http://\S+)", line)
    assert match and "?token=" in match.group(1), line  # a token even on the loopback
    yield match.group(1)  # the URL as printed: a user opens it first
    proc.terminate()
    proc.wait(10)


def wait_for(check, timeout: float = 20.0, what: str = "", detail=None):
    deadline = time.monotonic() + timeout  # a bound on waiting, not a timing assertion
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f": {detail()}" if detail else ""))


def text_of(browser, element_id: str) -> str:
    """An element's text, read in the page in one call (an element handle goes stale when the live page
    replaces the element between finding it and reading it)."""
    script = "var e = document.getElementById(arguments[0]); return e ? e.textContent : ''"
    return browser.execute_script(script, element_id)


def click(browser, selector: str) -> bool:
    """Find and click in one go; False when the live page replaced the element in between (try again)."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        browser.find_element("css selector", selector).click()
    except StaleElementReferenceException:
        return False
    return True


def test_a_gate_turns_waiting_live_is_answered_in_the_page_and_the_run_completes(project, server, browser, tmp_path):
    run = subprocess.Popen([sys.executable, "-m", "dagplan", "run", "approve_refund.yaml", "--tools", "slow_tools.py",
                            "-i", "customerId=cust_42", "-i", "amount=25", "--no-input"],
                           cwd=project, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    run_id = wait_for(lambda: next(iter(os.listdir(project / ".dagplan" / "runs")), None)
                      if (project / ".dagplan" / "runs").is_dir() else None, what="the run")  # fmt: skip
    browser.get(server)  # the printed URL: its token is kept in a cookie from then on
    assert run_id in browser.page_source
    base = server.split("/?", 1)[0]
    browser.get(f"{base}/runs/{run_id}")
    browser.execute_script("window.sameDocument = true")
    node = 'document.getElementById("node-approve").getAttribute("class")'
    assert "status-waiting" not in browser.execute_script(f"return {node}")
    wait_for(lambda: "status-waiting" in browser.execute_script(f"return {node}"), what="the gate to wait")
    assert browser.execute_script("return window.sameDocument") is True  # updated live, not reloaded
    progress = 'return document.getElementById("run-progress").textContent'
    assert browser.execute_script(progress) == "1/3"  # history settled, live
    browser.refresh()
    assert browser.execute_script(progress) == "1/3"  # and as the server renders it
    assert run.wait(30) == 3  # the CLI run stopped at the gate (exit 3)
    wait_for(lambda: browser.find_elements("css selector", '#gate-approve button[value="approve"]'),
             what="the gate's form")  # fmt: skip
    style = 'return getComputedStyle(document.querySelector("#gate-approve .question")).whiteSpace'
    assert browser.execute_script(style) == "pre-wrap"  # a question of several lines keeps them
    shots = {"run-waiting.png": tmp_path / "run-waiting.png"}
    browser.save_screenshot(str(shots["run-waiting.png"]))
    wait_for(lambda: click(browser, '#gate-approve button[value="approve"]'), what="a click on approve")
    wait_for(lambda: "completed" in browser.execute_script(
        'return document.getElementById("run-status").textContent'), timeout=60, what="the run to complete",
        detail=lambda: browser.find_element("tag name", "body").text[:3000])  # fmt: skip
    wait_for(lambda: "status-completed" in browser.execute_script(
        'return document.getElementById("node-refund").getAttribute("class")'), what="refund completed")  # fmt: skip
    # what a tool wrote is shown as text, never run
    # (read in the page, in one call: the live page replaces a step's panel as its events arrive)
    wait_for(lambda: "<script>window.pwned = 1</script>" in text_of(browser, "step-refund"), what="the refund's output",
             detail=lambda: text_of(browser, "step-refund")[:2000])  # fmt: skip
    assert browser.execute_script("return window.pwned") is None
    shots["run-page.png"] = tmp_path / "run-page.png"
    browser.save_screenshot(str(shots["run-page.png"]))
    assert all(shot.stat().st_size > 10_000 for shot in shots.values())
    keep = os.environ.get("DAGPLAN_SCREENSHOTS")  # the README's pictures: DAGPLAN_SCREENSHOTS=docs pytest ...
    if keep:
        for name, shot in shots.items():
            shutil.copy(shot, Path(keep) / name)


def test_paths_tokens_and_csrf(project):
    from starlette.testclient import TestClient

    from dagplan.web.app import Viewer

    (project / "secret.yaml").write_text("steps: [{id: a, tool: t}]\n")
    outside = project.parent / "outside.yaml"
    outside.write_text("steps: [{id: a, tool: t}]\n")
    viewer = Viewer(project / ".dagplan", root=project)
    client = TestClient(viewer.app, base_url="http://127.0.0.1")
    assert client.get("/runs/..%2F..%2Fetc").status_code == 404
    assert client.get("/runs/20990101-000000-abcd").status_code == 404
    assert client.get("/plan", params={"file": "../outside.yaml"}).status_code == 403
    assert client.get("/plan", params={"file": "/etc/passwd"}).status_code == 403
    page = client.get("/plan", params={"file": "secret.yaml"})
    assert page.status_code == 200 and 'id="node-a"' in page.text
    assert client.post("/runs/x/discard", data={"csrf": "forged"}).status_code == 403
    locked = TestClient(Viewer(project / ".dagplan", root=project, token="s3cret").app, base_url="http://localhost")
    assert locked.get("/").status_code == 401
    assert locked.get("/", params={"token": "wrong"}).status_code == 401
    opened = locked.get("/", params={"token": "s3cret"})
    assert opened.status_code == 200 and "dagplan_token" in opened.headers.get("set-cookie", "")
    assert locked.get("/").status_code == 200  # the cookie carries it from then on


def test_a_plan_page_shows_diagnostics_at_their_lines_escaped(project):
    from starlette.testclient import TestClient

    from dagplan.web.app import Viewer

    (project / "bad.yaml").write_text("steps:\n  - {id: a, tool: t, deps: ['<img src=x onerror=alert(1)>']}\n")
    client = TestClient(Viewer(project / ".dagplan", root=project).app, base_url="http://127.0.0.1")
    page = client.get("/plan", params={"file": "bad.yaml"})
    assert "bad.yaml:2:" in page.text and "unknown-step" in page.text
    assert "<img src=x" not in page.text and "&lt;img src=x" in page.text


def test_serve_binding_another_address_requires_a_token(project):
    proc = subprocess.Popen([sys.executable, "-m", "dagplan", "serve", "--host", "0.0.0.0", "--port", "0"],
                            cwd=project, env=env(), stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = proc.stderr.readline()
        assert re.search(r"http://0\.0\.0\.0:\d+/\?token=\S{20,}", line), line
    finally:
        proc.terminate()
        proc.wait(10)


def test_dns_rebinding_cross_site_posts_big_bodies_and_test_files_are_refused(project):
    """A page that re-resolves its own name to 127.0.0.1 is not the viewer: its Host is refused; a POST
    from another origin is refused even with a stolen CSRF token; a body over the limit is refused unread;
    a GET never imports code; what a request sends never makes a 500."""
    from starlette.testclient import TestClient

    from dagplan.web.app import MAX_BODY, Viewer

    (project / "p.yaml").write_text("steps: [{id: a, tool: t}]\n")
    (project / "evil.py").write_text("open('imported', 'w').close()\n")
    (project / "p.test.yaml").write_text("plan: p.yaml\ntools: [evil.py]\ncases: [{name: x}]\n")
    viewer = Viewer(project / ".dagplan", root=project, token="s3cret", hosts=("viewer.internal",))
    rebound = TestClient(viewer.app, base_url="http://attacker.example:8765")
    assert rebound.get("/", params={"token": "s3cret"}).status_code == 421
    ok = TestClient(viewer.app, base_url="http://127.0.0.1:8765")
    assert ok.get("/", params={"token": "s3cret"}).status_code == 200
    assert (
        TestClient(viewer.app, base_url="http://viewer.internal").get("/", params={"token": "s3cret"}).status_code
        == 200
    )
    assert ok.get("/", params={"token": "s3cret"}, headers={"host": "[::1]:9"}).status_code == 200
    csrf = {"csrf": viewer.csrf}
    cross = ok.post("/runs/x/discard", data=csrf, headers={"origin": "http://attacker.example:8765"})
    assert cross.status_code == 403
    assert ok.post("/runs/x/discard", data=csrf, headers={"sec-fetch-site": "cross-site"}).status_code == 403
    same = ok.post("/runs/x/discard", data=csrf, headers={"origin": "http://127.0.0.1:8765"})
    assert same.status_code != 403
    big = ok.post(
        "/plan/run", content=b"x" * (MAX_BODY + 1), headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert big.status_code == 413
    assert ok.get("/plan", params={"file": "p.test.yaml"}).status_code == 403
    assert not (project / "imported").exists()
    assert ok.get("/plan", params={"file": "p\0.yaml"}).status_code == 400
    assert ok.get("/", params={"token": "s\u00e9cret"}).status_code == 401
    assert ok.get("/?token=%ED%A0%80%FF").status_code == 401  # not UTF-8 at all
    assert ok.post("/runs/x/discard", data={"csrf": "\u00e9"}).status_code == 403


def test_a_database_password_is_never_shown_in_a_page(project):
    from starlette.testclient import TestClient

    from dagplan.web.app import Viewer

    viewer = Viewer("postgresql://ada:hunter2@127.0.0.1:1/runs?password=hunter3", root=project, token="t")
    page = TestClient(viewer.app, base_url="http://127.0.0.1").get("/plan", params={"file": "approve_refund.yaml",
                                                                                      "token": "t"})  # fmt: skip
    assert page.status_code == 200, page.text
    assert "hunter2" not in page.text and "hunter3" not in page.text and "ada:***@127.0.0.1" in page.text


def test_what_a_request_sends_never_makes_a_500(project):
    """Cursors that are no integers, inputs nested thousands deep or of the wrong shape: 4xx or a page."""
    from starlette.testclient import TestClient

    from dagplan.web.app import Viewer

    (project / "p.yaml").write_text("inputs: {x: {type: array}}\nsteps: [{id: a, gate: {question: q}}]\n")
    viewer = Viewer(project / ".dagplan", root=project, token="t")
    client = TestClient(viewer.app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    client.cookies.set("dagplan_token", "t")
    ran = client.post("/plan/run", data={"csrf": viewer.csrf, "file": "p.yaml", "inputs": '{"x": []}'},
                      follow_redirects=False)  # fmt: skip
    assert ran.status_code == 303, ran.text
    run_id = ran.headers["location"].rsplit("/", 1)[1]
    for cursor in ("abc", "1e309", "-1", "9" * 5000, '"x"', "[]", "\u00e9"):
        with client.stream("GET", f"/runs/{run_id}/stream", params={"cursor": cursor}) as response:
            assert response.status_code == 200
    for inputs in ("[" * 5000 + "]" * 5000, '{"x": ' + "[" * 5000 + "]" * 5000 + "}", "[]", "3", "{bad"):
        answer = client.post("/plan/run", data={"csrf": viewer.csrf, "file": "p.yaml", "inputs": inputs})
        assert 400 <= answer.status_code < 500, (inputs[:20], answer.status_code, answer.text[:200])


OVERLAPS = """
const boxes = [...document.querySelectorAll('svg.graph .node rect, svg.graph .edge-label rect')].map(r => {
  const b = r.getBBox(); return {x: b.x, y: b.y, w: b.width, h: b.height, label: !!r.closest('.edge-label')}; });
const out = [];
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const a = boxes[i], b = boxes[j];
  if ((a.label || b.label) && a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) out.push([a, b]);
}
return out;
"""


def test_the_viewer_at_a_desk_and_on_a_phone(tmp_path, browser):
    """A newcomer's tour: a refused gate is no green 'completed', a run links to its plan, the graph is laid
    out with its labels clear of every node and zooms, a required input is asked for (never sent empty), and
    the pages fit a 1,280 px window and a phone."""
    for name in ("weather.yaml", "approve_refund.yaml", "ci_triage.yaml", "tools.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    refused = subprocess.run([sys.executable, "-m", "dagplan", "run", "approve_refund.yaml", "--tools", "tools.py",
                              "-i", "customerId=c", "-i", "amount=5", "--answer", "approve=reject"],
                             cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    proc = subprocess.Popen([sys.executable, "-m", "dagplan", "serve", "--port", "0", "--tools", "tools.py"],
                            cwd=tmp_path, env=env(), stderr=subprocess.PIPE, text=True)  # fmt: skip
    shots: dict[str, Path] = {}
    try:
        url = re.search(r"(http://\S+)", proc.stderr.readline()).group(1)
        base = url.split("/?", 1)[0]
        browser.set_window_size(1280, 900)
        browser.get(url)
        badge = browser.find_element("css selector", "#runs tbody tr td:nth-child(2) .badge")
        assert badge.text == "completed with errors" and "s-errors" in badge.get_attribute("class")
        link = browser.find_element("css selector", "#runs a.plan-link")
        assert link.text == "approve_refund.yaml"
        link.click()
        assert "approve_refund.yaml" in browser.title
        for plan in ("ci_triage.yaml", "weather.yaml"):  # the last one stays open
            browser.get(f"{base}/plan?file={plan}")
            assert browser.execute_script(OVERLAPS) == [], plan
        wrap_width = browser.execute_script("return document.getElementById('graph').clientWidth")
        width = lambda: int(browser.find_element("css selector", "svg.graph").get_attribute("width"))  # noqa: E731
        before = width()
        browser.find_element("css selector", ".zoom-in").click()
        assert width() > before
        wheel = "document.getElementById('graph').dispatchEvent(new WheelEvent('wheel', {deltaY: -100, ctrlKey: true, bubbles: true, cancelable: true}))"  # noqa: E501
        zoomed = width()
        browser.execute_script(wheel)
        assert width() > zoomed  # ctrl+wheel zooms
        drag = """const w = document.getElementById('graph'), box = w.getBoundingClientRect();
            const at = (t, x) => new MouseEvent(t, {clientX: x, clientY: box.top + 40, button: 0, bubbles: true});
            w.scrollLeft = 0; w.dispatchEvent(at('mousedown', box.left + 300));
            window.dispatchEvent(at('mousemove', box.left + 100)); window.dispatchEvent(at('mouseup', box.left + 100));
            return w.scrollLeft;"""
        for _ in range(8):  # wider than the window: there is room to pan
            if browser.execute_script("var w = document.getElementById('graph'); return w.scrollWidth > w.clientWidth"):
                break
            browser.find_element("css selector", ".zoom-in").click()
        assert browser.execute_script(drag) > 0  # dragging the graph pans it
        browser.find_element("css selector", ".zoom-fit").click()
        assert width() <= wrap_width
        field = browser.find_element("id", "input-city")
        assert field.get_attribute("value") == "" and field.get_attribute("required") is not None
        assert browser.execute_script("return document.getElementById('approve').checkValidity()") is False
        shots["plan-page.png"] = tmp_path / "plan-page.png"
        browser.save_screenshot(str(shots["plan-page.png"]))
        field.send_keys("Rome")
        browser.find_element("css selector", "#approve button.primary").click()
        wait_for(lambda: "completed" in browser.execute_script(
            "var s = document.getElementById('run-status'); return s ? s.textContent : ''"), timeout=60,
            what="the run started from the form",
            detail=lambda: browser.current_url + " " + browser.find_element("tag name", "body").text[:2000])  # fmt: skip
        wait_for(lambda: "biggest park of Rome" in text_of(browser, "step-present"), what="the step's output",
                 detail=lambda: text_of(browser, "step-present")[:2000])  # fmt: skip
        for page in (url, browser.current_url, f"{base}/plan?file=weather.yaml"):
            browser.set_window_size(390, 844)
            browser.get(page)
            overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, (page, overflow)  # nothing wider than the phone but what scrolls inside
        shots["run-phone.png"] = tmp_path / "run-phone.png"
        browser.get(url)
        browser.save_screenshot(str(shots["run-phone.png"]))
    finally:
        proc.terminate()
        proc.wait(10)
    keep = os.environ.get("DAGPLAN_SCREENSHOTS")
    if keep:
        for name, shot in shots.items():
            shutil.copy(shot, Path(keep) / name)


def test_the_runs_list_refreshes_itself_only_while_a_run_runs(project, monkeypatch):
    import time as clock

    from starlette.testclient import TestClient

    from dagplan.interpreter.core.progress import RunInfo
    from dagplan.interpreter.core.vocabulary import RunStatus
    from dagplan.web.app import Viewer

    viewer = Viewer(project / ".dagplan", root=project)
    client = TestClient(viewer.app, base_url="http://127.0.0.1")
    for status, refreshes in ((RunStatus.RUNNING, True), (RunStatus.COMPLETED, False)):
        info = RunInfo("20261125-000000-abcd", "approve_refund.yaml", status, 1, 3, clock.time())
        monkeypatch.setattr(viewer.project, "runs", lambda *a, info=info, **k: [info])
        page = client.get("/").text
        assert ('http-equiv="refresh"' in page) is refreshes, status
        assert 'class="plan-link"' in page  # the plan is a file of the served folder: linked


def test_a_plan_too_large_for_the_layered_layout_is_drawn_in_columns():
    import json

    import dagplan
    from dagplan.dsl.schedule import analysis_of
    from dagplan.render import LAYOUT_LIMIT, render_svg

    def chain(n: int):
        steps = [{"id": f"s{i}", "tool": "t", "args": {"x": f"†state.v{i - 1}"} if i else {}, "output": f"†state.v{i}"}
                 for i in range(n)]  # fmt: skip
        return dagplan.load(text=json.dumps({"steps": steps}))

    for n in (LAYOUT_LIMIT, LAYOUT_LIMIT + 1):
        plan = chain(n)
        svg = render_svg(plan, analysis_of(plan))
        xs = {int(x) for x in re.findall(r'<rect x="(-?\d+)" y="-?\d+" width="190"', svg)}
        assert svg.count('class="node status-pending"') == n
        # layered: one column top to bottom; columns: one step per column, left to right
        assert (len(xs) == 1) is (n <= LAYOUT_LIMIT), (n, len(xs))


FAILING_TOOLS = """import dagplan

def helper(d):
    return d["title"]

@dagplan.tool(purity="pure")
def fetch(q: str) -> str:
    issue = {"name": q}
    return helper(issue)

@dagplan.tool(purity="pure")
def leak(q: str) -> str:
    raise ValueError("no"); token = "sk-abcdefghijklmnopqrstuvwx"
"""


FAILING_PLAN = """steps:
  - id: get
    tool: fetch
    args: {q: x}
    output: $state.t
  - id: other
    tool: leak
    args: {q: y}
    output: $state.u
"""


def served_page(folder: Path, path: str, *serve_args: str) -> str:
    """A page of `dagplan serve` started in ``folder`` (its printed URL, its token), the server stopped after."""
    import httpx

    server = subprocess.Popen([sys.executable, "-m", "dagplan", "serve", "--port", "0", *serve_args], cwd=folder,
                              env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        url = re.search(r"(http://\S+)", server.stderr.readline())[1]
        base, query = url.split("/?", 1)
        return httpx.get(f"{base}{path}{'&' if '?' in path else '?'}{query}", timeout=30).text
    finally:
        server.terminate()
        server.wait(10)


PRINTING_TOOLS = """import sys
import dagplan

@dagplan.tool(purity="pure")
def fetch(q: str) -> str:
    print("fetching", q)
    print("slow server", file=sys.stderr)
    return q.upper()

@dagplan.tool(purity="pure")
async def tag(text: str) -> str:
    print("tagging", text, "token sk-abcdefghijklmnopqrstuvwx")
    return text + "!"
"""


def test_a_tools_exception_says_which_file_and_line_everywhere(tmp_path):
    (tmp_path / "tools.py").write_text(FAILING_TOOLS)
    (tmp_path / "p.yaml").write_text(FAILING_PLAN)
    done = run_dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 1
    assert "(FAILED: KeyError: 'title') (at tools.py:4 in helper)" in done.stdout, done.stdout  # the run table
    assert "fetch: FAILED: KeyError: 'title' (at tools.py:4 in helper)" in done.stderr  # the progress line
    assert "Traceback" not in done.stdout
    verbose = run_dagplan(tmp_path, "-v", "run", "p.yaml", "--tools", "tools.py")
    assert (
        'Traceback of get (its frames in your code, innermost last):\n  File "tools.py", line 9, in fetch\n'
        '    return helper(issue)\n  File "tools.py", line 4, in helper\n    return d["title"]'
    ) in verbose.stdout
    assert "sk-abcdefghijkl" not in verbose.stdout and "[REDACTED]" in verbose.stdout  # a secret in a code line
    shown = run_dagplan(tmp_path, "runs", "show", "@last", "--step", "get")
    assert "KeyError: 'title' (at tools.py:4 in helper)" in shown.stdout and "line 4, in helper" in shown.stdout
    events = json.loads(run_dagplan(tmp_path, "events", "@last", "--format", "json").stdout)
    failed = next(e for e in events if e["type"] == "plan_step_failed" and e["step"] == "get")
    assert [(Path(f["file"]).name, f["line"], f["function"]) for f in failed["traceback"]] == [
        ("tools.py", 9, "fetch"), ("tools.py", 4, "helper")]  # fmt: skip
    journal = "".join(p.read_text() for p in (tmp_path / ".dagplan").rglob("wal.jsonl"))
    assert "sk-abcdefghijkl" not in journal


def test_the_viewer_shows_where_a_tool_failed(tmp_path):
    (tmp_path / "tools.py").write_text(FAILING_TOOLS)
    (tmp_path / "p.yaml").write_text(FAILING_PLAN)
    run_id = re.search(r"run (\S+)", run_dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py").stderr)[1]
    page = served_page(tmp_path, f"/runs/{run_id}")
    assert "attempt 1 failed at tools.py:4 in helper" in page
    assert "traceback (your code)" in page and "return d[&#34;title&#34;]" in page


def test_the_viewers_plan_page_checks_with_the_tools_serve_was_given(tmp_path):
    (tmp_path / "tools.py").write_text(FAILING_TOOLS)
    (tmp_path / "p.yaml").write_text(FAILING_PLAN.replace("tool: leak", "tool: leek"))
    page = served_page(tmp_path, "/plan?file=p.yaml", "--tools", "tools.py")
    assert "unknown-tool" in page and "leek" in page, page[:2000]  # as `check --tools tools.py` says


def test_what_a_tool_prints_is_kept_with_its_step_not_written_raw_to_the_terminal(tmp_path):
    (tmp_path / "tools.py").write_text(PRINTING_TOOLS)
    (tmp_path / "p.yaml").write_text("steps:\n  - id: get\n    tool: fetch\n    args: {q: owls}\n"
                                     "    output: $state.t\n  - id: mark\n    tool: tag\n    args: {text: $state.t}\n"
                                     "    output: $state.m\nresult: $state.m\n")  # fmt: skip
    done = run_dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 0, done.stderr
    assert "fetching" not in done.stdout + done.stderr and "tagging" not in done.stdout + done.stderr
    shown = run_dagplan(tmp_path, "runs", "show", "@last", "--step", "get")
    assert "What get's tool printed:\nfetching owls\nslow server" in shown.stdout, shown.stdout
    marked = run_dagplan(tmp_path, "runs", "show", "@last", "--step", "mark").stdout
    assert "tagging OWLS token [REDACTED]" in marked and "sk-abcdefghijkl" not in marked
    events = json.loads(run_dagplan(tmp_path, "events", "@last", "--format", "json").stdout)
    assert [(e["step"], e["text"]) for e in events if e["type"] == "plan_step_printed"][0] == (
        "get",
        "fetching owls\nslow server\n",
    )
    run_id = json.loads(run_dagplan(tmp_path, "runs", "--format", "json").stdout)[0]["id"]
    page = served_page(tmp_path, f"/runs/{run_id}")
    assert "what the tool printed" in page and "fetching owls" in page


def test_what_threads_of_one_tool_call_print_is_all_kept():
    """A step's buffer is set up at its first write (the engine makes one for every tool call); threads of one
    call racing to that first write keep every piece they wrote, whichever list won."""
    import threading

    from dagplan.interpreter.core.printed import Printed

    for _ in range(100):
        printed, start = Printed(), threading.Barrier(8)

        def write(i: int, printed: Printed = printed, start: threading.Barrier = start) -> None:
            start.wait()
            for k in range(20):
                printed.add(f"{i}.{k};")

        threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert len(printed.pieces or ()) == 160 and printed.text().count(";") == 160


def test_every_edge_of_the_graph_is_drawn_inside_its_box():
    """A layered layout routes some edges around the nodes: the SVG's box holds every point of every edge
    (the page showed them clipped), every node and every label; checked over random plans."""
    import json
    import random

    import dagplan
    from dagplan.dsl.schedule import analysis_of
    from dagplan.render import render_svg

    rng, outside, edges = random.Random(7), [], 0
    for case in range(120):
        steps = []
        for i in range(rng.randint(2, 14)):
            reads = [j for j in range(i) if rng.random() < 0.3]
            steps.append({"id": f"s{i}", "tool": "t", "args": {f"a{j}": f"†state.v{j}" for j in reads},
                          "output": f"†state.v{i}"})  # fmt: skip
        plan = dagplan.load(text=json.dumps({"steps": steps}))
        svg = render_svg(plan, analysis_of(plan))
        width, height = map(float, re.search(r'viewBox="0 0 (\S+) (\S+)"', svg).groups())
        for d in re.findall(r'class="edge"[^>]* d="([^"]+)"', svg):
            edges += 1
            outside += [(case, x, y, width, height) for x, y in re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", d)
                        if not (0 <= float(x) <= width and 0 <= float(y) <= height)]  # fmt: skip
        for x, y, w, h in re.findall(r'<rect x="(-?[\d.]+)" y="(-?[\d.]+)" width="([\d.]+)" height="([\d.]+)"', svg):
            assert 0 <= float(x) and float(x) + float(w) <= width and 0 <= float(y) and float(y) + float(h) <= height
    assert edges > 500 and not outside, outside[:5]
