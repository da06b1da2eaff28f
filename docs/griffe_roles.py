"""Griffe extensions for the API reference. :class:`Roles`: the docstrings' Sphinx roles
(``:func:`~.api.run```, ``:class:`RunResult```) read as code (`run`, `RunResult`), and their double backticks
as Markdown's single ones. The docstrings stay as the code's readers (and editors' hovers) know them; the page
shows no raw role. :class:`SyncTwins`: a function ``NAME(first, **kwargs)`` that runs its coroutine twin
``aNAME`` (``run`` and ``arun``) is shown with the twin's parameters, which it takes."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|py:\w+):`~?\.?([^`]+)`")
_DOUBLE = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """``text`` with each role as code of its last name (``:func:`~.api.run``` -> `run`), ``x`` as `x`."""
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    return _DOUBLE.sub(lambda m: f"`{m.group(1)}`", text)


class Roles(griffe.Extension):
    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)


class SyncTwins(griffe.Extension):
    def on_module_members(self, *, mod: Any, **kwargs: Any) -> None:
        for name, member in list(mod.members.items()):
            twin = mod.members.get("a" + name)
            if member.is_alias or twin is None or twin.is_alias or not (member.is_function and twin.is_function):
                continue
            params = list(member.parameters)
            if params and params[-1].kind is griffe.ParameterKind.var_keyword and len(params) <= 2:
                member.parameters = griffe.Parameters(*twin.parameters)
