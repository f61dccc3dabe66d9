"""TravelPlanner's pure scoring: the two agents' answers in, the merged plan, the reference's
team reward with every term named, and TravelPlanner's own metrics out.

The reference reward (OpenMLRL/LLM_Collab_Travel, the "fixed" dense reward of README@c7cb5b1,
`single_turn_reward.py@c7cb5b1`; max 1.0, clamped to [-0.25, 1.0]):

    R = 0.02 P + 0.03 E + 0.04 V + 0.02 J + 0.14 J B + 0.57 J C + 0.08 J G + 0.10 U
        - 0.10 max(invalid-action rate, recovery violation rate) - 0.05 conflict rate
        - 0.05 overlap rate - 0.10 reference-copy rate - 0.05 overlength rate

V is the mean strict validity of the two answers, J joint validity (both strict and a clean
merge), B = 0.2 mean + 0.8 min over the roles of their grounded share of their required slots,
G the plan's required grounded recall, C = B^0.65 Q^0.35 with Q the plan quality (coverage,
G, grounding F1, the commonsense and hard soft scores, weighted by S = 0.1 + 0.9 G), U the
collaboration success, P the answers' format progress and soft validity, E the same geometric
composite on a plan rebuilt from the slots recovered from the text. Components: one per term,
named as the reference names them, penalties negative, and `clamp` for what the clamp (and the
reference's snap of a perfect plan to exactly 1.0) changed.

Quirk kept by default: the merger's shared cap ceil(7D/2) is under agent 1's 4D slots for every
trip of two days or more, so agent 1's full answer is dropped, J is always 0 and the gated
terms never pay (an all-"-" team scores about 0.03, a slot-split annotated plan about 0.05).
`capacity="role"` caps each agent at its own slot count instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from collabzoo.rewards import RewardBreakdown
from collabzoo.tasks.travelplanner.rewards import benchmark
from collabzoo.tasks.travelplanner.rewards.catalog import PLAN_FIELDS, owned_slots
from collabzoo.tasks.travelplanner.rewards.parsing import (
    CAPACITIES,
    Merge,
    Recovery,
    capacities_for,
    merge,
    parse_answer,
    recover,
    recovered_merge,
)
from collabzoo.tasks.travelplanner.rewards.plan import PlanCheck, check_plan
from collabzoo.tasks.travelplanner.rewards.task import COPY_NGRAM, TravelTask, words

MAX_REWARD = 1.0
MIN_REWARD = -0.25
WEIGHTS = {
    "protocol_progress": 0.02,
    "recovered_semantic": 0.03,
    "action_validity": 0.04,
    "team_action": 0.02,
    "strict_balance": 0.14,
    "strict_quality": 0.57,
    "strict_grounding": 0.08,
    "final_success": 0.10,
}
PENALTIES = {
    "invalid_action": 0.10,
    "conflict": 0.05,
    "overlap": 0.05,
    "reference_copy": 0.10,
    "overlong": 0.05,
}
PLAN_WEIGHTS = {
    "assignment_coverage": 0.20,
    "required_grounded_recall": 0.25,
    "grounding_f1": 0.15,
    "commonsense_soft": 0.25,
    "hard_constraint_soft": 0.15,
}
SUPPORT_FLOOR = 0.10
BOTTLENECK = (0.2, 0.8)
"""(mean, min) weights: both roles count, the weaker one most."""

__all__ = [
    "CAPACITIES",
    "MAX_REWARD",
    "TravelOutcome",
    "TravelTask",
    "benchmark_query",
    "score_travel",
]


def _clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return max(low, min(high, value))


def _bottleneck(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    return BOTTLENECK[0] * (sum(values) / len(values)) + BOTTLENECK[1] * min(values)


def _geometric(balance: float, quality: float) -> float:
    if balance <= 0.0 or quality <= 0.0:
        return 0.0
    return balance**0.65 * quality**0.35


def _quality(scores: dict[str, float]) -> float:
    grounding = scores["required_grounded_recall"]
    support = SUPPORT_FLOOR + (1.0 - SUPPORT_FLOOR) * grounding
    return math.fsum(
        (
            support * PLAN_WEIGHTS["assignment_coverage"] * scores["assignment_coverage"],
            PLAN_WEIGHTS["required_grounded_recall"] * grounding,
            PLAN_WEIGHTS["grounding_f1"] * scores["grounding_f1"],
            support * PLAN_WEIGHTS["commonsense_soft"] * scores["commonsense_soft"],
            support * PLAN_WEIGHTS["hard_constraint_soft"] * scores["hard_constraint_soft"],
        )
    )


def copy_rate(text: str, task: TravelTask) -> float:
    """Sustained copying of the reference information: the share of the answer's word 8-grams
    found in it, 0 up to 20% and 1 from 80%."""
    tokens = words(text)
    reference = task.reference_ngrams
    if len(tokens) < COPY_NGRAM or not reference:
        return 0.0
    grams = [tuple(tokens[i : i + COPY_NGRAM]) for i in range(len(tokens) - COPY_NGRAM + 1)]
    return _clamp((sum(g in reference for g in grams) / len(grams) - 0.20) / 0.60)


def overlong_rate(text: str, agent: int, days: int) -> float:
    limit = 240 + 180 * len(owned_slots(agent, days))
    return _clamp((len(text or "") - limit) / max(1, limit))


def benchmark_query(task: TravelTask) -> benchmark.Query:
    return benchmark.Query(
        task.org,
        task.dest,
        task.days,
        int(task.visiting_city_number),
        int(task.people_number),
        float(task.budget),
        dict(task.local_constraint or {}),
        str(task.level),
    )


@dataclass(frozen=True)
class TravelOutcome:
    """A scored joint answer: the merged plan, the reference's checks of it, what was recovered
    from the text, TravelPlanner's own checks, and the reward."""

    merged: Merge
    check: PlanCheck
    recovered: tuple[Recovery, ...]
    benchmark: benchmark.BenchmarkResult
    breakdown: RewardBreakdown
    agent_valid: tuple[bool, ...]


