"""Project configuration: ``dagplan.toml``, or ``[tool.dagplan]`` in ``pyproject.toml``.

Looked up from the working directory upwards; the first file that has a dagplan
section wins. Every key is optional::

    model = "openai/gpt-4o-mini"     # default model of LLM steps and the planner ($DAGPLAN_MODEL wins over it)
    tools = ["tools.py"]             # tool files or modules, like --tools
    max_concurrency = 16
    step_max_iterations = 5          # tool-calling loop bound inside an LLM step
    max_cost = 0.50                  # USD per run; max_tokens likewise
    max_steps = 1000                 # `check` fails plans that could execute more
    max_items = 100                  # default cap of for_each steps without max_items
    state_dir = ".dagplan"            # or state = "postgresql://user@host/db": runs in PostgreSQL

    [resume]
    default = "retry_pending"        # retry_pending | discard
    side_effect = "ask"              # interrupted side-effecting steps: ask | adopt | retry
    pure = "retry"                   # interrupted pure / idempotent steps: retry | adopt
    idempotent = "retry"
    undeclared = "retry"             # steps that declare no purity: at-least-once

    redact = ["acct_[0-9]+"]         # more secrets kept out of cassettes (regular expressions)

    executor = "ray"                 # tool calls as Ray tasks (per tool: @dagplan.tool(executor="ray"))
    [ray]                            # ray.init() arguments; none: a local Ray
    address = "ray://head:10001"

    [pool]                           # dagplan worker: runs at once across all workers
    max_running = 50
    [pool.per_plan]                  # ... and of one plan (its name as submitted)
    "nightly.yaml" = 2

    [llm]                            # passed to litellm as is (api_base, api_key env names, ...)
    api_base = "http://127.0.0.1:8000/v1"

    [mcp.git]                        # an MCP server's tools, named git.TOOL in plans (stdio)
    command = "mcp-server-git"
    args = ["--repository", "."]
    [mcp.search]                     # ... or streamable HTTP; ${VAR} is read from the environment
    url = "https://example.com/mcp"
    headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }
"""

from __future__ import annotations

import os
import re
from stat import S_ISREG
from ...dsl.record import record, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ...dsl.errors import RunError, Span, did_you_mean, error

RESUME_DEFAULTS = {
    "default": "retry_pending",
    "side_effect": "ask",
    "pure": "retry",
    "idempotent": "retry",
    "undeclared": "retry",
}
_CHOICES = {
    "default": ("retry_pending", "discard"),
    "side_effect": ("ask", "adopt", "retry"),
    "pure": ("retry", "adopt"),
    "idempotent": ("retry", "adopt"),
    "undeclared": ("retry", "adopt", "ask"),
}


@record(frozen=True)
class Config:
    """The project configuration: dagplan.toml, or [tool.dagplan] in pyproject.toml."""

    path: Path | None = None
    model: str | None = None
    tools: tuple[str, ...] = ()
    max_concurrency: int = 16
    step_max_iterations: int = 5
    max_cost: float | None = None
    max_tokens: int | None = None
    max_steps: int | None = None
    max_items: int | None = None  # default cap of for_each steps that give no max_items
    state_dir: str | None = None
    resume: Mapping[str, str] = field(default_factory=lambda: dict(RESUME_DEFAULTS))
    llm: Mapping[str, Any] = field(default_factory=dict)
    plan_first: Mapping[str, Any] = field(default_factory=dict)
    redact: tuple[str, ...] = ()  # regular expressions of secrets kept out of cassettes
    executor: str | None = None  # "ray": tool calls run as Ray tasks
    ray: Mapping[str, Any] = field(default_factory=dict)  # ray.init() arguments ([ray] address = "...")
    pool: Mapping[str, Any] = field(default_factory=dict)  # workers' limits: max_running, [pool.per_plan]
    mcp: Mapping[str, Any] = field(default_factory=dict)  # MCP servers by name: their tables, checked
    notify: Mapping[str, Any] = field(default_factory=dict)  # gates' notifiers by name: their tables, checked
    schedule: Mapping[str, Any] = field(default_factory=dict)  # runs the workers submit on a cron line, by name
    structured_output: str = "auto"  # how a model's answer is held to a schema (llm/constrained.py)

    @property
    def default_model(self) -> str | None:
        return chosen_model(configured=self.model)


