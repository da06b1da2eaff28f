"""The docs site's one hook (mkdocs ``hooks:``): reference tables generated from the code's own tables.

A page says where a table goes with ``<!-- generated: NAME (where it comes from) -->``; the hook puts the table
there at build time, so a reference page is never a copy that can drift from the code. An unknown NAME fails
the build (``mkdocs build --strict``, which the suite runs: tests/test_site.py).
"""

from __future__ import annotations

import json
import sys
import re
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
MARK = re.compile(r"<!-- generated: ([a-z-]+)(?: \(.*?\))? -->")


def _diagnostic_codes() -> str:
    from dagplan.dsl.codes import code_table

    return code_table()


def _exit_codes() -> str:
    from dagplan.cli.common import exit_table

    return exit_table()


def _configuration_keys() -> str:
    from dagplan.interpreter.core.config import key_table

    return key_table()


def _properties(schema: dict) -> str:
    rows = ["| key | type | what it is |", "| --- | --- | --- |"]
    required = set(schema.get("required", ()))
    for key, spec in schema.get("properties", {}).items():
        kind = spec.get("type") or ("reference" if "$ref" in spec else "one of several" if "oneOf" in spec else "")
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        text = " ".join((spec.get("description") or "").split()).replace("|", "\\|")
        rows.append(f"| `{key}`{' (required)' if key in required else ''} | {kind} | {text} |")
    return "\n".join(rows) + "\n"


def _plan_schema() -> str:
    from dagplan.dsl.schema import schema_text

    found = json.loads(schema_text("plan.schema.json"))
    step = found.get("$defs", {}).get("step", {})
    whole = json.dumps(found, indent=2, ensure_ascii=False)
    return (f"## A plan's keys\n\n{_properties(found)}\n## A step's keys\n\n{_properties(step)}\n"
            f"## The whole schema\n\n```json\n{whole}\n```\n")  # fmt: skip


def _commands() -> str:
    import click

    from dagplan.cli import COMMANDS
    from dagplan.cli.group import cli

    out = []
    with click.Context(cli, info_name="dagplan") as parent:
        for name in COMMANDS:
            command = cli.get_command(parent, name)
            if command is None:
                continue
            with click.Context(command, info_name=name, parent=parent) as ctx:
                out.append(f"## dagplan {name}\n\n```text\n{command.get_help(ctx)}\n```\n")
    return "\n".join(out)


def _readme() -> str:
    """The README as the site's front page: its links into docs/ made the site's own."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\(docs/", "](", text).replace("](CHANGELOG.md)", "](changelog.md)")
    return text


def _examples() -> str:
    """Each plan of examples/ with its summary (its tests named), and the invalid plans' count."""
    import yaml

    rows = ["| plan | what it does | tested by |", "| --- | --- | --- |"]
    for path in sorted((ROOT / "examples").glob("*")):
        if path.suffix not in (".yaml", ".json", ".rewoo") or path.name.endswith((".test.yaml", ".test.json")):
            continue
        text = path.read_text(encoding="utf-8")
        first = text.split("\n", 1)[0]
        data = {"summary": first[len("Plan:"):]} if path.suffix == ".rewoo" and first.startswith("Plan:") else (
            yaml.safe_load(text) or {})  # fmt: skip
        data = data if isinstance(data, dict) else {}  # a dialect whose document is a list of calls
        summary = " ".join(str(data.get("summary") or data.get("description") or "").split()).replace("|", "\\|")
        test = path.with_name(path.stem + ".test.yaml")
        rows.append(f"| `{path.name}` | {summary} | {'`' + test.name + '`' if test.exists() else ''} |")
    invalid = len(list((ROOT / "examples" / "invalid").glob("*.*")))
    return "\n".join(rows) + f"\n\n`examples/invalid/`: {invalid} plans, one per diagnostic.\n"


def _changelog() -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return text.split("\n", 1)[1]  # its own title is the page's


