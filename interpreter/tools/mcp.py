"""Tools on MCP servers: declared in the configuration, locked for offline checks, called in runs.

A server is declared in ``dagplan.toml`` (``[mcp.NAME]``): a command started over stdio
(``command``, ``args``, ``env``, ``cwd``) or a streamable HTTP endpoint (``url``, ``headers``);
``${VAR}`` (or ``${VAR:-default}``) in any of those values is read from the environment when the
server is started, so no secret is written in the file. A stdio server gets only the SDK's safe
default environment (``PATH``, ``HOME``...) plus its ``env``: nothing else of dagplan's leaks to
it. Its tools are named ``NAME.TOOL`` in plans, and the source
``mcp:NAME`` stands for all of them wherever tool sources are listed (the configuration adds
one per declared server).

``dagplan tools lock`` connects to every declared server and writes ``dagplan.lock`` beside the
configuration: each tool's name, description, input and output schemas, annotations and a hash.
Everything static reads the lock, never a server: ``check`` (arguments, purity), ``preview``,
plan tests (an MCP tool is mocked like any other). A run connects to a server on its first
call (one session per server per run, closed when the run ends) and refuses to call a tool
whose listing no longer matches the lock, naming what drifted.

Annotations decide purity: ``readOnlyHint`` is ``pure`` (re-run freely on resume),
``idempotentHint`` is ``idempotent`` (``retry`` on resume without asking), anything else a
``side_effect``; ``destructiveHint`` is shown by ``preview``. Results: ``structuredContent`` is
the step's output, else the text of the content; ``isError`` is a failure of type
:class:`McpToolError` (``catch: McpToolError`` routes it); a lost connection or a timeout is a
:class:`~.catalog.TransientError` (the step's retry rules apply) and the session is opened
again for the next attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Mapping, cast

from ...dsl.errors import RunError, Span, first_line, printable
from ...dsl.ir import Purity
from ...dsl.jsontext import loads
from ..core.config import MCP_SOURCE, expand_env
from .catalog import TransientError, Tool


class _ToDebugLog(logging.Handler):
    """The MCP SDK's client log (a server's stray stdout line, a dropped session) goes to the ``dagplan.mcp``
    debug log, one line a record, never to the terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger("dagplan.mcp").debug("MCP SDK: %s", first_line(record.getMessage())[:500])


for _name in ("mcp.client", "mcp.shared", "mcp.os"):
    _sdk = logging.getLogger(_name)
    _sdk.handlers, _sdk.propagate = [_ToDebugLog()], False

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$")
LOCK_NAME = "dagplan.lock"
LOCK_VERSION = 1
CONNECT_TIMEOUT = 30.0
log = logging.getLogger("dagplan.mcp")


class McpToolError(Exception):
    """An MCP tool answered with ``isError``: its text is the message. ``catch: McpToolError`` routes it."""


class McpDrift(Exception):
    """A tool's live listing differs from the lock (or the tool is gone): the call is refused."""


# --- declarations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """One ``[mcp.NAME]`` table of the configuration, as written (``${VAR}`` not yet expanded)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None  # seconds a call may take (the step's own timeout applies too)


def declared(name: str, table: Mapping[str, Any], base: Path | None) -> Server:
    """A checked declaration as a :class:`Server` (a relative ``cwd`` is the configuration's folder's)."""
    cwd = table.get("cwd")
    if cwd is not None and base is not None and not os.path.isabs(cwd):
        cwd = str(base / cwd)
    return Server(
        name,
        command=table.get("command"),
        args=tuple(table.get("args", ())),
        env=dict(table.get("env", {})),
        cwd=cwd,
        url=table.get("url"),
        headers=dict(table.get("headers", {})),
        timeout=float(table["timeout"]) if "timeout" in table else None,
    )


def expand(server: str, key: str, value: str) -> str:
    """``${VAR}`` in ``mcp.SERVER.KEY`` read from the environment (the configuration's one rule)."""
    return expand_env(f"mcp.{server}.{key}", value)


# --- the lock ---------------------------------------------------------------------------------------