def _contributions(merged: Merge, check: PlanCheck, task: TravelTask) -> list[float]:
    """Each role's grounded share of its required slots (0 for a role with none)."""
    validity = check.required_validity(task)
    shares = []
    for agent, assignments in enumerate(merged.per_agent):
        mine = set(owned_slots(agent, task.days)) & set(validity)
        grounded = sum(validity[s] for s in mine if s in assignments and s in merged.merged)
        shares.append(grounded / len(mine) if mine else 0.0)
    return shares


def score_travel(
    task: TravelTask,
    answers: Sequence[str],
    *,
    capacity: str = "reference",
    official: bool = True,
) -> TravelOutcome:
    """The reference reward of agent 0's and agent 1's answers on `task`, with TravelPlanner's
    own metrics of the merged plan (`official=False` skips those, for speed)."""
    if len(answers) != 2:
        raise ValueError(f"TravelPlanner takes two answers (agents 0 and 1), got {len(answers)}")
    days = task.days
    caps = capacities_for(capacity, days)
    texts = [a if isinstance(a, str) else "" for a in answers]
    parses = [
        parse_answer(t, agent=i, days=days, capacity=c)
        for i, (t, c) in enumerate(zip(texts, caps, strict=True))
    ]
    merged = merge(parses, days, caps)
    check = check_plan(task, merged)
    scores = check.scores
    # per-agent validity (the reference's evaluation module)
    valid: list[bool] = []
    soft: list[float] = []
    verified: list[float] = []
    for agent, (parsed, accepted) in enumerate(zip(parses, merged.per_agent, strict=True)):
        owned = set(owned_slots(agent, days))
        count = len(accepted)
        owned_count = sum(slot in owned for slot in accepted)
        precision = owned_count / count if count else 0.0
        fidelity = _clamp(1.0 - abs(count - len(owned)) / max(1, len(owned)))
        acceptance = count / parsed.raw_count if parsed.raw_count else 0.0
        parts = (
            float(parsed.schema_valid) + float(parsed.agent_id_match)
            + float(parsed.capacity_valid) + precision + fidelity + acceptance
        )  # fmt: skip
        soft.append(float(parsed.decoded) * parts / 6.0)
        valid.append(
            parsed.strict
            and set(accepted) <= owned
            and count == len(owned)
            and count == parsed.raw_count
        )
        verified.append(
            sum(
                check.slot_validity.get(s, 0.0)
                for s in accepted
                if s in owned and s in merged.merged
            )
            / max(1, len(owned))
        )
    clean = not (
        merged.conflicts or merged.overlap or merged.invalid or merged.self_duplicates
        or merged.extra
    )  # fmt: skip
    team_valid = all(valid) and clean
    shares = _contributions(merged, check, task)
    contribution = _bottleneck(shares)
    total_slots = len(PLAN_FIELDS) * days
    raw_total = sum(p.raw_count for p in parses)
    overlap_rate = min(1.0, merged.overlap / max(1, total_slots))
    conflict_rate = min(1.0, len(merged.conflicts) / max(1, total_slots))
    invalid_rate = min(
        1.0, (merged.invalid + merged.self_duplicates + merged.extra) / max(1, raw_total)
    )
    both_verified = all(v >= 1.0 - 1e-9 for v in verified)
    success = float(bool(scores["plan_success"]) and team_valid and both_verified)
    # the shaping surface: recovery, copy and length
    recovered = tuple(
        recover(t, p, agent=i, days=days)
        for i, (t, p) in enumerate(zip(texts, parses, strict=True))
    )
    rebuilt = recovered_merge(recovered, days, caps)
    rebuilt_check = check_plan(task, rebuilt)
    rebuilt_shares = _contributions(rebuilt, rebuilt_check, task)
    violation = max(max(r.overflow_rate, r.rejected_rate) for r in recovered)
    protocol = _bottleneck(
        [0.5 * r.format_progress + 0.5 * s for r, s in zip(recovered, soft, strict=True)]
    )
    semantic = _bottleneck(
        [
            share * r.structure * (1.0 - max(r.overflow_rate, r.rejected_rate)) ** 2
            for share, r in zip(rebuilt_shares, recovered, strict=True)
        ]
    )
    quality = _quality(scores)
    rebuilt_quality = _quality(rebuilt_check.scores)
    action_validity = sum(valid) / 2
    joint = float(team_valid)
    grounding = scores["required_grounded_recall"]
    positive = {
        "protocol_progress": WEIGHTS["protocol_progress"] * protocol,
        "recovered_semantic": WEIGHTS["recovered_semantic"] * _geometric(semantic, rebuilt_quality),
        "action_validity": WEIGHTS["action_validity"] * action_validity,
        "team_action": WEIGHTS["team_action"] * joint,
        "strict_balance": WEIGHTS["strict_balance"] * joint * contribution,
        "strict_quality": WEIGHTS["strict_quality"] * joint * _geometric(contribution, quality),
        "strict_grounding": WEIGHTS["strict_grounding"] * joint * grounding,
        "final_success": WEIGHTS["final_success"] * success,
    }
    copy = max(copy_rate(t, task) for t in texts)
    overlong = max(overlong_rate(t, i, days) for i, t in enumerate(texts))
    penalty = {
        "invalid_action": PENALTIES["invalid_action"] * max(invalid_rate, violation),
        "conflict": PENALTIES["conflict"] * conflict_rate,
        "overlap": PENALTIES["overlap"] * overlap_rate,
        "reference_copy": PENALTIES["reference_copy"] * copy,
        "overlong": PENALTIES["overlong"] * overlong,
    }
    unclamped = math.fsum((*positive.values(), *(-v for v in penalty.values())))
    perfect = (
        success == 1.0 and action_validity == 1.0 and joint == 1.0 and contribution == 1.0
        and grounding == 1.0 and protocol == 1.0 and semantic == 1.0 and quality == 1.0
        and rebuilt_quality == 1.0 and not any(penalty.values())
    )  # fmt: skip
    if perfect and abs(unclamped - 1.0) <= 8 * math.ulp(1.0):
        unclamped = 1.0
    total = _clamp(unclamped, MIN_REWARD, MAX_REWARD)
    components = {**positive, **{k: -v for k, v in penalty.items()}}
    components["clamp"] = total - math.fsum(components.values())
    result = (
        benchmark.evaluate(
            benchmark_query(task), benchmark.benchmark_plan(merged.plan()), task.sandbox
        )
        if official
        else benchmark.BenchmarkResult({}, None, {})
    )
    metrics: dict[str, float] = {
        **result.metrics,
        "action_validity": action_validity,
        "team_action_success": joint,
        "collaboration_success": success,
        "required_cooperative_contribution": contribution,
        "required_grounded_recall": grounding,
        "entity_grounding_precision": scores["entity_grounding_precision"],
        "grounding_f1": scores["grounding_f1"],
        "required_cost_completeness": scores["required_cost_completeness"],
        "reference_budget_soft": check.hard_soft["budget"],
        "reference_budget_pass": scores["budget_pass"],
        "route_scaffold_match": scores["route_scaffold_match"],
        "reference_plan_delivery": scores["plan_delivery"],
        "required_plan_completion": scores["required_plan_completion"],
        "reference_commonsense_micro": scores["commonsense_micro"],
        "reference_commonsense_macro": scores["commonsense_macro"],
        "reference_hard_micro": scores["hard_micro"],
        "reference_hard_macro": scores["hard_macro"],
        "reference_plan_success": scores["plan_success"],
        "assignment_coverage": scores["assignment_coverage"],
        "estimated_cost": scores["estimated_cost"],
        "conflicts": float(len(merged.conflicts)),
        "overlaps": float(merged.overlap),
        "dropped_answers": float(sum(not p.capacity_valid for p in parses)),
    }
    return TravelOutcome(
        merged,
        check,
        recovered,
        result,
        RewardBreakdown(total=total, components=components, metrics=metrics),
        tuple(valid),
    )
