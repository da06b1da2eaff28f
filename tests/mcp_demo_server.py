"""An MCP server written with the SDK, for the suite: ``python mcp_demo_server.py [stdio | http PORT]``.

Tools: ``add`` (read-only, structured output), ``shout`` (text), ``fail`` (answers isError), ``slow``
(sleeps), ``record`` (a side effect: appends a line to $DEMO_LEDGER, then sleeps $DEMO_HOLD seconds),
``remove`` (destructive), ``bump`` (idempotent). Every call is appended to $DEMO_CALLS when set.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("demo")


class Sum(TypedDict):
    sum: int


def _called(name: str) -> None:
    path = os.environ.get("DEMO_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(name + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    _called("add")
    return {"sum": a + b}


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def shout(text: str) -> str:
    """The text in capitals."""
    _called("shout")
    return text.upper()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(reason: str) -> str:
    """Always fails, with the reason."""
    _called("fail")
    raise ToolError(reason)  # a tool's own error: its message reaches the client (isError)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    _called("slow")
    await asyncio.sleep(seconds)
    return "done"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def record(line: str) -> str:
    """Appends a line to the ledger (a side effect), then holds for $DEMO_HOLD seconds."""
    _called("record")
    with open(os.environ["DEMO_LEDGER"], "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    await asyncio.sleep(float(os.environ.get("DEMO_HOLD", "0")))
    return "recorded"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def remove(name: str) -> str:
    """Deletes something (destructive)."""
    _called("remove")
    return f"removed {name}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
def bump(key: str) -> str:
    """Sets a flag (idempotent)."""
    _called("bump")
    return f"bumped {key}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
