"""The price of a tool on an MCP server: a chain of tool steps run through dagplan's public API, each step
calling the same function (1) as a Python tool, (2) on the suite's SDK server over stdio, (3) over
streamable HTTP on loopback; and, as the floor of (2), the SDK's own client calling the server directly
in a loop (no dagplan). Medians of 5 rounds; ratios within the same run.

    python benchmarks/bench_mcp.py [--steps 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SERVER = HERE.parent / "tests" / "mcp_demo_server.py"


def chain(steps: int, tool: str) -> str:
    lines = ["steps:"]
    for i in range(steps):
        lines += [
            f"  - id: s{i}",
            f"    tool: {tool}",
            "    args: {a: 1, b: " + str(i) + "}",
            f"    output: †state.s{i}",
        ]
    return "\n".join(lines) + "\n"


def run_plan(folder: Path, steps: int, tool: str, tools: dict | None = None) -> float:
    """Seconds a call: the marginal cost, from a chain of ``steps`` and one of twice as many (so the
    session's start-up, paid once a run, is out of the figure; it is printed apart)."""
    return (_seconds(folder, 2 * steps, tool, tools) - _seconds(folder, steps, tool, tools)) / steps


def start_up(folder: Path, steps: int, tool: str) -> float:
    return 2 * _seconds(folder, steps, tool, None) - _seconds(folder, 2 * steps, tool, None)


def _seconds(folder: Path, steps: int, tool: str, tools: dict | None) -> float:
    import dagplan

    os.chdir(folder)
    tools = tools or dagplan.load_tools(["mcp:demo"])
    plan = dagplan.load(text=chain(steps, tool), name="chain.yaml", tools=tools)
    started = time.perf_counter()
    result = dagplan.run(plan, tools=tools)
    assert str(result.status) == "completed", result.message
    return time.perf_counter() - started


def sdk_floor(steps: int) -> float:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def main() -> float:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        async with Client(params) as client:
            await client.call_tool("add", {"a": 1, "b": 0})
            started = time.perf_counter()
            for i in range(steps):
                await client.call_tool("add", {"a": 1, "b": i})
            return (time.perf_counter() - started) / steps

    return asyncio.run(main())


def check_while_asked(steps: int = 10_000, rounds: int = 3) -> dict[str, float]:
    """``dagplan mcp`` over stdio: ``check_plan`` of a ``steps``-step plan, and how long a cheap request
    (``list_runs``) waits meanwhile, against the same request on an idle server. Medians over rounds."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    import json

    from benchmarks.bench_check import generate

    text = json.dumps(generate(steps), ensure_ascii=False)  # the plan of the report's 10,000-step check row
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    async def main() -> dict[str, float]:
        folder = tempfile.mkdtemp()
        params = StdioServerParameters(command=sys.executable, args=["-m", "dagplan", "mcp"], cwd=folder, env=env)
        idle, during, checks = [], [], []
        async with Client(params) as client:
            await client.call_tool("list_runs", {})
            for _ in range(rounds):
                for _ in range(5):
                    started = time.perf_counter()
                    await client.call_tool("list_runs", {})
                    idle.append(time.perf_counter() - started)
                started = time.perf_counter()
                check = asyncio.ensure_future(client.call_tool("check_plan", {"plan": text, "name": "big.json"}))
                await asyncio.sleep(0.05)  # the check has started
                waits = []
                while not check.done():
                    asked = time.perf_counter()
                    await client.call_tool("list_runs", {})
                    waits.append(time.perf_counter() - asked)
                checked = await check
                assert checked.structured_content["valid"], checked
                checks.append(time.perf_counter() - started)
                during.append(max(waits) if waits else float("nan"))
        shutil.rmtree(folder, ignore_errors=True)
        return {"check": statistics.median(checks), "idle": statistics.median(idle),
                "longest wait during": statistics.median(during)}  # fmt: skip

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    steps = parser.parse_args().steps
    rounds = parser.parse_args().rounds
    import dagplan

    @dagplan.tool(purity="pure")
    def add(a: int, b: int) -> dict:
        return {"sum": a + b}

    work = Path(tempfile.mkdtemp())
    stdio, http = work / "stdio", work / "http"
    for folder in (stdio, http):
        folder.mkdir()
        shutil.copy(SERVER, folder / "server.py")
    (stdio / "dagplan.toml").write_text(f'[mcp.demo]\ncommand = "{sys.executable}"\nargs = ["server.py"]\n')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        time.sleep(2)
        (http / "dagplan.toml").write_text(f'[mcp.demo]\nurl = "http://127.0.0.1:{port}/mcp"\n')
        for folder in (stdio, http):
            subprocess.run([sys.executable, "-m", "dagplan", "tools", "lock"], cwd=folder, check=True)
        figures: dict[str, list[float]] = {"python": [], "stdio": [], "http": [], "sdk stdio floor": []}
        starts: list[float] = []
        for _ in range(rounds):
            figures["python"].append(run_plan(work, steps, "add", {"add": add}))
            figures["stdio"].append(run_plan(stdio, steps, "demo.add"))
            figures["http"].append(run_plan(http, steps, "demo.add"))
            figures["sdk stdio floor"].append(sdk_floor(steps))
            starts.append(start_up(stdio, steps, "demo.add"))
    finally:
        server.kill()
        shutil.rmtree(work, ignore_errors=True)
    median = {k: statistics.median(v) * 1e6 for k, v in figures.items()}
    print(f"chains of {steps} and {2 * steps} tool steps, medians of {rounds} rounds, us per call (marginal)")
    for name, value in median.items():
        print(f"  {name:16s} {value:9.0f} us")
    print(f"  MCP over stdio costs {median['stdio'] - median['python']:.0f} us a call more than a Python tool; "
          f"{median['stdio'] / median['sdk stdio floor']:.2f}x the SDK client alone")  # fmt: skip
    print(f"  MCP over HTTP costs {median['http'] - median['python']:.0f} us a call more than a Python tool")
    print(f"  a stdio server's session starts in {statistics.median(starts) * 1e3:.0f} ms, once per run")


if __name__ == "__main__":
    main()
