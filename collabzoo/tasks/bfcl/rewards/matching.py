"""A task's gold calls and how a read call is compared with them, as the reference compares.

A value matches an argument when it equals one of the gold's accepted values in canonical form
(numbers within 1e-6). The accepted values are a list read as alternatives at every depth, so a
gold whose accepted value is itself a list (`multiples: [[3, 5]]`) offers 3 and 5, never the list
[3, 5] (a reference quirk: 87 of the 400 parallel rows have one). BFCL's optional-parameter marker
`""` is an accepted value like any other, so omitting the parameter loses its credit (quirk).

Call similarity: 0 for another name; for a gold call without arguments 1.0 when the call has none,
else 0.7; otherwise matched gold arguments / gold arguments, times g / (g + e) when the call gives
e argument names the gold has not. Exact: every gold argument matched and none extra.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from typing import Any

from collabzoo.tasks.bfcl.rewards.parsing import ToolCall, canonical_value, parameter_order

NUMBER_TOLERANCE = 1e-6


def _leaves(accepted: Any, into: list[Any]) -> list[Any]:
    if isinstance(accepted, list):
        for item in accepted:
            _leaves(item, into)
    else:
        into.append(canonical_value(accepted))
    return into


@dataclass(frozen=True, slots=True)
class Accepted:
    """An argument's accepted values in canonical form: numbers apart (compared within the
    tolerance), the others as a set."""

    numbers: tuple[float, ...]
    others: frozenset[Any]

    @classmethod
    def of(cls, accepted: Any) -> Accepted:
        leaves = _leaves(accepted, [])
        numbers = tuple(float(v) for v in leaves if isinstance(v, (int, float)))
        return cls(numbers, frozenset(v for v in leaves if not isinstance(v, (int, float))))

    def matches(self, canonical: Any) -> bool:
        if isinstance(canonical, (int, float)):
            try:
                number = float(canonical)
            except OverflowError:
                return False
            return any(abs(number - a) < NUMBER_TOLERANCE for a in self.numbers)
        return canonical in self.others


@dataclass(frozen=True, slots=True)
class GoldCall:
    name: str
    arguments: dict[Any, Any]
    accepted: tuple[tuple[Any, Accepted], ...]


def gold_calls(ground_truth: Sequence[Any]) -> list[GoldCall]:
    """The gold calls of a possible-answer list `[{name: {parameter: [accepted]}}]`, skipping
    entries that are not one-call objects, as the reference does."""
    calls = []
    for entry in ground_truth or []:
        if not isinstance(entry, dict) or not entry:
            continue
        name, arguments = next(iter(entry.items()))
        arguments = dict(arguments or {})
        accepted = tuple((k, Accepted.of(v)) for k, v in arguments.items())
        calls.append(GoldCall(str(name), arguments, accepted))
    return calls


def similarity(call: ToolCall, gold: GoldCall) -> tuple[float, bool]:
    """(similarity, exact) of a read call to a gold call."""
    if call.name != gold.name:
        return 0.0, False
    if not gold.arguments:
        exact = not call.arguments
        return (1.0 if exact else 0.7), exact
    canonical = call.canonical
    matched = 0
    for name, accepted in gold.accepted:
        if name in canonical:
            value = canonical[name]
            if isinstance(value, (int, float)):
                matched += accepted.matches(value)
            elif value in accepted.others:
                matched += 1
    size = len(gold.arguments)
    base = matched / max(1, size)
    extra = len(call.arguments.keys() - gold.arguments.keys())
    if extra:
        base *= size / (size + extra)
    return float(base), matched == size and extra == 0


_SCORE_THEN_EXACT = itemgetter(0, 1)
Table = list[list[tuple[float, bool]]]
"""similarity(call i, gold j) for every pair: `table[i][j]`."""


def similarities(calls: Sequence[ToolCall], gold: Sequence[GoldCall]) -> Table:
    """Every pair's similarity, computed once for the terms that read them."""
    zero = (0.0, False)
    return [[similarity(c, g) if c.name == g.name else zero for g in gold] for c in calls]


def greedy_match(
    calls: Sequence[ToolCall], gold: Sequence[GoldCall], table: Table | None = None
) -> tuple[float, int, int]:
    """(summed similarity over |G|, exact pairs, pairs) of the one-to-one matching that takes
    pairs by similarity, then exactness, highest first."""
    candidates = []
    if table is None:
        by_name: dict[str, list[int]] = {}
        for j, target in enumerate(gold):
            by_name.setdefault(target.name, []).append(j)
        for i, call in enumerate(calls):
            for j in by_name.get(call.name, ()):  # another name scores 0: never a candidate
                score, exact = similarity(call, gold[j])
                if score > 0:
                    candidates.append((score, exact, i, j))
    else:
        for i, row in enumerate(table):
            for j, (score, exact) in enumerate(row):
                if score > 0:
                    candidates.append((score, exact, i, j))
    candidates.sort(key=_SCORE_THEN_EXACT, reverse=True)
    used_calls: set[int] = set()
    used_gold: set[int] = set()
    total, exact_pairs, pairs = 0.0, 0, 0
    for score, exact, i, j in candidates:
        if i in used_calls or j in used_gold:
            continue
        used_calls.add(i)
        used_gold.add(j)
        total += float(score)
        exact_pairs += int(exact)
        pairs += 1
    return total / max(1, len(gold)), exact_pairs, pairs


def function_f1(calls: Sequence[ToolCall], gold: Sequence[GoldCall]) -> float:
    """F1 of the name multisets."""
    predicted = Counter(c.name for c in calls)
    wanted = Counter(g.name for g in gold)
    overlap = sum(min(predicted[name], wanted[name]) for name in wanted)
    if not calls or not gold:
        return 0.0
    precision, recall = overlap / len(calls), overlap / len(gold)
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def ideal_counts(calls: int, agents: int) -> list[int]:
    """An even split of the gold calls, the first agents taking the odd ones."""
    base, extra = divmod(calls, agents)
    return [base + (1 if index < extra else 0) for index in range(agents)]


def balance(agent_counts: Sequence[int], gold_count: int) -> float:
    if not agent_counts or gold_count <= 0:
        return 0.0
    ideal = ideal_counts(gold_count, len(agent_counts))
    diff = sum(abs(int(a) - e) for a, e in zip(agent_counts, ideal, strict=True))
    return max(0.0, 1.0 - diff / max(1, gold_count))


def cross_agent_overlap(per_agent: Sequence[Sequence[ToolCall]]) -> int:
    """For each call key, the agents beyond the first that emitted it, summed."""
    counts: Counter[tuple] = Counter()
    for calls in per_agent:
        counts.update({c.key for c in calls})
    return sum(max(0, n - 1) for n in counts.values())


@dataclass(frozen=True)
class CallTask:
    """What a row's scoring needs: its function schemas, its possible answers (BFCL's form,
    `[{name: {parameter: [accepted]}}]`) and its BFCL category (which AST rules apply)."""

    functions: tuple[Mapping[str, Any], ...]
    ground_truth: tuple[Mapping[str, Any], ...]
    category: str

    @cached_property
    def order(self) -> dict[str, list[str]]:
        return parameter_order(self.functions)

    @cached_property
    def gold(self) -> list[GoldCall]:
        return gold_calls(self.ground_truth)
