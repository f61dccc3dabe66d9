"""Teams: who answers for each agent, from a spec on the command line.

    scripted:KIND                     a scripted team of the package (oracle, naive, heuristic)
    scripted:noisy, scripted:noisy:P  the building games' oracle with each answer line dropped
                                      with probability P (0.3): an imperfect demonstrator
    hf:MODEL                          one Hugging Face model (hub id, local folder, or "tiny")
                                      for every agent, through the learners' LLMPolicy
    hf:CHECKPOINT                     a `collabzoo train` checkpoint: one folder per policy,
                                      named after its agents joined by "+"
    hf:MODEL_1,MODEL_2                one model per agent, in play order
    vllm:MODEL, vllm:CHECKPOINT, ...  the same targets on local vLLM engines (one per model; a
                                      LoRA team's checkpoint on one engine with its adapters)
    openai:http://HOST:PORT/v1/MODEL  any OpenAI-compatible chat endpoint (vLLM, llama.cpp, ...)
    openai:BASE_URL#MODEL             the same, when the base URL does not end in /v1

Per-agent lists may mix kinds (`hf:Qwen/A,openai:http://h:8000/v1/B`); an item without a
`kind:` prefix has the kind of the item before it. Models named twice are loaded once and
shared. In Python, `PolicyTeam` makes a team of any text policies (callables).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collabzoo.bench.daemon_pool import DaemonPool
from collabzoo.bench.models import (
    CallSeeds,
    Generation,
    ModelOptions,
    Sampling,
    ScriptedModel,
    TeamError,
    TextModel,
)
from collabzoo.envs.scripted_teams import (
    NOISY_DROP,
    NoisyOracle,
    env_policy,
    env_team_games,
    listed_games,
    teams,
)
from collabzoo.model_names import ModelNotFound, check_model_name

KINDS = ("scripted", "hf", "vllm", "openai")
LOCAL_KINDS = ("hf", "vllm")
"""Kinds whose models load in this process, one team at a time."""
LOCAL_TITLES = {"hf": "Hugging Face model", "vllm": "vLLM model"}
SCRIPTED_KINDS = ("oracle", "naive", "heuristic", "noisy")


def scripted_kind(target: str) -> tuple[str, float | None]:
    """(kind, drop probability) of a scripted target: "oracle", or "noisy" / "noisy:0.2"."""
    kind, _, level = target.partition(":")
    if kind not in SCRIPTED_KINDS or (level and kind != "noisy"):
        raise TeamError(
            f"unknown scripted team {target!r}; expected one of {', '.join(SCRIPTED_KINDS)} "
            "(noisy takes a drop probability: noisy:0.2)"
        )
    if kind != "noisy":
        return kind, None
    try:
        drop = float(level) if level else NOISY_DROP
    except ValueError:
        drop = math.nan
    if not 0 <= drop < 1:
        raise TeamError(f"scripted:{target}: the drop probability must be in [0, 1), got {level!r}")
    return kind, drop


class NoScriptedTeam(TeamError):
    """The package has no scripted team of that kind for the env (`--env all` skips it)."""


class Team:
    """One model per agent (agents may share a model object). `generate` makes one call per
    distinct model, so agents sharing a model are batched together."""

    def __init__(self, label: str, members: Mapping[str, TextModel]) -> None:
        self.label = label
        self.members = dict(members)
        batching = [m for m in self.distinct if getattr(m, "batcher", None) is not None]
        for model in batching[1:]:  # one batcher for the team: see CallBatcher
            model.batcher = batching[0].batcher  # type: ignore[attr-defined]

    @property
    def distinct(self) -> list[TextModel]:
        return list({id(m): m for m in self.members.values()}.values())

    def solo(self) -> TextModel:
        """The one model of a team that has one (the `single` protocol needs that)."""
        models = self.distinct
        if len(models) != 1:
            raise TeamError(
                f"the single protocol plays one model, but team {self.label!r} has "
                f"{len(models)} different ones; give one model (e.g. hf:NAME)"
            )
        return models[0]

    def generate(
        self, prompts: Mapping[str, str], sampling: Sampling, seeds: CallSeeds
    ) -> dict[str, Generation]:
        agents = list(prompts)
        groups: dict[int, list[str]] = {}
        for agent in agents:
            groups.setdefault(id(self.members[agent]), []).append(agent)
        calls = [(self.members[g[0]], g, seeds.take(len(g))) for g in groups.values()]

        def call(model: TextModel, group: list[str], group_seeds: list[int]) -> list[Generation]:
            return model.generate([prompts[a] for a in group], sampling, group_seeds)

        if len(calls) > 1 and all(m.concurrent for m, _, _ in calls):
            pool = DaemonPool(len(calls), "team")
            try:
                results = [f.result() for f in [pool.submit(call, *c) for c in calls]]
            finally:
                pool.close()
        else:
            results = [call(*c) for c in calls]
        answers: dict[str, Generation] = {}
        for (_, group, _), generations in zip(calls, results, strict=True):
            answers.update(zip(group, generations, strict=True))
        return {agent: answers[agent] for agent in agents}

    def describe(self) -> dict[str, Any]:
        return {
            "spec": self.label,
            "distinct_models": len(self.distinct),
            "members": {agent: model.describe() for agent, model in self.members.items()},
        }

    def episodes_at_once(self, options: ModelOptions) -> int:
        """Episodes played concurrently: an endpoint-only team fills its request slots; a team
        of local models (Hugging Face, vLLM) plays `options.episodes_at_once`, their calls
        batched together (`CallBatcher`); other teams one at a time (their agents are batched)."""
        models = self.distinct
        if models and all(m.kind == "openai" for m in models):
            return max(1, options.concurrency)
        if models and all(getattr(m, "batcher", None) is not None for m in models):
            return max(1, options.episodes_at_once)
        return 1

    @contextlib.contextmanager
    def episode(self) -> Iterator[None]:
        """Count one episode in play for every batching model of the team (their batches wait
        for the calls of the episodes in play)."""
        batchers = {id(b): b for m in self.distinct if (b := getattr(m, "batcher", None))}
        with contextlib.ExitStack() as stack:
            for batcher in batchers.values():
                stack.enter_context(batcher.episode())
            yield


# ----- specs --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Member:
    kind: str
    target: str


_KIND_PREFIX = re.compile(r"^(?P<kind>[A-Za-z]+):(?P<rest>.*)$", re.DOTALL)


def parse_team(spec: str) -> TeamSpec:
    """Read a team spec (see the module docstring); raises TeamError saying what was expected."""
    if not isinstance(spec, str) or not spec.strip():
        raise TeamError(f"a team spec is KIND:TARGET with KIND one of {', '.join(KINDS)}")
    members: list[Member] = []
    kind: str | None = None
    for item in (part.strip() for part in spec.split(",")):
        match = _KIND_PREFIX.match(item)
        if match and match.group("kind").lower() in KINDS:
            kind, target = match.group("kind").lower(), match.group("rest").strip()
        elif kind is None:
            examples = (
                "e.g. scripted:oracle, hf:Qwen/Qwen2.5-Coder-3B, "
                "openai:http://localhost:8000/v1/my-model"
            )
            if match:  # it has a kind, just not one we know: saying it lacks one misleads
                raise TeamError(
                    f"team {spec!r}: unknown kind {match.group('kind')!r}; the known kinds are "
                    f"{', '.join(KINDS)} ({examples})"
                )
            raise TeamError(
                f"team {spec!r} must start with a kind: KIND:TARGET with KIND one of "
                f"{', '.join(KINDS)} ({examples})"
            )
        else:
            target = item
        if not target:
            raise TeamError(f"team {spec!r}: {kind}: needs a target after the colon")
        if kind == "scripted":
            try:
                scripted_kind(target)
            except TeamError as error:
                raise TeamError(f"team {spec!r}: {error}") from None
        if kind in LOCAL_KINDS:  # a mistyped name fails now, before any env or model loads
            try:  # "tiny" is hf's; a vllm: team says first whether vLLM is installed
                check_model_name(target, also=("tiny",))
            except ModelNotFound as error:
                what = LOCAL_TITLES[kind]
                raise TeamError(
                    f"team {spec!r}: cannot load {what} {error.name!r}: {error.reason}"
                ) from None
        if kind == "openai":
            from collabzoo.bench.openai_model import parse_endpoint

            try:
                parse_endpoint(target)
            except ValueError as error:
                raise TeamError(f"team {spec!r}: {error}") from None
        members.append(Member(kind, target))
    return TeamSpec(spec.strip(), tuple(members))


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe form of a label."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "team"
    return cleaned[:limit].rstrip("-.")


@dataclass(frozen=True)
class TeamSpec:
    """A parsed `--team` value; `build` makes the models for one env's agents."""

    label: str
    members: tuple[Member, ...]

    @property
    def kinds(self) -> set[str]:
        return {m.kind for m in self.members}

    def check(self, game: str) -> None:
        """Raise TeamError when this team cannot play the env, before its data or any model
        is loaded (whether a code dataset has reference solutions shows only in `build`)."""
        for member in self.members:
            if member.kind == "scripted" and game not in env_team_games(member.target):
                scripted_policy(member.target, game, None)

    def build(self, env: Any, game: str, agents: Sequence[str], options: ModelOptions) -> Team:
        if len(self.members) not in (1, len(agents)):
            raise TeamError(
                f"team {self.label!r} lists {len(self.members)} models for the "
                f"{len(agents)} agents of {game} ({', '.join(agents)}); give one model for all "
                "of them or one per agent, in this order"
            )
        if len(self.members) == 1:
            only = self.members[0]
            if only.kind in LOCAL_KINDS:
                return Team(self.label, load_local_team(only.kind, [only.target], agents, options))
            model = self._model(only, env, game, options, {})
            return Team(self.label, dict.fromkeys(agents, model))
        made: dict[Member, TextModel] = {}
        members: dict[str, TextModel] = {}
        for kind in LOCAL_KINDS:
            items = [(a, m) for a, m in zip(agents, self.members, strict=True) if m.kind == kind]
            if items:
                targets = [m.target for _, m in items]
                members.update(load_local_team(kind, targets, [a for a, _ in items], options))
        for agent, member in zip(agents, self.members, strict=True):
            if member.kind not in LOCAL_KINDS:
                members[agent] = self._model(member, env, game, options, made)
        return Team(self.label, {agent: members[agent] for agent in agents})

    @staticmethod
    def _model(
        member: Member, env: Any, game: str, options: ModelOptions, made: dict[Member, TextModel]
    ) -> TextModel:
        if member in made:
            return made[member]
        if member.kind == "scripted":
            policy = scripted_policy(member.target, game, env)
            model: TextModel = ScriptedModel(member.target, policy, plays_every_role=True)
        else:
            from collabzoo.bench.openai_model import OpenAIModel

            model = OpenAIModel.from_target(member.target, options)
        made[member] = model
        return model


