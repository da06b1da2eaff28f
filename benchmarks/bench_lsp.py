"""The language server on a 1,000-step plan: from an edit (didChange) to its diagnostics, less the debounce,
against `dagplan.dsl.check` of the same text in-process (the floor). Medians of 20 edits.

    python benchmarks/bench_lsp.py [--steps 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path


def plan(steps: int, salt: int) -> str:
    lines = ["steps:"]
    for i in range(steps):
        lines += [f"  - id: s{i}", "    tool: t", "    args: {x: " + (f"†state.s{i - 1}" if i else str(salt)) + "}",
                  f"    output: †state.s{i}"]  # fmt: skip
    return "\n".join(lines) + "\n"


async def measure(steps: int, rounds: int) -> tuple[float, float]:
    """Medians: seconds from a didChange to its diagnostics, less the debounce; and of check in-process."""
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient

    from dagplan.dsl import check

    folder = Path(tempfile.mkdtemp())
    uri = (folder / "big.yaml").as_uri()
    client = LanguageClient("bench", "v1")
    arrived: asyncio.Queue = asyncio.Queue()

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on(params: t.PublishDiagnosticsParams) -> None:
        arrived.put_nowait(time.perf_counter())

    await client.start_io(sys.executable, "-m", "dagplan", "lsp", cwd=str(folder))
    await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities()))
    client.initialized(t.InitializedParams())
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        text_document=t.TextDocumentItem(uri=uri, language_id="yaml", version=1, text=plan(steps, 0))))  # fmt: skip
    await arrived.get()
    from dagplan.lsp import DEBOUNCE

    waits, floor = [], []
    for n in range(rounds):
        text = plan(steps, n + 1)
        sent = time.perf_counter()
        client.text_document_did_change(t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=n + 2),
            content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)]))  # fmt: skip
        waits.append((await arrived.get()) - sent - DEBOUNCE)
        started = time.perf_counter()
        check(text=text, name="big.yaml")
        floor.append(time.perf_counter() - started)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return statistics.median(waits), statistics.median(floor)


async def main(steps: int, rounds: int) -> None:
    from dagplan.lsp import DEBOUNCE

    wait, floor = await measure(steps, rounds)
    print(f"{steps}-step plan, {rounds} edits: diagnostics {wait * 1e3:.0f} ms after an edit "
          f"(debounce of {DEBOUNCE * 1e3:.0f} ms left out); check in-process {floor * 1e3:.0f} ms; "
          f"ratio {wait / floor:.2f}x")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.steps, args.rounds))