def tool_hash(entry: Mapping[str, Any]) -> str:
    """The hash of what a plan relies on in a tool's listing: its name, schemas and annotations."""
    relied = {k: entry.get(k) for k in ("name", "inputSchema", "outputSchema", "annotations")}
    from ..core.digest import digest

    return "sha256:" + digest(relied)


def _entry(tool: Any) -> dict[str, Any]:
    """One tool of a listing, as the lock keeps it."""
    data = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    entry = {k: data[k] for k in ("name", "description", "inputSchema", "outputSchema", "annotations") if k in data}
    entry["hash"] = tool_hash(entry)
    return entry


async def _listing(client: Any) -> list[dict[str, Any]]:
    """A server's tools as the lock keeps them; a listing the SDK cannot read, or a tool no plan could call,
    is a ValueError saying what is wrong (never the SDK's traceback)."""
    entries, cursor = [], None
    while True:
        try:
            page = await client.list_tools(cursor=cursor)
        except asyncio.CancelledError:
            raise
        except TransientError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK's validation of a malformed listing (pydantic)
            if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
                raise
            raise ValueError(f"its tool listing is malformed: {first_line(str(exc))[:300]}") from None
        entries += [_entry(tool) for tool in page.tools]
        cursor = page.next_cursor
        if not cursor:
            wrong = listing_problem(entries)
            if wrong is not None:
                raise ValueError(f"its tool listing is malformed: {wrong[1]}")
            return sorted(entries, key=lambda e: e["name"])


def lock_path(config: Any) -> Path:
    """Where the lock is: beside the configuration file (else in the working directory)."""
    base = Path(config.path).parent if getattr(config, "path", None) else Path.cwd()
    return base / LOCK_NAME


async def alock(servers: Mapping[str, Server]) -> dict[str, Any]:
    """Every declared server's listing, as the lock file's object."""

    async def one(server: Server) -> tuple[str, list]:
        connection = Connection(server)
        try:
            client = await connection.client()
            return server.name, await _listing(client)
        except (TransientError, ValueError) as exc:
            raise RunError.make("mcp-server", f"MCP server {server.name}: cannot list its tools: {exc}",
                                hint=f"check [mcp.{server.name}] in dagplan.toml, then run again")  # fmt: skip
        finally:
            await connection.aclose()

    found = await asyncio.gather(*(one(s) for s in servers.values()))
    return {"version": LOCK_VERSION, "servers": {name: {"tools": tools} for name, tools in sorted(found)}}


