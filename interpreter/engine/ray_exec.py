"""Tool calls as Ray tasks: ``executor = "ray"`` (the configuration, a run) or ``@dagplan.tool(executor="ray")``.

Only the call moves: the run's scheduling, attempt policy, timeouts and journal stay in the process
that runs the plan, so a tool on Ray behaves exactly as a local one. Each call is one Ray task with
the tool's ``resources`` (``num_gpus``, custom resources) and no retries of Ray's own (the step's
retry policy owns retrying); its error comes back as the tool's own exception (not Ray's wrapper),
so retry rules, ``catch:`` and the error object see the same type; a step timeout cancels the task.

``ray.init()`` runs once per process, with the ``[ray]`` table of the configuration (``address`` of a
cluster; none: a local Ray). A tools file loaded from a path is shipped by value (its module is not
importable on Ray's workers); a module by name must be importable there.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, Mapping

from ...dsl.errors import RunError

_lock = threading.Lock()
_remotes: dict[tuple, Any] = {}


def ray_module(settings: Mapping[str, Any]) -> Any:
    """The ``ray`` module, initialised once (with ``settings`` as ``ray.init()`` arguments)."""
    try:
        import ray
    except ImportError:
        raise RunError.make("no-ray", "a tool runs on Ray but ray is not installed",
                            hint="pip install 'dagplan[ray]'") from None  # fmt: skip
    with _lock:
        if not ray.is_initialized():
            options = {"include_dashboard": False, "log_to_driver": False, **dict(settings)}
            ray.init(ignore_reinit_error=True, **options)
    return ray


def _call_sync(fn: Any, kwargs: dict) -> Any:
    return fn(**kwargs)


def _call_async(fn: Any, kwargs: dict) -> Any:
    return asyncio.run(fn(**kwargs))


def _remote(ray: Any, tool: Any) -> Any:
    key = (id(tool.fn), tuple(sorted(tool.resources.items())))
    found = _remotes.get(key)
    if found is None:
        module = sys.modules.get(getattr(tool.fn, "__module__", ""), None)
        if module is not None and module.__name__.startswith("dagplan_tools_"):  # loaded from a file path
            from ray import cloudpickle

            cloudpickle.register_pickle_by_value(module)
        body = _call_async if tool.is_async else _call_sync
        options = {"num_cpus": 1, **dict(tool.resources), "max_retries": 0, "retry_exceptions": False}
        found = _remotes[key] = ray.remote(**options)(body)
    return found


async def call_on_ray(tool: Any, args: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    """One call of ``tool`` as a Ray task; its result, or the tool's own exception."""
    ray = ray_module(settings)
    ref = _remote(ray, tool).remote(tool.fn, dict(args))
    try:
        return await ref
    except asyncio.CancelledError:
        ray.cancel(ref, force=True)  # a step timeout (or the run stopping): the task stops too
        raise
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if isinstance(exc.cause, BaseException) else None
        if cause is None:
            raise
        raise cause from None
