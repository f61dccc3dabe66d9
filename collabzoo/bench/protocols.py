"""Inference-time collaboration protocols: team wrappers that decide who sees what before the
team's joint action goes to the env. The envs stay communication-free; everything a protocol
adds is text appended AFTER an agent's own observation, so the task prompt stays on top.

- `single`: one model does the whole task (the paper's "Raw model" row). Where the env has the
  reference single-agent baseline (`single_agent=True`: the writing and code tasks), the env is
  made that way and the model answers as its one agent. Elsewhere (the games) the model gets
  every agent's observation in one combined prompt and answers every part under a header per
  role; `split_combined_answer` cuts the answer back into the agents' actions.
- `parallel`: every agent answers its own observation, independently (the env as it is).
- `pipeline`: agents answer one after another in play order; each sees the answers its
  teammates gave earlier in the same turn.
- `discussion`: for R rounds each agent writes a draft (from round 2 on, after reading every
  draft of the round before); then each writes its final answer after reading the last
  round's drafts. So an agent generates R + 1 times per turn, and Cost counts all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from collabzoo.bench.models import CallSeeds, Sampling
from collabzoo.envs.single import (  # the combined format lives with the single-agent view
    combined_answer,  # noqa: F401  (re-exported: the bench's protocols read and write it)
    combined_prompt,
    split_combined_answer,
    split_combined_prompt,  # noqa: F401  (re-exported, as above)
    supports_single_agent,
)
from collabzoo.joint_sections import parse_tagged, tagged_prompt

if TYPE_CHECKING:
    from collabzoo.bench.teams import Team

PROTOCOLS = ("single", "parallel", "pipeline", "discussion")
NAMED_PROTOCOLS = (*PROTOCOLS, "joint")
"""Every protocol a run may name; `all` means PROTOCOLS (joint is asked for by name)."""
DEFAULT_ROUNDS = 1
"""Discussion rounds by default: one exchange of drafts, then the answers (2 generations per
agent per turn): the cheapest discussion, about twice a parallel team's Cost."""


@dataclass
class TurnPlay:
    """What a protocol produced for one env turn."""

    actions: dict[str, str]
    generations: list[dict[str, Any]] = field(default_factory=list)
    """Every generated text in order: agent, stage ("answer", "draft 1", "combined"), text,
    tokens, finish."""

    def record(self, agent: str, stage: str, generation: Any) -> None:
        self.generations.append(
            {
                "agent": agent,
                "stage": stage,
                "text": generation.text,
                "tokens": generation.tokens,
                "finish": generation.finish,
            }
        )

    @property
    def tokens(self) -> int:
        return sum(g["tokens"] for g in self.generations)


class TeamProtocol:
    """A way of collaborating: `play_turn` turns the agents' observations into their actions."""

    name: ClassVar[str] = ""

    def env_kwargs(self, env_class: type) -> dict[str, Any]:
        """Constructor arguments this protocol needs from the env (only `single` has any)."""
        return {}

    def settings(self) -> dict[str, Any]:
        return {"name": self.name}

    def play_turn(
        self, observations: Mapping[str, str], team: Team, sampling: Sampling, seeds: CallSeeds
    ) -> TurnPlay:
        raise NotImplementedError


class Parallel(TeamProtocol):
    name = "parallel"

    def play_turn(
        self, observations: Mapping[str, str], team: Team, sampling: Sampling, seeds: CallSeeds
    ) -> TurnPlay:
        answers = team.generate(observations, sampling, seeds)
        play = TurnPlay({agent: answers[agent].text for agent in observations})
        for agent in observations:
            play.record(agent, "answer", answers[agent])
        return play


def _answers_block(title: str, answers: Sequence[tuple[str, str]], end: str) -> str:
    parts = [f"=== {title} ==="]
    for label, text in answers:
        parts.append(f"--- {label} ---\n{text}")
    parts.append(f"=== {end} ===")
    return "\n".join(parts)


def pipeline_prompt(observation: str, earlier: Sequence[tuple[str, str]]) -> str:
    """An agent's observation followed by the answers its teammates gave before it this turn."""
    if not earlier:
        return observation
    block = _answers_block(
        "Your teammates' answers for this turn", earlier, "End of your teammates' answers"
    )
    return (
        f"{observation}\n\n{block}\n"
        "Your teammates answered before you (above). Now write your own answer, as your "
        "prompt asks, fitting it to theirs."
    )


class Pipeline(TeamProtocol):
    name = "pipeline"

    def play_turn(
        self, observations: Mapping[str, str], team: Team, sampling: Sampling, seeds: CallSeeds
    ) -> TurnPlay:
        play = TurnPlay({})
        earlier: list[tuple[str, str]] = []
        for agent, observation in observations.items():
            answer = team.generate({agent: pipeline_prompt(observation, earlier)}, sampling, seeds)
            play.actions[agent] = answer[agent].text
            play.record(agent, "answer", answer[agent])
            earlier.append((agent, answer[agent].text))
        return play


