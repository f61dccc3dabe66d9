"""The scripted oracle of the code tasks: built from a dataset's reference solutions, it finds
its role and its problem in the observation."""

from __future__ import annotations

from pathlib import Path

import pytest

import collabzoo
from collabzoo.envs.scripted_teams import code_oracle
from collabzoo.tasks.code.rewards import MAX_SCORE, NOT_WRAPPER_REWARD
from tests.conftest import require


@pytest.fixture(scope="module")
def humaneval_path(shared_data: Path) -> Path:
    return require(shared_data / "humaneval" / "HumanEval.jsonl.gz", "HumanEval")


def test_the_code_oracle_reads_its_role_and_problem_from_the_observation(
    humaneval_path: Path,
) -> None:
    env = collabzoo.make("humaneval", data=str(humaneval_path), split="eval")
    problems = list(env.items("eval"))
    oracle = code_oracle(problems)
    observations, _ = env.reset(options={"task": 3})
    problem = problems[3]
    aux, main = oracle(observations["aux"]), oracle(observations["main"])
    assert aux.startswith("def aux(") and f"def {problem.entry_point}(" not in aux
    assert main.startswith(f"def {problem.entry_point}(") and "return aux(" in main
    with pytest.raises(ValueError, match="quotes none of the oracle's problems"):
        oracle(observations["aux"].replace(problem.prompt.strip(), "another problem"))


def test_problems_without_reference_solutions_make_no_oracle(shared_data: Path) -> None:
    data = require(shared_data / "coophumaneval" / "CoopHumanEval.json", "CoopHumanEval")
    problems = collabzoo.make("coophumaneval", data=str(data)).items("eval")
    with pytest.raises(ValueError, match="CoopHumanEval/0 has no reference solution"):
        code_oracle(problems)


@pytest.mark.parametrize("task", ["HumanEval/32", "HumanEval/163"])
def test_the_problems_outside_the_reference_slices_play_and_score(
    humaneval_path: Path, code_sandbox, task: str
) -> None:
    """HumanEval/32 and /163 are in no reference slice; split "all" plays them, and the oracle's
    answer (the reference solution, main a thin wrapper) scores as every other problem's. Like
    HumanEval/10, /32's solution calls a helper of the prompt (`poly`): it passes with
    prompt_context="definitions" and the clean reading's split of `check` (the reference's
    split finds no test in /32's check: its only assert does not name `candidate`)."""
    env = collabzoo.make(
        "humaneval",
        data=str(humaneval_path),
        split="all",
        sandbox=code_sandbox,
        prompt_context="definitions",
        answer_reading="clean",
    )
    oracle = code_oracle(env.items())
    observations, infos = env.reset(options={"task": task})
    assert infos["main"]["task_id"] == task
    _, rewards, _, _, infos = env.step({a: oracle(observations[a]) for a in env.agents})
    metrics = infos["main"]["metrics"]
    assert metrics["pass"] == 1.0 and metrics["tests_passed"] == metrics["tests_total"] > 0
    assert rewards["main"] == pytest.approx(MAX_SCORE - NOT_WRAPPER_REWARD)
    if task == "HumanEval/32":
        for reading in ("reference", "clean"):
            reference = collabzoo.make(
                "humaneval",
                data=str(humaneval_path),
                split="all",
                sandbox=code_sandbox,
                answer_reading=reading,
            )
            observations, _ = reference.reset(options={"task": task})
            actions = {a: oracle(observations[a]) for a in reference.agents}
            observations, rewards, _, _, infos = reference.step(actions)
            assert rewards["main"] == pytest.approx(1.5), "found, parses, no test passes"
            if reading == "clean":
                assert "NameError: name 'poly' is not defined" in observations["main"]
            else:
                assert infos["main"]["metrics"]["tests_total"] == 0
