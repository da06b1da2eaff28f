"""The JSON Schema a referenced value follows, as far as the plan says: one rule for the checks
(:mod:`.validate`: unknown inputs, known kinds; :mod:`.validate_tools`: argument types) and for the
bounds (:mod:`.compose`: a fan-out's ``maxItems``; the cost estimate).

An input's schema is its entry in the plan's ``inputs``; the state's is the plan's ``state``; a fan-out
item's is the ``items`` of the list it goes over. :func:`descend` follows a path down ``properties`` and
``items``: ``None`` when the schema does not say, :data:`MISSING` when it says the key cannot be there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .ir import Plan, Ref

MISSING = object()  # the schema says this key is not there (``additionalProperties: false``, an unknown input)


def input_schema(inputs: Mapping, path: tuple) -> Any:
    """The JSON Schema of ``path`` under the inputs' properties; None when unknown; MISSING when absent."""
    if not path:
        return {"type": "object"}
    if path[0] not in inputs:
        return MISSING
    return descend(inputs[path[0]], path[1:])


def descend(schema: Any, path: tuple) -> Any:
    """The schema of ``path`` inside ``schema`` (properties, items); None when unknown; MISSING when absent."""
    for key in path:
        if not isinstance(schema, Mapping):
            return None
        if isinstance(key, int):
            schema = schema.get("items")
            continue
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            return None
        if key not in props:
            return None if schema.get("additionalProperties", True) is not False else MISSING
        schema = props[key]
    return schema


def ref_schema(plan: Plan, ref: Ref, item: Any = None) -> Any:
    """The JSON Schema a reference's value follows, as far as the plan says: an input's schema, the state's,
    a fan-out item's (``item``), followed down the path (properties, items); None when unknown."""
    if ref.root == "input":
        schema: Any = plan.inputs.get(str(ref.path[0])) if plan.inputs and ref.path else None
        path = ref.path[1:]
    elif ref.root in ("state", "item"):
        schema, path = (plan.state if ref.root == "state" else item), ref.path
    else:
        return None
    found = descend(schema, path) if schema is not None else None
    return found if isinstance(found, Mapping) else None