# the one order in which the model of an LLM step is found (README: "LLM steps")
MODEL_ORDER = "set `model:` on the step, --model, $DAGPLAN_MODEL, or `model` in dagplan.toml"


def chosen_model(step: str | None = None, given: str | None = None, configured: str | None = None) -> str | None:
    """The model an LLM step calls, the first found: the step's ``model:``, the one given (``--model``,
    ``model=``), ``$DAGPLAN_MODEL``, the configuration's ``model``."""
    return step or given or os.environ.get("DAGPLAN_MODEL") or configured


def load_config(start: str | os.PathLike | None = None) -> Config:
    """The configuration that applies in ``start`` (default: the working directory)."""
    return _found(os.path.abspath(start or os.getcwd()))


def _found(folder: str) -> Config:
    """The configuration of the project ``folder`` is in: the nearest ``dagplan.toml`` (or ``pyproject.toml``
    with a ``[tool.dagplan]`` table) at or above it, looking no further up than the project's root, the
    nearest folder with a ``.git`` or a ``pyproject.toml``: a stray file above a project (a temporary
    folder's parent, a home folder) never configures it."""
    while True:
        for name, section in (("dagplan.toml", None), ("pyproject.toml", ("tool", "dagplan"))):
            path = folder + os.sep + name if folder != os.sep else os.sep + name
            table = _read(path, section)
            if table is not None:
                return _build(Path(path), table)
        if _is_root(folder):
            return Config()
        parent = os.path.dirname(folder)
        if parent == folder:
            return Config()
        folder = parent


def project_root(start: str | os.PathLike | None = None) -> Path:
    """The project's root folder: where its ``dagplan.toml`` is, else the nearest folder with a ``.git`` or a
    ``pyproject.toml``, else ``start`` itself."""
    folder = os.path.abspath(start or os.getcwd())
    here = folder
    while True:
        if os.path.isfile(os.path.join(here, "dagplan.toml")) or _is_root(here):
            return Path(here)
        parent = os.path.dirname(here)
        if parent == here:
            return Path(folder)
        here = parent


def state_of(given: Any, config: Config, root: str | os.PathLike | None = None) -> Any:
    """Where a project's runs are kept, the one rule of every door: the state given (``--state``), else
    ``$DAGPLAN_STATE``, else ``$DAGPLAN_STATE_DIR``, else the configuration's ``state`` (relative to its
    file), else the ``.dagplan`` folder at the project's root (:func:`project_root`), wherever one stands
    in the project."""
    from .state import chosen_state

    found = chosen_state(given, config.state_dir)
    if found is not None:
        return found
    home = Path(root) if root is not None else project_root(config.path.parent if config.path else None)
    return str(home / ".dagplan")


def _is_root(folder: str) -> bool:
    return os.path.exists(os.path.join(folder, ".git")) or os.path.isfile(os.path.join(folder, "pyproject.toml"))


_PARSED: dict[str, tuple[tuple[int, int], dict]] = {}  # path -> (mtime_ns, size), its TOML


