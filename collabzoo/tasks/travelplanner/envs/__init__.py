"""TravelPlanner-v0: two agents plan one trip (OpenMLRL/LLM_Collab_Travel, H=1).

Agent `logistics` (the reference's agent 0) owns current_city, transportation and accommodation
on every day; agent `experience` (agent 1) owns breakfast, attraction, lunch and dinner. Each
answers one JSON object of its slots; a deterministic merger builds the plan, which is scored
against the query's own reference information by `collabzoo.tasks.travelplanner.rewards` (the
reference reward, max 1.0, and TravelPlanner's own metrics).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from collabzoo.envs.hub import (
    DatasetUnavailable,
    HubUnavailable,
    _datasets_offline,
    hub_unreachable_reason,
    offline_variable,
    one_line,
)
from collabzoo.envs.records import ALL, hub_dataset_id
from collabzoo.envs.text_env import TextCollabEnv, TurnResult, check_choice
from collabzoo.tasks.travelplanner import rewards as rules
from collabzoo.tasks.travelplanner.envs import data as sources
from collabzoo.tasks.travelplanner.envs.prompts import role_prompt
from collabzoo.tasks.travelplanner.rewards import MAX_REWARD, TravelOutcome, TravelTask
from collabzoo.tasks.travelplanner.rewards.catalog import PLAN_FIELDS, owned_fields

ROLES = ("logistics", "experience")
TITLE = "TravelPlanner"
HUB_LABEL = f"{sources.HUB_ID} {sources.HUB_CONFIG}@{sources.HUB_REVISION[:7]}"


def load_hub_rows() -> list[dict[str, Any]]:
    """The hub's validation rows at the pinned revision (`datasets`, config "validation"):
    downloaded where the hub answers, else from the local `datasets` cache only (HubUnavailable
    at once when it has no copy), as `collabzoo.envs.hub` does for every hub dataset."""
    import datasets  # deferred: slow to import, and only needed for hub data

    arguments = {
        "name": sources.HUB_CONFIG,
        "split": sources.HUB_SPLIT,
        "revision": sources.HUB_REVISION,
    }
    variable = offline_variable()
    reason = f"offline mode is set ({variable})" if variable else hub_unreachable_reason()
    if reason is None:
        return [dict(r) for r in datasets.load_dataset(sources.HUB_ID, **arguments)]
    cause: Exception | None = None
    with _datasets_offline() as switched:
        if switched or variable:
            try:
                return [dict(r) for r in datasets.load_dataset(sources.HUB_ID, **arguments)]
            except Exception as error:
                cause = error
    why = f"{reason}; and no copy in the local datasets cache"
    if cause is not None and not isinstance(cause, ConnectionError):
        why += f" ({one_line(cause, 200)})"
    raise HubUnavailable(why)


class TravelPlannerEnv(TextCollabEnv[TravelTask]):
    """TravelPlanner's queries as a two-agent itinerary task (H=1), scored as the reference
    scores it.

    Args:
        data: None (default) plays the hub's `osunlp/TravelPlanner` validation rows at the
            reference's pinned revision, as the reference loads them (the hub must answer, or
            the local `datasets` cache hold them). A local file or folder instead: hub-layout
            rows (json / jsonl / csv), or TravelPlanner's chat records
            (`finetuning_data/std_travelplanner.jsonl`: its 45 train queries with their
            reference information and annotated plans, the structured fields read from the
            query text; results label this the offline variant).
        split: "train" and "eval": the reference's split of the rows that pass its filter (3 or 5
            days, easy or medium, 1 or 2 cities), stratified by (days, level) with seed 42, the
            eval rows interleaved one per stratum; 60 + 20 of the hub's 80 such rows, and the
            reference loader's own 16 + 4 where there are fewer (the offline copy's 20). "all":
            every row of the data in its order (all lengths and levels), the benchmark's split.
        capacity: "reference" (default): the merger's shared cap ceil(7D/2), which drops
            agent 1's full answer (the reference's quirk); "role": each agent's own slot count.
        samples: (train, eval) rows of the split instead of the default above.
        memory: how much of its own history an agent sees: "full", "last" or "none".
        horizon: turns per episode (reference: 1; a later turn shows the last turn's score).
        render_mode: "ansi" makes `render()` return the merged plan and the reward as text;
            "human" prints it at every reset and step; None (default) leaves rendering off.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "travelplanner_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
        "multiline_answers": True,
    }
    roles = ROLES
    default_horizon = 1
    max_reward = MAX_REWARD
    hub_id = sources.HUB_ID
    local_file = "std_travelplanner.jsonl"
    """The shipped offline copy (in the reference data folder's travelplanner/), for the docs."""

    def __init__(
        self,
        *,
        data: str | os.PathLike[str] | None = None,
        split: str = "train",
        memory: str = "full",
        horizon: int | None = None,
        render_mode: str | None = None,
        capacity: str = "reference",
        samples: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        self.capacity = check_choice("capacity", capacity, rules.CAPACITIES)
        if samples is not None and not (
            isinstance(samples, (tuple, list))
            and len(samples) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in samples)
        ):
            raise ValueError(f"samples must be (train rows, eval rows) > 0, got {samples!r}")
        self.samples = None if samples is None else (int(samples[0]), int(samples[1]))
        if data is not None and not isinstance(data, (str, os.PathLike)):
            raise TypeError(f"data must be a path or a hub dataset id, got {type(data).__name__}")
        self._data = data
        self._last: TravelOutcome | None = None
        self._label = HUB_LABEL
        from_hub = data is None or hub_dataset_id(data) is not None
        if not from_hub or offline_variable() or hub_unreachable_reason() is not None:
            self.items(ALL)  # missing or bad data fails at make, not at the first reset

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[TravelTask]:
        if split != ALL:
            rows = sources.curriculum(self.items(ALL))
            train, evaluation = self.samples or sources.default_samples(len(rows))
            chosen = sources.stratified_split(rows, train, evaluation)
            return chosen[0] if split == "train" else chosen[1]
        if self._data is None or hub_dataset_id(self._data) is not None:
            source = str(self._data or sources.HUB_ID)
            if source != sources.HUB_ID:
                raise ValueError(f"{TITLE} plays {sources.HUB_ID} from the hub, not {source!r}")
            try:
                records = load_hub_rows()
            except Exception as error:
                raise DatasetUnavailable(
                    TITLE, source, one_line(error), f"is {sources.RECORD_FORMAT}"
                ) from None
            return sources.tasks_from_records(records, source)
        path = Path(self._data).expanduser()
        try:
            file, records = sources.query_records(path)
        except (ValueError, OSError) as error:
            kind = FileNotFoundError if isinstance(error, FileNotFoundError) else type(error)
            raise kind(f"{TITLE}: {error}; expected {sources.RECORD_FORMAT}") from None
        tasks = sources.tasks_from_records(records, str(file))
        offline = any(t.source == "offline" for t in tasks)
        self._label = f"{file.name} (offline variant)" if offline else file.name
        return tasks

    @property
    def dataset_label(self) -> str:
        """What the rows are, as results name them."""
        return self._label

    @property
    def data_description(self) -> str:
        """What the rows are, in a sentence (the docs' env card quotes it): the offline copy is
        named as such, never as the reference's hub rows."""
        if self._data is None:
            return f"`{HUB_LABEL}` from the Hugging Face hub, as the reference loads it"
        rows = self.items(ALL)
        if not any(t.source == "offline" for t in rows):
            return f"`{self._label}`, local rows in the hub's layout"
        kept = len(sources.curriculum(rows))
        train, evaluation = self.samples or sources.default_samples(kept)
        return (
            f"`{self._label}`: TravelPlanner's {len(rows)} train queries as chat records, their "
            f"fields read from the query text, of which the reference's filter keeps {kept}, "
            f"split {train} + {evaluation}; not the reference's hub rows (`{HUB_LABEL}`)"
        )

    def _item_id(self, item: TravelTask) -> str:
        return item.task_id

    def _begin_episode(self, item: TravelTask, options: Mapping[str, Any]) -> dict[str, Any]:
        self._last = None
        return {
            "dataset": self._label,
            "days": item.days,
            "level": item.level,
            "offline_variant": item.source == "offline",
        }

    def _role_prompt(self, agent: str) -> str:
        return role_prompt(self.item, ROLES.index(agent))

    # ----- a turn ---------------------------------------------------------------------------
    def _parsed(self, agent: int, outcome: TravelOutcome) -> dict[str, Any]:
        merged = outcome.merged
        parse = merged.parses[agent]
        mine = owned_fields(agent)
        accepted = merged.per_agent[agent]
        return {
            "strict": parse.strict,
            "valid_action": outcome.agent_valid[agent],
            "errors": list(parse.errors),
            "accepted": [f"day {d} {f}: {v}" for (d, f), v in sorted(accepted.items())],
            "not_owned": [f"day {d} {f}" for d, f in sorted(accepted) if f not in mine],
            "conflicts": [f"day {d} {f}" for d, f in sorted(merged.conflicts)],
            "rejected": [{"line": r.line, "reason": r.reason} for r in merged.rejected[agent]],
        }

    def _feedback(self, outcome: TravelOutcome) -> str:
        b = outcome.breakdown
        m = b.metrics
        return (
            f"Team reward {b.total:.3f} of {MAX_REWARD:g}. Merged plan: "
            f"{int(m['assignment_coverage'] * len(PLAN_FIELDS) * self.item.days)} of "
            f"{len(PLAN_FIELDS) * self.item.days} slots, required grounded "
            f"{m['required_grounded_recall']:.0%}, commonsense {m['commonsense_micro']:.0%}, "
            f"hard constraints {m['hard_micro']:.0%}, final pass {m['final_pass']:.0%}."
        )

    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        outcome = rules.score_travel(self.item, [answers[r] for r in ROLES], capacity=self.capacity)
        self._last = outcome
        feedback = self._feedback(outcome)
        return TurnResult(
            breakdown=outcome.breakdown,
            parsed={r: self._parsed(i, outcome) for i, r in enumerate(ROLES)},
            feedback=dict.fromkeys(ROLES, feedback),
        )

    def _render_ansi(self) -> str:
        task = self.item
        header = (
            f"{TITLE} {task.task_id} ({task.days} days, {task.level}, {task.org} -> {task.dest}, "
            f"{task.people_number} people, budget {task.budget}), after turn {self.turn} of "
            f"{self.horizon}"
        )
        if self._last is None:
            return header
        lines = [header]
        for row in self._last.merged.plan():
            cells = " | ".join(f"{f}: {row[f]}" for f in PLAN_FIELDS)
            lines.append(f"day {row['day']}: {cells}")
        b = self._last.breakdown
        parts = "  ".join(f"{k} {v:+.3f}" for k, v in b.components.items() if v)
        lines.append(f"reward {b.total:.3f} / {MAX_REWARD:g}  [{parts or 'nothing earned'}]")
        return "\n".join(lines)
