"""Tools of the kill harness: deterministic outputs, and a side-effect journal.

Every call appends ``<name>\\n`` to the file named by ``$DAGPLAN_TEST_JOURNAL``
(before returning), so a test can count how many times each step really ran.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os

import dagplan


def _journal(name: str) -> None:
    with open(os.environ["DAGPLAN_TEST_JOURNAL"], "a", encoding="utf-8") as f:
        f.write(name + "\n")


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:12]


@dagplan.tool(purity="idempotent")
async def work(name: str, inputs: dict | None = None) -> str:
    """A step's work: a short text that depends on its inputs."""
    await asyncio.sleep(0.02)
    _journal(name)
    return f"{name}:{_digest(inputs)}"


@dagplan.tool(purity="idempotent")
async def big(name: str, seed: str) -> str:
    """An output over 32 KB, with text that is not plain ASCII (CRLF, NUL, accents, emoji)."""
    await asyncio.sleep(0.02)
    _journal(name)
    line = f"{seed} é ü 😀 \x00 tab\t end\r\n"
    return line * (40_000 // len(line) + 1)


@dagplan.tool(purity="side_effect")
async def publish(name: str, inputs: dict | None = None) -> dict:
    """The one side effect: it must run once per run, unless interrupted mid-flight."""
    await asyncio.sleep(0.02)
    _journal(name)
    return {"published": _digest(inputs)}
