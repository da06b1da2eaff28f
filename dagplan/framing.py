"""The one guard in front of both stdio servers (``dagplan mcp``: a JSON-RPC message a line; ``dagplan lsp``:
``Content-Length`` framed messages): whatever a client sends, every request is answered and the server keeps
reading.

- :func:`screen` decides, for one message, whether it may reach the server: JSON (UTF-8, no NaN), no lone
  surrogate, nested at most :data:`MAX_DEPTH` deep, at most :data:`MAX_MESSAGE` bytes, a JSON-RPC 2.0 object.
  Anything else gets the JSON-RPC error the specification names (``-32700`` with id null when the text is no
  JSON, ``-32600`` with the request's id when it can be read), written by the guard itself.
- :class:`FramedReader` is what the language server reads: it parses ``Content-Length`` headers itself,
  skips a message whose header is malformed (and finds the next header), and hands on well-formed frames
  only. :func:`serve_mcp_stdio` does the same per line for the MCP server.
- Both servers write through one :class:`Wire`, so an error the guard writes never tears a server's message.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections import deque
from typing import Any, BinaryIO

MAX_DEPTH = 64  # JSON-RPC messages of both protocols nest a dozen levels; a plan travels as a string
MAX_MESSAGE = 64 * 1024 * 1024  # bytes: a plan is at most 16 MiB (the loader's limit), with room for JSON
MAX_HEADER = 8 * 1024
_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*([0-9]{1,12})[ \t]*$", re.IGNORECASE)
_NEXT = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)


def _no_nan(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON value")


def error_response(id_: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def screen(body: bytes | str) -> tuple[Any, dict | None]:
    """(the message, None) when it may reach the server, else (None, the error response to send).
    A notification that cannot be handed on gets no response, as JSON-RPC says (None, None)."""
    if len(body) > MAX_MESSAGE:
        return None, error_response(None, -32600, f"a message is at most {MAX_MESSAGE} bytes")
    try:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
        message = json.loads(text, parse_constant=_no_nan)
    except RecursionError:
        return None, error_response(None, -32700, f"Parse error: nested more than {MAX_DEPTH} deep")
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None, error_response(None, -32700, f"Parse error: {str(exc)[:200]}")
    id_ = message.get("id") if isinstance(message, dict) else None
    if not isinstance(id_, (str, int)) or isinstance(id_, bool):
        id_ = None
    problem = _shape(message, "\\ud" in text.lower())  # a lone surrogate can only come from a \ud... escape
    if problem is None and not (isinstance(message, dict) and message.get("jsonrpc") == "2.0"):
        problem = "not a JSON-RPC 2.0 message"
    if problem is None and isinstance(message, dict) and "method" in message and not isinstance(message["method"], str):
        problem = "method must be a string"
    if problem is None:
        return message, None
    if isinstance(message, dict) and "method" in message and "id" not in message:
        return None, None  # a notification: nothing to answer
    return None, error_response(id_, -32600, f"Invalid Request: {problem}")


def _shape(value: Any, strings: bool) -> str | None:
    """Depth beyond MAX_DEPTH, or (when ``strings``) a lone surrogate in a key or a string: what is wrong."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > MAX_DEPTH:
                return f"nested more than {MAX_DEPTH} deep"
            if strings and any(not _encodes(k) for k in item):
                return "a key holds a lone surrogate (not Unicode text)"
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            if depth > MAX_DEPTH:
                return f"nested more than {MAX_DEPTH} deep"
            stack.extend((v, depth + 1) for v in item)
        elif strings and isinstance(item, str) and not _encodes(item):
            return "a string holds a lone surrogate (not Unicode text)"
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _say(note: str) -> None:
    """What the guard skipped, on stderr (the editor's or host's log), never on the wire."""
    try:
        sys.stderr.write(f"dagplan: {note}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class Wire:
    """The one writer of a server's stdout: whole messages, one at a time."""

    def __init__(self, stream: BinaryIO):
        self.stream, self.lock = stream, threading.Lock()

    def write(self, data: bytes) -> None:
        with self.lock:
            self.stream.write(data)
            self.stream.flush()

    def flush(self) -> None:
        pass  # every write flushes

    def close(self) -> None:
        self.stream.close()

    def framed(self, message: dict) -> None:
        body = json.dumps(message).encode("utf-8")
        self.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)


