"""Renderers for runs: the preview, progress lines or a live view, and the final report.

Pure functions from values to text, plus two small event subscribers. ``rich``
is imported only when a live view is shown on a terminal.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from typing import Any, Sequence, TextIO

from .dsl.errors import counted, printable
from .interpreter.core.trace import lines as trace_lines, where
from .interpreter.core.vocabulary import EARLY, EventType, RunStatus, StepStatus, step_status_after

DESCRIPTION_WIDTH = 60


def cut(text: str, width: int = DESCRIPTION_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


# --- preview ---------------------------------------------------------------------------------


def preview_text(preview: Any, run_command: str | None = None, streamed: bool = False) -> str:
    """The preview as text; ``run_command``: how to run it, when known better than the plan alone tells
    (the command the user typed, with its flags); ``streamed``: a model's plan read as it is written (what
    started early is said; a plan file a person wrote has nothing to say of it)."""
    lines = [f"Plan: {preview.source} ({preview.mode}; nothing was executed)"]
    if preview.summary:
        lines.append(f"Summary: {preview.summary}")
    lines.append("")
    for number, step in enumerate(preview.steps, 1):
        lines.extend(_preview_step(number, step))
    lines.append("Parallel groups:")
    lines.extend(f"  {i}. [{', '.join(g)}]" for i, g in enumerate(preview.parallel_groups, 1))
    if preview.branch_points:
        lines.append("Branch points:")
        lines.extend(f"  {s.id}: {' | '.join(s.alternatives)}" for s in preview.branch_points)
    if preview.result:
        lines.append(f"Result: {preview.result}")
    worst = getattr(preview, "worst_case", None)
    if worst and any(s.repeat or s.children for s in preview.steps):
        lines.append(f"Worst case: {counted(worst['steps'], 'step')}, {counted(worst['llm_steps'], 'LLM step')}")
    cost = getattr(preview, "cost", None)
    if cost:
        lines.append(f"Cost (worst case): {cost['summary']}")
    early = getattr(preview, "starts_early", ()) if streamed else ()
    if early:
        lines.append(f"Streamed (plan --run --stream): {', '.join(early)} start while the plan is still being written "
                     "(they change nothing); the rest waits for the whole plan and its approval")  # fmt: skip
    lines.append("")
    lines.append(f"To run it: {run_command or preview.run_command}")
    return "\n".join(lines)


def rerun_text(found: Any, file: str = "PLAN") -> str:
    """Which steps ``run --reuse`` would run again and why, and what they would call."""
    several = len(found.runs) > 1
    lines = [f"With --reuse {' --reuse '.join(found.runs)}:"]
    rows = [(s["action"], s["id"], s.get("why", "") + (f" (from {s['from']})" if several and s.get("from") else ""))
            for s in found.steps]  # fmt: skip
    lines += ["  " + line for line in table(rows)] if rows else []
    again, saved = found.model_calls
    tokens = found.input_tokens[0]
    calls = f": {counted(again, 'model call')}" + (f" (<= {tokens:,} input tokens)" if again and tokens else "")
    said = f"{len(found.again)} of {len(found.steps)} step(s) run again" + (calls if again or saved else "")
    said += f"; {len(found.reused)} reused" + (f", {counted(saved, 'model call')} saved" if again or saved else "")
    lines.append(said)
    return "\n".join(lines)


def _preview_step(number: Any, step: Any, indent: str = "") -> list[str]:
    call = step.call if step.call in ("llm", "plan", "loop", "gate") else f"tool={step.call}"
    out = [f"{number}. [{step.id}] {call}" + (" (output given by the model)" if step.precomputed else "")
           + (" (acts on the world)" if getattr(step, "acts", False) else "")
           + (" (acts on the world? unknown: no tools known)" if getattr(step, "purity_unknown", False) else "")
           + (" (destructive)" if step.destructive else "")]  # fmt: skip
    if getattr(step, "repeat", None):
        out.append(f"     {step.repeat}")
    if step.when is not None:
        after = f"decided after {', '.join(step.decided_after)}" if step.decided_after else "decided at the start"
        out.append(f"     when: {step.when}  ({after})")
    if step.description:
        out.append(f"     {step.description}")
    if step.prompt:
        out.append(f"     prompt: {cut(step.prompt, 200)}")
    if step.args:
        out.append(f"     args: {json.dumps(step.args, ensure_ascii=False)}")
    if step.deps:
        out.append(f"     deps: {', '.join(step.deps)}")
    if step.output:
        out.append(f"     output: {step.output}")
    for entry in step.catch:
        out.append(f"     catch {', '.join(entry['errors'])} -> {entry['output']}")
    for i, child in enumerate(getattr(step, "children", ()), 1):  # a sub-plan's steps, nested
        out.extend("     " + line for line in _preview_step(f"{number}.{i}", child))
    return [indent + line for line in out]


# --- the final report ------------------------------------------------------------------------


def word_diff(before: str, after: str, context: int = 4) -> str:
    """Two texts as one, their words the same kept around each change (``context`` words, elsewhere ``...``), a
    removed run as ``[-words-]``, an added one as ``{+words+}`` (git's --word-diff): a prompt's edit reads as
    the edit, not as two truncated strings."""
    import difflib

    old, new = before.split(), after.split()
    parts: list[str] = []
    opcodes = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            same = old[i1:i2]
            first, last = index == 0, index == len(opcodes) - 1
            if len(same) > 2 * context + (0 if first or last else 1):
                head = [] if first else same[:context]
                tail = [] if last else same[-context:]
                same = [*head, "...", *tail]
            parts += same
            continue
        if i2 > i1:
            parts.append("[-" + " ".join(old[i1:i2]) + "-]")
        if j2 > j1:
            parts.append("{+" + " ".join(new[j1:j2]) + "+}")
    return " ".join(parts)


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Plain aligned columns, a line per row (the last column is not padded): every table we print."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in rows]


def reused_text(source: str) -> str:
    """How a result taken by fingerprint is said: from which run, or started early."""
    return "started while the plan was being written" if source == EARLY else f"reused from {source}"


def signature(spec: Any) -> str:
    """``findPark(city: string, near?: string)``: a tool's arguments in their order, ``?`` after an optional one."""
    props = (spec.parameters or {}).get("properties", {})
    required = set((spec.parameters or {}).get("required", ()))
    args = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', 'any') if isinstance(v, dict) else 'any'}"
                     for k, v in props.items())  # fmt: skip
    return f"{spec.name}({args})"