def _read(path: str, section: tuple[str, ...] | None) -> dict | None:
    """The file's dagplan table, or None (no such file, or no dagplan section).

    A file is parsed again only when it changed: every run reads the configuration, and
    parsing a large pyproject.toml costs about 0.5 ms (measured: 450 us -> 40 us a run)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if not S_ISREG(stat.st_mode):
        return None
    import tomllib  # only when there is a file to read

    try:
        found = _PARSED.get(path)
        if found is not None and found[0] == (stat.st_mtime_ns, stat.st_size):
            data = found[1]
        else:
            with open(path, encoding="utf-8") as f:
                data = tomllib.loads(f.read())
            _PARSED[path] = ((stat.st_mtime_ns, stat.st_size), data)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RunError.make("config", f"cannot read {path}: {exc}", hint="fix the TOML syntax") from None
    except RecursionError:  # tomllib recurses per nesting level: a hostile file nests thousands deep
        raise RunError.make("config", f"{path} nests too deep to be a configuration", Span(str(path), line=1, col=1),
                            hint="a configuration needs two levels of tables") from None  # fmt: skip
    for key in section or ():
        inner = data.get(key)
        if not isinstance(inner, dict):
            return None
        data = inner
    return data


# What each key holds: (a test of the value, the words for it). One table: the README's list, the
# errors and did-you-mean all come from it.
def _positive_int(v: Any) -> bool:
    return type(v) is int and v >= 1


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def _amount(v: Any) -> bool:
    return type(v) in (int, float) and v >= 0


def _text(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def _names(v: Any) -> bool:
    return isinstance(v, list) and all(_text(x) for x in v)


def _state(v: Any) -> bool:
    from .state import state_problem

    return _text(v) and state_problem(v) is None


def _table(v: Any) -> bool:
    return isinstance(v, dict)


def _pool(value: Any) -> bool:
    return isinstance(value, dict)  # what is inside: pool_problems, each at its own line


def pool_problems(value: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What is wrong inside ``[pool]``: (the dotted key, a sentence) each."""
    out = []
    for key in value:
        if key not in ("max_running", "per_plan"):
            hint = did_you_mean(key, ("max_running", "per_plan"), "known keys: max_running, per_plan")
            out.append((f"pool.{key}", f"unknown key pool.{key}" + (f" ({hint})" if hint else "")))
    if "max_running" in value and not _positive_int(value["max_running"]):
        out.append(
            ("pool.max_running", f"pool.max_running must be an integer of at least 1, not {value['max_running']!r}")
        )
    per_plan = value.get("per_plan", {})
    if not isinstance(per_plan, dict):
        out.append(("pool.per_plan", "pool.per_plan must be a table: [pool.per_plan] with a plan's name = its limit"))
    else:
        out += [(f"pool.per_plan.{name}", f"pool.per_plan.{name} must be an integer of at least 1, not {limit!r}")
                for name, limit in per_plan.items() if not _positive_int(limit)]  # fmt: skip
    return out


def _patterns(value: Any) -> bool:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return False
    try:
        for pattern in value:
            re.compile(pattern)
    except re.error:
        return False
    return True


SERVER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")  # an MCP server's name: its tools are NAME.TOOL
SERVER_KEYS = {
    "command": "the program that starts the server over stdio",
    "args": "a list of its arguments",
    "env": "a table of environment variables for it",
    "cwd": "its working directory",
    "url": "the server's streamable HTTP endpoint (http:// or https://)",
    "headers": 'a table of HTTP headers, e.g. Authorization = "Bearer ${TOKEN}"',
    "timeout": "seconds a call may take",
}


def server_problems(name: str, table: Any) -> list[str]:
    """What is wrong with one declaration (each a sentence naming the key), or nothing."""
    where = f"mcp.{name}"
    if not SERVER_NAME.match(name):
        return [f"{where}: a server's name is a word (letters, digits, _ and -): its tools are named {name}.TOOL"]
    if not isinstance(table, dict):
        return [f"{where} must be a table: [mcp.{name}] with command = ... or url = ..."]
    out = _unknown_keys(where, table, SERVER_KEYS)
    if ("command" in table) == ("url" in table):
        out.append(f"{where}: give either command (a server started over stdio) or url (streamable HTTP)")
    for key in ("command", "cwd", "url"):
        if key in table and not (isinstance(table[key], str) and table[key]):
            out.append(f"{where}.{key} must be {SERVER_KEYS[key]}, not {table[key]!r}")
    if "url" in table and isinstance(table["url"], str) and not table["url"].startswith(("http://", "https://")):
        out.append(f"{where}.url must start with http:// or https://, not {table['url']!r}")
    if "args" in table and not (isinstance(table["args"], list) and all(isinstance(a, str) for a in table["args"])):
        out.append(f"{where}.args must be a list of strings")
    for key in ("env", "headers"):
        value = table.get(key, {})
        if not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            out.append(f"{where}.{key} must be a table of strings")
    timeout = table.get("timeout", 1)
    if type(timeout) not in (int, float) or timeout <= 0:
        out.append(f"{where}.timeout must be a number of seconds above 0")
    return out


