"""The native parallel reward (`native_parallel_reward.py@e233fc1`, constants from the configs):
each agent's calls are de-duplicated, the team's calls are their union (de-duplicated again),
matched without order against the gold calls.

    + 0.05 parse (any call)          + 0.25 function-name F1        + 0.35 argument match
    + 0.10 count                     + 0.15 balance                 + 0.20 exact
    - 0.20 overlap rate              - 0.15 lazy rate               - 0.05 extra-call rate
    - 0.10 self-duplicate rate (only with self_duplicates="penalize"; the reference's "dedupe"
      counts them and charges nothing)
    clamped to [-0.4, 1.2]; the reachable maximum is 1.10.

Every term is a component of the breakdown (with `clamp`, what the clamp took or gave, so the
components add up to the total); the metrics are the reference logger's, plus BFCL's AST match.
Quirks kept: see `matching` (list-of-lists golds, `""` optional markers) and `parsing` (lower-cased
de-duplication, so a gold that repeats an identical call, or calls differing only in case,
cannot all be matched).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collabzoo.rewards.breakdown import RewardBreakdown
from collabzoo.tasks.bfcl.rewards.ast_match import AstVerdict, ast_match
from collabzoo.tasks.bfcl.rewards.matching import CallTask
from collabzoo.tasks.bfcl.rewards.parsing import (
    ParsedCalls,
    ToolCall,
    dedupe,
)
from collabzoo.tasks.bfcl.rewards.team_terms import (
    check_string_arguments,
    clamp_total,
    guarded_verdict,
    parse_answers,
    team_components,
    team_metrics,
    team_terms,
)

SELF_DUPLICATE_MODES = ("dedupe", "penalize")


@dataclass(frozen=True)
class NativeRules:
    """The reference's reward constants (`bfcl_reward` in its configs) and reading options."""

    parse_weight: float = 0.05
    function_weight: float = 0.25
    argument_weight: float = 0.35
    count_weight: float = 0.10
    balance_weight: float = 0.15
    exact_bonus: float = 0.20
    overlap_penalty: float = 0.20
    lazy_agent_penalty: float = 0.15
    extra_call_penalty: float = 0.05
    self_duplicate_mode: str = "dedupe"
    self_duplicate_penalty: float = 0.10
    min_reward: float = -0.4
    max_reward: float = 1.2
    string_arguments: str = "coerce"

    def __post_init__(self) -> None:
        if self.self_duplicate_mode not in SELF_DUPLICATE_MODES:
            raise ValueError(
                f"self_duplicate_mode must be one of {SELF_DUPLICATE_MODES}, "
                f"got {self.self_duplicate_mode!r}"
            )
        check_string_arguments(self.string_arguments)


NATIVE_MAX = 1.10
"""The reachable maximum: every positive term full and no penalty."""


@dataclass(frozen=True)
class CallScore:
    """A turn's score: the breakdown, what each agent's answer was read into, the team's calls
    and BFCL's verdict on them."""

    breakdown: RewardBreakdown
    parsed: list[ParsedCalls]
    per_agent: list[list[ToolCall]]
    team: list[ToolCall]
    ast: AstVerdict = field(default_factory=lambda: AstVerdict(False))


def decoded(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """Calls in the form BFCL's checker reads: `[{name: {parameter: value}}]`."""
    return [{c.name: c.arguments} for c in calls]


def checked_ast(task: CallTask, calls: Sequence[ToolCall]) -> AstVerdict:
    """BFCL's verdict; a schema the checker cannot read (it would raise) fails the row."""
    return guarded_verdict(
        lambda: ast_match(task.functions, decoded(calls), task.ground_truth, task.category)
    )


def score_native(
    answers: Sequence[str], task: CallTask, rules: NativeRules | None = None
) -> CallScore:
    """The team reward of one native parallel turn, agent answers in agent order."""
    rules = rules or NativeRules()
    gold = task.gold
    parsed = parse_answers(answers, task, rules.string_arguments)
    raw = [p.calls for p in parsed]
    per_agent = [dedupe(calls) for calls in raw]
    team = dedupe(c for calls in per_agent for c in calls)

    terms = team_terms(per_agent, team, gold)
    gold_count = terms.gold_count
    duplicate_count = sum(len(r) - len(d) for r, d in zip(raw, per_agent, strict=True))
    duplicate_rate = min(1.0, duplicate_count / max(1, gold_count))
    penalize = rules.self_duplicate_mode == "penalize"
    duplicate_penalty = rules.self_duplicate_penalty * duplicate_rate if penalize else 0.0
    exact = terms.exact_calls == gold_count and terms.team_count == gold_count and gold_count > 0

    components = team_components(
        rules, terms, exact, after_extra={"self_duplicates": 0.0 - duplicate_penalty}
    )
    total = clamp_total(components, rules)
    verdict = checked_ast(task, team)
    metrics = team_metrics(
        terms,
        exact,
        sum(len(r) for r in raw),
        verdict,
        task.category,
        sum(len(p.rejected) for p in parsed),
        after_overlap={
            "self_duplicate_count": float(duplicate_count),
            "self_duplicate_rate": float(duplicate_rate),
        },
    )
    return CallScore(
        RewardBreakdown(float(total), components, metrics), parsed, per_agent, team, verdict
    )
