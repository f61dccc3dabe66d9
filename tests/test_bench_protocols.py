"""The collaboration protocols, seen from the policies' side: scripted policies that record
every prompt they get and answer with recognisable text, so each test can check who saw whose
answer, how many rounds ran, and that Cost counts every generated token."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import collabzoo
from collabzoo.bench import BenchRun, PolicyTeam, count_pieces, run_bench
from collabzoo.bench.protocols import (
    combined_answer,
    combined_prompt,
    split_combined_answer,
    split_combined_prompt,
)
from collabzoo.bench.rescore import rescore


class Recorder:
    """A text policy per agent: answers 'ANSWER-<agent>-<n>' (n counts its calls) and keeps
    every prompt it was given."""

    def __init__(self, agent: str, answer=None) -> None:
        self.agent = agent
        self.prompts: list[str] = []
        self.answers: list[str] = []
        self._count = itertools.count(1)
        self._answer = answer

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        n = next(self._count)
        answer = self._answer(prompt) if self._answer else f"ANSWER-{self.agent}-{n} words here."
        self.answers.append(answer)
        return answer


def recorded_run(
    tmp_path: Path, env: str, protocol: str, rounds: int = 1, **env_kwargs
) -> tuple[dict, dict[str, Recorder]]:
    agents = collabzoo.make(env, **env_kwargs).possible_agents
    if protocol == "single":  # one model for the whole task
        recorders = {"solo": Recorder("solo")}
        team = PolicyTeam("recorder", recorders["solo"])
    else:
        recorders = {agent: Recorder(agent) for agent in agents}
        team = PolicyTeam("recorder", recorders)
    outcome = run_bench(
        BenchRun(
            env,
            team,
            protocol=protocol,
            rounds=rounds,
            episodes=2,
            env_kwargs=env_kwargs,
        ),
        tmp_path,
        progress=False,
    )
    return outcome.document, recorders


def observations_of(env_name: str, episode: dict, env_kwargs: dict) -> list[dict[str, str]]:
    """Each turn's observations, rebuilt by replaying the recorded actions."""
    env = collabzoo.make(env_name, **env_kwargs)
    observations, _ = env.reset(
        seed=episode["seed"], options={"task": episode["task"], "split": episode["split"]}
    )
    seen = []
    for turn in episode["turns"]:
        seen.append(dict(observations))
        observations, *_ = env.step(turn["actions"])
    return seen


def test_parallel_agents_see_only_their_own_observations(tmp_path: Path) -> None:
    document, recorders = recorded_run(tmp_path, "strbuild", "parallel", horizon=2)
    first, second = recorders.values()
    turns = [t for e in document["episodes"] for t in e["turns"]]
    assert len(first.prompts) == len(second.prompts) == len(turns) == 4
    expected = [
        obs for e in document["episodes"] for obs in observations_of("strbuild", e, {"horizon": 2})
    ]
    assert first.prompts == [o["first_builder"] for o in expected]
    assert second.prompts == [o["second_builder"] for o in expected]


def test_pipeline_shows_agent_1s_answer_to_agent_2(tmp_path: Path) -> None:
    document, recorders = recorded_run(tmp_path, "strbuild", "pipeline", horizon=2)
    first, second = recorders.values()
    expected = [
        obs for e in document["episodes"] for obs in observations_of("strbuild", e, {"horizon": 2})
    ]
    for k, observations in enumerate(expected):
        # agent 1 answers first: it sees its observation only
        assert first.prompts[k] == observations["first_builder"]
        # agent 2 sees its observation, then agent 1's answer of this very turn
        prompt = second.prompts[k]
        assert prompt.startswith(observations["second_builder"])
        extra = prompt[len(observations["second_builder"]) :]
        assert first.answers[k] in extra and "--- first_builder ---" in extra
        assert all(a not in extra for j, a in enumerate(first.answers) if j != k)
    actions = [t["actions"] for e in document["episodes"] for t in e["turns"]]
    assert [a["second_builder"] for a in actions] == second.answers


@pytest.mark.parametrize("rounds", [1, 3])
def test_discussion_runs_r_rounds_then_answers(tmp_path: Path, rounds: int) -> None:
    document, recorders = recorded_run(tmp_path, "tinycoop", "discussion", rounds, horizon=2)
    turns = [t for e in document["episodes"] for t in e["turns"]]
    calls = rounds + 1  # R drafts and the answer, per agent and turn
    for agent, recorder in recorders.items():
        other = next(a for a in recorders if a != agent)
        assert len(recorder.prompts) == calls * len(turns)
        for t, turn in enumerate(turns):
            mine = recorder.prompts[t * calls : (t + 1) * calls]
            my_answers = recorder.answers[t * calls : (t + 1) * calls]
            theirs = recorders[other].answers[t * calls : (t + 1) * calls]
            assert "draft round 1 of" in mine[0] and "draft" not in mine[0].split("===")[0]
            for r in range(1, calls):  # from round 2 on: every draft of the round before
                assert my_answers[r - 1] in mine[r] and theirs[r - 1] in mine[r]
                assert theirs[r] not in mine[r]  # nothing of the same round
                label = "final answer" if r == rounds else f"draft round {r + 1} of {rounds}"
                assert label in mine[r]
            # the action is the last answer; the drafts are recorded with their round
            assert turn["actions"][agent] == my_answers[-1]
            stages = [g["stage"] for g in turn["generations"] if g["agent"] == agent]
            assert stages == [f"draft {r}" for r in range(1, rounds + 1)] + ["answer"]