def report_text(result: Any, verbose: bool = False) -> str:
    """The run table; ``verbose``: each failed step's traceback (its frames in the user's code) under it."""
    header = f"Run {result.run_id}: {result.status}" + (" (with errors)" if result.had_errors else "")
    if result.message:
        header += f": {result.message}"
    rows = [("step", "call", "status", "attempts", "duration", "output")]
    for sid in result.order:
        s = result.steps[sid]
        detail = s.reason if s.status is StepStatus.SKIPPED else shown(s.head)
        if getattr(s, "trace", None):
            detail = f"{detail} (at {where(s.trace)})"
        status = f"{s.status} ({reused_text(s.reused)})" if getattr(s, "reused", None) else str(s.status)
        if getattr(s, "taken", None):
            status = f"{s.status} ({s.taken[0]} of {len(s.output)} items {reused_text(s.taken[1])})"
        rows.append((sid, s.call, status, str(s.attempts), f"{s.duration:.2f}s", cut(detail or "", 60)))
    lines = [header, *table(rows)]
    reused = sorted({s.reused for s in result.steps.values() if getattr(s, "reused", None) not in (None, EARLY)})
    if reused:
        count = sum(getattr(s, "reused", None) not in (None, EARLY) for s in result.steps.values())
        lines.append(f"{count} of {len(result.steps)} step(s) reused from {', '.join(reused)}: "
                     "nothing was called again for them")  # fmt: skip
    if result.usage.get("llm_calls"):
        u = result.usage
        lines.append(
            f"LLM: {u['llm_calls']} calls, {u['prompt_tokens'] + u['completion_tokens']} tokens, ${u['cost']:.4f}"
        )
    if verbose:
        for sid in result.order:
            trace = getattr(result.steps[sid], "trace", None)
            if trace:
                lines += [f"Traceback of {sid} (its frames in your code, innermost last):", *trace_lines(trace)]
    if result.status == RunStatus.COMPLETED or result.result is not None:  # (a waiting or failed run has none)
        lines.append("Result:")
        lines.append(_result_text(shown(result.result)))
    return "\n".join(lines)


