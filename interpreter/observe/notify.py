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
import json
import logging
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
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    with urlopen(request, timeout=timeout) as response:  # noqa: S310 - the scheme is checked above
        response.read(1024)


async def _run(argv: list[str], body: Mapping[str, Any], timeout: float) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(json.dumps(body).encode("utf-8")), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise TimeoutError(f"the command did not finish within {timeout:g}s") from None
    if process.returncode:
        last = (err or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"the command exited with {process.returncode}: {last[0][:200]}")


def _why(exc: BaseException) -> str:
    """A failure in words that never carry the URL (urllib's errors do not; a RunError names the variable)."""
    from urllib.error import HTTPError, URLError

    if isinstance(exc, HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, URLError):
        return f"cannot connect ({exc.reason})" if isinstance(exc.reason, str) else "cannot connect"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return str(exc) or "timed out"
    headline = getattr(exc, "headline", None)
    return headline.message if headline is not None else f"{type(exc).__name__}: {exc}"
