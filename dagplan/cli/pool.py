"""``dagplan submit`` and ``dagplan worker``: runs queued in the run database, run by a pool of workers."""

from __future__ import annotations

import asyncio
import signal

import click

from ..dsl.errors import DagplanError
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, die, fail, finish, project_of, state_dir_option, tools_option


@click.command("submit")
@click.argument("file", type=click.Path(dir_okay=False))
@tools_option
@click.option("--input", "-i", "pairs", multiple=True, metavar="KEY=VALUE", help="A run input (repeatable).")
@click.option("--input-file", type=click.Path(dir_okay=False, exists=True), help="Run inputs from a JSON/YAML file.")
@click.option("--each", type=click.Path(dir_okay=False), default=None, metavar="INPUTS.jsonl",
              help="Queue one run per line: each line a JSON object of inputs (over --input); every line is "
              "checked first, and one bad line queues nothing.")  # fmt: skip
@state_dir_option
def submit(file: str, tool_sources, pairs, input_file, each, state_dir) -> None:
    """Queue a run of FILE for the workers of the run database; prints its id (with --each, one a line)."""
    from .run import prepare

    _, _, plan, inputs = prepare(file, tool_sources, pairs, input_file)
    project = project_of(state_dir, tool_sources)  # its tools checked the plan; a worker loads their sources
    try:
        ids = project.submit_each(plan, each, inputs) if each is not None else [project.submit(plan, inputs)]
    except DagplanError as exc:
        fail(exc, EXIT_USAGE)
    for run_id in ids:
        click.echo(run_id)


@click.command("worker")
@state_dir_option
@click.option(
    "--concurrency", type=click.IntRange(1), default=1, show_default=True, help="Runs at once in this worker."
)
@click.option("--drain", is_flag=True, help="Stop once no run is left to claim (default: wait for more).")
@click.option(
    "--on-interrupted",
    type=click.Choice(["retry", "adopt", "fail"]),
    default=None,
    help="A side-effecting step an earlier worker was running when it died, where the resume policy says "
    "ask: run it again, take it as done, or fail it (default: the run stops in needs_decision for an operator).",
)
def worker(state_dir, concurrency, drain, on_interrupted) -> None:
    """Claim queued and orphaned runs of the run database and run them. SIGTERM hands running runs back."""

    def say(run_id: str, what: str) -> None:
        click.echo(f"{run_id} {what}", err=True)

    async def main() -> list:
        pool = project_of(state_dir).worker_pool(concurrency=concurrency, on_interrupted=on_interrupted, on_event=say)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, pool.stop)  # hand running runs back, then exit
        return await pool.run(drain=drain)

    try:
        finished = asyncio.run(main())
    except DagplanError as exc:
        fail(exc)
    except ValueError as exc:
        die(str(exc), EXIT_USAGE)
    failed = [run for run, status in finished if status not in ("completed", "waiting", "needs_decision")]
    finish(EXIT_FAILED if failed else EXIT_OK)


@click.command("schedule")
@state_dir_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def schedule(state_dir, fmt) -> None:
    """List the schedules of dagplan.toml ([schedule.NAME]: a plan, a cron line, its inputs), which the
    workers (dagplan worker) fire: each one's next time, and when it last fired with the run it submitted."""
    import json

    try:
        rows = project_of(state_dir).schedules()
    except DagplanError as exc:
        fail(exc)
    if fmt == "json":
        click.echo(json.dumps({"schedules": rows}, indent=2))
        finish(EXIT_OK)
    if not rows:
        click.echo("no schedules: add one to dagplan.toml, e.g. [schedule.nightly] plan = \"plans/report.yaml\", "
                   "cron = \"0 2 * * *\"", err=True)  # fmt: skip
        finish(EXIT_OK)
    for row in rows:
        last = f"last {row['last']} (run {row['last_run']})" if row["last"] else "not fired yet"
        click.echo(f"{row['name']}  {row['cron']} ({row['timezone']})  {row['plan']}  next {row['next']}  {last}")
    finish(EXIT_OK)