def _result_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)


# --- progress --------------------------------------------------------------------------------


class PlainProgress:
    """One line per step event, for logs and pipes."""

    def __init__(self, plan: Any, stream: TextIO = sys.stderr):
        self.plan, self.stream = plan, stream
        self.total = len(plan.steps)
        self.done = 0

    def start(self) -> None:
        from .dsl.schedule import analysis_of

        self._print(f"Plan with {counted(self.total, 'step')}:")
        for sid in analysis_of(self.plan).order:  # the order of the run table (and, mostly, of the progress)
            self._print(f"  - {cut(self.plan.by_id[sid].label)}")

    def __call__(self, event: Any) -> None:
        line = self._line(event)
        if line:
            self._print(line)

    def stop(self) -> None:
        pass

    def _line(self, event: Any) -> str | None:
        if event.step and event.step not in self.plan.by_id:
            return None  # a child of a composition step (review[3], sub.fetch): its progress event tells
        label = cut(self.plan.by_id[event.step].label) if event.step else ""
        if event.type is EventType.STEP_PROGRESS:  # fan-out and loops
            return f"    {label}: {progress_text(event.data)}"
        if event.type is EventType.STEP_STARTED:  # no count: steps started together would share one
            return f"{'':>{2 * len(str(self.total)) + 3}} {label} ..."
        if event.type in _SETTLING:
            self.done += 1
            return f"[{self.done:>{len(str(self.total))}}/{self.total}] {label}: {_outcome(event)}"
        if event.type is EventType.STEP_WAITING:
            return f"    {label}: waiting for an answer"
        if event.type is EventType.STEP_RETRYING:
            err = event.data["error"]
            attempt, delay = event.data["attempt"] + 1, event.data["delay"]
            return f"    retrying {label} (attempt {attempt}, in {delay}s): {err['type']}: {err['message']}"
        return None

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)


_SETTLING = frozenset({EventType.STEP_COMPLETED, EventType.STEP_FAILED, EventType.STEP_SKIPPED})


def progress_text(data: Any) -> str:
    """``review 7/12`` (the fan-out's ``as:`` name, else ``item``) or ``iteration 3/10``."""
    if "done" in data:
        return f"{data.get('name') or 'item'} {data['done']}/{data['total']}"
    return f"iteration {data['iteration']}/{data['total']}"


def _outcome(event: Any) -> str:
    if event.type is EventType.STEP_SKIPPED:
        return f"skipped ({event.data.get('reason')})"
    if event.type is EventType.STEP_FAILED:
        err = event.data["error"]
        kind = "handled" if event.data.get("handled") else "FAILED"
        at = f" (at {where(event.data['traceback'])})" if event.data.get("traceback") else ""
        return f"{kind}: {err['type']}: {cut(err['message'], 80)}{at}"
    if event.data.get("adopted"):
        return "adopted (a person took the interrupted call as done; nothing was called)"
    if event.data.get("replayed"):
        return "done (replayed)"
    if event.data.get("reused"):
        return f"done ({reused_text(event.data['reused'])})"
    took = f" in {event.duration:.2f}s" if event.duration else ""
    return ("done (output given by the model)" if event.data.get("precomputed") else "done") + took