def load_local_team(
    kind: str, targets: Sequence[str], agents: Sequence[str], options: ModelOptions
) -> dict[str, Any]:
    """The members of an `hf:` or `vllm:` team (imported only when such a team plays)."""
    if kind == "vllm":
        from collabzoo.bench.vllm_model import load_vllm_team

        return load_vllm_team(targets, agents, options)
    from collabzoo.bench.hf_model import load_hf_team

    return load_hf_team(targets, agents, options)


def scripted_policy(kind: str, game: str, env: Any) -> Callable[..., str]:
    """The package's scripted policy of `kind` for an env: the text policies of
    `collabzoo.envs.scripted_teams`, the noisy oracle of the building games ("noisy:P"), and for
    the code tasks the oracle built from the env's problems (it needs their reference
    solutions: HumanEval has them)."""
    kind, drop = scripted_kind(kind)
    if drop is not None:
        try:
            return NoisyOracle(game, drop)
        except ValueError as error:
            raise NoScriptedTeam(str(error)) from None
    if game in env_team_games(kind):
        try:
            return env_policy(game, kind, env)  # the code tasks' oracle, from their solutions
        except ValueError as error:
            raise NoScriptedTeam(str(error)) from None
    policy = teams().get(kind, {}).get(game)
    if policy is None:
        plays = listed_games(kind)
        raise NoScriptedTeam(
            f"no scripted {kind} team for {game} (the {kind} team plays {', '.join(plays)})"
        )
    return policy


class PolicyTeam:
    """A team of Python text policies (prompt -> answer), for experiments and tests: one
    callable for every agent, or a mapping agent -> callable. They get each prompt as the
    protocol wrote it (under `single`, the combined prompt), and Cost counts their answers like
    a scripted team's."""

    kinds = frozenset({"scripted"})

    def __init__(
        self, label: str, policies: Callable[[str], str] | Mapping[str, Callable[[str], str]]
    ) -> None:
        self.label = label
        self.policies = policies

    def check(self, game: str) -> None:
        return None

    def build(self, env: Any, game: str, agents: Sequence[str], options: ModelOptions) -> Team:
        if callable(self.policies):
            model = ScriptedModel(self.label, self.policies)
            return Team(self.label, dict.fromkeys(agents, model))
        missing = [a for a in agents if a not in self.policies]
        if missing:
            raise TeamError(f"team {self.label!r} has no policy for agents {missing}")
        models: dict[int, ScriptedModel] = {}
        members = {}
        for agent in agents:
            policy = self.policies[agent]
            models.setdefault(id(policy), ScriptedModel(f"{self.label}:{agent}", policy))
            members[agent] = models[id(policy)]
        return Team(self.label, members)
