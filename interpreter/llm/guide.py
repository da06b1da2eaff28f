"""Guiding a small model to the right plan: the request split into the clauses it states in order
(plan-and-solve), and the catalog narrowed to the tools each clause is about (BM25 over the tools' names,
descriptions and argument names, with ``rank_bm25``).

A 135M-parameter model held to the whole catalog's schema writes plans that pass ``check`` and call the
wrong tools: any of 40 names is as good as another to it. Held instead to a schema whose first position
offers the few tools the first clause is about, whose second the tools of the second clause and depends on
the first, and so on, it chooses among a handful and fills in the arguments: the order the request states
is the order of the plan. :func:`positions` is what the planner's schema (:func:`.constrained.catalog_schema`)
is built from; measured in ``benchmarks/bench_planning.py --graph`` (README: "Is the plan right?").
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Mapping

from ...dsl.ir import ToolSpec

# A clause ends where the request says what comes next: ", then", "after", "once", "finally", ";", a new
# sentence. The same words `dagplan plan` counts for its fewer-steps-than-clauses warning.
# (each run of blanks is read from its first blank only, and whole: `(?<!\s)\s++`; from every blank of a run it was
# quadratic in the run: issue 61)
CLAUSES = re.compile(r",?(?<!\s)\s++(?:and\s++)?(?:then|after(?:wards)?|once|finally)\b|;|\.\s++(?=[A-Z])", re.I)
# "... and VERB ...": another thing to do, after the first ("find a restaurant and reserve a table"); "and the
# rate", "and a hotel" join two objects of one thing (an article or a name follows)
_AND_THEN = re.compile(
    r",?(?<!\s)\s++and\s++(?=(?!(?:the|a|an|my|his|her|their|its|our|your|to|of|in|on|for|then)\b)[a-z]+\b)"
)
# "A, B, then C": in a request that states a sequence, a comma before a lowercase word that starts a clause (no
# article or preposition) separates two of its things to do ("Read the commits, format them, then write...")
_LISTED = re.compile(
    r",\s+(?=(?!(?:the|a|an|my|his|her|their|its|our|your|to|of|in|on|for|and|or|but|with|from|at|"
    r"by|as|which|that|who|where|when|if|so|please)\b)[a-z]+\b)"
)
_THEN = re.compile(r"\bthen\b", re.I)
# words by which a clause refers to what the one before it found or made
_BACK = re.compile(r"\b(?:it|them|they|that|those|this|these|one|ones|result|results)\b", re.I)
_WORD = re.compile(r"[A-Za-z]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_STOP = frozenset("a an the to of for in on at by and or it its is are be me my i you your with from this that "
                  "then after once finally first last one do get find give make check about into there what where "
                  "how his her them their our please now some all it's what's want need can".split())  # fmt: skip
# Places a request gives, each whole: a URL; a path (with a slash) or a file name (by its extension); "." (this
# folder). The one rule of what a place is: the values a request gives, what asks for a tool that takes one
# (:func:`_kinds`), what an argument naming a place is offered (constrained.py).
_EXTENSIONS = "md|txt|py|json|ya?ml|csv|log|html|js|ts|toml|cfg|ini|png|jpe?g|gif|wav|mp3|mp4|pdf|docx?|pkl"
_URL = re.compile(r"""\bhttps?://[^\s'"]+""")
_PATH = re.compile(rf"(?:~|\.{{1,2}}|\b[A-Za-z]:)?/[\w.~/-]+|\b[\w.-]+/[\w./-]*|\b[\w-]+\.(?:{_EXTENSIONS})\b")
_HERE = r"(?<=\s)\.(?=\s|$|,)"
# Words of a parameter's name that say it names a place.
PLACE_WORDS = frozenset("url uri link path file filename dir directory folder repository repo location".split())
# A date a request gives, whole: 2022-04-27, 04/27/2022, "May 12, 2022", "March 10th, 2023", "Apr 27", "April 2022".
_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
          r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")  # fmt: skip
DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b"
    rf"|\b{_MONTH}\.?\s?\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s\d{{4}}\b)?|\b{_MONTH}\s\d{{4}}\b"
)
# A number a request gives: 12,000 (its thousands separated), 3.5, 10:30, -3, or one with its unit written on
# (440Hz, 20ft, 3kg: the number alone).
_SIGN = r"(?:(?<![\w.)\]-])-(?=\d))?"  # a minus written on (b=-3, between -5 and 5), not a range's dash (10-20)
_NUMBER = rf"{_SIGN}\b\d{{1,3}}(?:,\d{{3}})+(?!\d)|{_SIGN}\b\d+(?:[.:]\d+)?(?:\b|(?=[A-Za-z]{{1,4}}\b))"
# The values a request gives, each whole: its places, a quoted text, an email, a date, a number or time, a
# capitalised name (not the sentence's first word; "Treaty of Tordesillas" one name), an id (o-1234, cust_42,
# p77), an all-capital code (USD, AAPL).
VALUES = re.compile(
    rf"{_URL.pattern}|{_PATH.pattern}|{_HERE}"
    rf"""|'[^']+'|"[^"]+"|\b[\w.+-]+@[\w-]+\.[\w.]+|{DATE.pattern}|\b\d{{4}}-\d{{4}}\b|{_NUMBER}"""
    r"|(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+(?:\s(?:of\s|de\s|the\s)?[A-Z][a-z]+)*\b|\b[a-z]+[-_]\w+\b"
    r"|\b[A-Za-z]+\d\w*\b|\b[A-Z]{2,5}\b|#[A-Za-z][\w-]*"
)


def is_date(value: str) -> bool:
    """Whether a value the request gives is a date (:data:`DATE`)."""
    return bool(DATE.fullmatch(value))


def is_place(value: str) -> bool:
    """Whether a value the request gives is a place: a URL, a path, a file name, "." or ".."."""
    return value in (".", "..") or bool(_URL.fullmatch(value) or _PATH.fullmatch(value))


def name_words(name: str) -> set[str]:
    """The words of a parameter's name, lower case (``filePath``, ``file_path``: file, path)."""
    return {w.lower() for w in _WORD.findall(_CAMEL.sub(" ", name))}


_TRAILING_AFTER = re.compile(r"^([^,]+?),?(?<!\s)\s++(?:after|once)\s++([^,]+?)[.?!]?$", re.I | re.S)
_LEADING_AFTER = re.compile(r"^\s*(?:after|once)\s+(.+?),\s*(.+)$", re.I | re.S)
PER_CLAUSE = 3  # tools offered for one clause
WHOLE = 5  # tools offered for a clause that shares no word with any tool, or for positions past the clauses


def clauses(task: str, tools: Mapping[str, ToolSpec] | None = None) -> list[str]:
    """The things a request asks for, in the order it states them (one when it states none): "After X, Y"
    is X, then Y. With ``tools``, "and" before a word that names one of their parameters joins two values of
    one thing ("a base of 10 and height of 5", "the date and time"), not two things to do."""
    leading = _LEADING_AFTER.match(task)
    if leading:
        return [*clauses(leading.group(1), tools), *clauses(leading.group(2), tools)]
    trailing = _TRAILING_AFTER.match(task)
    if trailing and not _THEN.search(task) and not _a_while(trailing.group(2), trailing.group(1), tools):
        return [*clauses(trailing.group(2), tools), *clauses(trailing.group(1), tools)]  # "X after Y": Y, then X
    found = [part.strip(" ,.") for part in _split(task, tools) if part and part.strip(" ,.")]
    if len(found) > 1 and _THEN.search(task):  # "A, B, then C": its comma-listed things to do are clauses too
        found = [piece for part in found for piece in _LISTED.split(part)]
    named = _parameter_words(tools) if tools else frozenset()
    joined: list[str] = []
    for part in found:
        before = ""  # the piece before this one, as written (each piece is ranked once, whatever was joined)
        for index, piece in enumerate(_AND_THEN.split(part)):
            piece = piece.strip(" ,")
            if not piece.strip(" ,."):
                continue
            first = _WORD.match(piece)
            if index and joined and first and _singular(first.group(0).lower()) in named:
                joined[-1] = f"{joined[-1]} and {piece}"  # another value of the same thing
            elif index and joined and before and tools and _one_call(before, piece, tools):
                joined[-1] = f"{joined[-1]} and {piece}"  # two things one tool does at once ("the area and ...")
            else:
                joined.append(piece)
            before = piece
    return joined or [task]


