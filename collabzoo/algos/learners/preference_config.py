"""Settings of the preference learners (MADPO, MARLHF and their online variants): where the
pairs come from and how they are chosen, the DPO loss, and the online iterations' comparator
and replay. Apart from the loops so a config can be read, validated and documented alone."""

from __future__ import annotations

from dataclasses import dataclass

from collabzoo.algos.learners.config import LearnerConfig, require_at_least, require_positive
from collabzoo.algos.learners.preference_pairs import (
    ONLINE_PAIR_SELECTIONS,
    PAIR_SELECTIONS,
    REPLAY_MODES,
)

COMPARATORS = ("current", "model", "lag")
"""Who the current policy's candidates meet online: itself (fresh samples), a frozen model
(the trainer's `comparator=` team, else the initial policy) or its own weights of
`comparator_lag` iterations ago."""
COMPARATOR_GENERATION_MODES = ("decentralized", "centralized")


def _one_of(config: object, name: str, allowed: tuple[str, ...]) -> None:
    value = getattr(config, name)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


@dataclass
class PreferenceConfig(LearnerConfig):
    """Where the pairs come from and which are kept (reference names and defaults)."""

    num_turns: int | None = 1
    """Preference learning is single-turn (the reference enforces it): only 1 is accepted."""
    agent_learning_rate: float = 5.0e-6
    """AdamW learning rate of every policy."""
    preference_num_candidates: int = 80
    """C: aligned joint candidates sampled per episode (one generate call per model)."""
    preference_pairs_per_sample: int | None = 16
    """Pairs kept per episode at most; None: no limit (required by pair_selection="all")."""
    pair_selection: str = "reward_gap"
    """"reward_gap" (largest reward gaps first), "random" or "all"."""
    preference_num_items: int = 16
    """Episodes whose candidates make the pair set (the reference uses its whole train split;
    an env has no fixed size, so say how many)."""
    preference_data: str | None = None
    """A `datasets` folder or .jsonl/.json/.parquet file of pairs to train on instead of
    sampled ones (see `preference_data`)."""
    train_batch_size: int = 2
    """Pairs per optimizer step."""
    dpo_beta: float = 0.1
    """beta of the DPO loss (MADPO) and of its implicit reward margin."""

    def validate(self) -> None:
        super().validate()
        if self.num_turns != 1:
            raise ValueError(
                f"preference learners are single-turn (pairs of first answers): num_turns must "
                f"be 1, got {self.num_turns!r}"
            )
        require_positive(self, "agent_learning_rate", "dpo_beta")
        require_at_least(self, 2, "preference_num_candidates")
        require_at_least(self, 1, "preference_num_items", "train_batch_size")
        require_at_least(self, 1, "preference_pairs_per_sample", optional=True)
        self._check_selection(PAIR_SELECTIONS)

    def _check_selection(self, allowed: tuple[str, ...]) -> None:
        _one_of(self, "pair_selection", allowed)
        if self.pair_selection == "all" and self.preference_pairs_per_sample is not None:
            raise ValueError(
                'pair_selection="all" keeps every pair: set preference_pairs_per_sample=None '
                f"(got {self.preference_pairs_per_sample})"
            )


@dataclass
class OnlinePreferenceConfig(PreferenceConfig):
    """One update is one iteration: pairs from the current policy against a comparator, a
    replay of earlier iterations' pairs, then training on them (reference defaults)."""

    max_updates: int = 6
    """Iterations (the reference's num_iterations)."""
    preference_num_candidates: int = 20
    preference_pairs_per_sample: int | None = 4
    pair_selection: str = "comparator_reward"
    """"comparator_reward" (the comparator's best first, then the gap), "reward_gap",
    "random" or "all"."""
    num_train_epochs: int = 1
    """Passes over an iteration's pairs."""
    comparator_policy: str = "current"
    """"current", "model" or "lag" (see `COMPARATORS`)."""
    comparator_lag: int = 1
    """With "lag": the weights of this many iterations ago (1: the previous iteration's;
    the reference's comparator_history_k=1 is the current weights, so it needs 2)."""
    comparator_num_candidates: int | None = None
    """C': the comparator's candidates per episode; None: C."""
    comparator_generation_mode: str = "decentralized"
    """"centralized": one policy (`comparator_centralized_agent`) answers a joint prompt with
    a tagged section per agent (<agent_0>...</agent_0>); an answer without any tag is counted
    (`comparator_unparsed`) and skipped."""
    comparator_centralized_agent: str | None = None
    """The agent whose policy writes the centralized comparator's answers; None: the first."""
    preference_replay_mode: str = "current"
    """"current", "nearest_k", "all_history" or "lambda_decay"."""
    preference_replay_k: int | None = None
    """Iterations replayed by "nearest_k"."""
    preference_replay_lambda: float | None = None
    """lambda of "lambda_decay": weights (1 - lambda) lambda^age, age 0 the newest."""
    preference_replay_sample_size: int | None = None
    """Pairs a replay draws; None: as many as this iteration made."""

    def validate(self) -> None:
        super().validate()
        require_at_least(self, 1, "num_train_epochs", "comparator_lag")
        require_at_least(self, 1, "comparator_num_candidates", optional=True)
        require_at_least(self, 0, "preference_replay_sample_size", optional=True)
        _one_of(self, "comparator_policy", COMPARATORS)
        _one_of(self, "comparator_generation_mode", COMPARATOR_GENERATION_MODES)
        _one_of(self, "preference_replay_mode", REPLAY_MODES)
        require_at_least(self, 1, "preference_replay_k", optional=True)
        if self.preference_replay_mode == "nearest_k" and self.preference_replay_k is None:
            raise ValueError(
                'preference_replay_mode="nearest_k" replays the last k iterations: set '
                "preference_replay_k (1 or more)"
            )
        if self.preference_replay_mode == "lambda_decay":
            value = self.preference_replay_lambda
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (0.0 <= value <= 1.0)
            ):
                raise ValueError(
                    'preference_replay_mode="lambda_decay" needs preference_replay_lambda in '
                    f"[0, 1], got {value!r}"
                )
        if self.preference_data is not None:
            raise ValueError(
                "the online variants sample their pairs every iteration: preference_data is "
                "for the offline learners (MADPO, MARLHF)"
            )

    def _check_selection(self, allowed: tuple[str, ...]) -> None:
        super()._check_selection(ONLINE_PAIR_SELECTIONS)


__all__ = [
    "COMPARATORS",
    "COMPARATOR_GENERATION_MODES",
    "OnlinePreferenceConfig",
    "PreferenceConfig",
]
