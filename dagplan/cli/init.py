"""``dagplan init [DIR]``: a project that checks, runs and tests at once, the starting point of the tutorial.

It writes a ``tools.py`` with one tool that reads and one that acts on the world, a plan that passes data
from the first to the second behind a person's gate, a plan test, a ``dagplan.toml`` naming the tools, the
pre-commit configuration that checks plans on every commit, and a ``.gitignore`` for the runs. It never
overwrites a file: any of them already there, and nothing is written (exit 2).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from .common import EXIT_USAGE, die

TOOLS = '''"""The tools the plans of this project may call: plain Python functions, typed and documented."""

import os
from pathlib import Path

import dagplan


@dagplan.tool(purity="pure")
def lookup_order(order_id: str) -> dict:
    """Look up an order (reads only: it may run again, and early, freely)."""
    return {"order_id": order_id, "customer": "ada@example.org", "status": "shipped"}


@dagplan.tool(purity="side_effect")
def send_email(to: str, body: str) -> str:
    """Send an email (acts on the world: it runs once, after a person's approval, never on a failure)."""
    with Path("outbox.txt").open("a", encoding="utf-8") as outbox:
        outbox.write(f"to {to}: {body}\\n")
    return f"sent to {to}"
'''

PLAN = """# Tell a customer where their order is: look it up, ask a person, then send the email.
#   dagplan run plan.yaml -i order_id=A17
dagplan: 1
summary: Tell the customer where their order is
inputs:
  order_id: {type: string, description: The order to report on}
steps:
  - id: order
    description: Look up the order
    tool: lookup_order
    args: {order_id: $input.order_id}
    output: $state.order
  - id: approve
    gate: {question: "Email $state.order.customer about order $input.order_id?", choices: [approve, reject]}
  - id: email
    description: Email the customer
    tool: send_email
    args:
      to: $state.order.customer
      body: "Your order $input.order_id is $state.order.status."
    deps: [approve]
    output: $state.sent
result: $state.sent
"""

TEST = """# Plan tests for plan.yaml: offline, no tool called (dagplan test).
plan: plan.yaml
tools: [tools.py]
cases:
  - name: an approved email is sent to the order's customer
    inputs: {order_id: A17}
    mocks:
      tools:
        lookup_order: {result: {order_id: A17, customer: ada@example.org, status: shipped}}
        send_email:
          - args: {to: ada@example.org, body: Your order A17 is shipped.}
            result: sent to ada@example.org
      gates: {approve: approve}
    expect:
      result: sent to ada@example.org

  - name: a refused email is not sent
    inputs: {order_id: A17}
    mocks:
      tools:
        lookup_order: {result: {order_id: A17, customer: ada@example.org, status: shipped}}
      gates: {approve: reject}
    expect:
      had_errors: true
      steps:
        email: {status: skipped}
"""

CONFIG = """# dagplan's configuration for this project (every command and the API read it)
tools = ["tools.py"]
"""

PRE_COMMIT = """# pre-commit: check every plan on every commit (pip install pre-commit && pre-commit install)
repos:
  - repo: local
    hooks:
      - id: dagplan-check
        name: dagplan check
        entry: dagplan check --plans-only
        language: system
        types_or: [yaml, json, python]
        pass_filenames: false
        args: [.]
"""

GITIGNORE = ".dagplan/\noutbox.txt\n"

FILES = {
    "tools.py": TOOLS,
    "plan.yaml": PLAN,
    "plan.test.yaml": TEST,
    "dagplan.toml": CONFIG,
    ".pre-commit-config.yaml": PRE_COMMIT,
    ".gitignore": GITIGNORE,
}


@click.command("init")
@click.argument("folder", default=".", type=click.Path(file_okay=False))
def init(folder: str) -> None:
    """Start a project in FOLDER (default: here): tools, a plan, its test, the configuration, a pre-commit hook."""
    from ..api import DagplanError, create_file

    root = Path(folder)
    there = [name for name in FILES if os.path.lexists(root / name)]  # a dangling link is something there too
    if there:
        die(f"dagplan init: {', '.join(there)} already in {folder}: nothing written (init never overwrites)",
            EXIT_USAGE)  # fmt: skip
    try:
        root.mkdir(parents=True, exist_ok=True)
        for name, text in FILES.items():
            create_file(root / name, text.encode("utf-8"))  # never through a link that appeared since
    except OSError as exc:
        die(f"dagplan init: cannot write in {folder}: {exc.strerror or exc}", EXIT_USAGE)
    except DagplanError as exc:
        die(f"dagplan init: {exc.headline.message}", EXIT_USAGE)
    go = "" if folder == "." else f"cd {folder}\n  "
    click.echo(f"A dagplan project in {folder}: {', '.join(FILES)}.\nNext:\n  {go}dagplan check plan.yaml\n"
               "  dagplan test\n  dagplan run plan.yaml -i order_id=A17      # asks you at the gate")  # fmt: skip