@pytest.mark.parametrize("protocol", ["parallel", "pipeline", "discussion", "single"])
def test_cost_counts_every_generated_token(tmp_path: Path, protocol: str) -> None:
    document, recorders = recorded_run(tmp_path, "tinycoop", protocol, 2, horizon=2)
    generated = [a for r in recorders.values() for a in r.answers]
    if protocol == "single":  # one model, one combined prompt per turn
        prompts = recorders["solo"].prompts
        assert len(prompts) == 2 * 2 and all(split_combined_prompt(p) for p in prompts)
    assert sum(e["cost"] for e in document["episodes"]) == sum(count_pieces(a) for a in generated)
    for episode in document["episodes"]:
        texts = [g["text"] for t in episode["turns"] for g in t["generations"]]
        assert episode["cost"] == sum(count_pieces(t) for t in texts)
    summary = document["summary"]
    assert summary["Cost"]["mean"] == pytest.approx(
        sum(e["cost"] for e in document["episodes"]) / 2
    )
    (path,) = tmp_path.glob("*.json")
    assert rescore(path).ok  # every protocol's file re-scores from its actions alone


def test_single_uses_the_envs_own_one_model_baseline(tmp_path: Path) -> None:
    document, recorders = recorded_run(tmp_path, "tldr", "single", data="sample")
    assert document["env"]["kwargs"] == {"data": "sample", "single_agent": True}
    assert document["env"]["agents"] == ["writer"]
    (writer,) = recorders.values()
    assert len(writer.prompts) == 2 and all("Your part: both" in p for p in writer.prompts)


def test_single_plays_every_role_of_a_game_from_one_prompt(tmp_path: Path) -> None:
    """StrBuild has no one-model mode: one combined prompt holds both builders' observations,
    and the one answer is cut back into both builders' actions."""
    env = collabzoo.make("strbuild")
    agents = env.possible_agents
    prompts: list[str] = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return combined_answer({a: f"/setblock {k} 0 0 stone" for k, a in enumerate(agents)})

    outcome = run_bench(
        BenchRun("strbuild", PolicyTeam("one-model", model), protocol="single", episodes=1),
        tmp_path,
        progress=False,
    )
    (episode,) = outcome.document["episodes"]
    assert len(prompts) == env.horizon
    observations = observations_of("strbuild", episode, {})
    for prompt, seen in zip(prompts, observations, strict=True):
        assert split_combined_prompt(prompt) == seen
    first_turn = episode["turns"][0]
    assert first_turn["actions"] == {a: f"/setblock {k} 0 0 stone" for k, a in enumerate(agents)}
    (generation,) = first_turn["generations"]
    assert generation["stage"] == "combined" and generation["headers_found"] == agents


def test_combined_answers_are_read_forgivingly() -> None:
    roles = ["first_builder", "second_builder"]
    text = "Sure!\n### First_Builder ###\n/setblock 0 0 0 stone\n\n**second_builder:**\n/kill\n"
    assert split_combined_answer(text, roles) == (
        {"first_builder": "/setblock 0 0 0 stone", "second_builder": "/kill"},
        roles,
    )
    # a missing part is empty; no header at all: the whole text is the first role's
    assert split_combined_answer("##### second_builder #####\nx", roles)[0] == {
        "first_builder": "",
        "second_builder": "x",
    }
    assert split_combined_answer("just text", roles) == (
        {"first_builder": "just text", "second_builder": ""},
        [],
    )
    prompt = combined_prompt({"a": "obs of a\nline 2", "b": ""})
    assert split_combined_prompt(prompt) == {"a": "obs of a\nline 2", "b": ""}
    assert split_combined_prompt("no roles here") == {}


def test_the_prompts_own_section_headers_copied_back_are_accepted_and_the_rest_reported() -> None:
    """A real small model (SmolLM2-135M-Instruct) answers the combined prompt by copying its
    section headers: `##### Role 1 of 2: first_builder #####` ... `##### End of role ... #####`.
    Those must split like the layout's own headers; what lies outside every role is reported."""
    roles = ["first_builder", "second_builder"]
    text = (
        "Here are the answers.\n"
        "##### Role 1 of 2: first_builder #####\n/setblock 0 0 0 stone\n"
        "##### End of role first_builder #####\n"
        "stray words\n"
        "##### Role 2 of 2: second_builder #####\n/fill 0 0 0 1 0 0 dirt\n"
    )
    rejected: list[str] = []
    assert split_combined_answer(text, roles, rejected) == (
        {"first_builder": "/setblock 0 0 0 stone", "second_builder": "/fill 0 0 0 1 0 0 dirt"},
        roles,
    )
    assert rejected == [
        "Here are the answers.",
        "##### End of role first_builder #####",
        "stray words",
    ]
    # a role the task does not have is not a header: its lines stay in the answer before it
    other = "##### first_builder #####\na\n##### Role 3 of 3: third #####\nb"
    assert split_combined_answer(other, roles)[0]["first_builder"] == (
        "a\n##### Role 3 of 3: third #####\nb"
    )
