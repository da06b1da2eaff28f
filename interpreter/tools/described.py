"""Tools a catalog describes and no code here runs: a JSON or YAML file of tool descriptions given to
``--tools`` (or ``tools = [...]``), as other people write them: OpenAI's ``tools`` list (``{"type":
"function", "function": {...}}``), a list of functions (``{"name", "description", "parameters"}``: BFCL's,
OpenAI's older ``functions``), MCP's ``tools/list`` (``inputSchema``, ``annotations``), Anthropic's
(``input_schema``), a ``{"tools": [...]}`` wrapper of any of these, dagplan's own mapping of names to
entries (``{"search": {"description", "parameters", "purity"}}``), or what ``dagplan tools list --format json``
writes (a catalog of a project's tools, read back the same).

What needs only the descriptions works on them: ``check``, ``plan``, ``preview``, ``dagplan test`` with mocks.
A real run of a plan calling such a tool is refused before anything runs (the preflight of tool sources, the
one every source answers): the catalog says what the tool takes, not how to do it. A bad file is an error
at its line and column, never a traceback.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Mapping

from ...dsl.errors import DagplanError, Diagnostic, RunError, Span, error
from ...dsl.ir import PURITY_RANK
from ..core.digest import digest
from ..core.trace import shown_path
from .catalog import Tool

_HINT = "a catalog is a list of tools ({name, description, parameters}) or a mapping of names to them"
_FIELDS = "name, description, parameters"


def described_tools(path: str | os.PathLike) -> dict[str, Tool]:
    """The tools the catalog at ``path`` describes, by name (in its order); RunError with every problem
    found, each at its position."""
    from ...dsl.load import read_document  # only when there is a catalog to read

    name = shown_path(os.fspath(path))  # as a person reads it: relative to where they stand, when it is below
    try:
        data, source = read_document(name, holds="tools", example=_HINT, lists=True)
    except DagplanError as exc:  # its syntax, its size, its encoding: the catalog's fault, where it is
        raise RunError([replace(d, code="bad-catalog") for d in exc.diagnostics]) from None
    entries = _entries(data)
    problems: list[Diagnostic] = []
    tools: dict[str, Tool] = {}
    for where, entry in entries:
        try:
            tool = _tool(name, where, entry)
        except _Bad as bad:
            problems.append(error("bad-catalog", bad.message, source.locate(Span(name, bad.where)), bad.hint))
            continue
        if tool.name in tools:
            problems.append(error("bad-catalog", f"tool {tool.name!r} is described twice",
                                  source.locate(Span(name, where)), "give each tool one entry"))  # fmt: skip
            continue
        tools[tool.name] = tool
    if not entries:
        problems.append(error("bad-catalog", f"{name} describes no tool", Span(name, line=1, col=1), _HINT))
    if problems:
        raise RunError(problems)
    return tools


class _Bad(Exception):
    def __init__(self, where: tuple, message: str, hint: str = _HINT):
        self.where, self.message, self.hint = where, message, hint


def _entries(data: Any) -> list[tuple[tuple, Any]]:
    """Each entry and its document path: a list's items, a ``tools``/``functions`` wrapper's, or a mapping's
    values (dagplan's own form: the key is the name)."""
    if isinstance(data, Mapping):
        for key in ("tools", "functions"):
            if isinstance(data.get(key), list):
                return [((key, i), entry) for i, entry in enumerate(data[key])]
        return [
            ((key,), {"name": key, **entry} if isinstance(entry, Mapping) else entry) for key, entry in data.items()
        ]
    return [((i,), entry) for i, entry in enumerate(data)]


def _tool(file: str, where: tuple, entry: Any) -> Tool:
    if not isinstance(entry, Mapping):
        raise _Bad(where, f"a tool's entry is an object ({_FIELDS}), not {type(entry).__name__}")
    if entry.get("type") == "function" and isinstance(entry.get("function"), Mapping):  # OpenAI's tools list
        where, entry = (*where, "function"), entry["function"]
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _Bad(where, "a tool's entry has no name", f"write its name: name: search ({_FIELDS})")
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise _Bad((*where, "description"), f"tool {name!r}: its description is text")
    key = next((k for k in ("parameters", "inputSchema", "input_schema") if k in entry), None)
    parameters = entry[key] if key else {"type": "object"}
    if not isinstance(parameters, Mapping):
        kind = type(parameters).__name__
        raise _Bad(
            (*where, key),
            f"tool {name!r}: its parameters are a JSON schema (an object), not {kind}",
            "write: parameters: {type: object, properties: {...}}",
        )
    parameters = json_schema(parameters)
    output = entry.get("output_schema", entry.get("outputSchema"))
    if output is not None and not isinstance(output, Mapping):
        raise _Bad((*where, "output_schema"), f"tool {name!r}: its output schema is an object")
    annotations = entry.get("annotations") if isinstance(entry.get("annotations"), Mapping) else {}
    purity = entry.get("purity")
    if purity is not None and purity not in PURITY_RANK:
        raise _Bad((*where, "purity"), f"tool {name!r}: purity {purity!r} is not one of {', '.join(PURITY_RANK)}",
                   "pure: reads only; idempotent: acts, the same again changes nothing; side_effect: acts")  # fmt: skip
    if purity is None and annotations:  # MCP's hints, read as the MCP source reads a server's
        from .mcp import purity_of

        purity = purity_of(annotations)
    alternatives = entry.get("alternatives")  # how many outcomes it answers with (dagplan's own listing)
    if alternatives is not None and (type(alternatives) is not int or alternatives < 1):
        raise _Bad(
            (*where, "alternatives"),
            f"tool {name!r}: alternatives is how many outcomes it answers with, a whole number",
        )
    version = digest(entry)[:16]  # what a step's fingerprint holds of it: an edit of its entry re-runs it
    return Tool(name=name, fn=_NoCode(name, file), description=description, parameters=parameters,
                purity=purity, is_async=True, source=_Described(name, file), output_schema=output,
                destructive=entry.get("destructive") is True
                or (bool(annotations.get("destructiveHint")) and not annotations.get("readOnlyHint")),
                alternatives=alternatives, version=version)  # fmt: skip


# Python's names for JSON Schema's types, as catalogs written from Python code give them (BFCL's: dict, float,
# tuple, any; others write str, int, bool, list); "any" says nothing, so no type is kept
_PYTHON_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "str": "string",
                 "int": "integer", "bool": "boolean", "any": None}  # fmt: skip


