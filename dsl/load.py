"""Text -> document data: decoding, finding the document in prose, JSON/YAML, limits, positions.

``load_text`` is the first stage of the pipeline. It

1. refuses what is not a plan before parsing it (too large, binary, invalid UTF-8);
2. finds the document: the whole text if it parses as a mapping or a list, else the
   one plausible candidate among markdown code fences and balanced JSON values inside
   prose (two plausible candidates is an ``ambiguous-document`` error, never a guess);
3. parses JSON with the standard library and YAML from a C event stream (libyaml via
   PyYAML when present, else ruamel.yaml; :mod:`.yaml_reader`) into plain data, checking limits as it goes
   (``too-deep``, ``too-many-nodes`` for alias bombs, ``too-large`` strings) and
   refusing duplicate keys (``duplicate-key``; YAML merge keys ``<<`` are plain keys);
4. normalizes dialects into the canonical form (:mod:`.dialects`); a text that holds no JSON or YAML plan
   but ReWOO's ``#E1 = Tool[...]`` lines is read as those (:mod:`.rewoo`).

Scalars follow the YAML 1.2 core schema: ``yes``/``no``/``on``/``off`` stay strings,
timestamps stay strings. Text outside the document is blanked (replaced by spaces,
newlines kept) rather than cut, so every line and column stays that of the original
text. Positions are not computed on the happy path: :class:`SourceMap` builds its
path -> position index the first time a diagnostic needs locating.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from .record import record
from typing import Any, Iterator

from .errors import DEFAULT_LIMITS, Diagnostic, Limits, LoadError, Span
from .source import Positions, SourceMap  # noqa: F401 - SourceMap is part of this module's interface
from .yaml_reader import _full_limits, _read_yaml, _too_deep, _too_many, too_many_digits

_JSON_START = re.compile(r"\s*[\[{]")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")  # a fence's line, at its start: ``` or ~~~, then an info string
_SYNTAX_CODES = ("yaml-syntax", "json-syntax")
_MAX_CANDIDATE_TRIES = 200  # balanced-JSON attempts inside prose; bounds hostile text


@record(frozen=True)
class Document:
    """Loaded text: the data, the dialect it was written in, and where its values are."""

    data: Any
    dialect: str
    source_map: "Positions"
    name: str
    warnings: tuple[Diagnostic, ...] = ()


# --- entry points -----------------------------------------------------------------------

TEST_SUFFIXES = (".test.yaml", ".test.yml", ".test.json")  # plan test files, not plans


def is_test_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a plan test file (``*.test.yaml``) rather than a plan."""
    return os.fspath(path).endswith(TEST_SUFFIXES)