def read_lock(path: Path) -> dict[str, Any]:
    """The lock's object; a missing or damaged lock is a usage error with its position and the fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunError.make(
            "tools-lock", f"no {path.name} beside the configuration: MCP tools are checked from it",
            Span(str(path)), hint="run: dagplan tools lock",
        ) from None  # fmt: skip
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError.make("tools-lock", f"cannot read {path}: {exc}", Span(str(path))) from None
    try:
        data = loads(text)
    except ValueError as exc:
        line, col = getattr(exc, "lineno", 1), getattr(exc, "colno", 1)
        raise RunError.make("tools-lock", f"{path.name} is not JSON: {getattr(exc, 'msg', exc)}",
                            Span(str(path), line=line, col=col), hint="run: dagplan tools lock") from None  # fmt: skip
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or data.get("version") != LOCK_VERSION:
        raise RunError.make("tools-lock", f"{path.name} is not a dagplan tools lock (version {LOCK_VERSION})",
                            Span(str(path), line=1, col=1), hint="run: dagplan tools lock")  # fmt: skip
    for name, server in servers.items():
        tools = server.get("tools") if isinstance(server, dict) else None
        if not isinstance(tools, list):
            raise RunError.make("tools-lock", f"{path.name}: server {name!r} has no list of tools",
                                _where(path, text, name), hint="run: dagplan tools lock")  # fmt: skip
        wrong = listing_problem(tools)
        if wrong is not None:
            raise RunError.make("tools-lock", f"{path.name}: server {name!r}: {wrong[1]}",
                                _where(path, text, wrong[0] if wrong[0] is not None else name),
                                hint="run: dagplan tools lock")  # fmt: skip
        for entry in tools:
            if entry.get("hash") != tool_hash(entry):  # edited by hand or by a bad merge: trusted for nothing
                raise RunError.make(
                    "lock-tampered",
                    f"{path.name}: the entry of {name}.{entry['name']} does not match its hash: it was changed after "
                    "`dagplan tools lock` wrote it",
                    _where(path, text, entry["name"]),
                    hint="run dagplan tools lock again (it asks the server), and review the lock's diff",
                )
    return data


def entry_problem(entry: Any) -> str | None:
    """What is wrong with one tool of a listing (a server's answer or a lock's entry), or None: a name a plan
    can write (``SERVER.TOOL``), text where text is meant, JSON Schemas and annotations that are objects."""
    if not isinstance(entry, dict):
        return "a tool is not an object"
    name = entry.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        return (f"tool name {printable(str(name))[:60]!r} is not a name a plan can call as SERVER.TOOL (letters, "
                "digits, _ and -; no dots, slashes or spaces)")  # fmt: skip
    for key, kind in (("description", str), ("inputSchema", dict), ("outputSchema", dict), ("annotations", dict)):
        if key in entry and entry[key] is not None and not isinstance(entry[key], kind):
            what = "text" if kind is str else "an object"
            return f"tool {name!r}: {key} is {type(entry[key]).__name__}, not {what}"
    if not isinstance(entry.get("inputSchema", {}), dict):
        return f"tool {name!r} has no inputSchema object"
    return None


def listing_problem(entries: list[Any]) -> tuple[Any, str] | None:
    """The first tool of a listing that no plan could call, or a name listed twice: (its name, why)."""
    seen: set[str] = set()
    for entry in entries:
        problem = entry_problem(entry)
        if problem is None and entry["name"] in seen:
            problem = f"tool {entry['name']!r} is listed twice"
        if problem is not None:
            return (entry.get("name") if isinstance(entry, dict) else None), problem
        seen.add(entry["name"])
    return None


def _where(path: Path, text: str, name: Any) -> Span:
    """The line of the lock where ``name`` is written (a lock is indented JSON), else its first line."""
    needle = json.dumps(str(name))
    for number, line in enumerate(text.split("\n"), 1):
        if needle in line:
            return Span(str(path), line=number, col=line.index(needle) + 1)
    return Span(str(path), line=1, col=1)


def purity_of(annotations: Mapping[str, Any] | None) -> Purity:
    """``readOnlyHint`` -> pure, ``idempotentHint`` -> idempotent, anything else a side effect."""
    annotations = annotations or {}
    if annotations.get("readOnlyHint"):
        return "pure"
    if annotations.get("idempotentHint"):
        return "idempotent"
    return "side_effect"


def tools_of(server: Server, lock: Mapping[str, Any]) -> dict[str, Tool]:
    """The server's tools as the lock lists them, named ``SERVER.TOOL``; calls go through one connection."""
    listed = (lock.get("servers") or {}).get(server.name)
    if listed is None:
        raise RunError.make("tools-lock", f"server {server.name!r} is declared but not in {LOCK_NAME}",
                            hint="run: dagplan tools lock")  # fmt: skip
    connection = Connection(server)
    out = {}
    for entry in listed["tools"]:
        qualified = f"{server.name}.{entry['name']}"
        annotations = entry.get("annotations") or {}
        out[qualified] = Tool(
            name=qualified,
            fn=_Call(connection, entry),
            description=str(entry.get("description") or ""),
            parameters=entry.get("inputSchema") or {"type": "object"},
            purity=purity_of(annotations),
            is_async=True,
            source=connection,
            output_schema=entry.get("outputSchema"),
            destructive=bool(annotations.get("destructiveHint")) and not annotations.get("readOnlyHint"),
            version=str(entry.get("hash") or ""),  # the lock's entry: what a step's fingerprint holds of the tool
        )
    return out