def discussion_prompt(
    observation: str,
    agent: str,
    drafts: Mapping[str, str] | None,
    round_number: int,
    rounds: int,
) -> str:
    """The prompt of draft round `round_number` (1..rounds) or, at rounds + 1, of the final
    answer; `drafts` are every agent's drafts of the round before (None in round 1)."""
    final = round_number > rounds
    if drafts is None:
        return (
            f"{observation}\n\n=== Discussion, draft round 1 of {rounds} ===\n"
            "Write a draft of your answer. Your teammates draft theirs at the same time; you "
            "will all read each other's drafts before answering."
        )
    shown = [("your draft", drafts[agent])] + [
        (f"{other}'s draft", text) for other, text in drafts.items() if other != agent
    ]
    title = (
        f"Discussion, final answer: the drafts of round {round_number - 1}"
        if final
        else f"Discussion, draft round {round_number} of {rounds}: the drafts of round "
        f"{round_number - 1}"
    )
    block = _answers_block(title, shown, "End of the drafts")
    ask = (
        "Now write your final answer, as your prompt asks, taking the drafts into account."
        if final
        else "Write a revised draft of your answer, taking your teammates' drafts into account."
    )
    return f"{observation}\n\n{block}\n{ask}"


class Discussion(TeamProtocol):
    name = "discussion"

    def __init__(self, rounds: int = DEFAULT_ROUNDS) -> None:
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"discussion rounds must be a positive int, got {rounds!r}")
        self.rounds = rounds

    def settings(self) -> dict[str, Any]:
        return {"name": self.name, "rounds": self.rounds}

    def play_turn(
        self, observations: Mapping[str, str], team: Team, sampling: Sampling, seeds: CallSeeds
    ) -> TurnPlay:
        play = TurnPlay({})
        drafts: dict[str, str] | None = None
        for round_number in range(1, self.rounds + 2):
            prompts = {
                agent: discussion_prompt(observation, agent, drafts, round_number, self.rounds)
                for agent, observation in observations.items()
            }
            answers = team.generate(prompts, sampling, seeds)
            stage = "answer" if round_number > self.rounds else f"draft {round_number}"
            for agent in observations:
                play.record(agent, stage, answers[agent])
            drafts = {agent: answers[agent].text for agent in observations}
        play.actions = dict(drafts or {})
        return play


# ----- single: one model, the whole task ---------------------------------------------------
class Single(TeamProtocol):
    name = "single"

    def env_kwargs(self, env_class: type) -> dict[str, Any]:
        return {"single_agent": True} if supports_single_agent(env_class) else {}

    def play_turn(
        self, observations: Mapping[str, str], team: Team, sampling: Sampling, seeds: CallSeeds
    ) -> TurnPlay:
        model = team.solo()
        roles = list(observations)
        if len(roles) == 1:  # the env's own single-agent mode
            (generation,) = model.generate([observations[roles[0]]], sampling, seeds.take(1))
            play = TurnPlay({roles[0]: generation.text})
            play.record(roles[0], "answer", generation)
            return play
        (generation,) = model.generate([combined_prompt(observations)], sampling, seeds.take(1))
        rejected: list[str] = []
        actions, found = split_combined_answer(generation.text, roles, rejected)
        play = TurnPlay(actions)
        play.record("+".join(roles), "combined", generation)
        play.generations[-1]["headers_found"] = found
        play.generations[-1]["rejected_lines"] = rejected
        return play


# ----- joint: one model, every role in tagged sections ----------------------------------------
class Joint(TeamProtocol):
    """One model answers for every agent from the joint prompt, in `<agent_i>` sections: how a
    joint actor (`collabzoo train joint`, CoMLRL's CentralizedMAGRPO) was trained, so its team
    plays here as it learned. Tags index the agents in play order; an unparsable answer (no
    section at all) gives every agent "" and is recorded."""

    name = "joint"

    def play_turn(
        self, observations: Mapping[str, str], team: Team, sampling: Sampling, seeds: CallSeeds
    ) -> TurnPlay:
        model = team.solo()
        roles = list(observations)
        prompt = tagged_prompt([observations[role] for role in roles])
        (generation,) = model.generate([prompt], sampling, seeds.take(1))
        parse = parse_tagged(generation.text, len(roles))
        play = TurnPlay({role: parse.answers[i] for i, role in enumerate(roles)})
        play.record("+".join(roles), "joint", generation)
        play.generations[-1]["sections_found"] = [roles[i] for i in parse.found]
        play.generations[-1]["unparsable"] = parse.unparsable
        play.generations[-1]["rejected_text"] = parse.rejected
        return play


def make_protocol(name: str, rounds: int = DEFAULT_ROUNDS) -> TeamProtocol:
    """A protocol by name; `rounds` is the discussion's R."""
    if name == "discussion":
        return Discussion(rounds)
    found = {"single": Single, "parallel": Parallel, "pipeline": Pipeline, "joint": Joint}.get(name)
    if found is None:
        raise ValueError(f"unknown protocol {name!r}; expected one of {', '.join(NAMED_PROTOCOLS)}")
    return found()
