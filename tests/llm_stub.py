"""A small OpenAI-compatible chat.completions server for tests.

Runs stdlib ``http.server`` in a thread on 127.0.0.1 (port 0), answers
``POST /v1/chat/completions`` with scripted responses shaped exactly like
OpenAI's (``id``, ``object``, ``created``, ``model``, ``choices`` with
``message`` and ``finish_reason``, ``usage``), records every request body and
counts them, so litellm's real HTTP path runs against it.

A script entry is one of:

* :func:`text` - a plain assistant message;
* :func:`tool_calls` - an assistant message calling tools;
* :func:`json_reply` - a message whose content is the JSON of a value;
* :func:`error` - an HTTP error status with an OpenAI-style error body;
* :func:`hang` - never answers until the server is stopped (for kill tests);
* :func:`streamed` - a plain message, streamed (``stream: true``) in pieces, held or cut where the test says;
* any callable ``(request_body) -> entry`` - decides from the request.

When the script runs out, ``default`` answers (a plain "ok" unless set).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

DEFAULT_MODEL = "gpt-4o-mini"  # a model litellm's offline cost map knows the price of


@dataclass(frozen=True)
class Reply:
    content: str | None = None
    calls: tuple[tuple[str, str, str], ...] = ()  # (call id, name, arguments JSON)
    status: int = 200
    prompt_tokens: int = 11
    completion_tokens: int = 7
    wait: float = 0.0  # seconds before answering; float("inf") = until stopped
    # a streamed answer (a request with stream: true): the content in pieces of `piece` characters; after the
    # first piece that completes `hold_after`, wait for `hold` (an Event the test sets on a condition) before
    # the rest; with `cut_after`, the stream ends there (no [DONE]), as a dropped connection
    piece: int = 7
    hold_after: str | None = None
    hold: Any = None
    cut_after: str | None = None


def text(content: str, *, prompt_tokens: int = 11, completion_tokens: int = 7) -> Reply:
    return Reply(content=content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def json_reply(value: Any, **usage: int) -> Reply:
    return text(json.dumps(value), **usage)


def tool_calls(*calls: tuple[str, dict], content: str | None = None, **usage: int) -> Reply:
    """``tool_calls(("lookup", {"q": "x"}), ("other", {}))``; ids are ``call_<n>``."""
    entries = tuple((f"call_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(calls, 1))
    return Reply(content=content, calls=entries, **usage)


def error(status: int = 500, message: str = "stub error") -> Reply:
    return Reply(content=message, status=status)


def streamed(content: str, *, piece: int = 7, hold_after: str | None = None, hold: Any = None,
             cut_after: str | None = None, **usage: int) -> Reply:  # fmt: skip
    return Reply(content=content, piece=piece, hold_after=hold_after, hold=hold, cut_after=cut_after, **usage)


def hang() -> Reply:
    return Reply(wait=float("inf"))


Entry = Reply | Callable[[dict], Reply]


@dataclass
class StubLLM:
    """``with StubLLM() as stub: stub.script(text("hi")); ... stub.count``."""

    model: str = DEFAULT_MODEL
    default: Entry = field(default_factory=lambda: text("ok"))
    requests: list[dict] = field(default_factory=list)
    _script: list[Entry] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> "StubLLM":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> "StubLLM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the stub first"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The ``api_base`` to give litellm."""
        return f"http://127.0.0.1:{self.port}/v1"

    def kwargs(self) -> dict:
        """``completion_kwargs`` pointing litellm at this server."""
        return {"api_base": self.url, "api_key": "x"}

    # --- script ----------------------------------------------------------------------

    def script(self, *entries: Entry) -> "StubLLM":
        with self._lock:
            self._script.extend(entries)
        return self

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()

    @property
    def count(self) -> int:
        return len(self.requests)

    @property
    def pending(self) -> int:
        """Scripted entries not answered yet."""
        return len(self._script)

    def _next(self, body: dict) -> Reply:
        with self._lock:
            self.requests.append(body)
            entry = self._script.pop(0) if self._script else self.default
        return entry(body) if callable(entry) else entry

    # --- responses -------------------------------------------------------------------

    def completion(self, reply: Reply, n: int) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in reply.calls
            ]
        usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }
        return {
            "id": f"chatcmpl-stub{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": "fp_stub",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if reply.calls else "stop",
                }
            ],
            "usage": usage,
        }


def _handler_for(stub: StubLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # headers and body go out as two writes: without this, Nagle + delayed ACK add ~40 ms a call
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": stub.model, "object": "model"}]})
            else:
                self._send(404, _error_body("not found", "invalid_request_error"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self._send(400, _error_body("body is not JSON", "invalid_request_error"))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self._send(404, _error_body(f"no route {self.path}", "invalid_request_error"))
            reply = stub._next(body)
            if reply.wait:
                stub._stopped.wait(None if reply.wait == float("inf") else reply.wait)
                if stub._stopped.is_set():
                    return
            if reply.status != 200:
                return self._send(reply.status, _error_body(reply.content or "error", "server_error"))
            if body.get("stream"):
                return self._stream(reply, stub.count, bool((body.get("stream_options") or {}).get("include_usage")))
            self._send(200, stub.completion(reply, stub.count))

        def _stream(self, reply: Reply, n: int, usage: bool) -> None:
            """Server-sent events as OpenAI streams them: a chunk per piece, the finish, the usage, [DONE]."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

            def chunk(delta: dict, finish: str | None = None, extra: dict | None = None) -> bytes:
                choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
                body = {"id": f"chatcmpl-stub{n}", "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": stub.model, "choices": choices, **(extra or {})}  # fmt: skip
                return b"data: " + json.dumps(body).encode() + b"\n\n"

            content = reply.content or ""
            held = reply.hold_after is None
            try:
                self.wfile.write(chunk({"role": "assistant", "content": ""}))
                for at in range(0, len(content), max(1, reply.piece)):
                    self.wfile.write(chunk({"content": content[at : at + reply.piece]}))
                    self.wfile.flush()
                    written = content[: at + reply.piece]
                    if reply.cut_after is not None and reply.cut_after in written:
                        return  # the connection drops mid-answer
                    if not held and reply.hold_after in written:
                        held = True
                        reply.hold.wait(60)  # the test's condition (bounded: a failing test must end)
                self.wfile.write(chunk({}, "stop"))
                if usage:
                    self.wfile.write(chunk(None, extra={"usage": {  # type: ignore[arg-type]
                        "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens}}))  # fmt: skip
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


def _error_body(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


if __name__ == "__main__":  # run standalone: python tests/llm_stub.py  (answers "ok" forever)
    with StubLLM() as s:
        print(s.url, flush=True)
        threading.Event().wait()