_SEQUENCE = re.compile(r"\s*(?:then|after|afterwards|once|finally|next)\b", re.I)


def _split(task: str, tools: Mapping[str, ToolSpec] | None) -> list[str]:
    """The request cut where it says what comes next (:data:`CLAUSES`), but kept whole where the cut says when
    (":func:`_a_while`": "... after 6 seconds") or where a new sentence asks the same tool about the same thing
    ("I have 100 euro. How much is it in USD?"); a sentence that starts with "then" is always a next thing."""
    parts: list[str] = []
    last = 0
    for cut in CLAUSES.finditer(task):
        part, said = task[last : cut.start()], cut.group(0)
        last = cut.end()
        parts.append(part)
        parts.append(said)
    parts.append(task[last:])
    kept = [parts[0]]
    for before, said, part in zip(parts[0::2], parts[1::2], parts[2::2]):  # each compared with the one before it
        timed = re.search(r"\b(?:after|once)\b", said, re.I) is not None
        sentence = said.lstrip(",").strip().startswith(".")
        if (
            before.strip()
            and part.strip()
            and (
                (timed and _a_while(part, before, tools))
                or (sentence and tools and not _SEQUENCE.match(part) and _one_call(before, part, tools, sentence=True))
            )
        ):
            kept[-1] = f"{kept[-1]}{said}{part}"
        else:
            kept.append(part)
    return kept


def _a_while(after: str, before: str, tools: Mapping[str, ToolSpec] | None) -> bool:
    """Whether "BEFORE after AFTER" says when, not what comes first: a time ("after 6 seconds", "after 5 years"),
    or what the same tool takes ("the final velocity ... after accelerating at 2 m/s^2 for 5 s")."""
    return after.lstrip()[:1].isdigit() or bool(tools) and _one_tool(before, after, tools)  # type: ignore[arg-type]


def _one_call(before: str, piece: str, tools: Mapping[str, ToolSpec], sentence: bool = False) -> bool:
    """Whether PIECE asks the call BEFORE makes (:func:`_one_tool`), not another call of it: the two do not each
    give values of their own ("the boiling point and melting point of water at 5000 m": one call; "a flight from
    Rome to Oslo on May 3 and another from Oslo to Bergen on May 9": two), or a new sentence refers back to the
    one before ("I have 100 euro. How much is it in USD?")."""
    if not _one_tool(before, piece, tools):
        return False
    both = VALUES.search(before) is not None and VALUES.search(piece) is not None
    return not both or (sentence and _BACK.search(piece) is not None)


def _one_tool(before: str, piece: str, tools: Mapping[str, ToolSpec]) -> bool:
    """Whether "BEFORE and PIECE" asks one tool for two things, not for two calls: the tool the piece is most
    about is the one the clause before it is ("the boiling point and melting point", "the area and perimeter",
    "based on interest rates and unemployment rates"). Two things to do ask two tools ("find a restaurant and
    reserve a table"); the same tool twice is said with "then" or another sentence, which are not joined."""
    found = rank(piece, tools, 1)
    return bool(found) and found == rank(before, tools, 1)


