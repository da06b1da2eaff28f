"""The plan-first gate: deterministic complexity score (seed 003)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from dagplan.interpreter.llm.score import complexity_score, score, should_plan_first

OAUTH = (
    "Implement OAuth login in cli/auth/google.go, add tests in auth_test.go, then update README.md and finally deploy"
)


@pytest.mark.parametrize(
    "task, expected",
    [
        ("read main.go", 1),  # the seed's example: auto does not fire
        ("What is the capital of France?", 0),
        (OAUTH, 10),
        ("Crie o arquivo main.py, adicione testes em test_main.py e depois atualize o README.md", 7),
        ("Após corrigir o bug em api/server.go, escreva testes e por fim faça o deploy", 6),
        ("Set up CI with a Dockerfile and a Makefile, then run the tests", 6),
        ("Añade un endpoint en app.py y luego despliega", 4),
    ],
)
def test_scores(task, expected):
    assert complexity_score(task) == expected


def test_parts_and_caps():
    s = score("fix add write test build run deploy a.py b.py c.py d.py then then then")
    assert (s.verbs, s.files, s.sequencers, s.total) == (5, 3, 2, 10)
    assert len(s.matched_verbs) == 7  # everything found is reported, only the score is capped
    assert s.matched_files == ("a.py", "b.py", "c.py", "d.py")


def test_a_repeated_verb_counts_once_and_readme_is_a_file():
    assert score("fix fix fix").verbs == 1  # as chatcli's ComplexityScore
    s = score("update README, CHANGELOG and LICENSE")
    assert s.matched_files == ("README", "CHANGELOG", "LICENSE") and s.files == 3


def test_files_count_once_and_are_not_words():
    s = score("add.py and add.py again; look at Makefile")
    assert s.matched_files == ("add.py", "Makefile") and s.verbs == 0


def test_longest_sequencer_wins():
    assert score("do this and then that").matched_sequencers == ("and then",)
    assert score("e em seguida isso").matched_sequencers == ("e em seguida",)


def test_accents_and_case_do_not_matter():
    assert score("APÓS isso, CRIE tudo").total == score("apos isso, crie tudo").total == 2


def test_set_up_is_one_verb_and_set_alone_none():
    assert score("set up the server").matched_verbs == ("set up",)
    assert score("a set of numbers").verbs == 0


@pytest.mark.parametrize(
    "mode, task, expected",
    [
        ("off", OAUTH, False),
        ("always", "hi", True),
        ("auto", OAUTH, True),
        ("auto", "read main.go", False),
    ],
)
def test_should_plan_first(mode, task, expected):
    assert should_plan_first(task, mode) is expected


def test_threshold():
    task = "Añade un endpoint en app.py y luego despliega"  # 4
    assert should_plan_first(task, "auto", threshold=4) and not should_plan_first(task, "auto", threshold=5)


def test_bad_mode():
    with pytest.raises(ValueError, match="off, auto, always"):
        should_plan_first("x", "sometimes")


@given(st.text(max_size=300))
def test_always_in_range_and_deterministic(task):
    first = complexity_score(task)
    assert 0 <= first <= 10 and complexity_score(task) == first


def test_the_verbs_of_an_agents_tools_count(tmp_path):
    """A newcomer's "fetch the issue, classify it, then label it" scored `verbs 0/5`."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dagplan", "score", "fetch the issue, classify it, then label it"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and "verbs      3/5  fetch, classify, label" in out.stdout, out.stdout
