"""The multi-turn flat reward (`multiturn_flat_reward.py@6de881e`): each agent's calls are
de-duplicated, then the team's sequence is agent 0's calls followed by agent 1's, order kept, and
scored against the turn's ordered gold calls.

    + 0.05 parse      + 0.15 function-name F1     + 0.20 argument match (unordered, as native)
    + 0.25 ordered alignment (best monotone alignment of similarities, / |G|, at most 1)
    + 0.10 prefix (similarities from the start until the first zero, / |G|, at most 1)
    + 0.10 count      + 0.15 balance              + 0.20 if the sequences are exactly equal
    - 0.15 overlap rate    - 0.25 lazy rate       - 0.15 extra-call rate
    clamped to [-0.4, 1.2]; the maximum is 1.20.

Quirks kept: ordered credit needs agent 0's calls to come first in the gold order, and a turn
with one gold call cannot reach the maximum (one agent is lazy, or the two overlap). The AST
metric here is `ordered_ast_match`, this suite's own (BFCL scores multi-turn by execution).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collabzoo.rewards.breakdown import RewardBreakdown
from collabzoo.tasks.bfcl.rewards.ast_match import AstVerdict, ordered_ast_match
from collabzoo.tasks.bfcl.rewards.matching import CallTask, Table, similarities
from collabzoo.tasks.bfcl.rewards.native import CallScore, decoded
from collabzoo.tasks.bfcl.rewards.parsing import ToolCall, dedupe
from collabzoo.tasks.bfcl.rewards.team_terms import (
    check_string_arguments,
    clamp_total,
    guarded_verdict,
    parse_answers,
    team_components,
    team_metrics,
    team_terms,
)

MULTITURN_MAX = 1.20


@dataclass(frozen=True)
class MultiTurnRules:
    """The reference's multi-turn reward constants (`MultiturnFlatRewardConfig`)."""

    parse_weight: float = 0.05
    function_weight: float = 0.15
    argument_weight: float = 0.20
    order_weight: float = 0.25
    prefix_weight: float = 0.10
    count_weight: float = 0.10
    balance_weight: float = 0.15
    exact_bonus: float = 0.20
    overlap_penalty: float = 0.15
    lazy_agent_penalty: float = 0.25
    extra_call_penalty: float = 0.15
    min_reward: float = -0.4
    max_reward: float = 1.2
    string_arguments: str = "coerce"

    def __post_init__(self) -> None:
        check_string_arguments(self.string_arguments)


def alignment(table: Table, gold_count: int) -> float:
    """The best monotone alignment's summed similarity over |G|, at most 1."""
    if not gold_count or not table:
        return 0.0
    previous = [0.0] * (gold_count + 1)
    for scores in table:
        row = [0.0]
        for j in range(1, gold_count + 1):
            row.append(max(previous[j], row[j - 1], previous[j - 1] + scores[j - 1][0]))
        previous = row
    return min(1.0, previous[-1] / max(1, gold_count))


def prefix(table: Table, gold_count: int) -> float:
    """Similarities summed position by position from the start until the first zero, over
    |G|, at most 1."""
    if not gold_count or not table:
        return 0.0
    total = 0.0
    for k in range(min(len(table), gold_count)):
        score = table[k][k][0]
        if score <= 0.0:
            break
        total += score
    return min(1.0, total / max(1, gold_count))


def ordered_exact(table: Table, gold_count: int) -> bool:
    if len(table) != gold_count or not gold_count:
        return False
    return all(table[k][k][1] for k in range(gold_count))


def checked_ordered_ast(task: CallTask, calls: Sequence[ToolCall]) -> AstVerdict:
    return guarded_verdict(
        lambda: ordered_ast_match(task.functions, decoded(calls), task.ground_truth)
    )


def score_multiturn(
    answers: Sequence[str], task: CallTask, rules: MultiTurnRules | None = None
) -> CallScore:
    """The team reward of one flattened multi-turn step, agent answers in agent order."""
    rules = rules or MultiTurnRules()
    gold = task.gold
    parsed = parse_answers(answers, task, rules.string_arguments)
    per_agent = [dedupe(p.calls) for p in parsed]
    team = [c for calls in per_agent for c in calls]

    gold_count = len(gold)
    table = similarities(team, gold)
    terms = team_terms(per_agent, team, gold, table)
    order_score = alignment(table, gold_count)
    prefix_score = prefix(table, gold_count)
    exact = ordered_exact(table, gold_count)

    components = team_components(
        rules,
        terms,
        exact,
        after_arguments={
            "order": rules.order_weight * order_score,
            "prefix": rules.prefix_weight * prefix_score,
        },
    )
    total = clamp_total(components, rules)
    verdict = checked_ordered_ast(task, team)
    metrics = team_metrics(
        terms,
        exact,
        sum(len(p.calls) for p in parsed),
        verdict,
        task.category,
        sum(len(p.rejected) for p in parsed),
        after_extra={
            "sequence_score": float(order_score),
            "prefix_score": float(prefix_score),
        },
    )
    return CallScore(
        RewardBreakdown(float(total), components, metrics), parsed, per_agent, team, verdict
    )