class LiveProgress(PlainProgress):
    """A rich live table on a terminal: one row per step, updated in place."""

    def __init__(self, plan: Any, stream: TextIO = sys.stderr):
        super().__init__(plan, stream)
        from rich.console import Console
        from rich.live import Live

        self.status = {s.id: StepStatus.PENDING for s in plan.steps}
        self.started: dict[str, float] = {}
        self.console = Console(file=getattr(stream, "raw", stream))  # rich's own codes; the cells: printable
        self.live = Live(self._table(), console=self.console, refresh_per_second=8, transient=False)

    def start(self) -> None:
        self.live.start()

    def stop(self) -> None:
        self.live.update(self._table())
        self.live.stop()

    def pause(self) -> None:
        self.live.stop()

    def resume(self) -> None:
        self.live.start()

    def __call__(self, event: Any) -> None:
        if event.step in self.status:
            self.status[event.step] = _status_after(event, self.status[event.step])
            if event.type is EventType.STEP_STARTED:
                self.started[event.step] = time.monotonic()
        self.live.update(self._table())

    def _table(self):
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, show_header=False)
        styles = {
            StepStatus.COMPLETED: "green",
            StepStatus.HANDLED: "yellow",
            StepStatus.FAILED: "red",
            StepStatus.SKIPPED: "dim",
            StepStatus.RUNNING: "cyan",
            StepStatus.WAITING: "magenta",
        }
        from .dsl.schedule import analysis_of

        for step in (self.plan.by_id[sid] for sid in analysis_of(self.plan).order):
            st = self.status[step.id]
            style = styles.get(st)
            label = Text(printable(cut(step.label)))  # a Text: never read as markup, never a control code
            table.add_row(f"[{style}]{st}[/]" if style else st, label)
        return table


def _status_after(event: Any, current: StepStatus) -> StepStatus:
    """A step's status once ``event`` happened to it (the vocabulary's one table)."""
    return step_status_after(event.type, event.data) or current


def progress_for(plan: Any, stream: TextIO = sys.stderr) -> PlainProgress:
    return LiveProgress(plan, stream) if stream.isatty() else PlainProgress(plan, stream)


class JsonlEvents:
    """``--events TARGET``: every event as one JSON line (pure JSONL: nothing else is written there)."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    @classmethod
    def to(cls, target: str) -> "JsonlEvents":
        """``-``: stdout; ``jsonl``: stderr (the older spelling); anything else: a file, appended to."""
        if target == "-":
            return cls(sys.stdout)
        if target == "jsonl":
            return cls(sys.stderr)
        return cls(open(target, "a", encoding="utf-8"))  # noqa: SIM115 - open for the whole run

    def __call__(self, event: Any) -> None:
        print(json.dumps(event.to_json(), ensure_ascii=False, default=str), file=self.stream, flush=True)


# --- one event as one line (dagplan events, the viewer's log) ----------------------------------

HIDDEN = {"seq", "ts", "type", "step", "run_id", "duration", "replayed", "output", "crc"}


def event_line(event: dict) -> str:
    """``seq  time  type  step  details``: one line per event, outputs cut."""
    when = datetime.fromtimestamp(event.get("ts", 0)).strftime("%H:%M:%S.%f")[:-3]
    parts = [f"{event.get('seq', ''):>5}", when, event.get("type", "?")]
    if event.get("step"):
        parts.append(event["step"])
    if event.get("type") == EventType.STEP_COMPLETED:
        parts.append("replayed" if event.get("replayed") else reused_text(event["reused"]) if event.get("reused")
                     else "fresh")  # fmt: skip
    if isinstance(event.get("duration"), (int, float)):
        parts.append(f"{event['duration'] * 1000:.1f}ms")
    extra = {k: v for k, v in event.items() if k not in HIDDEN and not _empty(v)}
    if extra:
        parts.append(_cut_text(json.dumps(shown(extra), ensure_ascii=False, default=str), 100))
    if "output" in event:
        parts.append("output=" + _cut_text(json.dumps(shown(event["output"]), ensure_ascii=False, default=str), 60))
    return "  ".join(parts)


def shown(value: Any) -> Any:
    """A value as text for people shows it (the run table, runs show, events, the viewer): secrets masked
    (core/redact.py's rules). The journal keeps what the tool returned: a resume and the steps after it
    need it; ``--format json`` and the API return it as it is."""
    from .interpreter.core.redact import redact

    return redact(value)


def _empty(value: Any) -> bool:
    """None, false, {} and [] say nothing in an event line (0 does: ``in (None, False)`` would drop it)."""
    return value is None or value is False or (isinstance(value, (dict, list)) and not value)


def event_text(event: Any) -> str:
    """:func:`event_line` of an :class:`Event` value."""
    return event_line(event.to_json())


def _cut_text(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"