# ${VAR}, ${VAR:-default} (a default holds no `$`, `{` or `}`), $${ for a literal ${; any other ${ is an error
_VARIABLE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^${}]*))?\}|\$\{")


def expand_env(where: str, value: str) -> str:
    """``${VAR}`` replaced by the environment's value (``${VAR:-default}``: the default when it is unset or
    empty; ``$${`` a literal ``${``); a variable that is not set and has no default, or a ``${`` of any other
    form (``${A:?msg}``, ``${A:-${B}}``, ``${ A }``), is a ``config`` error naming ``where``."""

    def one(found: re.Match) -> str:
        name, default = found.group(1), found.group(2)
        if found.group(0) == "$${":
            return "${"
        if name is None:
            rest = value[found.start() : found.start() + 24]
            raise RunError.make(
                "config",
                f"{where}: {rest!r}... is not a form dagplan reads: only ${{VAR}} and ${{VAR:-default}} (a default "
                "without $, { or })",
                hint="write ${VAR} or ${VAR:-default}; $${ stands for a literal ${",
            )
        if default is not None:
            return os.environ.get(name) or default
        if name not in os.environ:
            raise RunError.make(
                "config",
                f"{where} uses ${{{name}}}, which is not set in the environment",
                hint=f"export {name}=... before running (secrets stay out of the configuration file)",
            )
        return os.environ[name]

    return _VARIABLE.sub(one, value)


NOTIFIER_KEYS = {"webhook": 'a URL from the environment, "${SLACK_WEBHOOK_URL}"',
                 "command": 'a command and its arguments, ["./notify.sh"]',
                 "retries": "a number of attempts, at least 1", "timeout": "seconds per attempt, above 0"}  # fmt: skip


def _unknown_keys(where: str, table: Mapping[str, Any], known: Mapping[str, str]) -> list[str]:
    """A sub-table's keys it does not know, each with did-you-mean (an MCP server's, a notifier's)."""
    out = []
    for key in table:
        if key not in known:
            hint = did_you_mean(key, known, f"known keys: {', '.join(known)}")
            out.append(f"{where}: unknown key {key!r}" + (f" ({hint})" if hint else ""))
    return out


def notifier_problems(name: str, table: Any) -> list[str]:
    """What is wrong with one ``[notify.NAME]`` (each a sentence naming the key), or nothing. A webhook's URL
    is a secret: it is written ``${VAR}`` and read from the environment when a gate waits."""
    where = f"notify.{name}"
    if not isinstance(table, dict):
        return [f"{where} must be a table: [notify.{name}] with webhook = ... or command = [...]"]
    out = _unknown_keys(where, table, NOTIFIER_KEYS)
    if ("webhook" in table) == ("command" in table):
        out.append(f"{where}: give either webhook (a URL from the environment) or command")
    hook = table.get("webhook")
    if hook is not None and not (isinstance(hook, str) and _VARIABLE.fullmatch(hook.strip())):
        out.append(f"{where}.webhook must be {NOTIFIER_KEYS['webhook']} (a URL written in the file is a secret in it)")
    command = table.get("command")
    if command is not None and not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
        out.append(f"{where}.command must be {NOTIFIER_KEYS['command']}")
    retries, timeout = table.get("retries", 3), table.get("timeout", 10)
    if type(retries) is not int or retries < 1:
        out.append(f"{where}.retries must be {NOTIFIER_KEYS['retries']}")
    if type(timeout) not in (int, float) or timeout <= 0:
        out.append(f"{where}.timeout must be {NOTIFIER_KEYS['timeout']}")
    return out


SCHEDULE_KEYS = {"plan": 'the plan file, relative to this file, "plans/report.yaml"',
                 "cron": 'five fields, minute hour day month weekday: "0 9 * * 1-5"',
                 "inputs": "a table of the run's inputs",
                 "timezone": 'an IANA zone, "Europe/Paris" (default UTC)'}  # fmt: skip


def schedule_problems(name: str, table: Any) -> list[tuple[str, str]]:
    """What is wrong with one ``[schedule.NAME]``: (the dotted key, a sentence naming it) each."""
    where = f"schedule.{name}"
    if not SERVER_NAME.match(name):
        return [(where, f"{where}: a schedule's name is a word (letters, digits, _ and -)")]
    if not isinstance(table, dict):
        return [(where, f'{where} must be a table: [schedule.{name}] with plan = "..." and cron = "..."')]
    out = [(f"{where}.{key}", message) for key in table for message in _unknown_keys(where, {key: 0}, SCHEDULE_KEYS)]
    for key in ("plan", "cron"):
        if not (isinstance(table.get(key), str) and table[key].strip()):
            out.append((f"{where}.{key}", f"{where}.{key} must be {SCHEDULE_KEYS[key]}"))
    if isinstance(table.get("cron"), str) and table["cron"].strip():
        problem = cron_problem(table["cron"])
        if problem:
            out.append((f"{where}.cron", f"{where}.cron = {table['cron']!r}: {problem} ({SCHEDULE_KEYS['cron']})"))
    if "inputs" in table and not isinstance(table["inputs"], dict):
        out.append((f"{where}.inputs", f"{where}.inputs must be {SCHEDULE_KEYS['inputs']}"))
    zone = table.get("timezone", "UTC")
    if not (isinstance(zone, str) and zone_problem(zone) is None):
        out.append((f"{where}.timezone", f"{where}.timezone must be {SCHEDULE_KEYS['timezone']}, not {zone!r}"))
    return out


def cron_problem(line: str) -> str | None:
    """Why a cron line is not one (cronsim reads it: minute hour day month weekday, with L, W and #), else None."""
    from datetime import datetime, timezone

    from cronsim import CronSim, CronSimError

    fields = line.split()
    if len(fields) != 5:  # cronsim also takes a sixth, seconds field: `* * * * * *` would fire every second
        return f"it has {len(fields)} field{'s' * (len(fields) != 1)}, not five"
    try:
        CronSim(line, datetime.now(timezone.utc))
    except CronSimError as exc:
        return str(exc).rstrip(".") or "not a cron line"
    return None


def zone_problem(zone: str) -> str | None:
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(zone)
    except (ValueError, LookupError, OSError):  # ZoneInfoNotFoundError is a KeyError; a bad name a ValueError
        return f"no time zone {zone!r}"
    return None


def unknown_notifier(step: Any, name: str, declared: Mapping[str, Any]) -> Any:
    """The error of a gate naming a notifier the configuration does not declare (check and run alike)."""
    hint = did_you_mean(name, declared, f'declare it in dagplan.toml: [notify.{name}] webhook = "${{VAR}}"')
    return error("unknown-notifier", f"gate '{step.id}' notifies {name!r}, which the configuration does not declare",
                 step.span.at("gate", "notify"), hint)  # fmt: skip


MCP_SOURCE = "mcp:"  # a tool source naming a declared MCP server: mcp:NAME (interpreter/tools/mcp.py)
CATALOG_SUFFIXES = (".json", ".yaml", ".yml")  # a tool source that describes tools (interpreter/tools/described.py)


def is_catalog(source: Any) -> bool:
    """Whether a tool source names a catalog file (tools described, no code), by its name."""
    return os.fspath(source).lower().endswith(CATALOG_SUFFIXES)


def names_a_file(source: Any) -> bool:
    """Whether a tool source names a file (a Python file or a catalog), so that one given relative is placed
    where it was given (the configuration's folder, the command's, the test file's); else it is a module name
    or ``mcp:NAME``."""
    return os.fspath(source).endswith(".py") or is_catalog(source)


# how a model's answer is held to a schema: by provider (auto), or forced (interpreter/llm/constrained.py)
STRUCTURED_OUTPUT = ("auto", "json_schema", "llama_cpp", "ollama", "guided_json", "json_object", "none")

KEYS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "model": (_text, 'a model name (litellm), e.g. "openai/gpt-4o-mini"'),
    "tools": (_names, 'a list of tool files or modules, e.g. ["tools.py"]'),
    "max_concurrency": (_positive_int, "an integer of at least 1"),
    "step_max_iterations": (_positive_int, "an integer of at least 1"),
    "max_cost": (_amount, "a number of US dollars, at least 0"),
    "max_tokens": (_count, "an integer of at least 0"),
    "max_steps": (_positive_int, "an integer of at least 1"),
    "max_items": (_positive_int, "an integer of at least 1"),
    "state_dir": (_state, "a directory path"),
    "state": (_state, 'a directory path, or a PostgreSQL URL: "postgresql://user@host/db"'),
    "resume": (_table, "a table: [resume] with default, side_effect, pure, idempotent, undeclared"),
    "llm": (_table, "a table of litellm arguments: [llm]"),
    "plan_first": (_table, "a table: [plan_first] with mode and threshold"),
    "redact": (_patterns, 'a list of regular expressions, e.g. ["acct_[0-9]+"]'),
    "executor": (lambda v: v in ("local", "ray"), '"local" or "ray"'),
    "ray": (_table, 'a table of ray.init() arguments: [ray] address = "ray://head:10001"'),
    "pool": (_pool, "a table: [pool] max_running = 50, and [pool.per_plan] with a plan's name = its limit"),
    "structured_output": (
        lambda v: v in STRUCTURED_OUTPUT,
        "one of " + ", ".join(f'"{s}"' for s in STRUCTURED_OUTPUT) + " (how answers are held to a schema)",
    ),
    "mcp": (_table, 'a table of MCP servers: [mcp.NAME] command = "..." (stdio) or url = "..." (HTTP)'),
    "notify": (_table, 'a table of notifiers for gates: [notify.NAME] webhook = "${VAR}" or command = [...]'),
    "schedule": (_table, 'a table of schedules: [schedule.NAME] plan = "..." and cron = "0 9 * * 1-5"'),
}