def _parameter_words(tools: Mapping[str, ToolSpec]) -> frozenset[str]:
    """The words of the catalog's parameter names, singular (``max_height``: max, height)."""
    names = [name for spec in tools.values() for name in ((spec.parameters or {}).get("properties") or {})]
    return frozenset(_singular(word) for name in names for word in name_words(name))


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _tokens(text: str) -> list[str]:
    """Each content word twice: as written, and as its first four letters (so "planner" and "plan",
    "summary" and "summarize", "flights" and "flight" meet; the whole word tells "translate" from
    "transfer")."""
    words = [w.lower() for w in _WORD.findall(_CAMEL.sub(" ", text)) if w.lower() not in _STOP]
    return [form for word in words for form in (word, "~" + word[:4])]


def _document(spec: ToolSpec) -> list[str]:
    params = " ".join((spec.parameters or {}).get("properties", {}))
    name = _tokens(spec.name)
    return name * 3 + _tokens(spec.description or "") + _tokens(params)  # the name weighs most


def _kinds(text: str) -> list[str]:
    """Words for the kinds of value a text gives, matched against the tools' parameter names: a URL asks for a
    tool taking a `url`, a path or a file name for one taking a `path` or a `file` (a request rarely says
    "download" before a link: "describe the picture at https://...")."""
    found = []
    if _URL.search(text):
        found += _tokens("url link")
    elif _PATH.search(text):
        found += _tokens("path file")
    return found


def rank(text: str, tools: Mapping[str, ToolSpec], k: int, kinds: bool = True) -> list[str]:
    """The ``k`` tools most about ``text``, best first: the words they share (BM25) and what they mean (the
    cosine of WordLlama embeddings, :func:`_meanings`), the two rankings fused by their reciprocal ranks
    (RRF, Cormack et al. 2009: no weight to tune). Without WordLlama, the words alone, and none when the text
    shares no word with any tool. ``kinds``: a URL or a path in the text asks for the tools that take one
    (:func:`_kinds`)."""
    from rank_bm25 import BM25Okapi

    names = sorted(tools)
    if not names:
        return []
    index = BM25Okapi([_document(tools[name]) for name in names])
    scores = index.get_scores(_tokens(text) + (_kinds(text) if kinds else []))
    lexical = [i for i in sorted(range(len(names)), key=lambda i: (-scores[i], names[i])) if scores[i] > 0]
    meanings = _meanings(text, [tools[name] for name in names])
    if meanings is None:
        return [names[i] for i in lexical[:k]]
    fused = [0.0] * len(names)
    for ranking in (lexical, sorted(range(len(names)), key=lambda i: (-meanings[i], names[i]))):
        for place, i in enumerate(ranking, 1):
            fused[i] += 1 / (_RRF + place)
    words = {i: place for place, i in enumerate(lexical)}  # a tie goes to the tool the words rank first
    return [names[i] for i in sorted(range(len(names)), key=lambda i: (-fused[i], words.get(i, len(names)),
                                                                       names[i]))[:k]]  # fmt: skip


_RRF = 60  # reciprocal rank fusion's constant, as its authors set it
_EMBEDDER: list = []  # the WordLlama model, loaded once (or False: not installed)
_TOOL_VECTORS: dict[str, object] = {}  # a tool's text -> its embedding


def _meanings(text: str, specs: list[ToolSpec]) -> list[float] | None:
    """The cosine of ``text`` with each tool's name, description and parameter names, by WordLlama (16 MB of
    static token embeddings in its wheel, ``pip install 'dagplan[local]'``; no download, about 2 ms a
    request); None when it is not installed."""
    if not _EMBEDDER:
        _EMBEDDER.append(_load_embedder())
    model = _EMBEDDER[0]
    if model is False:
        return None
    documents = [_meaning_text(spec) for spec in specs]
    missing = [d for d in dict.fromkeys(documents) if d not in _TOOL_VECTORS]
    if missing:
        if len(_TOOL_VECTORS) > 20_000:  # a long-lived server's catalogs come and go
            _TOOL_VECTORS.clear()
        _TOOL_VECTORS.update(zip(missing, model.embed(missing, norm=True)))
    query = model.embed([text], norm=True)[0]
    return [float(query @ _TOOL_VECTORS[d]) for d in documents]  # type: ignore[operator]