def load_source(source: str) -> dict[str, Tool]:
    """The tools of ``mcp:NAME``: the configuration's declaration of NAME, the lock's listing of it."""
    from ..core.config import load_config

    name = source[len(MCP_SOURCE) :]
    config = load_config()
    table = config.mcp.get(name)
    if table is None:
        known = ", ".join(sorted(config.mcp)) or "none"
        raise RunError.make("tools-import", f"{source}: no server {name!r} is declared (declared: {known})",
                            hint=f"declare it in dagplan.toml: [mcp.{name}] command = ... or url = ...")  # fmt: skip
    return tools_of(declared(name, table, Path(config.path).parent if config.path else None),
                    read_lock(lock_path(config)))  # fmt: skip


# --- a run's session with a server --------------------------------------------------------------------


class _Call:
    """One tool of a server, as the run calls it: ``await call(**arguments)``."""

    def __init__(self, connection: "Connection", entry: Mapping[str, Any]):
        self.connection, self.entry = connection, entry

    @property
    def identity(self) -> str:
        """What its code identity is (tools/identity.py): the server and the tool's entry in the lock."""
        return json.dumps({"server": self.connection.server.name, "entry": self.entry}, sort_keys=True, default=str)

    async def __call__(self, **arguments: Any) -> Any:
        return await self.connection.call(self.entry, arguments)

    def __repr__(self) -> str:
        return f"<MCP tool {self.connection.server.name}.{self.entry['name']}>"


class Connection:
    """One server's session for one event loop (a run): opened on the first call, closed by :meth:`aclose`.

    The SDK's client must be entered and left by the same task, so a task of its own holds it open
    while the run's steps call through it."""

    def __init__(self, server: Server):
        self.server = server
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._holder: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._opening: asyncio.Lock | None = None
        self._live: dict[str, str] | None = None  # tool name -> hash of its live listing
        self._errlog: Any = None
        self.stderr_tail: list[str] = []  # the last lines the server wrote to stderr (why it would not start)

    def preflight(self) -> list[Any]:
        """What would stop the server from starting, known before the run: ``${VAR}`` not set."""
        server, found = self.server, cast(list[Any], [])
        values = [("command", server.command), ("url", server.url), *(("args", a) for a in server.args),
                  *((f"env.{k}", v) for k, v in server.env.items()),
                  *((f"headers.{k}", v) for k, v in server.headers.items())]  # fmt: skip
        for key, value in values:
            try:
                if value is not None:
                    expand(server.name, key, value)
            except RunError as exc:
                found += exc.diagnostics
        return found

    async def client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new run in a new loop: nothing of the old session is usable
            self._loop, self._client, self._holder, self._live = loop, None, None, None
            self._opening = asyncio.Lock()
        assert self._opening is not None
        async with self._opening:
            if self._client is None:
                await self._open()
        return self._client

    async def _open(self) -> None:
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._holder = asyncio.get_running_loop().create_task(self._hold(ready, self._stop))
        try:
            self._client = await asyncio.wait_for(asyncio.shield(ready), CONNECT_TIMEOUT)
        except TimeoutError:
            await self._drop()
            raise TransientError(f"MCP server {self.server.name}: no answer within {CONNECT_TIMEOUT:g}s") from None
        except Exception as exc:  # noqa: BLE001 - a server that cannot be started or reached
            await self._drop()
            raise _connection_failure(self.server, exc, self.stderr_tail) from None

    async def _hold(self, ready: asyncio.Future, stop: asyncio.Event) -> None:
        from mcp import Client

        try:
            async with Client(self._transport(), read_timeout_seconds=self.server.timeout) as client:
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller waiting for the session
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(str(exc)))
            elif not isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
                log.debug("MCP server %s: session ended: %s", self.server.name, exc)
        finally:
            self._flush_log()

    def _transport(self) -> Any:
        server = self.server
        if server.url is not None:
            headers = {k: expand(server.name, f"headers.{k}", v) for k, v in server.headers.items()}
            return _http(expand(server.name, "url", server.url), headers)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert server.command is not None
        params = StdioServerParameters(
            command=expand(server.name, "command", server.command),
            args=[expand(server.name, "args", a) for a in server.args],
            env={k: expand(server.name, f"env.{k}", v) for k, v in server.env.items()} or None,
            cwd=server.cwd,
        )
        self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        return stdio_client(params, errlog=self._errlog)

    def _flush_log(self) -> None:
        """The server's stderr goes to the debug log (logger ``dagplan.mcp``), never to the terminal."""
        errlog, self._errlog = self._errlog, None
        if errlog is None:
            return
        try:
            errlog.seek(0)
            lines = errlog.read().splitlines()
            for line in lines:
                log.debug("MCP server %s: %s", self.server.name, line)
            self.stderr_tail = [line for line in lines if line.strip()][-3:]
        finally:
            errlog.close()

    async def call(self, entry: Mapping[str, Any], arguments: Mapping[str, Any]) -> Any:
        name = entry["name"]
        client = await self.client()
        await self._check_drift(client, entry)
        try:
            result = await client.call_tool(name, dict(arguments))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - sorted below: the server's error, or the connection's
            failure = _call_failure(self.server, name, exc)
            if isinstance(failure, TransientError):
                await self._drop()  # the next attempt opens a new session
            raise failure from None
        if result.is_error:
            raise McpToolError(_text(result.content) or f"{self.server.name}.{name} failed")
        if result.structured_content is not None:
            return result.structured_content
        return _content_value(result.content)

    async def _check_drift(self, client: Any, entry: Mapping[str, Any]) -> None:
        if self._live is None:
            self._live = {e["name"]: e["hash"] for e in await _listing(client)}
        live = self._live.get(entry["name"])
        if live == tool_hash(entry):  # the listing the lock's entry holds, whatever hash it claims
            return
        what = "is no longer listed" if live is None else "changed (its schemas or annotations)"
        raise McpDrift(
            f"{self.server.name}.{entry['name']} {what} since {LOCK_NAME} was written; "
            f"check the plan against the new listing: dagplan tools lock, then dagplan check"
        )

    async def _drop(self) -> None:
        holder, stop = self._holder, self._stop
        self._client, self._holder, self._live = None, None, None
        if stop is not None:
            stop.set()
        if holder is not None:
            try:
                await asyncio.wait_for(holder, 5.0)
            except BaseException:  # noqa: BLE001 - a session that will not close is abandoned
                holder.cancel()

    async def aclose(self) -> None:
        """End the session (the server process with it); the next call opens a new one."""
        if self._loop is asyncio.get_running_loop():
            await self._drop()