def json_schema(schema: Any, depth: int = 0) -> Any:
    """A catalog's parameter schema as JSON Schema: each ``type`` Python names (``dict``, ``float``, ``tuple``,
    ``any``...) as JSON Schema's, at every level (properties, items, alternatives); the rest as written."""
    if depth > 64:  # a document deeper than the loader's limit never gets here; a built one is kept as given
        return schema
    if isinstance(schema, list):
        return [json_schema(s, depth + 1) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "type":
            kinds = [
                _PYTHON_TYPES.get(k, k) if isinstance(k, str) else k
                for k in (value if isinstance(value, list) else [value])
            ]
            if None in kinds:  # "any": no type
                continue
            out[key] = kinds if isinstance(value, list) else kinds[0]
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: json_schema(sub, depth + 1) for name, sub in value.items()}
        else:
            out[key] = json_schema(value, depth + 1) if isinstance(value, (Mapping, list)) else value
    return out


class _Described:
    """The source of one described tool: its preflight refuses a real run that calls it (nothing would run)."""

    def __init__(self, name: str, file: str):
        self.name, self.file = name, file

    def preflight(self) -> list[Diagnostic]:
        return [error("tool-not-runnable", f"tool {self.name!r} is only described (by {self.file}): no code runs it",
                      hint="give its code (--tools tools.py, or an MCP server: mcp:NAME), or mock it: "
                           "dagplan test with mocks")]  # fmt: skip

    async def aclose(self) -> None:
        return None


class _NoCode:
    """What a described tool's call does if it is reached (a run without the preflight): fail the step."""

    def __init__(self, name: str, file: str):
        self.name, self.file = name, file
        self.__name__ = self.__qualname__ = name
        self.__module__ = __name__

    async def __call__(self, **_: Any) -> Any:
        raise RunError(_Described(self.name, self.file).preflight())
