"""``dagplan lsp`` attacked as a hostile or careless client would: raw ``Content-Length`` framing, positions
past the end, characters that are one code point but two UTF-16 units, line separators LSP does not count,
names no step may have, documents never opened, and a seeded fuzz of requests on mutated plans in which every
request is answered without a traceback."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from net import read_some

ROOT = Path(__file__).resolve().parent.parent
PLAN = """steps:
  - id: fetch
    tool: checkBillingHistory
    args: {customerId: c1}
    output: †state.h
  - id: use
    llm: "Summarize #fetch.head=200"
    deps: [fetch]
    output: †state.u
"""


class Raw:
    def __init__(self, cwd: Path):
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.p = subprocess.Popen([sys.executable, "-m", "dagplan", "lsp"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        self.buffer, self.id, self.notes = b"", 0, []

    def send_raw(self, data: bytes) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def recv(self, timeout: float = 30) -> dict | None:
        assert self.p.stdout is not None
        end = time.monotonic() + timeout
        while True:
            if b"\r\n\r\n" in self.buffer:
                head, rest = self.buffer.split(b"\r\n\r\n", 1)
                length = next(
                    int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")
                )
                if len(rest) >= length:
                    self.buffer = rest[length:]
                    return json.loads(rest[:length])
            chunk = read_some(self.p.stdout, end)
            if not chunk:
                return None
            self.buffer += chunk

    def request(self, method: str, params: dict | None, timeout: float = 30) -> dict:
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            answer = self.recv(timeout)
            assert answer is not None, f"no answer to {method}"
            if answer.get("id") == self.id and "method" not in answer:
                return answer
            self.notes.append(answer)

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def diagnostics(self, uri: str, timeout: float = 30) -> list:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for note in list(self.notes):
                if note.get("method") == "textDocument/publishDiagnostics" and note["params"]["uri"] == uri:
                    self.notes.remove(note)
                    return note["params"]["diagnostics"]
            answer = self.recv(max(0, end - time.monotonic()))
            if answer is None:
                break
            self.notes.append(answer)
        raise AssertionError(f"no diagnostics for {uri}")

    def init(self, root: Path, encodings: list[str] | None = None) -> dict:
        capabilities = {"general": {"positionEncodings": encodings}} if encodings else {}
        answer = self.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": capabilities})
        self.notify("initialized", {})
        return answer["result"]

    def open(self, uri: str, text: str) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1,
                                                              "text": text}})  # fmt: skip

    def close(self) -> str:
        try:
            self.request("shutdown", None, 10)
            self.notify("exit", None)
        except AssertionError:
            pass
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        assert self.p.stderr is not None
        return self.p.stderr.read().decode("utf-8", "replace")


@pytest.fixture
def lsp(tmp_path):
    (tmp_path / "tools.py").write_text((ROOT / "examples" / "tools.py").read_text())
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    started: list[Raw] = []

    def start(encodings: list[str] | None = None) -> tuple[Raw, dict]:
        started.append(Raw(tmp_path))
        return started[-1], started[-1].init(tmp_path, encodings)

    yield start
    for raw in started:
        stderr = raw.close()
        assert "Traceback" not in stderr, stderr


def _uri(tmp_path: Path, name: str = "plan.yaml") -> str:
    return (tmp_path / name).as_uri()


@pytest.mark.parametrize("method", ["completion", "definition", "references", "rename", "hover", "prepareRename"])
def test_positions_past_the_end_answer_empty(lsp, tmp_path, method):
    raw, _ = lsp()
    uri = _uri(tmp_path)
    raw.open(uri, PLAN)
    raw.diagnostics(uri)
    for line, character in ((PLAN.count("\n"), 0), (PLAN.count("\n") + 5, 3), (1, 10_000), (0, 0)):
        params = {"textDocument": {"uri": uri}, "position": {"line": line, "character": character},
                  **_extra(method)}  # fmt: skip
        answer = raw.request(f"textDocument/{method}", params)
        assert "error" not in answer, answer


def _extra(method: str) -> dict:
    """What a request of ``method`` carries besides the document and the position."""
    return {"references": {"context": {"includeDeclaration": True}}, "rename": {"newName": "x"},
            "completion": {"context": {"triggerKind": 1}}}.get(method, {})  # fmt: skip


def test_a_request_whose_params_do_not_fit_is_answered(lsp, tmp_path):
    raw, _ = lsp()
    uri = _uri(tmp_path)
    raw.open(uri, PLAN)
    for params in ({"textDocument": {"uri": uri}, "position": {"line": "x"}}, {"textDocument": 5}, [], None,
                   {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}, "context": {"a": 1}}):  # fmt: skip
        answer = raw.request("textDocument/completion", params)
        assert answer["error"]["code"] == -32602 and "data" not in answer["error"], answer
    assert "result" in raw.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_columns_are_in_the_negotiated_encoding(lsp, tmp_path, encoding):
    raw, capabilities = lsp([encoding])
    assert capabilities["capabilities"]["positionEncoding"] == encoding
    text = ('steps:\n  - {id: fetch, tool: checkBillingHistory, args: {customerId: c}, output: †state.h}\n'
            '  - {id: a, description: "😀é😀", tool: notify, args: {message: "🎉"}, deps: [histroy]}\n')  # fmt: skip
    uri = _uri(tmp_path)
    raw.open(uri, text)
    found = [d for d in raw.diagnostics(uri) if d["code"] == "unknown-step"]
    line = text.split("\n")[2]
    before = line[: line.index("histroy")]
    units = {"utf-16": len(before.encode("utf-16-le")) // 2, "utf-8": len(before.encode()), "utf-32": len(before)}
    assert [d["range"]["start"]["character"] for d in found] == [units[encoding]], (found, encoding)
    # incoming positions are read in the same units: `fetch` after the emoji, on a line of its own
    text2 = 'steps:\n  - {id: fetch, tool: checkBillingHistory, args: {customerId: "😀"}, output: †state.h}\n'
    text2 += '  - {id: a, description: "😀😀", tool: notify, args: {message: "#fetch"}}\n'
    raw.open(_uri(tmp_path, "two.yaml"), text2)
    line2 = text2.split("\n")[2]
    before2 = line2[: line2.index("#fetch") + 2]
    at = {"utf-16": len(before2.encode("utf-16-le")) // 2, "utf-8": len(before2.encode()), "utf-32": len(before2)}
    hover = raw.request("textDocument/references", {"textDocument": {"uri": _uri(tmp_path, "two.yaml")},
                                                    "position": {"line": 2, "character": at[encoding]},
                                                    "context": {"includeDeclaration": True}})  # fmt: skip
    starts = sorted((r["range"]["start"]["line"], r["range"]["start"]["character"]) for r in hover["result"])
    id_at = text2.split("\n")[1].index("fetch")
    ref_at = line2.index("#fetch") + 1
    cols = {"utf-16": lambda s, i: len(s[:i].encode("utf-16-le")) // 2, "utf-8": lambda s, i: len(s[:i].encode()),
            "utf-32": lambda s, i: i}[encoding]  # fmt: skip
    assert starts == [(1, cols(text2.split("\n")[1], id_at)), (2, cols(line2, ref_at))], (starts, encoding)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c"])
def test_only_lsp_line_breaks_count(lsp, tmp_path, separator):
    raw, _ = lsp()
    text = f'summary: "one{separator}two"\n' + PLAN
    uri = _uri(tmp_path)
    raw.open(uri, text)
    raw.diagnostics(uri)
    answer = raw.request("textDocument/references", {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 10},
                                                     "context": {"includeDeclaration": True}})  # fmt: skip
    assert len(answer["result"]) == 3, answer  # the id, #fetch, deps: [fetch]
    symbols = raw.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})["result"]
    assert [(s["name"], s["selectionRange"]["start"]["line"]) for s in symbols] == [("fetch", 2), ("use", 6)]


@pytest.mark.parametrize("name", ["x y", "../../etc/passwd", "", "use", "a--b", "-a", "x" * 65, "#fetch", "é"])
def test_rename_refuses_a_name_no_step_may_have(lsp, tmp_path, name):
    raw, _ = lsp()
    uri = _uri(tmp_path)
    raw.open(uri, PLAN)
    raw.diagnostics(uri)
    answer = raw.request("textDocument/rename", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 10},
                                                 "newName": name})  # fmt: skip
    assert answer.get("error", {}).get("code") == -32602 and "traceback" not in json.dumps(answer), answer
    good = raw.request("textDocument/rename", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 10},
                                               "newName": "history"})  # fmt: skip
    assert len(good["result"]["changes"][uri]) == 3


def test_a_document_never_opened_is_never_read(lsp, tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    raw, _ = lsp()
    for method, extra in (("documentSymbol", {}), ("hover", {"position": {"line": 0, "character": 0}}),
                          ("completion", {"position": {"line": 0, "character": 0}})):  # fmt: skip
        for target in (fifo.as_uri(), _uri(tmp_path, "missing.yaml"), "file:///dev/zero"):
            answer = raw.request(f"textDocument/{method}", {"textDocument": {"uri": target}, **extra}, timeout=20)
            assert "error" not in answer and not (answer["result"] or {}).get("items"), answer


@pytest.mark.parametrize(
    "garbage",
    [b"Content-Length: abc\r\n\r\n{}", b"Content-Length: -5\r\n\r\n", b"hello\r\n\r\n", b"\r\n\r\n\r\n",
     b"Content-Length: 3\r\n\r\n{x}", b"Content-Type: x\r\n\r\n{}", b"Content-Length: 99999999999999\r\n\r\n{}",
     b"Content-Length: 10\r\n\r\n" + b'"\\ud800"  '],
)  # fmt: skip
def test_a_malformed_message_is_skipped_and_the_server_goes_on(lsp, tmp_path, garbage):
    raw, _ = lsp()
    raw.send_raw(garbage)
    uri = _uri(tmp_path, "p.yaml")
    raw.open(uri, "steps: []\n")
    answer = raw.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}}, timeout=20)
    assert "result" in answer, answer


def test_a_fuzz_of_requests_on_mutated_plans_each_answered(lsp, tmp_path):
    rng = random.Random(20261127)
    raw, _ = lsp()
    sources = [p.read_text() for p in sorted((ROOT / "examples").glob("*.yaml"))][:6] + [PLAN]
    alphabet = ["\n", "\r\n", "\r", "\u2028", "🎉", "é", "#", "†state.", ":", "- ", "  ", "{", "}", "[", '"', "\t"]
    methods = ["completion", "hover", "definition", "references", "rename", "documentSymbol", "prepareRename",
               "codeAction"]  # fmt: skip
    for number in range(60 * int(os.environ.get("DAGPLAN_FUZZ_SCALE", "1"))):  # longer by hand: the scale
        text = list(rng.choice(sources))
        for _ in range(rng.randrange(1, 6)):
            at = rng.randrange(len(text) + 1)
            if rng.random() < 0.5:
                text.insert(at, rng.choice(alphabet))
            else:
                del text[at : at + rng.randrange(1, 8)]
        uri = _uri(tmp_path, f"f{number}.yaml")
        raw.open(uri, "".join(text))
        for _ in range(5):
            position = {"line": rng.randrange(-1, 60), "character": rng.randrange(-1, 200)}
            if position["line"] < 0 or position["character"] < 0:
                position = {"line": 0, "character": 0}
            method = rng.choice(methods)
            params: dict = {"textDocument": {"uri": uri}, "position": position, **_extra(method)}
            if method == "rename":
                params["newName"] = rng.choice(["ok", "x y", "use", ""])
            if method == "codeAction":
                params = {"textDocument": {"uri": uri}, "range": {"start": position, "end": position},
                          "context": {"diagnostics": []}}  # fmt: skip
            answer = raw.request(f"textDocument/{method}", params)
            assert "result" in answer or answer["error"]["code"] == -32602, answer


@pytest.mark.parametrize("shutdown", [True, False])
def test_exit_ends_with_0_after_shutdown_and_1_without(tmp_path, shutdown):
    raw = Raw(tmp_path)
    raw.init(tmp_path)
    uri = _uri(tmp_path)
    raw.open(uri, PLAN)
    if shutdown:
        assert "result" in raw.request("shutdown", None)
        after = raw.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
        assert after["error"]["code"] == -32600  # a request after shutdown is answered, refused
    raw.notify("exit", None)
    assert raw.p.wait(20) == (0 if shutdown else 1)
