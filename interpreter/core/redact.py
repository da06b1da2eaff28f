"""Secrets, the one rule set: what is redacted from everything that leaves the process (cassettes, a
replay's miss message, the arguments a journal records of a tool call, trace attributes, pages), and how a
credential in a URL is shown.

A value is a secret when:

- it stands under a key that names a credential (``api_key``, ``Authorization``, ``token``, ``password``,
  ``secret``, ``credentials``, ``cookie``...), whatever its type: a string, a number, an object, a list
  (counts such as ``tokens`` and ``max_tokens`` are not credentials);
- it is the value of a name/value pair that names one: ``{"name": "api_key", "value": ...}``, a header
  list ``[["Authorization", "Basic ..."]]``;
- it looks like one: a bearer token, ``sk-``/``ghp_``/``AKIA``/``xox`` keys, the password of a URL
  (``https://user:pw@host``), a credential in a query (``?access_token=...``);
- it is the value of an environment variable named like a credential (``*_API_KEY``, ``*_TOKEN``,
  ``*_SECRET``, ``*_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``...), or a password inside an environment
  variable's URL (``DATABASE_URL``), wherever it appears in a string;
- it matches one of the configured ``redact`` patterns.

Redacted text becomes ``[REDACTED]``. A recorded value with ``[REDACTED]`` inside a longer string matches
any value that has the same text around it (:func:`matches`), so a cassette still replays.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Iterator, Mapping

from .patterns import project_patterns, project_redact, use_patterns  # noqa: F401 - where they are set

REDACTED = "[REDACTED]"
SECRET_KEY = re.compile(
    r"(?i)(api[_-]?key|apikey|authorization|password|passwd|passphrase|secret|token(?!s(?![a-z])|iz)|credential|cookie|"
    r"private[_-]?key|access[_-]?key|session[_-]?id|x-api-key)"
)
SECRET_VALUES = [
    re.compile(r"(?i)\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),  # OpenAI / Anthropic style keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"),  # Slack tokens
]
_URL_PASSWORD = re.compile(r"(?<=://)([^/@:?#\s]*):([^/@?#\s]+)@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:[a-z0-9_.-]*(?:password|passwd|token|secret|api_?key|apikey|signature|sig|credential)"
    r"[a-z0-9_.-]*)=)([^&#\s]+)"
)
_ENV_SECRET = re.compile(r"(?i)(key|token|secret|password|passwd|passphrase|credentials?|auth)$")
_PAIR_NAMES = ("name", "key", "header", "field")


def masked(text: Any) -> str:
    """``text`` with the credentials of every URL in it masked (``postgresql://user:***@host/db``,
    ``?password=***``): what pages, logs, messages and run lists show of a state or a URL. Never fails."""
    shown = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:***@", str(text))
    return _QUERY_SECRET.sub(lambda m: m.group(1) + "***", shown)


def _environment_secrets() -> list[str]:
    found: set[str] = set()
    for name, value in os.environ.items():
        if _ENV_SECRET.search(name) and len(value) >= 8:
            found.add(value)
        for match in _URL_PASSWORD.finditer(value):
            if len(match.group(2)) >= 4:
                found.add(match.group(2))
    return sorted(found, key=len, reverse=True)


class Redactor:
    """The rules above, with the environment read once and the configured ``patterns`` compiled once."""

    def __init__(self, patterns: Iterable[str] = (), also: Iterable[str] = ()):
        self.literal = sorted({*_environment_secrets(), *(s for s in also if len(s) >= 4)}, key=len, reverse=True)
        self.rules = SECRET_VALUES + [re.compile(p) for p in patterns]
        self._any = _either([*self.rules, _URL_PASSWORD, _QUERY_SECRET])

    def __call__(self, value: Any) -> Any:
        return self._clean(value, "")

    def text(self, text: str) -> str:
        """A string with every secret in it redacted (for a message)."""
        for secret in self.literal:
            if secret in text:
                text = text.replace(secret, REDACTED)
        if self._any is not None and self._any.search(text) is None:  # the common case: one scan, nothing to redact
            return text
        text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
        text = _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
        for rule in self.rules:
            text = rule.sub(REDACTED, text)
        return text

    def _clean(self, value: Any, key: str) -> Any:
        if key and SECRET_KEY.search(key) and value not in (None, "", [], {}):
            return REDACTED  # whatever it is: a string, a number, an object
        if isinstance(value, Mapping):
            named = _pair_name(value)
            if named is not None and SECRET_KEY.search(named):
                return {k: (REDACTED if k == "value" else self._clean(v, "")) for k, v in value.items()}
            return {k: self._clean(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            if len(value) == 2 and isinstance(value[0], str) and SECRET_KEY.search(value[0]):
                return [value[0], REDACTED]  # a header pair: ["Authorization", "Basic ..."]
            return [self._clean(v, key) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def _either(rules: list[re.Pattern]) -> re.Pattern | None:
    """One pattern finding what any of ``rules`` finds (None when they cannot be joined)."""
    parts = [f"(?i:{r.pattern[4:]})" if r.pattern.startswith("(?i)") else f"(?:{r.pattern})" for r in rules]
    try:
        return re.compile("|".join(parts))
    except re.error:
        return None


def _pair_name(value: Mapping[str, Any]) -> str | None:
    if "value" not in value:
        return None
    return next((str(value[k]) for k in _PAIR_NAMES if isinstance(value.get(k), str)), None)


_DEFAULT: tuple[tuple, Redactor] | None = None


def secret_inputs(plan_doc: Any) -> set[str]:
    """The inputs a plan passes under a credential's key (``credentials: {password: †input.pw}``): their
    values are secrets wherever they appear (a cassette's ``inputs`` too)."""
    found: set[str] = set()
    stack: list[tuple[Any, bool]] = [(plan_doc, False)]
    while stack:
        item, under = stack.pop()
        if isinstance(item, str) and under:
            found.update(_INPUT_REF.findall(item))
        elif isinstance(item, Mapping):
            stack.extend((v, under or bool(SECRET_KEY.search(str(k)))) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, under) for v in item)
    return found


