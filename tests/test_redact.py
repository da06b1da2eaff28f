"""Secrets, one rule set (interpreter/core/redact.py): a secret planted anywhere in a recorded run reaches no
artefact: the cassette, the journal's record of a tool call, a replay's miss message."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dagplan.interpreter.core.redact import REDACTED, matches, masked, redact
from as_user import run_dagplan

SECRET = "hunter2-Xy7-very-secret"


@pytest.mark.parametrize(
    "value",
    [
        {"token": {"nested": SECRET}},
        {"credentials": [SECRET, SECRET]},
        {"apiKey": 12345678901},
        {"headers": [["Authorization", f"Basic {SECRET}"]]},
        {"params": [{"name": "api_key", "value": SECRET}]},
        {"url": f"https://ada:{SECRET}@example.org/x"},
        {"url": f"https://example.org/cb?access_token={SECRET}&page=2"},
        {"text": f"call with Bearer {SECRET}"},
    ],
)
def test_every_kind_of_secret_is_redacted(value):
    cleaned = json.dumps(redact(value))
    assert SECRET not in cleaned and "12345678901" not in cleaned and REDACTED in cleaned


def test_counts_are_not_credentials():
    usage = {"tokens": 18, "prompt_tokens": 3, "max_tokens": 100, "tokenizer": "bpe"}
    assert redact(usage) == usage


def test_environment_secrets_and_database_passwords_are_redacted_wherever_they_appear(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "AWSsecretvalue12345")
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:dbpass9876@db/prod")
    cleaned = json.dumps(redact({"note": "keys AWSsecretvalue12345 and dbpass9876 in a sentence"}))
    assert "AWSsecretvalue12345" not in cleaned and "dbpass9876" not in cleaned


def test_configured_patterns_and_a_redacted_part_of_a_string_still_replays():
    assert redact({"account": "acct_12345 paid"}, [r"acct_[0-9]+"]) == {"account": f"{REDACTED} paid"}
    assert matches(f"{REDACTED} paid", "acct_999 paid") and not matches(f"{REDACTED} paid", "acct_999 unpaid")
    assert masked("postgresql://u:pw@h/db?password=x") == "postgresql://u:***@h/db?password=***"


TOOLS = """\
import dagplan


@dagplan.tool
def login(user: str, credentials: dict, url: str) -> str:
    return "ok " + user
"""


def test_a_planted_secret_reaches_no_artefact_of_a_recorded_run(tmp_path):
    (tmp_path / "t.py").write_text(TOOLS)
    plan = {
        "inputs": {"pw": {"type": "string"}},
        "steps": [{"id": "a", "tool": "login", "args": {"user": "ada", "credentials": {"password": "†input.pw"},
                                                          "url": f"https://ada:{SECRET}@example.org"}}],
    }  # fmt: skip
    (tmp_path / "p.json").write_text(json.dumps(plan))
    (tmp_path / "dagplan.toml").write_text('redact = ["acct_[0-9]+"]\n')
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "s"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-m", "dagplan", "run", "p.json", "--tools", "t.py", "-i", f"pw={SECRET}",
                           "--record", "c.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in (tmp_path / "c.json").read_text()
    journals = [p for p in (tmp_path / "s").rglob("*") if p.is_file() and p.name.startswith(("log", "wal", "events"))]
    for journal in journals:
        text = journal.read_text(errors="replace")
        for line in text.splitlines():
            if '"tool_called"' in line:
                assert SECRET not in line, line
    miss = subprocess.run([sys.executable, "-m", "dagplan", "run", "p.json", "--tools", "t.py", "-i", "pw=other-acct_777",
                           "--replay", "c.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "acct_777" not in miss.stdout + miss.stderr


@pytest.mark.parametrize("size", [7, 64 * 1024])
def test_a_streamed_output_is_masked_even_where_a_chunk_cuts_a_secret(monkeypatch, size):
    """The viewer streams a step's whole output in chunks: a secret cut by a chunk's end, or inside a line
    longer than what the stream holds back, is masked all the same; nothing else changes."""
    from dagplan.interpreter.core.redact import project_patterns, redacted_chunks

    text = ("line one acct_31415 here\n" + "x" * 2_000_000 + " acct_27182 é\n" + "tail acct_1") * 2
    data = text.encode("utf-8")
    chunks = [data[i : i + size] for i in range(0, len(data), size)]  # cuts secrets and é's two bytes alike
    with project_patterns(("acct_[0-9]+",)):  # the project's patterns, as its door sets them
        out = b"".join(redacted_chunks(chunks)).decode("utf-8")
    assert "acct_" not in out and out == text.replace("acct_31415", REDACTED).replace("acct_27182", REDACTED).replace(
        "acct_1", REDACTED)  # fmt: skip


def test_a_secret_a_tool_returns_is_masked_where_people_read_it_and_kept_for_the_run(tmp_path):
    (tmp_path / "tools.py").write_text("import dagplan\n\n@dagplan.tool(purity='pure')\ndef login(user: str) -> str:\n"
                                       "    return 'session for ' + user + ': sk-abcdefghijklmnopqrstuvwx'\n")  # fmt: skip
    (tmp_path / "p.yaml").write_text("steps:\n  - id: s\n    tool: login\n    args: {user: ada}\n"
                                     "    output: $state.session\nresult: $state.session\n")  # fmt: skip
    done = run_dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 0 and "sk-abcdefghijkl" not in done.stdout + done.stderr, done.stdout
    assert "session for ada: [REDACTED]" in done.stdout
    for args in (("runs", "show", "@last"), ("events", "@last")):
        shown = run_dagplan(tmp_path, *args)
        assert "sk-abcdefghijkl" not in shown.stdout and "[REDACTED]" in shown.stdout, args
    as_json = json.loads(run_dagplan(tmp_path, "run", "p.yaml", "--tools", "tools.py", "--format", "json").stdout)
    assert as_json["result"].endswith("sk-abcdefghijklmnopqrstuvwx")  # the value, for a program (README)