def _meaning_text(spec: ToolSpec) -> str:
    params = " ".join(_CAMEL.sub(" ", p).replace("_", " ") for p in (spec.parameters or {}).get("properties", {}))
    return f"{_CAMEL.sub(' ', spec.name).replace('_', ' ')}: {spec.description or ''} ({params})"


def _load_embedder() -> object:
    try:
        import wordllama
        from pathlib import Path

        # the weights and the tokenizer lie in the wheel; the cache folder is pointed at it: nothing is fetched
        return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    except (ImportError, OSError):  # not installed, or a release whose wheel lacks its files: the words alone
        return False


def _takes_place(spec: ToolSpec) -> bool:
    return any(name_words(n) & PLACE_WORDS for n in (spec.parameters or {}).get("properties", {}))


def _fetch_first(task: str, tools: Mapping[str, ToolSpec], k: int) -> list[str]:
    """A one-clause request that gives a place (a URL, a path) its chosen tool cannot take asks for a step that
    takes it first: "describe the picture at https://..." downloads, then describes. The tools that take a
    place, best first (none when the chosen tool takes one itself)."""
    action = rank(task, tools, 1, kinds=False)  # what the words ask for, the place aside
    if not _kinds(task) or not action or _takes_place(tools[action[0]]):
        return []
    takers = {name: spec for name, spec in tools.items() if _takes_place(spec)}
    return rank(task, takers, k)


def positions(task: str, tools: Mapping[str, ToolSpec], max_steps: int = 7, per_clause: int = PER_CLAUSE
              ) -> list[list[str]]:  # fmt: skip
    """Per step position, the tools offered there: the ``per_clause`` each clause (read with the clause before
    it) is most about, in the request's order. A request of one clause gets the tools it is about (one
    position), after a tool that takes the place it gives when its own tool cannot (:func:`_fetch_first`)."""
    parts = clauses(task, tools)[:max_steps]
    whole = rank(task, tools, WHOLE) or sorted(tools)
    if len(parts) < 2:
        fetch = _fetch_first(task, tools, per_clause)
        if not fetch:  # the ``per_clause`` it is most about, as for a clause of many (the catalog when none is)
            # on the reference tasks of one tool and one clause, the first of five offered is right 23 of 24
            # times (everyday) and 13 of 13 (examples), the model's choice among the five 50% and 48% (node F1)
            return [rank(task, tools, per_clause) or whole]
        action = rank(task, tools, per_clause, kinds=False)
        return [fetch, action]
    # a clause that refers back ("then book the first one", "email it") is read with the one before it; its own
    # words count twice, its action (its first content word) once more. Chosen on the reference tasks alone
    # among six variants (action 0-2 times; the clause before always or only when referred to): retrieval
    # node F1 on them 88.8 / 93.2 / 98.2 / 90.4 (everyday, media, pipeline, examples).
    return [
        rank(f"{part} {part} {_action(part)} {parts[i - 1] if i and _BACK.search(part) else ''}", tools, per_clause)
        or whole
        for i, part in enumerate(parts)
    ]


@dataclass(frozen=True)
class Named:
    """What a request says of a tool's arguments: those it names (``mentioned``), and the value it gives right
    after one's name (``bound``: "a base of 10" -> base: 10, "a=2" -> a: 2, "the depth of trees as 5" -> depth)."""

    mentioned: frozenset[str]
    bound: Mapping[str, str]


_NEAR = 4  # words between an argument's name and the value it is given, at most ("depth of trees as 5")


