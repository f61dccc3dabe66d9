"""BFCL-v0 and BFCLMultiTurn-v0: two agents each write the function calls they choose for one
request; the team's calls are scored against BFCL's possible answers (H=1).

Both agents read the same request, function schemas and role text (the reference's prompts,
`prompts`); with the reference's role mode `self_select` their prompts are identical and each
decides which calls it makes. The reward is the reference's (`rewards.native` for BFCL-v0,
`rewards.multiturn` for BFCLMultiTurn-v0); the last turn's metrics carry the reference logger's
rates and BFCL's AST match (`ast_match`, and `ast_match_<category>` for the row's category).

Data (`data=`): None (default) loads the reference's hub set with its slices (native:
`OpenMLRL/BFCL-V4-Parallel-Native`, train[:160] and eval[:40], categories parallel and
parallel_multiple; multi-turn: `OpenMLRL/BFCL-V4-Parallel-Multi-Turn`, train and eval, all four
step categories), as the reference does (slice, then filter by category), reading each split's
`<split>.jsonl` as written (`data.hub_rows`; through `datasets` where only its cache has a copy);
a hub that cannot be reached with no local copy is an error that says what to pass instead. A
local folder with the hub's `train.jsonl` / `eval.jsonl`, sliced the same way; any other file or
folder of rows in the hub's form, of which the last 20% are eval; or BFCL's own data folder
(`BFCL_v4_*.json` with `possible_answer/`, and `multi_turn_func_doc/` for the multi-turn env), or
one of its question files: the offline build of `data`, labelled in results and on the
leaderboard as not OpenMLRL's split.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from collabzoo.envs.hub import DatasetUnavailable, hub_unreachable_reason, offline_mode, one_line
from collabzoo.envs.prompt_form import CHAT_TEMPLATE_MODES, turn_prompt
from collabzoo.envs.records import ALL, REFERENCE_SPLITS, hub_dataset_id
from collabzoo.envs.text_env import TextCollabEnv, TurnResult, check_choice
from collabzoo.tasks.bfcl.envs import data as sources
from collabzoo.tasks.bfcl.envs.prompts import (
    ROLE_MODES,
    multiturn_prompt,
    native_prompt,
    single_prompt,
)
from collabzoo.tasks.bfcl.rewards import (
    MULTITURN_MAX,
    NATIVE_MAX,
    STRING_ARGUMENTS,
    CallScore,
    CallTask,
    MultiTurnRules,
    NativeRules,
    call_text,
    score_multiturn,
    score_native,
)

TEAM_ROLES = ("agent_0", "agent_1")
SOLO_ROLE = "caller"
SHOWN_REQUEST_CHARS = 600


@dataclass(frozen=True)
class BFCLRow:
    """One task: its row in the hub's form (what the prompts read) and where it came from."""

    row_id: str
    record: Mapping[str, Any]
    dataset: str

    @cached_property
    def task(self) -> CallTask:
        return CallTask(
            tuple(self.record["function"]),
            tuple(self.record["ground_truth"]),
            str(self.record["official_category"]),
        )

    @property
    def category(self) -> str:
        return str(self.record["official_category"])