# what each key is for (the reference page's table, generated with each key's value from KEYS)
KEY_MEANINGS: dict[str, str] = {
    "model": "the default model (litellm's name, or `local`); `$DAGPLAN_MODEL` overrides",
    "tools": 'tool files or modules (`["tools.py"]`), or `mcp:NAME` for a declared MCP server',
    "max_concurrency": "steps running at once (default 16)",
    "step_max_iterations": "an LLM step's tool-calling rounds (default 5)",
    "max_cost": "a run's budget in US dollars: over it the run stops with `budget-exceeded`",
    "max_tokens": "a run's budget in model tokens: over it the run stops with `budget-exceeded`",
    "max_items": "the default cap of `for_each` steps without `max_items` (default 100)",
    "max_steps": "`check` fails a plan that could execute more steps (worst case)",
    "state": "where runs are kept: a directory (relative to this file), or `postgresql://user@host/db` (see "
    "*Running at scale*); `--state`, `$DAGPLAN_STATE` and `$DAGPLAN_STATE_DIR` override",
    "state_dir": "the same as `state`, for a directory (default: `.dagplan` at the project's root)",
    "resume": "`[resume]`: what `resume` does with a step that was running: `default`, and by purity "
    "`side_effect`, `pure`, `idempotent`, `undeclared`",
    "llm": "`[llm]`: passed to litellm as is (`api_base`, `api_key`, ...); a key of ours written under it is an error",
    "plan_first": "`[plan_first]`: `mode` and `threshold` of the complexity score (`dagplan score`)",
    "redact": "regular expressions of the project's secrets: masked wherever people read a run (run tables, "
    "events, the viewer, MCP answers), in cassettes, traces, logs and the journal's record of tool calls",
    "executor": 'where tool calls run: `"local"` (threads and the event loop) or `"ray"`',
    "ray": '`[ray]`: `ray.init()` arguments, for `executor = "ray"` (`address = "ray://head:10001"`)',
    "pool": "`[pool]`: `max_running`, and `[pool.per_plan]` limits for workers",
    "structured_output": 'how answers are held to a schema: `"auto"` (by provider) or a form forced',
    "mcp": '`[mcp.NAME]`: an MCP server whose tools plans call as `NAME.TOOL` (see "MCP")',
    "notify": '`[notify.NAME]`: who is told when a gate waits, a `webhook = "${VAR}"` or a `command = [...]` '
    '(see "Deadlines and notices")',
    "schedule": "`[schedule.NAME]`: a plan the workers submit on a cron line, with `inputs` and a `timezone` "
    '(see "Schedules")',
}


