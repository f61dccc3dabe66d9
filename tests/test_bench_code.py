"""The code tasks on the bench: the scripted oracle built from HumanEval's reference solutions
passes every test in the sandbox; tasks without reference solutions have no oracle."""

from __future__ import annotations

from pathlib import Path

import pytest

import collabzoo
from collabzoo.bench import BenchRun, NotApplicable, parse_team, run_bench
from collabzoo.bench.rescore import rescore
from collabzoo.tasks.code.rewards import MAX_SCORE, NOT_WRAPPER_REWARD
from tests.conftest import require


@pytest.fixture(scope="module")
def humaneval_path(shared_data: Path) -> Path:
    return require(shared_data / "humaneval" / "HumanEval.jsonl.gz", "HumanEval")


@pytest.mark.parametrize("protocol", ["parallel", "single"])
def test_the_code_oracle_passes_every_test(
    tmp_path: Path, humaneval_path: Path, code_sandbox, protocol: str
) -> None:
    # prompt_context="definitions": HumanEval/10's solution calls the prompt's own helper; the
    # clean reading: under the reference's, multi-line asserts are cut to their first line
    # (HumanEval/1) and a nested def ends its function's text (the solutions of /6 and /11)
    kwargs = {
        "data": str(humaneval_path),
        "prompt_context": "definitions",
        "answer_reading": "clean",
        "sandbox": code_sandbox,
    }
    outcome = run_bench(
        BenchRun("humaneval", parse_team("scripted:oracle"), protocol=protocol, env_kwargs=kwargs),
        tmp_path,
        progress=False,
    )
    document = outcome.document
    assert len(document["episodes"]) == len(
        collabzoo.make("humaneval", data=str(humaneval_path)).items("eval")
    )
    assert outcome.summary["Pass"]["mean"] == 100.0
    # a thin wrapper by design: everything but the not-a-wrapper level
    assert {e["final_reward"] for e in document["episodes"]} == {MAX_SCORE - NOT_WRAPPER_REWARD}
    assert document["sandbox"]["backend"] == code_sandbox.kind
    assert document["sandbox"]["test_timeout_s"] == 10.0
    assert "sandbox" not in document["env"]["kwargs"]
    if protocol == "single":
        assert document["env"]["agents"] == ["solver"]
    # the file alone re-scores: the actions replayed in a fresh env on the same sandbox
    replayed = rescore(outcome.path, sandbox_factory=lambda: code_sandbox)
    assert replayed.ok and replayed.episodes == len(document["episodes"])


def test_code_tasks_without_reference_solutions_have_no_oracle(
    tmp_path: Path, shared_data: Path
) -> None:
    data = shared_data / "coophumaneval" / "CoopHumanEval.json"
    with pytest.raises(NotApplicable, match="no reference solutions"):
        run_bench(
            BenchRun(
                "coophumaneval", parse_team("scripted:oracle"), env_kwargs={"data": str(data)}
            ),
            tmp_path,
            progress=False,
        )
    assert not list(tmp_path.glob("*.json"))
