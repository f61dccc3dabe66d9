"""Where preference pairs come from: candidates sampled by the team and scored by the env's
reward (offline, once), or each iteration's current candidates matched against a comparator's
(online), with the replay of earlier iterations' pairs and the comparator's weight history.

Candidates are aligned joint actions of one rollout-tree level: C samples per agent of the same
episode, candidate k the k-th sample of every agent, stepped in its own env copy. The comparator
samples C' more of the same episodes: the live policy ("current"), a frozen team or the initial
weights ("model"), or the live policy's own weights of `comparator_lag` iterations ago ("lag",
swapped in for sampling: no second copy), or an HTTP completion service ("api",
`comparator_api`). A centralized comparator is one policy (or the service) answering a tagged
joint prompt (`collabzoo.joint_sections`, the joint actor's).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.learners.comparator_api import ComparatorAPI
from collabzoo.algos.learners.preference_pairs import (
    PreferencePair,
    replay_selection,
    select_comparison_pairs,
    select_pair_indices,
)
from collabzoo.algos.policies.policy import Policy
from collabzoo.algos.rollout.tree import Node, TreeRollout, team_reward
from collabzoo.joint_sections import parse_tagged, tagged_prompt

PAIR_SEED_OFFSET = 500_000
"""Pair episodes are seeded apart from the RL phase's: seed * 1_000_003 + this + index."""
HELDOUT_SEED_OFFSET = 900_000
"""Held-out pairs (the reward model's accuracy) come from episodes seeded from here."""


def candidate_rollout(learner: Any, policies: dict[str, Policy], candidates: int) -> TreeRollout:
    """One tree level of `candidates` aligned joint actions per episode, rewarded by the env."""
    return TreeRollout(
        learner.env_factory,
        policies,
        learner.sampling,
        num_generations=candidates,
        joint_mode="aligned",
        max_depth=1,
        executor=learner.executor,
        generate=learner.rollout.generate,
        remote=learner.remote,
    )


def pair_seeds(seed: int, start: int, count: int, offset: int = PAIR_SEED_OFFSET) -> list[int]:
    return [seed * 1_000_003 + offset + start + j for j in range(count)]


def candidate_rewards(node: Node) -> list[float]:
    """Candidate k's team reward, in candidate order."""
    return [child.reward for child in sorted(node.children, key=lambda c: c.joint[0])]


def node_pairs(
    node: Node, mode: str, limit: int | None, rng: random.Random
) -> list[PreferencePair]:
    """The pairs one episode's candidates give (offline selection)."""
    rewards = candidate_rewards(node)
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    return [
        PreferencePair(
            prompts={a: str(node.observations[a]) for a in node.agents},
            chosen={a: node.samples[a][w].text for a in node.agents},
            rejected={a: node.samples[a][l_].text for a in node.agents},
            prompt_ids={a: list(node.samples[a][w].prompt_ids) for a in node.agents},
            chosen_ids={a: list(node.samples[a][w].completion_ids) for a in node.agents},
            rejected_ids={a: list(node.samples[a][l_].completion_ids) for a in node.agents},
            chosen_reward=rewards[w],
            rejected_reward=rewards[l_],
            candidate_reward_mean=mean,
        )
        for w, l_ in select_pair_indices(rewards, mode, limit, rng)
    ]


def sampled_pairs(learner: Any, seeds: Sequence[int], rng: random.Random) -> list[PreferencePair]:
    """Offline pairs: C candidates per episode from the current team, pairs per episode."""
    args = learner.args
    rollout = candidate_rollout(learner, learner.policies, args.preference_num_candidates)
    roots = rollout.build(list(seeds), 1.0)
    learner.preference_env_steps += rollout.env_steps
    pairs: list[PreferencePair] = []
    for root in roots:
        if root.children:
            pairs += node_pairs(root, args.pair_selection, args.preference_pairs_per_sample, rng)
    return pairs