def key_table() -> str:
    """The reference page's table (Markdown): every key, what it is for, what it takes (the errors' words)."""
    rows = ["| key | what it is for | value |", "| --- | --- | --- |"]
    rows += [f"| `{key}` | {KEY_MEANINGS.get(key, '')} | {words} |" for key, (_, words) in KEYS.items()]
    return "\n".join(rows) + "\n"


def _build(path: Path, table: dict) -> Config:
    """The configuration from a file's table, every key checked (position, expected value, did-you-mean)."""
    problems = []
    for key, value in table.items():
        if key not in KEYS:
            hint = did_you_mean(key, KEYS, f"known keys: {', '.join(KEYS)}")
            problems.append(error("config", f"unknown key {key!r}", _key_span(path, key), hint))
            continue
        valid, words = KEYS[key]
        if not valid(value):
            problems.append(error("config", f"{key} must be {words}, not {value!r}", _key_span(path, key)))
    llm = table.get("llm")
    for key in [k for k in (llm if isinstance(llm, dict) else {}) if k in KEYS]:  # TOML put it in [llm]
        problems.append(error("config", f"{key!r} is a dagplan setting, but it is inside the [llm] table "
                              "(written after [llm], it became a litellm argument)", _key_span(path, key),
                              f"move `{key} = ...` above the first [table] of the file"))  # fmt: skip
    servers = table.get("mcp")
    for name, server in (servers if isinstance(servers, dict) else {}).items():
        problems += [
            error("config", message, _key_span(path, f"mcp.{name}")) for message in server_problems(name, server)
        ]
    pool = table.get("pool")
    problems += [error("config", message, _key_span(path, key)) for key, message in pool_problems(pool)] if isinstance(
        pool, dict) else []  # fmt: skip
    notifiers = table.get("notify")
    for name, notifier in (notifiers if isinstance(notifiers, dict) else {}).items():
        problems += [
            error("config", message, _key_span(path, f"notify.{name}")) for message in notifier_problems(name, notifier)
        ]
    schedules = table.get("schedule")
    for name, scheduled in (schedules if isinstance(schedules, dict) else {}).items():
        found = schedule_problems(name, scheduled)
        problems += [error("config", message, _key_span(path, key)) for key, message in found]
    given = table.get("resume")
    resume = {**RESUME_DEFAULTS, **(given if isinstance(given, dict) else {})}
    for key, value in resume.items():
        if key not in _CHOICES:
            hint = did_you_mean(key, _CHOICES, f"known keys: {', '.join(_CHOICES)}")
            problems.append(error("config", f"unknown key resume.{key}", _key_span(path, key), hint))
        elif value not in _CHOICES[key]:
            problems.append(
                error(
                    "config",
                    f"resume.{key} = {value!r}",
                    _key_span(path, key),
                    f"one of {', '.join(_CHOICES[key])}" if key in _CHOICES else None,
                )
            )
    if problems:
        raise RunError(problems)
    values = {k: v for k, v in table.items() if k != "resume"}
    if "state" in values:  # `state` names runs' place whatever it is (a directory, a database)
        values["state_dir"] = values.pop("state")
    if "state_dir" in values:
        from .state import is_url

        if not is_url(values["state_dir"]) and not os.path.isabs(values["state_dir"]):
            values["state_dir"] = str(path.parent / values["state_dir"])  # the project's, wherever one stands
    if "redact" in values:
        values["redact"] = tuple(values["redact"])
    if "tools" in values:
        base = path.parent
        values["tools"] = tuple(str(base / t) if names_a_file(t) else t for t in values["tools"])
    if values.get("mcp"):  # each declared server is a tool source: its tools come with the others'
        values["tools"] = (*values.get("tools", ()), *(MCP_SOURCE + name for name in values["mcp"]))
    return Config(path=path, resume=resume, **values)


