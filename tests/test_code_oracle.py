"""The scripted oracle of the code tasks: built from a dataset's reference solutions, it finds
its role and its problem in the observation."""

from __future__ import annotations

from pathlib import Path

import pytest

import collabzoo
from collabzoo.envs.scripted_teams import code_oracle
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