def encode_answer(policy: Policy, text: str) -> list[int]:
    """An answer's token ids under a policy that did not sample it (re-tokenized text)."""
    tokenizer = getattr(policy, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("re-tokenizing an answer needs an LLM policy with a tokenizer")
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class OnlinePairs:
    """The online variants' pair source: per iteration, current vs comparator candidates, the
    selected pairs written to output_dir/preference_replay/iteration_NNNN.json, the replay of
    earlier shards, and the snapshots a lagged comparator samples with."""

    def __init__(self, learner: Any, comparator: Any = None) -> None:
        self.learner = learner
        self.args = learner.args
        self.comparator_team: dict[str, Policy] | None = None
        self.api: ComparatorAPI | None = None
        if self.args.comparator_policy == "api":
            if comparator is not None:
                raise ValueError(
                    'comparator_policy="api" answers from comparator_api_url: a comparator= '
                    'team is for comparator_policy="model"'
                )
            self.api = ComparatorAPI(self.args, learner.sampling)
        if comparator is not None:
            from collabzoo.algos.policies.model_loading import team_policies

            self.comparator_team = team_policies(comparator, learner.agents)
            for policy in {id(p): p for p in self.comparator_team.values()}.values():
                policy.model.eval()
                for parameter in policy.model.parameters():
                    parameter.requires_grad_(False)
        self.history: list[list[dict[str, Any]]] = []
        """Every iteration's selected pairs (records), oldest first."""
        self.snapshots: list[dict[str, Any]] = []
        """Trainable weights at the start of the recent iterations (CPU), oldest first, and the
        iteration each belongs to."""
        self.unparsed = 0
        """Centralized comparator answers without any agent tag, so far (skipped)."""

    # ----- weights of earlier iterations ------------------------------------------------------
    def _team_state(self) -> dict[str, dict[str, torch.Tensor]]:
        learner = self.learner
        return {
            learner.policy_name(p): {
                k: v.detach().cpu().clone() for k, v in p.trainable_state().items()
            }
            for p in learner.distinct
        }

    def _load_team_state(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        for policy in self.learner.distinct:
            policy.load_trainable_state(state[self.learner.policy_name(policy)])
        self.learner.weights_changed()

    def remember(self, iteration: int) -> None:
        """Snapshot the weights iteration `iteration` starts from (kept as far back as the
        comparator looks: the lag, or the initial weights for a "model" without a team)."""
        if self.args.comparator_policy == "lag" or (
            self.args.comparator_policy == "model" and self.comparator_team is None
        ):
            if not any(s["iteration"] == iteration for s in self.snapshots):
                self.snapshots.append({"iteration": iteration, "team": self._team_state()})
            keep_from = iteration - self.args.comparator_lag
            if self.args.comparator_policy == "lag":
                self.snapshots = [s for s in self.snapshots if s["iteration"] >= keep_from]
            else:
                self.snapshots = self.snapshots[:1]

    def comparator_state(self, iteration: int) -> dict[str, Any] | None:
        """The weights the comparator samples with at `iteration`, or None (the live ones)."""
        if self.args.comparator_policy == "model" and self.comparator_team is None:
            return self.snapshots[0]["team"]
        if self.args.comparator_policy != "lag":
            return None
        target = max(0, iteration - self.args.comparator_lag)
        found = [s for s in self.snapshots if s["iteration"] == target]
        if not found:
            raise RuntimeError(f"no snapshot of iteration {target} (comparator_lag)")
        return found[0]["team"]

    # ----- one iteration ------------------------------------------------------------------------
    def iteration_pairs(
        self, iteration: int, rng: random.Random
    ) -> tuple[list[PreferencePair], dict[str, float]]:
        """This iteration's training pairs (after replay) and what to log about them."""
        self.remember(iteration)
        args, learner = self.args, self.learner
        count = args.preference_num_items
        seeds = pair_seeds(args.seed, iteration * count, count)
        c = args.preference_num_candidates
        c_prime = args.comparator_num_candidates or c
        centralized = args.comparator_generation_mode == "centralized"
        live_comparator = args.comparator_policy == "current" and not centralized
        rollout = candidate_rollout(
            learner, learner.policies, c + (c_prime if live_comparator else 0)
        )
        roots = rollout.build(seeds, 1.0)
        learner.preference_env_steps += rollout.env_steps
        if live_comparator:
            others = [self._split(root, c) for root in roots]
        else:
            others = self._comparator_candidates(roots, iteration, c_prime, centralized)
        made: list[PreferencePair] = []
        current_rewards: list[float] = []
        comparator_rewards: list[float] = []
        env_rewards: list[float] = []
        scored = False
        for root, other in zip(roots, others, strict=True):
            mine = self._candidates_of(root, c)
            env_rewards += [r for *_, r in mine] + [f[2] for f in other if f is not None]
            rescored = self._scored(root, mine, other)
            if rescored is not None:
                mine, other = rescored
                scored = True
            current_rewards += [r for *_, r in mine]
            comparator_rewards += [found[2] for found in other if found is not None]
            made += self._matched(root, mine, other, rng)
        records = [p.to_record() for p in made]
        self.history.append(records)
        self._write(iteration, records)
        chosen = replay_selection(
            self.history,
            args.preference_replay_mode,
            rng,
            k=args.preference_replay_k,
            lam=args.preference_replay_lambda,
            sample_size=args.preference_replay_sample_size,
        )
        metrics = {
            "iter/current_preference_pairs": float(len(made)),
            "iter/train_preference_pairs": float(len(chosen)),
            "iter/total_preference_pairs": float(sum(len(s) for s in self.history)),
            "iter/current_reward_mean": _mean(current_rewards),
            "iter/comparator_reward_mean": _mean(comparator_rewards),
            "comparator_unparsed": float(self.unparsed),
        }
        if hasattr(learner, "candidate_scores"):  # MARLHFIter: who ordered the candidates
            metrics["iter/scored_by_reward_model"] = float(scored)
            metrics["iter/candidate_env_reward_mean"] = _mean(env_rewards)
        return [PreferencePair.from_record(r) for r in chosen], metrics

    def _scored(
        self,
        root: Node,
        mine: list[tuple[dict, dict, float]],
        other: list[tuple[dict, dict, float] | None],
    ) -> tuple[list, list] | None:
        """The candidates with the learner's scores in place of the env's rewards
        (`candidate_scores`: MARLHFIter's reward model), or None: the env's rewards stand."""
        score = getattr(self.learner, "candidate_scores", None)
        if score is None:
            return None
        theirs = [found for found in other if found is not None]
        prompts = [{a: str(root.observations[a]) for a in root.agents}] * (len(mine) + len(theirs))
        found = score(prompts, [texts for texts, *_ in mine + theirs])
        if found is None:
            return None
        ours, rest = iter(found[: len(mine)]), iter(found[len(mine) :])
        rescored = [(texts, ids, next(ours)) for texts, ids, _ in mine]
        others = [None if f is None else (f[0], f[1], next(rest)) for f in other]
        return rescored, others

    def _candidates_of(self, root: Node, c: int) -> list[tuple[dict, dict, float]]:
        """The first c candidates of a root: (texts, ids, reward) per candidate."""
        rewards = candidate_rewards(root)[:c]
        return [
            (
                {a: root.samples[a][k].text for a in root.agents},
                {a: list(root.samples[a][k].completion_ids) for a in root.agents},
                rewards[k],
            )
            for k in range(min(c, len(rewards)))
        ]

    def _split(self, root: Node, c: int) -> list[tuple[dict, dict, float]]:
        """The live comparator's candidates: those after the current policy's first c."""
        rewards = candidate_rewards(root)
        return [
            (
                {a: root.samples[a][k].text for a in root.agents},
                {a: list(root.samples[a][k].completion_ids) for a in root.agents},
                rewards[k],
            )
            for k in range(c, len(rewards))
        ]

    def _comparator_candidates(
        self, roots: list[Node], iteration: int, c_prime: int, centralized: bool
    ) -> list[list[tuple[dict, dict, float] | None]]:
        learner = self.learner
        if self.api is not None:
            return self._api_candidates(roots, c_prime, centralized)
        state = self.comparator_state(iteration)
        live = self._team_state() if state is not None else None
        policies = self.comparator_team or learner.policies
        try:
            if state is not None:
                self._load_team_state(state)
            if centralized:
                return [self._centralized(root, policies, c_prime) for root in roots]
            rollout = candidate_rollout(learner, policies, c_prime)
            theirs = rollout.build([root.seed for root in roots], 1.0)
            learner.preference_env_steps += rollout.env_steps
            out = []
            for other in theirs:
                candidates = self._candidates_of(other, c_prime)
                if self.comparator_team is not None:  # another model's ids: re-tokenize
                    candidates = [
                        (
                            texts,
                            {a: encode_answer(learner.policies[a], t) for a, t in texts.items()},
                            r,
                        )
                        for texts, _, r in candidates
                    ]
                out.append(candidates)
            return out
        finally:
            if live is not None:
                self._load_team_state(live)

    def _centralized(
        self, root: Node, policies: dict[str, Policy], count: int
    ) -> list[tuple[dict, dict, float] | None]:
        """`count` joint answers of one policy to the tagged joint prompt, split per agent and
        rewarded by the env; an answer with no tag at all is None (counted, skipped)."""
        policy = policies[self._writer(root, policies)]
        prompt = tagged_prompt([root.observations[a] for a in root.agents])
        answers = policy.generate([prompt] * count, self.learner.sampling)
        return self._joint_candidates(root, [answer.text for answer in answers])

    def _writer(self, root: Node, agents: Sequence[str]) -> str:
        """The agent whose policy (or, with "api", whose index) writes the joint answers."""
        writer = self.args.comparator_centralized_agent or root.agents[0]
        if writer not in agents:
            raise ValueError(
                f"comparator_centralized_agent={writer!r} is not an agent ({root.agents})"
            )
        return writer

    def _joint_candidates(
        self, root: Node, answers: Sequence[str]
    ) -> list[tuple[dict, dict, float] | None]:
        """Joint answers split into the agents' sections and rewarded; an answer without any
        tag is None (counted in `comparator_unparsed`, skipped)."""
        out: list[tuple[dict, dict, float] | None] = []
        for answer in answers:
            parse = parse_tagged(answer, len(root.agents))
            if parse.unparsable:
                self.unparsed += 1
                out.append(None)
                continue
            out.append(self._stepped(root, dict(zip(root.agents, parse.answers, strict=True))))
        return out

    def _stepped(self, root: Node, texts: dict[str, str]) -> tuple[dict, dict, float]:
        """Another writer's joint answer to a root: stepped in a fresh copy of its episode for
        the team reward, each text re-tokenized by its agent's policy."""
        learner = self.learner
        env = learner.env_factory()
        env.reset(seed=root.seed)
        stepped = env.step(texts)
        learner.preference_env_steps += 1
        ids = {a: encode_answer(learner.policies[a], t) for a, t in texts.items()}
        return texts, ids, team_reward(stepped[1], root.agents)

    def _api_candidates(
        self, roots: list[Node], count: int, centralized: bool
    ) -> list[list[tuple[dict, dict, float] | None]]:
        """The HTTP comparator's candidates: per episode, `count` answers to each agent's
        prompt (decentralized; candidate k is every agent's k-th answer) or to the tagged
        joint prompt (centralized, split as a policy's are), requests sent concurrently."""
        assert self.api is not None
        api = self.api
        jobs: list[tuple[int, str | None, str, int, dict[str, Any] | None]] = []
        for i, root in enumerate(roots):
            if not root.agents:
                continue
            # Only the generic request sends it, and making it resets a fresh env.
            item = self._batch_item(root) if api.format == "generic" else None
            if centralized:
                writer = self._writer(root, root.agents)
                prompt = tagged_prompt([root.observations[a] for a in root.agents])
                jobs.append((i, None, prompt, root.agents.index(writer), item))
            else:
                for j, agent in enumerate(root.agents):
                    jobs.append((i, agent, str(root.observations[agent]), j, item))
        workers = max(1, min(self.args.comparator_api_max_concurrent, len(jobs)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            answers = list(pool.map(lambda job: api.complete(job[2], count, job[3], job[4]), jobs))
        per_root: dict[int, dict[str | None, list[str]]] = {}
        for (i, agent, *_), texts in zip(jobs, answers, strict=True):
            per_root.setdefault(i, {})[agent] = texts
        out: list[list[tuple[dict, dict, float] | None]] = []
        for i, root in enumerate(roots):
            got = per_root.get(i, {})
            if centralized:
                out.append(self._joint_candidates(root, got.get(None, [])))
                continue
            k = min((len(texts) for texts in got.values()), default=0)
            out.append([self._stepped(root, {a: got[a][j] for a in root.agents}) for j in range(k)])
        return out

    def _batch_item(self, root: Node) -> dict[str, Any]:
        """What a generic request sends as `batch_item` (the reference sends its dataset row;
        an env has none): the episode's seed, every agent's first observation and reset
        info."""
        env = self.learner.env_factory()
        _, infos = env.reset(seed=root.seed)
        return {
            "seed": root.seed,
            "observations": {a: str(root.observations[a]) for a in root.agents},
            "infos": {a: infos.get(a, {}) for a in root.agents},
        }

    def _matched(
        self,
        root: Node,
        mine: list[tuple[dict, dict, float]],
        other: Sequence[tuple[dict, dict, float] | None],
        rng: random.Random,
    ) -> list[PreferencePair]:
        """Index-matched pairs of one episode; a skipped comparator candidate (None) drops its
        index from the match."""
        usable = [k for k in range(min(len(mine), len(other))) if other[k] is not None]
        current = [mine[k][2] for k in usable]
        theirs = [other[k][2] for k in usable]  # type: ignore[index]
        sides = {"current": [mine[k] for k in usable], "comparator": [other[k] for k in usable]}
        mean = _mean(current + theirs)
        pairs = []
        for (w_side, w), (l_side, l_) in select_comparison_pairs(
            current, theirs, self.args.pair_selection, self.args.preference_pairs_per_sample, rng
        ):
            winner, loser = sides[w_side][w], sides[l_side][l_]
            pairs.append(
                PreferencePair(
                    prompts={a: str(root.observations[a]) for a in root.agents},
                    chosen=dict(winner[0]),  # type: ignore[index]
                    rejected=dict(loser[0]),  # type: ignore[index]
                    prompt_ids={a: list(root.samples[a][0].prompt_ids) for a in root.agents},
                    chosen_ids=dict(winner[1]),  # type: ignore[index]
                    rejected_ids=dict(loser[1]),  # type: ignore[index]
                    chosen_reward=winner[2],  # type: ignore[index]
                    rejected_reward=loser[2],  # type: ignore[index]
                    candidate_reward_mean=mean,
                    source="comparator" if w_side == "comparator" else "rollout",
                )
            )
        return pairs

    def _write(self, iteration: int, records: list[dict[str, Any]]) -> None:
        if not self.learner.is_main:
            return
        folder = Path(self.args.output_dir) / "preference_replay"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"iteration_{iteration:04d}.json"
        staging = path.with_suffix(".json.tmp")
        staging.write_text(json.dumps(records))
        staging.replace(path)

    # ----- state ----------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"history": self.history, "snapshots": self.snapshots, "unparsed": self.unparsed}

    def load_state(self, state: dict[str, Any]) -> None:
        self.history = state["history"]
        self.snapshots = state["snapshots"]
        self.unparsed = state["unparsed"]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


__all__ = [
    "HELDOUT_SEED_OFFSET",
    "OnlinePairs",
    "candidate_rollout",
    "node_pairs",
    "pair_seeds",
    "sampled_pairs",
]