def named_values(request: str, arguments: list[str], values: list[str]) -> Named:
    """Which of ``arguments`` the request names (each content word of the name, or its first five letters, is
    in it), and the value of ``values`` it gives right after the name (the nearest within a few words; none
    where two mentions give two values, or one value is given to two arguments; only values that are no plain
    word: numbers, names, quoted texts, ids).
    A one-letter name counts only as ``a=2``, ``a = 2``, ``a is 2``."""
    mentioned, bound = set(), {}
    spans = [(m.start(), m.end()) for m in re.finditer(r"\w+(?:[.,]\d+)?", request)]
    given = set(request_values(request))
    values = [v for v in values if v in given]
    mentions: dict[str, list[tuple[int, int]]] = {}  # each argument's mentions: (start, end) in the request
    for argument in arguments:
        words = [w for w in name_words(argument) if len(w) > 1 and w not in _STOP]
        places: list[tuple[int, int]] = []
        if len(argument) == 1:
            places = [m.span() for m in re.finditer(rf"(?<![\w.]){re.escape(argument)}\s*(?:=|:|\bis\b)", request)]
        elif words:
            found_each = [[m.span() for m in re.finditer(rf"\b{re.escape(word[:5])}\w*", request, re.I)]
                          for word in words]  # fmt: skip
            if all(found_each):
                places = [place for each in found_each for place in each]
        if places:
            mentions[argument] = places
    for argument, places in mentions.items():
        mentioned.add(argument)
        others = sorted(start for other, spots in mentions.items() if other != argument for start, _ in spots)
        found = set()
        for _, end in places:
            stop = next((start for start in others if start >= end), len(request))  # another argument's name
            value = _value_after(request, end, stop, values, spans)
            if value is not None:
                found.add(value)
        if len(found) == 1:
            bound[argument] = found.pop()
    # one value given to two arguments (one mention naming both: temperature1 and temperature2 in "the final
    # temperature when 20 kg..."): neither
    given_to = Counter(bound.values())
    bound = {a: v for a, v in bound.items() if given_to[v] == 1}
    return Named(frozenset(mentioned), bound)


# Words of an argument's name that say where something comes from, and where it goes.
_FROM_WORDS = frozenset("from source origin departure src sender".split())
_TO_WORDS = frozenset("to destination dest target arrival recipient".split())


def by_role(request: str, arguments: list[str], values: list[str]) -> dict[str, str]:
    """What "from X to Y" gives: the one argument whose name says where something comes from (departure_location,
    source, from_currency) takes the value right after "from", the one whose name says where it goes
    (destination, target, to_lang) the value right after "to" or "into"; only values that are no plain word, no
    date, each found once."""
    given = set(request_values(request))
    starting: dict[str, list[str]] = {}  # the values by their first word: each place looked up, not each value
    for value in values:
        if value in given and not is_date(value):
            starting.setdefault(_head(value), []).append(value)
    after: dict[str, set[str]] = {"from": set(), "to": set()}
    for match in _ROLE.finditer(request):
        for value in starting.get(_head(match.group(2)), ()):
            end = match.start(2) + len(value)
            if request.startswith(value, match.start(2)) and not request[end : end + 1].isalnum():
                after["from" if match.group(1).lower() == "from" else "to"].add(value)
    found: dict[str, str] = {}
    for words, role in ((_FROM_WORDS, "from"), (_TO_WORDS, "to")):
        names = [a for a in arguments if name_words(a) & words]
        if len(names) == 1 and len(after[role]) == 1:
            found[names[0]] = next(iter(after[role]))
    return found


_ROLE = re.compile(r"\b(from|to|into)\s+(?:the\s+)?(\S+)", re.I)


def _head(text: str) -> str:
    """A text's first word, a sentence's punctuation taken off its end ("London." and "London, UK": London;
    ./notes.txt stays whole)."""
    words = text.split(maxsplit=1)
    return words[0].rstrip(".,;:!?") if words else text