_INPUT_REF = re.compile(r"(?:\u2020|\$)input\.([A-Za-z_][A-Za-z0-9_]*)")


def redact(value: Any, patterns: Iterable[str] = (), also: Iterable[str] = ()) -> Any:
    """``value`` with every secret replaced by ``[REDACTED]`` (``also``: more literal secrets, such as the
    values of :func:`secret_inputs`). Without ``patterns`` or ``also`` the rules are kept
    between calls (a tool call's arguments are redacted on the hot path), renewed when the environment
    gains or loses a variable or the project's patterns (:func:`project_patterns`) change."""
    global _DEFAULT
    configured = project_redact()  # the patterns of the project whose work this is
    patterns, also = tuple(patterns), tuple(also)
    if patterns or also:
        return Redactor(dict.fromkeys((*configured, *patterns)), also)(value)
    key = (len(os.environ), configured)
    if _DEFAULT is None or _DEFAULT[0] != key:
        _DEFAULT = (key, Redactor(configured))
    return _DEFAULT[1](value)


_HELD = 1 << 20  # characters a masked stream holds back at most while it waits for a line's end
_OVERLAP = 4096  # ...and keeps past a forced cut: a secret of up to this length is masked across it


def redacted_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """A stream of UTF-8 bytes (a step's whole output, read in chunks) with every secret masked, as
    :func:`redact` masks a value: each piece is masked once it ends at a line's end, so a secret that
    straddles two chunks is still masked; a line longer than about a megabyte is cut with a 4 KB overlap."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    held = ""
    for chunk in chunks:
        piece = decoder.decode(chunk)
        held += piece
        cut = piece.rfind("\n") + 1  # looked for in what came, not in all that is held
        if cut:
            cut += len(held) - len(piece)  # whole lines: a secret is never cut (patterns match within a line)
            yield redact(held[:cut]).encode("utf-8")
            held = held[cut:]
        elif len(held) > _HELD:  # one long line: masked whole, its last 4 KB kept to meet the next chunk
            done = redact(held)
            yield done[:-_OVERLAP].encode("utf-8")
            held = done[-_OVERLAP:]
    held += decoder.decode(b"", final=True)
    if held:
        yield redact(held).encode("utf-8")


def matches(recorded: str, actual: str) -> bool:
    """Whether a recorded string with ``[REDACTED]`` parts matches ``actual`` (each part: any text)."""
    if REDACTED not in recorded:
        return recorded == actual
    pattern = ".+?".join(re.escape(part) for part in recorded.split(REDACTED))
    return re.fullmatch(pattern, actual, re.S) is not None