@contextlib.asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The streamable HTTP transport with the declared headers (its HTTP client closed with it)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def _text(content: list[Any]) -> str:
    return "\n".join(getattr(block, "text", "") for block in content if getattr(block, "type", "") == "text")


def _content_value(content: list[Any]) -> Any:
    """A result without structured content: its text, or (images, resources) its blocks as JSON."""
    if all(getattr(block, "type", "") == "text" for block in content):
        return _text(content)
    return [block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in content]


def _connection_failure(server: Server, exc: BaseException, stderr: list[str]) -> Exception:
    """Why a session could not be opened, with the last words the server wrote (shown as text, never raw)."""
    if isinstance(exc, RunError):
        return exc
    if isinstance(exc, (FileNotFoundError, PermissionError)):
        return RunError.make("mcp-server", f"MCP server {server.name}: cannot start {server.command!r}: {exc}",
                             hint=f"check mcp.{server.name}.command in dagplan.toml")  # fmt: skip
    said = f" (the server said: {printable(' | '.join(stderr))[:300]})" if stderr else ""
    return TransientError(f"MCP server {server.name}: cannot connect: {_first_line(exc)}{said}")


def _call_failure(server: Server, tool: str, exc: BaseException) -> Exception:
    """A failed call: the server's refusal (an MCP error) fails the step; a lost connection or a timeout
    may pass if tried again."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return McpToolError(f"{server.name}.{tool}: {exc}")
    return TransientError(f"{server.name}.{tool}: {type(exc).__name__}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    if getattr(exc, "exceptions", None):  # an exception group from the transport's task group: its first
        return _first_line(exc.exceptions[0])  # type: ignore[attr-defined]
    return first_line(str(exc)) or type(exc).__name__