class BFCLEnv(TextCollabEnv[BFCLRow]):
    """Native parallel function calling (H=1): agents `agent_0` and `agent_1` each answer the
    request with the calls they make; the union of their calls is matched against the possible
    answers.

    Args:
        data: where the rows come from (module docstring): None (the hub, the reference's
            slices), a local folder or file, a hub dataset id, or BFCL's data folder.
        split: "train", "eval" or "all" (train then eval).
        categories: the BFCL categories kept (reference: parallel, parallel_multiple; also
            live_parallel, live_parallel_multiple).
        task_types: keep only rows with these hub `task_type` labels (None: all).
        role_mode: how the agents split the calls: "self_select" (reference), "same_prompt",
            "odd_even", "split_by_order".
        hub_splits: the hub split (with slice) of "train" and "eval", default the reference's.
        self_duplicate_mode: "dedupe" (reference: repeated own calls are dropped, counted, not
            charged) or "penalize" (-0.10 x their rate).
        string_arguments: a JSON call whose `arguments` is a string: "coerce" (read as JSON or a
            Python literal, as the reference's later parser does) or "reject" (the call is
            dropped and reported); the parser the spec pins raises there.
        reward_weights: reference constants to change, by `NativeRules` field name.
        single_agent: one agent, `caller`, makes every call (the reference's single-agent
            baseline prompt, scored as a one-agent team).
        chat_template: "every_turn" (default, as every CollabZoo task: a policy puts each
            prompt inside its model's chat template) or "never" (the reference's: CoMLRL
            tokenizes the formatter's text as it is; the observations are then `RawPrompt`s).
        memory: how much of its own history an agent sees, as every CollabZoo env.
        horizon: turns per episode (1, the reference's).
        render_mode: "ansi", "human" or None, as every CollabZoo env.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "bfcl_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
        "multiline_answers": True,  # one call per line
    }
    roles = TEAM_ROLES
    default_horizon = 1
    max_reward = NATIVE_MAX
    _shared_on_copy = ("_items_by_split", "_built")
    title: ClassVar[str] = "BFCL"
    hub_id: ClassVar[str] = sources.NATIVE_HUB
    local_data: ClassVar[str] = "bfcl"
    """The benchmark's own data folder, as a reference data folder holds it (both variants)."""
    multiturn: ClassVar[bool] = False
    known_categories: ClassVar[tuple[str, ...]] = sources.NATIVE_CATEGORIES
    default_categories: ClassVar[tuple[str, ...]] = sources.REFERENCE_NATIVE_CATEGORIES
    default_hub_splits: ClassVar[Mapping[str, str]] = sources.NATIVE_HUB_SPLITS

    def __init__(
        self,
        *,
        data: str | os.PathLike[str] | None = None,
        split: str = "train",
        memory: str = "full",
        horizon: int | None = None,
        categories: Sequence[str] | None = None,
        task_types: Sequence[str] | None = None,
        role_mode: str = "self_select",
        hub_splits: Mapping[str, str] | None = None,
        self_duplicate_mode: str = "dedupe",
        string_arguments: str = "coerce",
        reward_weights: Mapping[str, float] | None = None,
        single_agent: bool = False,
        chat_template: str = "every_turn",
        render_mode: str | None = None,
    ) -> None:
        self.chat_template = check_choice("chat_template", chat_template, CHAT_TEMPLATE_MODES)
        if not isinstance(single_agent, bool):
            raise TypeError(f"single_agent must be a bool, got {single_agent!r}")
        self.single_agent = single_agent
        self.roles = (SOLO_ROLE,) if single_agent else TEAM_ROLES
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        if data is not None and not isinstance(data, (str, os.PathLike)):
            raise TypeError(
                f"data must be a path or a hub dataset id, got {type(data).__name__}: expected "
                f"{sources.ROW_FORMAT}"
            )
        self._data = data
        chosen = tuple(self._default_categories() if categories is None else categories)
        unknown = [c for c in chosen if c not in self.known_categories]
        if not chosen or unknown or isinstance(categories, str):
            raise ValueError(
                f"categories must be a non-empty sequence of {self.known_categories}, got "
                f"{chosen!r}" + ("" if categories is not None else f" (those of {self._data})")
            )
        self.categories = chosen
        self.task_types = tuple(task_types) if task_types else None
        self.role_mode = check_choice("role_mode", role_mode, ROLE_MODES)
        splits = dict(self.default_hub_splits if hub_splits is None else hub_splits)
        if set(splits) != set(REFERENCE_SPLITS):
            raise ValueError(f"hub_splits needs exactly {REFERENCE_SPLITS}, got {hub_splits!r}")
        for spec in splits.values():
            sources.split_slice(spec)
        self.hub_splits = splits
        self.rules = self._rules(self_duplicate_mode, string_arguments, reward_weights or {})
        self._built: dict[str, list[dict]] | None = None
        self._last: CallScore | None = None
        self._last_answers: dict[str, str] = {}
        self._check_data()

    def _default_categories(self) -> tuple[str, ...]:
        """The reference's categories; a single BFCL question file's own category."""
        if self._data is not None:
            category = sources.source_category(Path(self._data))
            if category is not None and Path(self._data).is_file():
                step = f"{category}_step"
                return (step,) if step in self.known_categories else (category,)
        return self.default_categories

    def _rules(
        self, self_duplicate_mode: str, string_arguments: str, weights: Mapping[str, float]
    ) -> NativeRules | MultiTurnRules:
        check_choice("string_arguments", string_arguments, STRING_ARGUMENTS)
        names = {f.name for f in fields(NativeRules)} - {"self_duplicate_mode", "string_arguments"}
        unknown = sorted(set(weights) - names)
        if unknown:
            raise ValueError(f"unknown reward_weights {unknown}; they are {sorted(names)}")
        return NativeRules(
            **weights, self_duplicate_mode=self_duplicate_mode, string_arguments=string_arguments
        )

    # ----- task items -----------------------------------------------------------------------
    def _check_data(self) -> None:
        """Read the rows now, so that missing or wrong data fails at `make`, unless they come
        from a hub that answers: then they download at the first reset."""
        source = self.hub_id if self._data is None else self._data
        from_hub = hub_dataset_id(source) is not None
        if from_hub and not offline_mode() and hub_unreachable_reason() is None:
            return
        self.items(ALL)

    @property
    def dataset_label(self) -> str:
        """What the rows are, as results and the leaderboard name them."""
        if self._data is None:
            return self.hub_id
        path = Path(self._data).expanduser()
        if sources.is_bfcl_source(path):
            return sources.offline_label(self.categories)
        return path.name if path.exists() else str(self._data)

    @property
    def data_description(self) -> str:
        """What the rows are, in a sentence (the docs' env card quotes it): an offline build is
        named as one, never as the reference's hub set."""
        label = self.dataset_label
        if self._data is None:
            return f"`{label}` from the Hugging Face hub, the reference's slices"
        path = Path(self._data).expanduser()
        if sources.is_bfcl_source(path):
            return (
                f"`{label}`, built offline from BFCL's own question files ({self._offline_split}"
                f"), not the reference's hub set `{self.hub_id}`, whose split is not public"
            )
        if sources.local_split_rows(path, self.hub_splits["train"]) is not None:
            return f"`{label}`, a local copy laid out as the hub set `{self.hub_id}`"
        return f"`{label}`, local rows in the hub's form (the last 20% eval)"

    @property
    def _offline_split(self) -> str:
        return "per category, in file order, the first 80% train and the last 20% eval"

    def _load_items(self, split: str) -> Sequence[BFCLRow]:
        if split == ALL:
            items = [*self.items("train"), *self.items("eval")]
            ids = [i.row_id for i in items]
            if len(set(ids)) == len(ids):
                return items
            return [
                replace(i, row_id=f"{part}/{i.row_id}")
                for part in REFERENCE_SPLITS
                for i in self.items(part)
            ]
        records = [sources.normalized(r) for r in self._records(split)]
        sources.check_rows(records, str(self._data or self.hub_id), multiturn=self.multiturn)
        label = self.dataset_label
        rows = sources.choose(records, self.categories, self.task_types)
        return [
            BFCLRow(str(r.get("id", f"{split}/{index}")), r, label) for index, r in enumerate(rows)
        ]

    def _records(self, split: str) -> list[dict]:
        spec = self.hub_splits[split]
        if self._data is None:
            return self._hub_records(self.hub_id, spec)
        path = Path(self._data).expanduser()
        try:
            if sources.is_bfcl_source(path):
                if self._built is None:
                    self._built = self._build_offline(path)
                return self._built[split]
            local = sources.local_split_rows(path, spec)
            if local is not None:
                return local
            if path.exists():
                return sources.local_rows(path, split)
        except (ValueError, OSError) as error:
            kind = FileNotFoundError if isinstance(error, FileNotFoundError) else type(error)
            kind = kind if kind in (ValueError, FileNotFoundError) else OSError
            raise kind(f"{self.title}: {error}") from None
        if hub_dataset_id(self._data) is None:
            raise FileNotFoundError(
                f"{self.title}: data {str(self._data)!r} is neither an existing file or folder "
                f"nor a hub dataset id; expected {sources.ROW_FORMAT}"
            )
        return self._hub_records(str(self._data), spec)

    def _build_offline(self, path: Path) -> dict[str, list[dict]]:
        return sources.native_source_rows(path, self.categories)

    def _hub_records(self, hub_id: str, spec: str) -> list[dict]:
        try:
            return sources.hub_rows(hub_id, spec)
        except Exception as error:
            raise DatasetUnavailable(
                self.title, hub_id, one_line(error), f"holding {sources.ROW_FORMAT}"
            ) from None

    def _item_id(self, item: BFCLRow) -> str:
        return item.row_id

    def _begin_episode(self, item: BFCLRow, options: Mapping[str, Any]) -> dict[str, Any]:
        self._last = None
        self._last_answers = {}
        return {
            "dataset": item.dataset,
            "category": item.category,
            "gold_calls": len(item.task.gold),
        }

    # ----- prompts and turns ----------------------------------------------------------------
    def _role_prompt(self, agent: str) -> str:
        record = self.item.record  # type: ignore[union-attr]
        if self.single_agent:
            text = single_prompt(record, multiturn=self.multiturn)
        else:
            write = multiturn_prompt if self.multiturn else native_prompt
            text = write(record, self.roles.index(agent), len(self.roles), self.role_mode)
        return turn_prompt(text, self.chat_template, self.turn)

    def _compose(self, agent: str) -> str:
        return turn_prompt(super()._compose(agent), self.chat_template, self.turn)

    def _score(self, answers: Sequence[str]) -> CallScore:
        return score_native(answers, self.item.task, self.rules)  # type: ignore[union-attr,arg-type]

    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        outcome = self._score([answers[a] for a in self.possible_agents])
        self._last, self._last_answers = outcome, dict(answers)
        team = [call_text(c) for c in outcome.team]
        ast = {"valid": outcome.ast.valid, "error_type": outcome.ast.error_type}
        parsed = {
            agent: {
                **outcome.parsed[k].report(),
                "deduplicated": [call_text(c) for c in outcome.per_agent[k]],
                "team_calls": team,
                "ast_match": ast,
            }
            for k, agent in enumerate(self.possible_agents)
        }
        total = outcome.breakdown.total
        feedback = {}
        for k, agent in enumerate(self.possible_agents):
            rejected = len(outcome.parsed[k].rejected)
            feedback[agent] = (
                f"Team reward {total:.3f} of {self.max_reward:.2f}. Your calls read: "
                f"{len(outcome.parsed[k].calls)} ({rejected} part{'s' if rejected != 1 else ''} "
                f"not read); the team made {len(team)} distinct calls for "
                f"{len(self.item.task.gold)} gold calls. Revise your calls."  # type: ignore[union-attr]
            )
        return TurnResult(breakdown=outcome.breakdown, parsed=parsed, feedback=feedback)

    def _render_ansi(self) -> str:
        item = self.item
        assert item is not None
        request = str(item.record.get("user_prompt", ""))
        if len(request) > SHOWN_REQUEST_CHARS:
            request = request[: SHOWN_REQUEST_CHARS - 3] + "..."
        lines = [
            f"{self.title} {item.row_id} ({item.category}, {item.dataset}), turn "
            f"{self.turn}/{self.horizon}",
            f"request: {request}",
            "gold calls:",
            *(
                f"  {name}({args})"
                for g in item.task.gold
                for name, args in [(g.name, g.arguments)]
            ),
        ]
        if self._last is None:
            lines.append("not played yet")
            return "\n".join(lines)
        for k, agent in enumerate(self.possible_agents):
            parsed = self._last.parsed[k]
            lines.append(f"{agent}: {len(parsed.calls)} calls, {len(parsed.rejected)} not read")
            lines += [f"  {call_text(c)}" for c in parsed.calls]
            lines += [f"  not read: {r.line!r} ({r.reason})" for r in parsed.rejected]
        breakdown = self._last.breakdown
        terms = ", ".join(f"{k} {v:+.3f}" for k, v in breakdown.components.items() if v)
        verdict = "pass" if self._last.ast.valid else f"fail ({self._last.ast.error_type})"
        lines.append(f"team reward {breakdown.total:.3f} ({terms or 'no term'}); AST {verdict}")
        return "\n".join(lines)


