"""The diagnostic codes of a plan check, each with what it means: the one table the reference page
(docs/reference/diagnostics.md) is generated from. Every code the checker writes is in it: tests/test_site.py
reads the checker's source and checks the invalid examples."""

from __future__ import annotations

# the codes that are warnings (the rest are errors): a plan with only these still runs
WARNINGS = frozenset(
    [
        "acts-on-failure",
        "constant-condition",
        "context-window",
        "dead-step",
        "destructive-as-pure",
        "foreign-template",
        "length-key",
        "maybe-unset",
        "misspelt-choice",
        "misspelt-reference",
        "parallel-groups-mismatch",
        "unbounded-cost",
        "unused-output",
    ]
)

# (the codes, what is wrong), in the order a reader meets them: the file, the document, the graph, the project
PLAN_CODES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("io", "binary", "too-large", "too-deep", "too-many-nodes"), "the file cannot be read within the limits on input"),
    (
        ("yaml-syntax", "json-syntax", "rewoo-syntax", "duplicate-key", "ambiguous-document", "unknown-dialect"),
        "the text is not one plan document",
    ),
    (("schema",), "the document breaks the JSON Schema (unknown key with did-you-mean, wrong type, missing key)"),
    (("syntax",), "a reference, placeholder or expression is malformed (the column points inside the string)"),
    (("mixed-operators",), "an argument mixes `||` and `&&`"),
    (("duplicate-id", "unsafe-id"), "step ids must be unique and safe as file names"),
    (("unknown-step",), "`deps` or a placeholder names no step"),
    (("unwritten-state",), "a step reads a `†state` path no step writes and `initial_state` lacks"),
    (("bad-schema",), "an input's schema (under `inputs`) is not valid JSON Schema"),
    (("unknown-input",), "a `†input` path is not in the input schema"),
    (("bad-output",), "an output path is not under `†state`, or is the whole state"),
    (("cycle",), "the graph has a cycle, printed `a -> b -> c -> a`"),
    (("conflicting-writers",), "two steps write one path and are not exclusive branches"),
    (("forward-dep",), "(steps dialect) a dep points to a later step"),
    (("misspelt-reference",), "text that reads like a reference with a misspelt root (`†stat.x`): it stays text"),
    (
        ("laxer-purity", "destructive-as-pure"),
        "(with tools) a step's `purity:` laxer than its tool's own; a destructive tool's step declared pure or "
        "idempotent",
    ),
    (("unknown-tool", "bad-argument"), "(with tools) unknown tool, missing/unknown/mistyped argument"),
    (("parallel-groups-mismatch",), "declared parallel groups differ from the computed ones"),
    (("unused-output", "dead-step"), "an output nobody reads; a step that cannot affect the result"),
    (
        ("gate-timeout", "unknown-notifier"),
        "`on_timeout` without `timeout`, or not a choice; a gate's `notify` names no notifier of the configuration",
    ),
    (
        ("foreign-template", "length-key"),
        "`{{ item.body }}` or `${state.x}` (another language's template: write `†item.body`); "
        "`†state.text.length` on text or a list (write `len(†state.text)` in a `when:`)",
    ),
    (
        ("maybe-unset",),
        "a step reads a value written only on a path it did not choose, with no default and no `trigger`",
    ),
    (
        ("acts-on-failure",),
        "(with tools) a step that acts on the world has a `trigger` that would run it after a failure or a refused "
        "gate: it is held back then (see *Triggers and defaults*)",
    ),
    (
        ("missing-max-items", "bad-for-each", "item-outside-for-each"),
        "a fan-out without a bound, over text, or `†item` used outside `for_each`",
    ),
    (
        ("include-cycle", "unbounded-loop", "bad-until"),
        "a sub-plan runs itself; a loop without `max_iterations`; `until` not on `†result`",
    ),
    (("too-many-steps",), "the worst case exceeds `max_steps` of the configuration"),
    (
        ("too-expensive", "unbounded-cost", "context-window"),
        "the worst case of the model calls exceeds `max_cost`, cannot be bounded, or a prompt can exceed its model's "
        "context window",
    ),
    (("test-file",), "(a `*.test.yaml`) a field, a mocked tool or step, an expected step the plan does not have"),
    (
        ("bad-condition", "constant-condition"),
        "a `when:` that does not parse, compares types its inputs rule out, or reads nothing",
    ),
    (
        ("misspelt-choice", "unknown-choice"),
        "a `when:` compares a gate's decision with a value that is not one of its `choices` (it never holds): "
        "close to one (a warning, with did-you-mean), or to none",
    ),
)


def code_table() -> str:
    """The reference page's table (Markdown): each row's codes, warnings marked, and what is wrong."""
    rows = ["| code | what is wrong |", "| --- | --- |"]
    for codes, meaning in PLAN_CODES:
        names = ", ".join(f"`{c}`" + (" (warning)" if c in WARNINGS else "") for c in codes)
        rows.append(f"| {names} | {meaning} |")
    return "\n".join(rows) + "\n"


def known_codes() -> frozenset[str]:
    return frozenset(c for codes, _ in PLAN_CODES for c in codes)