def load_file(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> Document:
    """Read and load a file; I/O problems are ``LoadError`` with code ``io``."""
    name = os.fspath(path)
    return load_text(read_file(name, limits), name, limits)


def read_data(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> dict:
    """A data file (run inputs): one JSON or YAML mapping, read like a plan (regular file, limits,
    UTF-8 with or without a byte-order mark); every problem is a ``LoadError`` with its position."""
    return read_document(path, limits, "input names to values", "write a mapping: {city: Rome}")[0]


def read_json_lines(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> Iterator[tuple[int, Any]]:
    """The one reader of a JSON Lines file (``submit --each``): ``(line number, value)`` for each line that
    is not blank, or ``(line number, LoadError)`` for a line that is no JSON value within the limits.

    The file is read as every input file is (:func:`read_file`: a regular file, within the size limit;
    UTF-8, else ``binary`` for the whole file, naming its line). Lines are separated by ``\n`` only (and
    ``\r\n``): U+2028, U+0085 and the other breaks ``str.splitlines`` knows may stand inside a string."""
    name = os.fspath(path)
    text = _decode(read_file(name, limits), name, limits, by_line=True)
    for number, line in enumerate(text.split("\n"), 1):
        line = line[:-1] if line.endswith("\r") else line
        if line.strip():
            yield number, _json_line(line, Span(name, line=number, col=1), limits)


def _json_line(line: str, span: Span, limits: Limits) -> Any:
    """One line of JSON Lines as its value, or the LoadError saying why it is none (at the line)."""
    try:
        data = json.loads(line, parse_constant=_not_json)
    except RecursionError:
        return _too_deep(span.file, limits, None).relocated(span)
    except _Constant as exc:
        return _constant(line, span.file, exc.args[0]).relocated(span)
    except json.JSONDecodeError as exc:
        return LoadError.make("bad-input", f"not JSON ({exc.msg})", Span(span.file, line=span.line, col=exc.colno),
                              "one JSON value a line")  # fmt: skip
    except ValueError:  # an integer past Python's digit limit
        return _huge_number(line, span.file).relocated(span)
    failure = _limits_failure(data, span.file, limits, line)
    return failure.relocated(span) if failure is not None else data


def read_document(
    path: str | os.PathLike,
    limits: Limits = DEFAULT_LIMITS,
    holds: str = "keys to values",
    example: str = "write a mapping",
    text: str | bytes | None = None,
    lists: bool = False,
) -> tuple[Any, SourceMap]:
    """A JSON or YAML mapping that is not a plan (inputs, a test file) and where its values are written;
    ``text``: its content as an editor holds it (``path`` then only names it); ``lists``: a list is taken too."""
    name = os.fspath(path)
    text = _decode(read_file(name, limits) if text is None else text, name, limits)
    if not text.strip():
        raise LoadError.make("empty-data", f"{name} is empty", Span(name, line=1, col=1), example)
    syntax, data = _parse(text, name, limits)
    if not isinstance(data, dict) and not (lists and isinstance(data, list)):
        raise LoadError.make(
            "bad-data",
            f"{name} holds {type(data).__name__ if data is not None else 'null'}, not a "
            f"{'mapping or list' if lists else 'mapping'} of {holds}",
            Span(name, line=1, col=1),
            example,
        )
    return data, SourceMap(text, name, syntax, text, limits)


def read_file(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """The one way a file is read (plans, sub-plans, input files): regular files only, within the size
    limit. A FIFO, a directory or a device is an ``io`` error (reading one could hang forever)."""
    name = os.fspath(path)
    try:
        info = os.stat(name)
        if not stat.S_ISREG(info.st_mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(info.st_mode)
                else "a FIFO"
                if stat.S_ISFIFO(info.st_mode)
                else ("a device or socket")
            )
            raise LoadError.make(
                "io",
                f"cannot read {name!r}: it is {kind}, not a regular file",
                Span(_printable(name)),
                "give the path of a plan file",
            )
        _check_size(info.st_size, name, limits)  # before reading a byte of it
        with open(name, "rb") as handle:  # read(n) allocates n bytes first: ask for what stat saw, then the rest
            data = handle.read(min(info.st_size, limits.max_bytes) + 1)
            if len(data) > info.st_size:  # it grew since: read on, to the limit (the size check follows)
                data += handle.read(limits.max_bytes + 1 - len(data))
            return data
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise LoadError.make("io", f"cannot read {name!r}: {reason}", Span(_printable(name))) from None
    except ValueError:  # a lone surrogate or a NUL in the path: no file can have that name
        raise LoadError.make(
            "io",
            f"cannot read {name!r}: the path cannot be a file name (it holds {_bad_char(name)})",
            Span(_printable(name)),
        ) from None


def _printable(name: str) -> str:
    return (
        name.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        if not name.isprintable() or (any(0xD800 <= ord(c) <= 0xDFFF for c in name))
        else name
    )


def _bad_char(name: str) -> str:
    for c in name:
        if c == "\x00":
            return "a NUL character"
        if 0xD800 <= ord(c) <= 0xDFFF:
            return f"a lone surrogate U+{ord(c):04X}"
    return "a character the file system cannot encode"


def load_text(text: str | bytes, name: str = "<string>", limits: Limits = DEFAULT_LIMITS) -> Document:
    """Text or bytes -> a canonical :class:`Document`. Raises :class:`LoadError`."""
    from .dialects import normalize

    text = _decode(text, name, limits)
    try:
        syntax, parse_text, data = _find_document(text, name, limits)
        canonical = normalize(data, name)
    except LoadError:
        from . import rewoo

        if not rewoo.holds(text):  # no JSON or YAML plan, and no ReWOO lines either: the reason stands
            raise
        data, written = rewoo.load(text, name, limits)
        return Document(data, "rewoo", written, name)
    source_map = SourceMap(text, name, syntax, parse_text, limits)
    source_map.to_original = canonical.to_original
    return Document(canonical.data, canonical.dialect, source_map, name, canonical.warnings)


# --- bytes -> text ------------------------------------------------------------------------


def _check_size(size: int, name: str, limits: Limits) -> None:
    if size > limits.max_bytes:
        raise LoadError.make(
            "too-large",
            f"{size:,} bytes is over the limit of {limits.max_bytes:,} bytes",
            Span(name),
            "plans are small; raise Limits.max_bytes if this one really is that big",
        )


def _decode(text: str | bytes, name: str, limits: Limits, by_line: bool = False) -> str:
    """``by_line``: a file read line by line (JSON Lines) names the line of a bad byte too."""
    _check_size(len(text), name, limits)  # characters never outnumber bytes: a cheap first bound
    if isinstance(text, bytes):
        raw = text
        line_of = (lambda at: raw.count(b"\n", 0, at) + 1) if by_line else (lambda at: 0)
        if b"\x00" in text:
            at = text.index(b"\x00")
            raise _binary(name, at, "a NUL byte", line_of(at))
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _binary(name, exc.start, f"invalid UTF-8 ({exc.reason})", line_of(exc.start)) from None
    elif "\x00" in text:
        raise _binary(name, text.index("\x00"), "a NUL character")
    return text[1:] if text.startswith("\ufeff") else text


def _binary(name: str, at: int, what: str, line: int = 0) -> LoadError:
    return LoadError.make(
        "binary",
        f"not a text file: {what} at byte {at}",
        Span(name, line=line, col=1 if line else 0),
        "a plan is UTF-8 encoded YAML or JSON text",
    )


# --- finding the document -------------------------------------------------------------------


@record
class _Candidate:
    """A JSON or YAML block found in a model's answer, with what reading it found."""

    start: int
    end: int
    syntax: str = ""
    data: Any = None
    failure: LoadError | None = None
    text: str = ""  # the whole text; what was parsed is text[start:end], positions kept

    @property
    def parse_text(self) -> str:
        """The text with everything outside the candidate blanked (built once, for the chosen one)."""
        if self.start == 0 and self.end == len(self.text):
            return self.text
        return _blank_outside(self.text, self.start, self.end)


def _find_document(text: str, name: str, limits: Limits) -> tuple[str, str, Any]:
    """-> (syntax, text as parsed with prose blanked, data)."""
    whole = _Candidate(0, len(text), text=text)
    _parse_candidate(whole, text, name, limits)
    if whole.failure is None and isinstance(whole.data, (dict, list)):
        return whole.syntax, text, whole.data
    if whole.failure is not None and whole.failure.code not in _SYNTAX_CODES:
        raise whole.failure  # a limit or a duplicate key: the text was a document, a bad one
    fences, inline = _candidates(text, name, limits)
    hard = [c.failure for c in fences + inline if c.failure is not None and c.failure.code not in _SYNTAX_CODES]
    if hard:
        raise hard[0]
    plausible = [c for c in fences + inline if c.failure is None and _plausible(c.data)]
    if len(plausible) == 1:
        best = plausible[0]
        return best.syntax, best.parse_text, best.data
    if len(plausible) > 1:
        raise _ambiguous(text, name, plausible)
    raise _no_document(text, name, whole, fences, inline)


def _plausible(data: Any) -> bool:
    from .dialects import detect

    return detect(data) is not None


def _candidates(text: str, name: str, limits: Limits) -> tuple[list[_Candidate], list[_Candidate]]:
    """Code fences, then balanced JSON values in the prose around them. Each candidate is parsed
    alone, with only the lines before it kept as blank lines, so the work stays linear in the text."""
    fences: list[_Candidate] = []
    for start, end in _fenced(text):
        if len(fences) >= _MAX_CANDIDATE_TRIES:
            break
        cand = _Candidate(start, end, text=text)
        _parse_candidate(cand, _alone(text, cand.start, cand.end), name, limits)
        fences.append(cand)
    taken = [(c.start, c.end) for c in fences]
    return fences, list(_inline_json(text, taken, name, limits))


def _fenced(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each code fence's body: a line opening with ``` or ~~~ (3 or more, then anything), to the
    next line that is that same fence alone (blanks around it). One pass over the lines, each closing line found
    by its fence (a regular expression that searched for the closing line from each opening one was quadratic
    in a text of fences that never close: issue 61)."""
    from bisect import bisect_right

    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    closers: dict[str, list[int]] = {}  # a fence -> the lines that are it alone
    for number, at in enumerate(starts):
        end = starts[number + 1] - 1 if number + 1 < len(starts) else len(text)
        alone = text[at:end].strip(" \t")
        if alone[:3] in ("```", "~~~") and alone.strip(alone[0]) == "":
            closers.setdefault(alone, []).append(number)
    number = 0
    while number < len(starts) - 1:  # an opening line has a line after it
        opened = _FENCE.match(text, starts[number])
        if opened is None:
            number += 1
            continue
        lines = closers.get(opened.group(1), [])
        after = bisect_right(lines, number)
        if after == len(lines):  # never closed: the next line may open one
            number += 1
            continue
        closing = lines[after]
        yield starts[number + 1], starts[closing]
        number = closing + 1


def _alone(text: str, start: int, end: int) -> str:
    """``text[start:end]`` preceded by blank lines and columns: its positions are those of ``text``."""
    line_start = text.rfind("\n", 0, start) + 1
    return "\n" * text.count("\n", 0, line_start) + " " * (start - line_start) + text[start:end]


def _inline_json(text: str, taken: list[tuple[int, int]], name: str, limits: Limits) -> Iterator[_Candidate]:
    """Balanced JSON values in prose: a real JSON parse from each ``{``/``[``, so braces
    in the prose after a value do not matter. Values inside a found one are skipped."""
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_not_json)
    pos, tries = 0, 0
    for match in re.finditer(r"[\[{]", text):
        start = match.start()
        if start < pos or any(a <= start < b for a, b in taken):
            continue
        tries += 1
        if tries > _MAX_CANDIDATE_TRIES:
            return
        try:
            data, end = decoder.raw_decode(text, start)
        except _DuplicateKey:
            cand = _Candidate(start, len(text), text=text)
            try:
                cand.end = json.JSONDecoder(parse_constant=_not_json).raw_decode(text, start)[1]
            except json.JSONDecodeError as exc:  # a truncated answer: the duplicate comes before the cut
                cand.failure = _json_syntax(exc, name)
            except (ValueError, RecursionError, _Constant):
                cand.failure = _json_syntax(json.JSONDecodeError("not readable JSON", text, start), name)
            if cand.failure is None:
                _parse_candidate(cand, _alone(text, start, cand.end), name, limits)
            yield cand  # its failure says where the duplicate (or the cut) is: nothing after it matters
            return
        except _Constant as exc:  # NaN or Infinity: JSON-looking, but no JSON; say where
            cand = _Candidate(start, len(text), text=text)
            cand.failure = _constant(text, name, exc.args[0])
            yield cand
            return
        except (ValueError, RecursionError):  # not JSON from here (a JSON number past 4,300 digits too)
            continue
        if isinstance(data, (dict, list)) and data:
            cand = _Candidate(start, end, "json", data, text=text)
            cand.failure = _limits_failure(data, name, limits, text, start, end)
            pos = end
            yield cand


def _blank_outside(text: str, start: int, end: int) -> str:
    """Spaces for everything outside [start, end), newlines kept: positions stay put."""
    return _blank(text[:start]) + text[start:end] + _blank(text[end:])


_NOT_NEWLINE = re.compile(r"[^\n\r]")


def _blank(part: str) -> str:
    return _NOT_NEWLINE.sub(" ", part)


def _parse_candidate(cand: _Candidate, text: str, name: str, limits: Limits) -> None:
    try:
        cand.syntax, cand.data = _parse(text, name, limits)
    except LoadError as exc:
        cand.failure = exc


def _ambiguous(text: str, name: str, found: list[_Candidate]) -> LoadError:
    where = [_position(text, c.start) for c in found]
    places = ", ".join(f"line {line} col {col}" for line, col in where)
    line, col = where[1]
    return LoadError.make(
        "ambiguous-document",
        f"the text holds {len(found)} plausible plan documents ({places}); which one is meant is not guessed",
        Span(name, line=line, col=col),
        "keep exactly one plan document (one code fence) in the text",
    )


def _no_document(text: str, name: str, whole: _Candidate, fences: list, inline: list) -> LoadError:
    failed = [c.failure for c in fences + inline if c.failure is not None]
    if failed:
        return failed[0]
    if whole.failure is not None:
        return whole.failure
    parsed = [c for c in fences + inline if c.failure is None]
    from .dialects import unknown_dialect

    if parsed:
        line, col = _position(text, parsed[0].start)
        return LoadError(unknown_dialect(Span(name, line=line, col=col)))
    return LoadError(unknown_dialect(Span(name, line=1, col=1), found=type(whole.data).__name__))


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


# --- parsing ----------------------------------------------------------------------------------


def _parse(text: str, name: str, limits: Limits) -> tuple[str, Any]:
    if not _JSON_START.match(text):
        return "yaml", _read_yaml(text, name, limits)
    try:
        data = json.loads(text, parse_constant=_not_json)
        shape = _Shape.of(data, limits.max_depth)
        if shape.depth > limits.max_depth or shape.keys != _key_bound(text):
            json.loads(text, object_pairs_hook=_no_duplicates)  # raises _DuplicateKey
    except _DuplicateKey:
        return "yaml", _read_yaml(text, name, limits)  # the YAML reader says where
    except RecursionError:
        raise _too_deep(name, limits, None) from None
    except _Constant as exc:
        raise _constant(text, name, exc.args[0]) from None
    except json.JSONDecodeError as exc:
        return _json_or_flow_yaml(text, name, limits, exc)
    except ValueError:  # an integer past Python's digit limit (the only other ValueError of json)
        raise _huge_number(text, name) from None
    failure = _limits_failure(data, name, limits, text, shape=shape)
    if failure:
        raise failure
    return "json", data


_KEY_END = '":'
_SPACED_KEY_END = re.compile(r'"[ \t\r\n]+:')


def _key_bound(text: str) -> int:
    """At least the number of object keys in JSON ``text`` (-1 when not cheaply known).

    Every key is a string followed by ``:``; ``":`` inside a string only adds to the count.
    When the parsed objects hold exactly this many keys, no object repeated a key, and the
    (three times slower) duplicate-checking parse can be skipped.
    """
    if _SPACED_KEY_END.search(text):
        return -1
    return text.count(_KEY_END)


def _json_or_flow_yaml(text: str, name: str, limits: Limits, json_error: json.JSONDecodeError) -> tuple[str, Any]:
    """Not JSON: it may still be YAML flow style (``{a: 1}``); if not, the JSON error is the clearer one."""
    try:
        return "yaml", _read_yaml(text, name, limits)
    except LoadError as exc:
        if exc.code != "yaml-syntax":
            raise
        raise _json_syntax(json_error, name) from None


def _huge_number(text: str, name: str) -> LoadError:
    found = re.search(r"\d{%d,}" % (sys.get_int_max_str_digits() + 1), text)
    start = found.start() if found else 0
    line, col = _position(text, start)
    return too_many_digits(name, len(found.group()) if found else 0, Span(name, line=line, col=col))


class _DuplicateKey(Exception):
    pass


class _Constant(Exception):
    """``NaN``, ``Infinity`` or ``-Infinity``: Python's json reads them, JSON has no such values."""


def _not_json(constant: str) -> Any:
    raise _Constant(constant)


def _constant(text: str, name: str, constant: str) -> LoadError:
    found = re.search(rf'(?<![\w"]){re.escape(constant)}(?![\w"])', text)
    line, col = _position(text, found.start() if found else 0)
    return LoadError.make(
        "json-syntax",
        f"{constant} is not a JSON value",
        Span(name, line=line, col=col),
        "JSON has no NaN or Infinity: write a number, a string or null",
    )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _DuplicateKey
    return out


def _json_syntax(exc: json.JSONDecodeError, name: str) -> LoadError:
    hint = "JSON needs double-quoted keys and strings, commas between items and none after the last"
    if "Extra data" in exc.msg:
        hint = "there is text after the JSON value; wrap the plan in one code fence or remove the rest"
    return LoadError.make("json-syntax", exc.msg, Span(name, line=exc.lineno, col=exc.colno), hint)


def _limits_failure(
    data: Any, name: str, limits: Limits, text: str, start: int = 0, end: int | None = None,
    shape: "_Shape | None" = None,
) -> LoadError | None:  # fmt: skip
    """Depth, node count and string length of parsed JSON (the JSON text is ``text[start:end]``).

    When the text shows that no string in it can be too long (:func:`_strings_fit`), only
    containers need visiting (a tenth of the values): the first failure is then the same as
    the full walk's.
    """
    if _strings_fit(text, start, len(text) if end is None else end, limits.max_string):
        shape = shape or _Shape.of(data, limits.max_depth)
        if shape.depth > limits.max_depth:
            return _too_deep(name, limits, None)
        return _too_many(name, limits, None) if shape.nodes > limits.max_nodes else None
    return _full_limits(data, name, limits)


_DELIMITER = re.compile(r'(?<!\\)"')  # a quote that no backslash escapes


def _strings_fit(text: str, start: int, end: int, longest: int) -> bool:
    """Whether no string of the JSON text ``text[start:end]`` can be longer than ``longest`` once read.

    Inside a JSON string a quote is always escaped, so a quote after any character but a backslash
    ends or starts one; when every block of ``longest // 2`` characters holds such a quote, no
    string's text spans more than ``longest`` characters, and reading a string never lengthens it
    (escapes only shorten). A few searches per 4 MB instead of a visit of every value; text that
    does not show it (one long string, quotes all escaped) is walked value by value.
    """
    if end - start <= longest:
        return True
    block = max(1, longest // 2)
    return all(_DELIMITER.search(text, at, min(at + block, end)) for at in range(start, end, block))


@record(frozen=True)
class _Shape:
    """Of parsed JSON: nesting depth (counted up to ``max_depth + 1``), values, and object keys."""

    depth: int
    nodes: int
    keys: int

    @classmethod
    def of(cls, data: Any, max_depth: int) -> "_Shape":
        level = [data] if type(data) is dict or type(data) is list else []
        nodes, keys, depth = 1, 0, 0
        while level and depth <= max_depth:
            depth += 1
            below: list = []
            for container in level:
                size = len(container)
                nodes += size
                if type(container) is dict:
                    keys += size
                    below += [v for v in container.values() if type(v) is dict or type(v) is list]
                else:
                    below += [v for v in container if type(v) is dict or type(v) is list]
            level = below
        return cls(depth, nodes, keys)
