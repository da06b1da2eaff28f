"""``dagplan diff A B``: what changed between two plans, for a reviewer (exit 1 when they differ)."""

from __future__ import annotations

import json

import click

from ..dsl.errors import DagplanError, printable
from .common import EXIT_FAILED, EXIT_OK, fail, finish, state_dir_option, tools_option


@click.command("diff")
@click.argument("before")
@click.argument("after")
@tools_option
@state_dir_option
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text")
@click.option("--against", "against", multiple=True, metavar="RUN",
              help="Also say which steps of AFTER `run --reuse RUN` would run again, and why.")  # fmt: skip
def diff(before: str, after: str, tool_sources: tuple[str, ...], state_dir: str | None, fmt: str,
         against: tuple[str, ...] = ()) -> None:  # fmt: skip
    """The semantic difference of plan BEFORE and plan AFTER (files in any dialect, or run:RUN_ID):
    side effects added or removed first, then steps added, removed, renamed and changed (field by
    field), dependency edges, the plan's keys and the worst-case cost. Exit 0 when they are the same
    plan, 1 when they differ (as diff does)."""
    from .common import project_of

    try:
        project = project_of(state_dir, tool_sources)
        found = project.diff(before, after)
        again = None
        if against:
            plan = project.stored_plan(after[4:], None) if after.startswith("run:") else after
            again = project.rerun(plan, list(against))
    except DagplanError as exc:
        fail(exc)
    if fmt == "json":
        out = {**found.to_json(), **({"rerun": again.to_json()} if again is not None else {})}
        click.echo(json.dumps(out, indent=2, ensure_ascii=False, default=str))
    else:
        from ..views import rerun_text

        text = render(found, markdown=fmt == "markdown")
        click.echo(printable(text + (("\n\n" + rerun_text(again, after)) if again is not None else "")))
    finish(EXIT_OK if found.same else EXIT_FAILED)


def render(found, markdown: bool = False) -> str:
    """The diff for people: text for a terminal, Markdown for a pull request's comment."""
    head = f"{found.before} -> {found.after}"
    if found.same:
        return f"{head}: the same plan"
    lines = [f"### {head}" if markdown else head]
    item = "- " if markdown else "  "

    def section(title: str, rows: list[str]) -> None:
        if rows:
            lines.append(f"**{title}**" if markdown else f"{title}:")
            lines.extend(item + row for row in rows)

    section("approval gates lost", [f"{sid} lost its approval gate ({', '.join(gates)}): it acts without asking"
                                    for sid, gates in found.gates_lost.items()])  # fmt: skip
    section("side effects added", found.side_effects_added)
    section("side effects removed", found.side_effects_removed)
    section("side effects changed", [f"{sid} ({', '.join(found.changed[sid])})" for sid in found.side_effects_changed])
    section("whether these act on the world is unknown (no tools known here: give --tools FILE)",
            [f"{sid} ({', '.join(found.changed[sid])})" if sid in found.changed else f"{sid} (added)"
             for sid in found.purity_unknown])  # fmt: skip
    section("steps added", found.added)
    section("steps removed", found.removed)
    section("steps renamed", [f"{a} -> {b}" for a, b in found.renamed])
    section("steps changed", [row for sid, fields in found.changed.items() for key, (a, b) in fields.items()
                              for row in _changed(f"{sid}.{key}", a, b)])  # fmt: skip
    section("edges added", [f"{a} -> {b}" for a, b in found.edges_added])
    section("edges removed", [f"{a} -> {b}" for a, b in found.edges_removed])
    section("plan", [f"{key}: {_short(a)} -> {_short(b)}" for key, (a, b) in found.plan_changed.items()])
    if found.cost:
        section("worst-case cost", [f"{found.cost[0]} -> {found.cost[1]}"])
    return "\n".join(lines)


def _changed(where: str, before, after) -> list[str]:
    """One row a change: a text's as a word diff (an object's texts each on its own row), else both values."""
    from ..views import word_diff

    if isinstance(before, str) and isinstance(after, str):
        return [f"{where}: {word_diff(before, after)}"]
    if isinstance(before, dict) and isinstance(after, dict):
        keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k)]
        if keys and all(isinstance(before.get(k), str) and isinstance(after.get(k), str) for k in keys):
            return [row for k in keys for row in _changed(f"{where}.{k}", before[k], after[k])]
    return [f"{where}: {_short(before)} -> {_short(after)}"]


def _short(value) -> str:
    text = "(none)" if value is None else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 120 else text[:117] + "..."
