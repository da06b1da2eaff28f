"""Where a run's tools come from: Python files and modules (``@dagplan.tool`` functions), and MCP
servers (``mcp:NAME``, :mod:`.mcp`); and the record of those sources a run keeps, so a resume loads
the same ones (files with their content hash).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import threading
import types
from pathlib import Path
from typing import Iterable, Mapping

from ...dsl.errors import RunError
from ...dsl.ir import ToolSpec
from ..core.config import CATALOG_SUFFIXES, MCP_SOURCE, is_catalog
from .catalog import Tool
from .described import described_tools


def load_tools(sources: Iterable[str | os.PathLike]) -> dict[str, Tool]:
    """Import each Python file or module name and collect the tools it defines; ``mcp:NAME`` gives the
    tools of a declared MCP server (:mod:`.mcp`); a JSON or YAML catalog, the tools it describes (no code:
    :mod:`.described`)."""
    found: dict[str, Tool] = {}
    for source in sources:
        if isinstance(source, str) and source.startswith(MCP_SOURCE):
            from .mcp import load_source

            found.update(load_source(source))
            continue
        if is_catalog(source) and Path(source).is_file():  # a JSON or YAML catalog: tools described, not code
            found.update(described_tools(source))
            continue
        module = _import(source)
        for value in vars(module).values():
            t = getattr(value, "__dagplan_tool__", None)
            if isinstance(t, Tool):
                found[t.name] = t
    return found


def source_record(sources: Iterable[str | os.PathLike]) -> list[dict[str, str]]:
    """How a run's tools were given, to load the same ones on resume: files by absolute path with
    their content hash, modules by name."""
    out = []
    for source in sources:
        text = os.fspath(source)
        path = Path(text)
        if text.endswith(".py") or path.is_file():
            resolved = path.resolve()
            out.append({"file": str(resolved), "sha256": _digest(resolved)})
        else:
            out.append({"module": text})
    return out


def changed_sources(record: Iterable[Mapping[str, str]]) -> list[str]:
    """The recorded tool files whose content is not what the run started with (or that are gone)."""
    return [r["file"] for r in record if "file" in r and _digest(Path(r["file"])) != r.get("sha256")]


def recorded_sources(record: Iterable[Mapping[str, str]]) -> list[str]:
    return [r.get("file") or r.get("module", "") for r in record]


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def load_tool_specs(sources: Iterable[str | os.PathLike]) -> dict[str, ToolSpec]:
    """The catalog of the tools in ``sources`` (files, modules, MCP servers from the lock), by name: what a
    check needs, no tool called."""
    return {name: t.spec for name, t in load_tools(sources).items()}


def _import(source: str | os.PathLike) -> types.ModuleType:
    text = os.fspath(source)
    path = Path(text)
    try:
        if text.endswith(".py") or path.exists():
            return _import_file(path)
        return importlib.import_module(text)
    except RunError:
        raise
    except SystemExit as exc:  # exit() on import: nothing was loaded, which must not pass for success
        raise RunError.make(
            "tools-import",
            f"cannot import tools from {text}: it called sys.exit({exc.code!r}) while being imported",
            hint="a tools module defines tools; move the script part under `if __name__ == '__main__':`",
        ) from None
    except Exception as exc:  # the user's module failed to import: say which and why
        raise RunError.make(
            "tools-import",
            f"cannot import tools from {text}: {type(exc).__name__}: {exc}",
            hint=_TAKES,
        ) from exc


# what a tool source is, said wherever one cannot be loaded
_TAKES = "--tools takes a Python file (tools.py), an importable module name, a catalog of tools (.json) or mcp:NAME"

# one tools file imported at a time: a module is in sys.modules while its code runs, so a second thread (the
# language server's hover while its check loads the same file) took the half-run module, with none of its tools
_IMPORTING = threading.RLock()


def _import_file(path: Path) -> types.ModuleType:
    if not path.is_file():
        raise RunError.make("tools-import", f"no such tools file: {path}", hint="check the --tools path")
    with _IMPORTING:
        return _imported_file(path.resolve())


def _imported_file(resolved: Path) -> types.ModuleType:
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    module_name = f"dagplan_tools_{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:  # not a name Python imports (tools.txt, a folder's file without .py)
        raise RunError.make("tools-import", f"{resolved} is not a Python file (.py) or a catalog of tools "
                                            f"({', '.join(CATALOG_SUFFIXES)}): nothing to import tools from",
                            hint=_TAKES)  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(resolved.parent))  # so a tools file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    finally:
        sys.path.remove(str(resolved.parent))
    return module
