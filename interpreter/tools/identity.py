"""A tool's code identity: the one rule for "is this the code that was approved, reused, recorded".

A function's own source says little of what it does: it calls helpers, reads module constants, takes
defaults and closure values, and may be a ``functools.partial`` of another function. The identity of a
tool's code is a hash of:

- the file of the module that defines the function (whatever it is: a tool file, a module given by name,
  an installed package), and of every module of the user's code that file uses, followed through their
  own uses (files outside dagplan, the standard library and the installed packages: the rule of
  :mod:`..core.trace`), whether imported as a module (``import helpers``) or by name (``from helpers
  import act``, ``from rates import FACTOR``: a number binds its module too), at the top of the file or
  inside a function's body, or by ``importlib.import_module("literal")``: each file's import statements are
  read from its source (:func:`_imports`), so a module the tool imports only when it runs counts as well;
- the function's qualified name, its defaults, and what its closure holds (a value as its ``repr`` when
  that says nothing of where it sits in memory; a function by its own identity);
- for a ``functools.partial``, the function's identity and the arguments it binds;
- for a callable that says what it is (``identity``: an MCP tool's lock entry), that.

Approvals (``preview --approve``, ``run --approved``, ``resume`` of an approved run), ``--reuse``
fingerprints and the journal all ask :func:`code_identity`; nothing else decides it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import sys
from types import ModuleType
from typing import Any

_MAX_REPR = 64 * 1024
_MAX_DEPTH = 8  # closures of closures of ...: deep enough for any decorator stack


def code_identity(fn: Any) -> str:
    """The hash of the code ``fn`` runs (see the module doc), 16 hex digits."""
    digest = hashlib.sha256()
    _callable(fn, digest, set(), 0)
    return digest.hexdigest()[:16]


def _callable(fn: Any, digest: Any, files: set[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    said = getattr(fn, "identity", None)
    if isinstance(said, str) and not inspect.isroutine(fn):  # an MCP call: its lock entry
        digest.update(b"said:" + said.encode("utf-8", "surrogatepass"))
        return
    if isinstance(fn, functools.partial):
        digest.update(b"partial:" + _value(fn.args).encode() + _value(fn.keywords).encode())
        _callable(fn.func, digest, files, depth + 1)
        return
    fn = inspect.unwrap(fn) if callable(fn) else fn
    fn = getattr(fn, "__func__", fn)  # a bound method: its function
    code = getattr(fn, "__code__", None)
    if code is None:  # a callable object: its class's __call__
        call = type(fn).__call__ if callable(fn) else None
        if call is not None and getattr(call, "__code__", None) is not None:
            digest.update(b"object:" + _value(vars(fn) if hasattr(fn, "__dict__") else None).encode())
            _callable(call, digest, files, depth + 1)
        else:
            digest.update(repr(type(fn)).encode())
        return
    digest.update(f"fn:{getattr(fn, '__qualname__', '')}".encode())
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    _module_files(module, code.co_filename, digest, files, always=True)
    digest.update(_value(getattr(fn, "__defaults__", None)).encode())
    digest.update(_value(getattr(fn, "__kwdefaults__", None)).encode())
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            held = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if inspect.isroutine(held) or isinstance(held, functools.partial):
            _callable(held, digest, files, depth + 1)
        else:
            digest.update(b"cell:" + _value(held).encode())


def _module_files(module: ModuleType | None, filename: str, digest: Any, files: set[str], always: bool = False) -> None:
    """The module's file and, when it is the user's, the files of the user's modules it uses."""
    path = getattr(module, "__file__", None) or filename
    if not path or path.startswith("<"):
        return
    path = os.path.realpath(path)
    if path in files:
        return
    from ..core.trace import is_users_file

    users = is_users_file(path)
    if not users and not always:
        return
    files.add(path)
    content = _file_bytes(path)
    digest.update(b"file:" + (hashlib.sha256(content).hexdigest() if content is not None else "missing").encode())
    if not users:
        return
    package = getattr(module, "__package__", None) or ""
    for name in _imports(content, package) if content is not None else ():
        found = _module_file(name)
        if found is not None:
            _module_files(sys.modules.get(name), found, digest, files)
    if module is None:
        return
    for value in list(vars(module).values()):
        used = value if isinstance(value, ModuleType) else sys.modules.get(getattr(value, "__module__", None) or "")
        path = getattr(used, "__file__", None)
        if used is not None and used is not module and isinstance(path, str):
            _module_files(used, path, digest, files)


_IMPORTS: dict[bytes, tuple[str, ...]] = {}  # a file's content hash -> the modules its source imports


def _imports(content: bytes, package: str) -> tuple[str, ...]:
    """The modules a file's source imports, wherever the statement is (a function's body too): ``import a.b``
    (``a`` and ``a.b``), ``from a import b`` (``a``, and ``a.b`` in case ``b`` is a module), relative ones
    resolved against ``package``, and ``importlib.import_module("a")`` / ``__import__("a")`` with a literal."""
    key = hashlib.sha256(content + b"\0" + package.encode()).digest()
    found = _IMPORTS.get(key)
    if found is not None:
        return found
    import ast

    names: list[str] = []
    try:
        tree = ast.parse(content)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                names += [".".join(parts[: i + 1]) for i in range(len(parts))]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            if base is None:
                continue
            if base:
                names.append(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.append(node.args[0].value)
    found = _IMPORTS[key] = tuple(dict.fromkeys(n for n in names if n))
    return found


def _absolute(module: str, level: int, package: str) -> str | None:
    if not level:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _module_file(name: str) -> str | None:
    """Where the module ``name`` is: its loaded module's file, else where the import system would find it
    (without running it); None for a name that is no module (an attribute ``from a import b`` imported)."""
    module = sys.modules.get(name)
    if module is not None:
        path = getattr(module, "__file__", None)
        return path if isinstance(path, str) else None
    import importlib.util

    parent = name.rpartition(".")[0]
    if parent and parent not in sys.modules:
        return None  # a submodule of a package nobody imported: finding it would run the package
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    return origin if isinstance(origin, str) and origin.endswith(".py") else None


def _file_bytes(path: str) -> bytes | None:
    """The file's content, read each time: a cache keyed by modification time would miss an edit of the
    same size within the file system's clock resolution, and an approval must not (tool files are small)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _value(value: Any) -> str:
    """A value as it counts in an identity: its ``repr``, unless that names a place in memory (then its type)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails says nothing
        return type(value).__qualname__
    if " at 0x" in text:  # where it sits in memory differs every run: its type is what is known
        return type(value).__qualname__
    if len(text) > _MAX_REPR:
        return "long:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text
