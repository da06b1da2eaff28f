"""Loopback servers the tests start: a free port, and waiting until something listens on it."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {seconds:g}s")


def read_some(stream, deadline: float) -> bytes:
    """What a child process wrote on ``stream`` by ``deadline`` (time.monotonic), at most 1 MiB: empty
    when nothing came in time or the stream ended (the raw JSON-RPC drivers of the MCP and LSP tests)."""
    import os
    import select

    ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
    return os.read(stream.fileno(), 1 << 20) if ready else b""
