"""Settings of the preference learners (MADPO, MARLHF and their online variants): where the
pairs come from and how they are chosen, the DPO loss, and the online iterations' comparator
and replay. Apart from the loops so a config can be read, validated and documented alone."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from collabzoo.algos.learners.comparator_api import api_format
from collabzoo.algos.learners.config import LearnerConfig, require_at_least, require_positive
from collabzoo.algos.learners.preference_pairs import (
    ONLINE_PAIR_SELECTIONS,
    PAIR_SELECTIONS,
    REPLAY_MODES,
)

COMPARATORS = ("current", "model", "lag", "api")
"""Who the current policy's candidates meet online: itself (fresh samples), a frozen model
(the trainer's `comparator=` team, else the initial policy), its own weights of
`comparator_lag` iterations ago, or an HTTP completion service (`comparator_api_url`)."""
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
    """"current", "model", "lag" or "api" (see `COMPARATORS`)."""
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
    comparator_api_url: str | None = None
    """With "api": the service's full URL (http:// or https://), e.g. an OpenAI-compatible
    server's .../v1/chat/completions."""
    comparator_api_format: str = "generic"
    """"generic" (CoMLRL's request and response), "openai_chat", "openai_responses" or
    "anthropic" (CoMLRL's spellings such as "openai" or "messages" are read too)."""
    comparator_api_model: str | None = None
    """The model name sent with every request (hosted APIs need one; None: not sent)."""
    comparator_api_max_n_per_request: int | None = None
    """openai_chat only: answers asked for in one request (n); None: all C' at once (1 for
    DeepSeek, which has no n)."""
    comparator_api_timeout: float = 120.0
    """Seconds one request may take."""
    comparator_api_retries: int = 0
    """Tries after a failed request (connection error, timeout, HTTP 429 or 5xx), waiting 1, 2,
    4, ... s; 0: none, as the reference."""
    comparator_api_headers: dict[str, str] | None = None
    """Extra HTTP headers (a JSON object on the command line)."""
    comparator_api_key_env: str | None = None
    """The environment variable holding the service's key (sent as
    `comparator_api_key_header: comparator_api_key_prefix KEY`); refused when it is not set.
    A key is never a config value, so it stays out of saved configs and logs."""
    comparator_api_key_header: str = "Authorization"
    """The header the key goes in ("x-api-key" for anthropic unless another is named)."""
    comparator_api_key_prefix: str = "Bearer"
    """Text before the key in its header ("" for none; dropped for anthropic)."""
    comparator_api_response_field: str | None = "completions"
    """generic: the (dotted) field of the response holding the list of texts; when absent,
    "completions", "responses", "outputs" and "choices" are tried."""
    comparator_api_extra_body: dict[str, Any] | None = None
    """Fields added to (over) every request body, e.g. {"stop": ["###"], "seed": 0}."""
    comparator_api_max_concurrent: int = 8
    """Requests in flight at once (one per agent and episode; one per episode centralized)."""
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
        self._check_api()
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

    def _check_api(self) -> None:
        """The HTTP comparator's settings: a URL with "api" (and only then), a known format,
        mappings where mappings go, and the key's environment variable set."""
        url = self.comparator_api_url
        if self.comparator_policy != "api":
            if url is not None:
                raise ValueError(
                    f"comparator_api_url is set ({url!r}) but comparator_policy is "
                    f'{self.comparator_policy!r}: set comparator_policy="api" to use the service'
                )
            return
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(
                'comparator_policy="api" needs comparator_api_url, the service\'s full URL '
                f"starting with http:// or https://, got {url!r}"
            )
        fmt = api_format(self.comparator_api_format)
        require_positive(self, "comparator_api_timeout")
        require_at_least(self, 0, "comparator_api_retries")
        require_at_least(self, 1, "comparator_api_max_concurrent")
        require_at_least(self, 1, "comparator_api_max_n_per_request", optional=True)
        if self.comparator_api_max_n_per_request is not None and fmt != "openai_chat":
            raise ValueError(
                "comparator_api_max_n_per_request splits openai_chat requests only: generic "
                "asks for all C' answers in one request (num_return_sequences) and "
                f"{fmt} for one a request; leave it None with format {fmt!r}"
            )
        for name in ("comparator_api_headers", "comparator_api_extra_body"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{name} must be a mapping (a JSON object) or None, got {value!r}")
        headers = self.comparator_api_headers or {}
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise ValueError(f"comparator_api_headers must map text to text, got {headers!r}")
        name = self.comparator_api_key_env
        if name is not None and not os.environ.get(name):
            raise ValueError(
                f"comparator_api_key_env={name!r} names an environment variable that is not "
                f"set (or empty): export {name}=<the service's key>, or leave "
                "comparator_api_key_env unset for a service without a key"
            )


__all__ = [
    "COMPARATORS",
    "COMPARATOR_GENERATION_MODES",
    "OnlinePreferenceConfig",
    "PreferenceConfig",
]
