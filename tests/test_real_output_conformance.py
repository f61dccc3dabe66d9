"""Scores right on what real models write: every turn of the real-output conformance set,
replayed through collabzoo's envs, earns the reward the reference's own functions gave it.

The set (tests/data/real_output_conformance.json, made by
benchmarks/real_output_conformance.py, whose docstring says how) holds SmolLM2-135M-Instruct's
answers, sampled at the reference settings and cut off at 256 tokens, on seeded train problems
of CoopHumanEval, HumanEval and MBPP (two turns each) and on the TLDR and arXiv samples, plus a
few targeted pairs for what a 135M model never reaches (the aux-call and anti-wrapper bonuses,
the aux-ignored penalty, timed-out tests). The reference rewards were computed by the
reference repositories' own reward functions, the code ones inside an isolated container.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conformance_replay import CODE_FOLDERS, replay

SET = Path(__file__).with_name("data") / "real_output_conformance.json"


@pytest.fixture(scope="module")
def conformance() -> dict:
    return json.loads(SET.read_text())


def test_the_set_covers_what_it_must(conformance) -> None:
    """The set is what its docstring says: real answers on every task, two turns of the code
    tasks, and rewards that reach every level of the code reward."""
    episodes = conformance["episodes"]
    real = [e for e in episodes if e["source"] != "targeted"]
    assert {e["env"] for e in real} == {*CODE_FOLDERS, "tldr", "arxiv"}
    code_turns = [t for e in real if e["env"] in CODE_FOLDERS for t in e["turns"]]
    assert len(code_turns) >= 100
    rewards = Counter(round(t["reference_reward"], 6) for e in episodes for t in e["turns"])
    assert {0.0, 0.4, 1.0, 1.5} <= set(rewards), "missing, found, parsed: all levels reached"
    assert any(r > 1.9 for r in rewards), "some pair passes tests"
    assert any(r >= 3.5 for r in rewards), "the aux-call and anti-wrapper bonuses"


def test_every_real_answer_scores_as_the_reference(conformance, shared_data, code_sandbox) -> None:
    mismatches, total = replay(conformance, shared_data, sandbox=code_sandbox)
    assert total == sum(len(e["turns"]) for e in conformance["episodes"])
    assert not mismatches, f"{len(mismatches)} of {total} turns differ:\n" + "\n".join(mismatches)