def _first_paragraph(obj: Any) -> str:
    import inspect

    own = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__  # not an inherited one
    doc = inspect.cleandoc(own) if own else ""
    if inspect.isclass(obj) and doc.startswith(obj.__name__ + "("):
        return ""  # a dataclass's generated signature says nothing more
    return " ".join(doc.split("\n\n", 1)[0].split())


_SAME = {"check": "check_files"}  # a Project method -> the module function it is, where the names differ


WITH_MEMBERS = ("Project", "RunSettings")  # classes whose reference lists their methods and fields


def _python_api() -> str:
    """``dagplan.__all__`` (what ``import dagplan`` offers) and :class:`dagplan.Project`: a table of the names, each
    with the first paragraph of its docstring, then each one's full reference by mkdocstrings (its signature and
    docstring, from the module that defines it: ``dagplan._EXPORTS``)."""
    import inspect

    import dagplan

    names = [n for n in dagplan.__all__ if n != "__version__"]

    def where(name: str) -> str:
        value = getattr(dagplan, name)  # where it is defined: griffe reads that module (API_TREE)
        return f"{getattr(value, '__module__', None) or dagplan._EXPORTS[name]}.{name}"

    sys.path.insert(0, str(ROOT / "docs"))
    from griffe_roles import plain  # the roles as code, as the reference below shows them

    def one_line(name: str) -> str:
        said = plain(_first_paragraph(getattr(dagplan, name))).replace("|", "\\|")
        return said.split(". ")[0].rstrip(".") + "." if said else "-"

    functions = [n for n in names if not inspect.isclass(getattr(dagplan, n)) and callable(getattr(dagplan, n))]
    classes = [n for n in names if inspect.isclass(getattr(dagplan, n))]
    table = ["| name | what it is |", "| --- | --- |",
             *(f"| [`{n}`](#{where(n)}) | {one_line(n)} |" for n in [*functions, *classes])]  # fmt: skip
    blocks = ["## Functions", *(f"::: {where(n)}\n    options:\n      show_root_heading: true\n" for n in functions),
              "## Classes",
              *(f"::: {where(n)}\n    options:\n      show_root_heading: true\n"
                f"      members: {'true' if n in WITH_MEMBERS else 'false'}\n" for n in classes)]  # fmt: skip
    return f"`import dagplan` offers {len(names)} names:\n\n" + "\n".join(table) + "\n\n" + "\n\n".join(blocks) + "\n"


GENERATED: dict[str, Callable[[], str]] = {
    "python-api": _python_api,
    "diagnostic-codes": _diagnostic_codes,
    "exit-codes": _exit_codes,
    "configuration-keys": _configuration_keys,
    "plan-schema": _plan_schema,
    "commands": _commands,
    "changelog": _changelog,
    "readme": _readme,
    "examples": _examples,
}


API_TREE = ROOT / "build" / "api-tree"  # mkdocs.yml's mkdocstrings `paths`


def _api_tree() -> None:
    """The package as it installs (``dagplan.dsl`` is dsl/, ``dagplan.interpreter`` interpreter/, ...: pyproject's
    package-dir), as a tree of links under build/, for griffe to read each module's source where an import finds it.
    Made when mkdocs loads this file, before any plugin reads its configuration (mkdocstrings drops a search path
    that is not there yet)."""
    import shutil

    tree = API_TREE / "dagplan"
    shutil.rmtree(API_TREE, ignore_errors=True)
    tree.mkdir(parents=True)
    for entry in (ROOT / "dagplan").iterdir():
        if entry.name != "__pycache__":
            (tree / entry.name).symlink_to(entry)
    for name in ("dsl", "interpreter", "schemas"):
        (tree / name).symlink_to(ROOT / name)


_api_tree()


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    def fill(found: re.Match) -> str:
        name = found.group(1)
        if name not in GENERATED:
            known = ", ".join(GENERATED)
            raise ValueError(f"{page.file.src_path}: no generated table is called {name!r} (known: {known})")
        return GENERATED[name]()

    return MARK.sub(fill, markdown)
