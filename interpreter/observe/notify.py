"""Telling people that a gate waits: the configuration's notifiers, ``[notify.NAME]``.

A notifier is a webhook, its URL read from the environment (``webhook = "${SLACK_WEBHOOK_URL}"``: the
URL is a secret, so it never sits in a file), or a command given the request as JSON on its stdin. A
plan names notifiers (``gate: {notify: ops}``) and never holds a URL or a command itself: a plan may
come from a model, and must not choose where run data is sent or what is executed.

Sending never blocks the run: each gate's notices go out in a task of their own, each notifier tried
``retries`` times with a doubling pause; what could not be sent is logged (``dagplan.notify``) with the
notifier's name, never its URL. The run ends by waiting a bounded time for notices still on their way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from typing import Any, Mapping, Sequence

from ..core.config import expand_env, notifier_problems

log = logging.getLogger("dagplan.notify")
SETTLE = 30.0  # seconds a finished run waits at most for notices still being sent


def message(run_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON of a notice: ``text`` for Slack-compatible incoming webhooks, and the request's fields."""
    choices = request.get("choices")
    allowed = f" [{'/'.join(map(str, choices))}]" if choices else ""
    text = (f"dagplan: run {run_id} waits at {request['step']}: {request.get('question')}{allowed}. "
            f"Answer with: dagplan answer {run_id} {request['step']} VALUE")  # fmt: skip
    fields = {k: request[k] for k in ("step", "question", "choices", "deadline", "on_timeout") if k in request}
    return {"text": text, "run_id": run_id, **fields}


async def send(notifiers: Mapping[str, Any], names: Sequence[str], body: Mapping[str, Any]) -> dict[str, str]:
    """Each named notifier told, retried; returns what failed (name -> why), never raises."""
    failed: dict[str, str] = {}
    for name in names:
        table = notifiers.get(name)
        if table is None or notifier_problems(name, table):
            failed[name] = "not declared in the configuration ([notify.NAME])"
            continue
        problem = await _tried(name, table, body)
        if problem is not None:
            failed[name] = problem
            log.warning("notifier %s: the notice was not delivered: %s", name, problem)
    return failed


async def _tried(name: str, table: Mapping[str, Any], body: Mapping[str, Any]) -> str | None:
    attempts, timeout = int(table.get("retries", 3)), float(table.get("timeout", 10))
    problem = None
    for attempt in range(attempts):
        try:
            if "webhook" in table:
                url = expand_env(f"notify.{name}.webhook", table["webhook"])
                await asyncio.wait_for(asyncio.to_thread(_post, url, body, timeout), timeout + 1)
            else:
                await _run(list(table["command"]), body, timeout)
            return None
        except Exception as exc:  # noqa: BLE001 - a notice that fails must never fail the run
            problem = _why(exc)
            log.debug("notifier %s, attempt %d: %s", name, attempt + 1, problem)
        if attempt + 1 < attempts:
            await asyncio.sleep(0.5 * 2**attempt)
    return problem


def _post(url: str, body: Mapping[str, Any], timeout: float) -> None:
    from urllib.request import Request, urlopen

    if not url.startswith(("https://", "http://")):
        raise ValueError("the webhook's URL does not start with http:// or https://")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValueError("the webhook's URL holds a space or a control character (pasted with a trailing word?)")
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    with urlopen(request, timeout=timeout) as response:  # noqa: S310 - the scheme is checked above
        response.read(1024)


async def _run(argv: list[str], body: Mapping[str, Any], timeout: float) -> None:
    """The command, given the notice on stdin, in a process group of its own: after ``timeout`` the whole
    group is killed (a child it started in the background too), and the run never waits on pipes it holds."""
    _adopt_orphans()
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(json.dumps(body).encode("utf-8")), timeout)
    except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
        await asyncio.shield(asyncio.to_thread(_kill_group, process.pid))  # reaping may take moments: off the loop
        with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
            await asyncio.wait_for(process.wait(), 5)
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise TimeoutError(f"the command did not finish within {timeout:g}s") from None
    if process.returncode:
        last = (err or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"the command exited with {process.returncode}: {last[0][:200]}")


def _adopt_orphans() -> None:
    """On Linux, this process becomes the reaper of what its notifier commands leave behind (a child they
    started in the background), so a killed group is reaped here, not left to an init that may never reap
    (a container's): once per process."""
    global _ADOPTING
    if _ADOPTING is None:
        _ADOPTING = False
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _ADOPTING = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


_ADOPTING: bool | None = None


def _kill_group(pid: int) -> None:
    """SIGKILL the command's process group, then reap the members this process adopted."""
    members = _group(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if not _ADOPTING:
        return
    for member in members - {pid}:  # the command itself is asyncio's to reap
        for _ in range(200):  # SIGKILL takes effect within moments; never wait unbounded
            try:
                if os.waitpid(member, os.WNOHANG) != (0, 0):
                    break  # reaped
            except ChildProcessError:  # not (yet) ours: its parent is still dying, or it is gone
                if not os.path.exists(f"/proc/{member}"):
                    break
            time.sleep(0.01)


def _group(pgid: int) -> set[int]:
    """The processes of a process group, from /proc (empty where there is none)."""
    found = set()
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{entry}/stat", "rb") as stat:
                        fields = stat.read().rsplit(b")", 1)[1].split()
                    if int(fields[2]) == pgid:
                        found.add(int(entry))
    return found


def _why(exc: BaseException) -> str:
    """A failure in words that never carry the URL or the command's arguments (a secret may be in either):
    words of our own for what we know, else only the exception's type."""
    from urllib.error import HTTPError, URLError

    if isinstance(exc, HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, URLError):
        return f"cannot connect ({exc.reason})" if isinstance(exc.reason, str) else "cannot connect"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return str(exc) or "timed out"
    if isinstance(exc, (ValueError, RuntimeError)) and type(exc) in (ValueError, RuntimeError):
        return str(exc)  # raised here, in words that hold no URL (the command's exit and its last line)
    headline = getattr(exc, "headline", None)
    if headline is not None:
        return headline.message  # a RunError names the variable, never its value
    if isinstance(exc, FileNotFoundError):
        return "the command was not found"
    return type(exc).__name__  # its text may quote the URL (http.client's InvalidURL does): never shown