def _key_span(path: Path, key: str) -> Span:
    """Where ``key = ...`` is written in the file (tomllib keeps no positions; keys are on their lines)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return Span(str(path))

    def quoted(word: str) -> str:
        return rf"(?:\"{re.escape(word)}\"|'{re.escape(word)}'|{re.escape(word)})"

    def at(number: int, line: str) -> Span:
        return Span(str(path), line=number, col=len(line) - len(line.lstrip()) + 1)

    pattern = re.compile(rf"^\s*(?:{quoted(key)}\s*=|\[\s*{quoted(key)}\s*[\].])")  # `key = ...`, or `[key]`
    for number, line in enumerate(lines, 1):
        if pattern.match(line):
            return at(number, line)
    if "." in key:  # `[table]` then `name = ...` under it (the table's header when the name is not found)
        table, name = key.rsplit(".", 1)
        dotted = r"\s*\.\s*".join(quoted(part) for part in table.split("."))
        header = re.compile(rf"^\s*\[\s*{dotted}\s*\]")
        inside = re.compile(rf"^\s*{quoted(name)}\s*=")
        for number, line in enumerate(lines, 1):
            if header.match(line):
                for later, below in enumerate(lines[number:], number + 1):
                    if below.lstrip().startswith("["):
                        break
                    if inside.match(below):
                        return at(later, below)
                return at(number, line)
        return _key_span(path, table)
    return Span(str(path))
