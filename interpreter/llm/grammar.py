"""JSON Schemas kept within what grammar engines accept (llama.cpp's JSON-Schema-to-grammar, vLLM's guided
decoding, the providers' structured outputs): the keywords they all take, nothing else. A leaf module: the
catalog schemas (:mod:`.constrained`) and the local model's tool choice (:mod:`.local`) both use it.
"""

from __future__ import annotations

from typing import Any, Mapping

_KEPT = ("type", "enum", "const", "items", "properties", "required", "minimum", "maximum", "minItems", "maxItems")


def plain(schema: Any) -> dict[str, Any]:
    """A tool's argument schema kept to what grammar engines take (no titles, formats, $refs)."""
    if not isinstance(schema, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key in _KEPT:
        if key not in schema:
            continue
        value = schema[key]
        if key == "items":
            value = plain(value)
        elif key == "properties":
            value = {k: plain(v) for k, v in value.items()} if isinstance(value, Mapping) else {}
        elif isinstance(value, (list, tuple)):
            value = list(value)
        out[key] = value
    if "anyOf" in schema and isinstance(schema["anyOf"], (list, tuple)):
        out["anyOf"] = [plain(s) for s in schema["anyOf"]]
    return out
