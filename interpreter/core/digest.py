"""The one canonical JSON and its digest: approvals, MCP locks, step fingerprints and memo keys hash with it.

Canonical JSON: keys sorted, compact separators, text as written (``ensure_ascii=False``), encoded as UTF-8 with
``surrogatepass`` (a lone surrogate a tool or a model returned is hashed, never an error). What JSON has no form
for takes one: a mapping its items, a list, tuple or set its items (a set's in canonical order, so the digest
does not depend on the process's hash seed), anything else its ``repr``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(value: Any) -> str:
    """``value`` as canonical JSON text (see the module doc)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_plain)


def digest(value: Any) -> str:
    """The SHA-256 (hex) of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical(value).encode("utf-8", "surrogatepass")).hexdigest()


def _plain(value: Any) -> Any:
    if hasattr(value, "keys"):
        return {k: value[k] for k in value.keys()}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=canonical)
    if isinstance(value, (list, tuple)):
        return list(value)
    return repr(value)