def _value_after(request: str, place: int, stop: int, values: list[str], spans: list[tuple[int, int]]) -> str | None:
    """The value of ``values`` that starts first after ``place`` in the request, within :data:`_NEAR` words and
    before ``stop`` (where another argument is named); the longest of those starting there."""
    following = [start for start, _ in spans if start >= place][: _NEAR + 1]
    if not following:
        return None
    limit = min(following[-1] + 1, stop)
    best: tuple[int, int, str] | None = None
    for value in values:
        at = request.find(value, place, limit + len(value))
        if at == -1 or at >= limit or (at and request[at - 1].isalnum()):
            continue
        if best is None or (at, -len(value)) < (best[0], best[1]):
            best = (at, -len(value), value)
    return best[2] if best else None


ABOUT = 0.3  # the least cosine of a request with some tool's meaning for a catalog that shares no word with it


def unrelated(task: str, tools: Mapping[str, ToolSpec]) -> str | None:
    """Why none of ``tools`` is about ``task`` (no tool shares a content word with it, and none is near it in
    meaning: cosine under :data:`ABOUT`), naming the closest; None when one may be, or when meaning cannot be
    told (WordLlama not installed). Measured (benchmarks/bfcl.py's data, 2026-12-06): it says so of 49% of
    BFCL's irrelevance requests, of 0.8% of its simple and multiple ones, of none of our 150 reference tasks."""
    if not tools:
        return None
    words = set(_tokens(task))
    if any(words & set(_document(spec)) for spec in tools.values()):
        return None
    names = sorted(tools)
    meanings = _meanings(task, [tools[name] for name in names])
    if meanings is None or max(meanings) >= ABOUT:
        return None
    closest = names[max(range(len(names)), key=meanings.__getitem__)]
    return f"none of the {len(names)} tool(s) is about this request (the closest, {closest}, shares no word with it)"


def _action(clause: str) -> str:
    """A clause's first content word: what it asks to do ("write", "format", "email")."""
    words = [w for w in _WORD.findall(clause) if w.lower() not in _STOP]
    return words[0] if words else ""


def request_values(task: str, words: bool = False) -> list[str]:
    """The values a request gives, in order, each once (quotes taken off); with ``words``, then its other
    content words too ("football" in "the news about football": a value that is no name)."""
    seen: dict[str, None] = {}
    for found in VALUES.findall(task):
        value = found.strip("'\"")
        if len(value) > 1 and ("/" in value or "://" in value):
            value = value.rstrip(".,;:")  # a sentence's end is not the path's
        if value and value != "I":
            seen.setdefault(value)
    if words:
        taken = " ".join(seen).casefold()
        for word in _WORD.findall(task):
            if len(word) > 2 and word.lower() not in _STOP and word.casefold() not in taken:
                seen.setdefault(word)
    return list(seen)


# A request that asks something: a question mark, or a question's first word.
_QUESTION = re.compile(
    r"\?\s*$|^\s*(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|should|"
    r"will|would|tell me|let me know)\b",
    re.I,
)
SOLVER_ID = "answer"


def asks(task: str) -> bool:
    """Whether the request asks a question, which a plan of tool calls alone does not answer."""
    return bool(_QUESTION.search(task))


def solver_step(task: str, steps: list[Mapping]) -> dict | None:
    """The solver (ReWOO's Solver, plan-and-solve's answer): a model step that answers the question from
    what the steps found, read through their ``#id`` placeholders; ``None`` when the request asks none, the
    last step already composes an answer, or the id is taken."""
    from ...dsl.ir import escape_text

    if not asks(task) or not steps or "llm" in steps[-1] or any(s.get("id") == SOLVER_ID for s in steps):
        return None
    found = "\n".join(
        f"- {escape_text(str(s.get('description') or s.get('tool') or s['id']))}: #{s['id']}.head=1000"
        for s in steps
        if s.get("id")
    )
    return {
        "id": SOLVER_ID,
        "description": "Answer the request from what the steps found",
        "llm": f"Answer the request in one or two sentences, from what the steps found.\n"
        f"Request: {escape_text(task.strip())}\nFound:\n{found}",
        "output": f"$state.{SOLVER_ID}",
    }
