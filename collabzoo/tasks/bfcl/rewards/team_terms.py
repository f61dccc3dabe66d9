"""What both BFCL rewards do alike (the reference's native and multi-turn reward files repeat
it): reading the agents' answers, the terms computed from the team's calls (parse, name F1 and
argument match, the count, balance, overlap, lazy and extra-call terms), their weighted
components, the clamp, the AST verdict's guard, and the metrics.

Each reward adds its own terms in its own place (`score_native`, `score_multiturn`); the
components keep the reference's order, so their sum is the reference's unclamped reward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from collabzoo.tasks.bfcl.rewards.ast_match import AstVerdict
from collabzoo.tasks.bfcl.rewards.matching import (
    CallTask,
    GoldCall,
    Table,
    balance,
    cross_agent_overlap,
    function_f1,
    greedy_match,
)
from collabzoo.tasks.bfcl.rewards.parsing import (
    STRING_ARGUMENTS,
    ParsedCalls,
    ToolCall,
    parse_calls,
)


class TeamWeights(Protocol):
    """The constants both rewards' rules hold (`NativeRules`, `MultiTurnRules`)."""

    @property
    def parse_weight(self) -> float: ...
    @property
    def function_weight(self) -> float: ...
    @property
    def argument_weight(self) -> float: ...
    @property
    def count_weight(self) -> float: ...
    @property
    def balance_weight(self) -> float: ...
    @property
    def exact_bonus(self) -> float: ...
    @property
    def overlap_penalty(self) -> float: ...
    @property
    def lazy_agent_penalty(self) -> float: ...
    @property
    def extra_call_penalty(self) -> float: ...
    @property
    def min_reward(self) -> float: ...
    @property
    def max_reward(self) -> float: ...


def check_string_arguments(string_arguments: str) -> None:
    """A rules' `string_arguments` is one of `STRING_ARGUMENTS`, or a clear error."""
    if string_arguments not in STRING_ARGUMENTS:
        raise ValueError(
            f"string_arguments must be one of {STRING_ARGUMENTS}, got {string_arguments!r}"
        )


def parse_answers(
    answers: Sequence[str], task: CallTask, string_arguments: str
) -> list[ParsedCalls]:
    """Each agent's answer read into calls (a missing answer reads as empty)."""
    return [
        parse_calls(text or "", task.order, string_arguments=string_arguments) for text in answers
    ]


def guarded_verdict(check: Callable[[], AstVerdict]) -> AstVerdict:
    """BFCL's verdict from `check`; a schema the checker cannot read (it would raise) fails."""
    try:
        return check()
    except (KeyError, TypeError, AttributeError, StopIteration):
        return AstVerdict(False, "ast_checker:unreadable_schema_or_answer")


@dataclass(frozen=True)
class TeamTerms:
    """A team's calls against the gold calls, before any weight."""

    parse_score: float
    f1: float
    argument_score: float
    exact_calls: int
    matched_calls: int
    gold_count: int
    team_count: int
    count_score: float
    balance_score: float
    overlap_count: int
    overlap_rate: float
    lazy_agents: int
    lazy_rate: float
    extra_rate: float


def team_terms(
    per_agent: Sequence[Sequence[ToolCall]],
    team: Sequence[ToolCall],
    gold: Sequence[GoldCall],
    table: Table | None = None,
) -> TeamTerms:
    """The shared terms of each agent's de-duplicated calls and the team's; `table` is the
    pairs' similarities where the caller has them already."""
    gold_count, team_count = len(gold), len(team)
    argument_score, exact_calls, matched_calls = greedy_match(team, gold, table)
    agent_counts = [len(calls) for calls in per_agent]
    overlap_count = cross_agent_overlap(per_agent)
    lazy_agents = sum(1 for n in agent_counts if n == 0)
    return TeamTerms(
        parse_score=1.0 if team else 0.0,
        f1=function_f1(team, gold),
        argument_score=argument_score,
        exact_calls=exact_calls,
        matched_calls=matched_calls,
        gold_count=gold_count,
        team_count=team_count,
        count_score=max(0.0, 1.0 - abs(team_count - gold_count) / max(1, gold_count)),
        balance_score=balance(agent_counts, gold_count),
        overlap_count=overlap_count,
        overlap_rate=min(1.0, overlap_count / max(1, gold_count)),
        lazy_agents=lazy_agents,
        lazy_rate=lazy_agents / max(1, len(agent_counts)),
        extra_rate=min(1.0, max(0, team_count - gold_count) / max(1, gold_count)),
    )


def team_components(
    rules: TeamWeights,
    terms: TeamTerms,
    exact: bool,
    after_arguments: Mapping[str, float] | None = None,
    after_extra: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The weighted terms in the reference's order, a reward's own after the argument match
    (`after_arguments`) and after the extra-call penalty (`after_extra`); penalties negative."""
    return {
        "parse": rules.parse_weight * terms.parse_score,
        "function_f1": rules.function_weight * terms.f1,
        "arguments": rules.argument_weight * terms.argument_score,
        **(after_arguments or {}),
        "count": rules.count_weight * terms.count_score,
        "balance": rules.balance_weight * terms.balance_score,
        "exact": rules.exact_bonus if exact else 0.0,
        "overlap": 0.0 - rules.overlap_penalty * terms.overlap_rate,
        "lazy": 0.0 - rules.lazy_agent_penalty * terms.lazy_rate,
        "extra_calls": 0.0 - rules.extra_call_penalty * terms.extra_rate,
        **(after_extra or {}),
    }


def clamp_total(components: dict[str, float], rules: TeamWeights) -> float:
    """The components' sum, in their order, clamped to the rules' range; what the clamp took or
    gave is added as the component `clamp`, so the components add up to the total."""
    unclamped = sum(components.values())
    total = max(rules.min_reward, min(rules.max_reward, unclamped))
    components["clamp"] = total - unclamped
    return total


def team_metrics(
    terms: TeamTerms,
    exact: bool,
    raw_call_count: int,
    verdict: AstVerdict,
    category: str,
    rejected_parts: int,
    after_overlap: Mapping[str, float] | None = None,
    after_extra: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The reference logger's metrics in its order, a reward's own after the overlap rate
    (`after_overlap`) and after the extra-call rate (`after_extra`), then BFCL's AST match and
    the parts the parser rejected."""
    return {
        "exact_match": float(exact),
        "parse_success": terms.parse_score,
        "function_f1": float(terms.f1),
        "argument_match": float(terms.argument_score),
        "matched_calls": float(terms.matched_calls),
        "exact_calls": float(terms.exact_calls),
        "pred_call_count": float(terms.team_count),
        "raw_call_count": float(raw_call_count),
        "gold_call_count": float(terms.gold_count),
        "count_score": float(terms.count_score),
        "balance_score": float(terms.balance_score),
        "overlap_count": float(terms.overlap_count),
        "overlap_rate": float(terms.overlap_rate),
        **(after_overlap or {}),
        "lazy_agents": float(terms.lazy_agents),
        "lazy_rate": float(terms.lazy_rate),
        "extra_call_rate": float(terms.extra_rate),
        **(after_extra or {}),
        "ast_match": float(verdict.valid),
        f"ast_match_{category}": float(verdict.valid),
        "rejected_parts": float(rejected_parts),
    }