class FramedReader:
    """``Content-Length`` frames from a byte stream, read robustly: what pygls's reader is given. It asks
    for a header line (``readline``) until a blank one, then the body (``read``); this hands it only
    frames whose header and body are well-formed."""

    def __init__(self, raw: BinaryIO, wire: Wire):
        self.raw, self.wire = raw, wire
        self.buffer = bytearray()
        self.lines: deque[bytes] = deque()
        self.body = b""
        self.eof = False

    def readline(self) -> bytes:
        if not self.lines:
            body = self._next()
            if body is None:
                return b""
            self.lines.extend((b"Content-Length: %d\r\n" % len(body), b"\r\n"))
            self.body = body
        return self.lines.popleft()

    def read(self, n: int) -> bytes:
        body, self.body = self.body, b""
        return body[:n]

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.raw.read1(65536) if hasattr(self.raw, "read1") else self.raw.read(65536)
        if not chunk:
            self.eof = True
            return False
        self.buffer += chunk
        return True

    def _next(self) -> bytes | None:
        """The next well-formed message body, or None at the end of the stream."""
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            while end < 0 and len(self.buffer) <= MAX_HEADER and self._more():
                end = self.buffer.find(b"\r\n\r\n")
            if end < 0 or end > MAX_HEADER:
                if self.eof and not self.buffer.strip():
                    return None
                if not self._resync("a header that does not end"):
                    return None
                continue
            length = None
            for line in bytes(self.buffer[:end]).split(b"\r\n"):
                found = _LENGTH.match(line.strip())
                if found:
                    length = int(found.group(1))
            if length is None or length > MAX_MESSAGE:
                del self.buffer[: end + 4]
                if not self._resync("a message whose Content-Length header is missing or malformed"):
                    return None
                continue
            start = end + 4
            while len(self.buffer) < start + length and self._more():
                pass
            if len(self.buffer) < start + length:
                return None  # the stream ended inside a body
            body = bytes(self.buffer[start : start + length])
            del self.buffer[: start + length]
            _, refused = screen(body)
            if refused is None:
                return body
            self.wire.framed(refused)

    def _resync(self, why: str | None) -> bool:
        """Drop what is before the next ``Content-Length`` header; False at the end of the stream."""
        if why:
            _say(f"skipped {why}")
        while True:
            found = _NEXT.search(self.buffer, 1)
            if found is not None:
                del self.buffer[: found.start()]
                return True
            keep = self.buffer[-32:]
            self.buffer = bytearray(keep)
            if not self._more():
                self.buffer.clear()
                return False


def _divert() -> tuple[BinaryIO, BinaryIO]:
    """The wire (stdin and stdout as they were), with fd 0 and 1 pointed elsewhere: a tool or a library that
    reads stdin or prints while the server runs can neither steal a message nor tear one."""
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def serve_lsp_stdio(server: Any) -> None:
    """Run a pygls server on stdio behind the guard."""
    _one_line_logs("pygls")
    wire_in, wire_out = _divert()
    wire = Wire(wire_out)
    server.start_io(FramedReader(wire_in, wire), wire)
    # LSP: exit ends the process with 0 after a shutdown request, 1 otherwise (pygls's own sys.exit was
    # swallowed by its loop, so it always ended with 0)
    sys.exit(0 if getattr(server.protocol, "_shutdown", False) else 1)


def _one_line_logs(name: str) -> None:
    """A library's log on stderr, one line a record, its first: a warning for the editor's log, never a
    traceback (which would show the client's text and the server's insides)."""
    import logging

    class FirstLine(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return f"dagplan lsp: {record.levelname.lower()}: {record.getMessage().splitlines()[0][:300]}"

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(FirstLine())
    logger = logging.getLogger(name)
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.WARNING)


def serve_mcp_stdio(server: Any) -> None:
    """Run an MCP SDK server on stdio behind the guard: each line is screened before the SDK reads it, and
    a line the guard refuses is answered with its JSON-RPC error."""
    import anyio

    from mcp.server.stdio import stdio_server

    wire_in, wire_out = _divert()
    wire = Wire(wire_out)

    def refuse(response: dict) -> None:
        wire.write(json.dumps(response).encode("utf-8") + b"\n")

    class Lines:
        """The lines the SDK may read: screened ones only."""

        def __aiter__(self) -> "Lines":
            return self

        async def __anext__(self) -> str:
            while True:
                line = await anyio.to_thread.run_sync(_readline, wire_in)
                if not line:
                    raise StopAsyncIteration
                if not line.strip():
                    continue
                message, refused = screen(line)
                if refused is not None:
                    refuse(refused)
                elif message is not None:
                    problem = _mcp_shape(message)
                    if problem is None:
                        return line.decode("utf-8")
                    if "id" in message:
                        refuse(error_response(message.get("id"), -32600, f"Invalid Request: {problem}"))

    class Out:
        async def write(self, text: str) -> None:
            await anyio.to_thread.run_sync(wire.write, text.encode("utf-8"))

        async def flush(self) -> None:
            pass

    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK's run_stdio_async, with guarded streams

    async def main() -> None:
        async with stdio_server(stdin=Lines(), stdout=Out()) as (read_stream, write_stream):  # type: ignore[arg-type]
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    anyio.run(main)


def _readline(stream: BinaryIO) -> bytes:
    """One line, at most MAX_MESSAGE bytes (a longer one is read to its end and refused by screen)."""
    out = bytearray()
    while True:
        chunk = stream.readline(MAX_MESSAGE + 1)  # type: ignore[call-arg]
        out += chunk
        if not chunk or chunk.endswith(b"\n"):
            return bytes(out)
        if len(out) > MAX_MESSAGE:
            while chunk and not chunk.endswith(b"\n"):
                chunk = stream.readline(65536)  # type: ignore[call-arg]
            return bytes(out[: MAX_MESSAGE + 1])


def _mcp_shape(message: dict) -> str | None:
    """What the SDK's own message model refuses (its error would be swallowed), as a reason."""
    import mcp_types as types
    from pydantic import ValidationError

    try:
        types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError as exc:
        return exc.errors()[0].get("msg", "not an MCP message") if exc.errors() else "not an MCP message"
    return None