class BFCLMultiTurnEnv(BFCLEnv):
    """One step of a BFCL multi-turn trajectory, flattened into a one-turn task (H=1): the team's
    calls are agent_0's followed by agent_1's, in order, scored against the step's ordered gold
    calls.

    Args:
        min_calls: an offline build keeps the steps with at least this many gold calls (2: the
            hub set is the parallel one; which steps it kept is not public).
        single_agent: BFCLEnv's; named here so that the bench's `single` protocol, which looks
            for it in the signature, plays the reference's single-agent baseline prompt.
        kwargs: BFCLEnv's arguments, `categories` of the four `multi_turn_*_step` categories
            (all by default); no `self_duplicate_mode`: the multi-turn reward has no such term.
    """

    metadata: ClassVar[dict[str, Any]] = {**BFCLEnv.metadata, "name": "bfcl_multiturn_v0"}
    max_reward = MULTITURN_MAX
    title = "BFCLMultiTurn"
    hub_id = sources.MULTITURN_HUB
    multiturn = True
    known_categories = sources.MULTITURN_CATEGORIES
    default_categories = sources.MULTITURN_CATEGORIES
    default_hub_splits = sources.MULTITURN_HUB_SPLITS

    def __init__(
        self,
        *,
        min_calls: int = sources.DEFAULT_MIN_CALLS,
        single_agent: bool = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(min_calls, bool) or not isinstance(min_calls, int) or min_calls < 1:
            raise ValueError(f"min_calls must be a positive int, got {min_calls!r}")
        self.min_calls = min_calls
        super().__init__(single_agent=single_agent, **kwargs)

    def _rules(
        self, self_duplicate_mode: str, string_arguments: str, weights: Mapping[str, float]
    ) -> NativeRules | MultiTurnRules:
        if self_duplicate_mode != "dedupe":
            raise ValueError("the multi-turn reward has no self-duplicate term: leave it 'dedupe'")
        check_choice("string_arguments", string_arguments, STRING_ARGUMENTS)
        names = {f.name for f in fields(MultiTurnRules)} - {"string_arguments"}
        unknown = sorted(set(weights) - names)
        if unknown:
            raise ValueError(f"unknown reward_weights {unknown}; they are {sorted(names)}")
        return MultiTurnRules(**weights, string_arguments=string_arguments)

    def _build_offline(self, path: Path) -> dict[str, list[dict]]:
        return sources.multiturn_source_rows(path, self.categories, self.min_calls)

    @property
    def _offline_split(self) -> str:
        return (
            "per category, by trajectory, the first 80% train and the last 20% eval; the steps "
            f"with at least {self.min_calls} gold calls"
        )

    def _score(self, answers: Sequence[str]) -> CallScore:
        return score_multiturn(answers, self.item.task, self.rules)  # type: ignore[union-attr,arg-type]
