"""TLDR-v0 and ArXiv-v0: two writers turn one source text into two complementary texts
(tasks.md sections 1 and 2).

TLDR: from a Reddit post, agent `concise` writes a short factual summary and agent `detailed`
a longer one with a richer vocabulary and transition words. arXiv: from a paper abstract, agent
`background` writes the background and motivation of an introduction and agent `methodology`
its methods and implications. Neither sees the other's text. The pair is scored by
`collabzoo.tasks.writing.rewards` (max 3.0 for both tasks); the env picks the source, writes the
prompts and the score feedback, and reports the levels reached.

Data. `data=None` loads the reference slices from the Hugging Face hub (`trl-lib/tldr`:
train[:1100] and test[:1100]; `OpenMLRL/arXiv_abstract`: train[:1100] and val[:1100]). When the
hub cannot be reached and the local `datasets` cache has no copy, the env falls back to a
12-item sample of original writing embedded in the package (8 train, 4 eval) and warns once
per process; `data="sample"` picks that sample on purpose, without the warning. `data=` also
takes a local file or directory, or a mapping {"train": source, "eval": source}. Split "all" is
the train items followed by the eval items.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from collabzoo.envs.hub import one_line
from collabzoo.envs.records import ALL, REFERENCE_SPLITS, load_records, train_eval_split
from collabzoo.envs.text_env import TextCollabEnv, TurnResult
from collabzoo.rewards import RewardBreakdown
from collabzoo.tasks.writing import rewards

SAMPLE = "sample"
"""`data=SAMPLE` selects the embedded sample."""
REFERENCE_ITEMS = 1100
"""The reference runs use the first 1100 records of each split."""
SAMPLE_DIR = Path(__file__).with_name("data")
SOURCE_SHOWN_CHARS = 600
"""How much of the source `render()` shows."""


class SampleDataWarning(UserWarning):
    """The hub data could not be loaded and the embedded sample is used instead."""


@dataclass(frozen=True)
class WritingItem:
    """One source text to write from."""

    item_id: str
    source: str
    """The post (with its subreddit and title lines) or the abstract."""
    reference: str
    """The dataset's reference answer (TLDR: the human summary; arXiv: none)."""
    dataset: str
    """Where the item came from: a hub id, "sample", or a local path."""


# ----- where the data comes from ------------------------------------------------------------
_hub_failures: dict[str, str] = {}  # hub id -> why it could not be loaded (this process)


def _per_split_lists(path: Path) -> dict[str, list] | None:
    """The {name: list} of a JSON file holding an object of lists (one per split), else None."""
    name = path.name.lower()
    if not path.is_file() or not name.endswith((".json", ".json.gz")):
        return None
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        try:
            value = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON: {error}") from error
    if not isinstance(value, dict):
        return None
    lists = {k: v for k, v in value.items() if isinstance(v, list)}
    return lists if len(lists) > 1 else None


# ----- the env --------------------------------------------------------------------------------
class WritingEnv(TextCollabEnv[WritingItem]):
    """The writing tasks (H = 1 by default); subclasses set the dataset, roles and prompts.

    Args:
        data: where the source texts come from.
            None (default): the hub dataset with the reference slices; if it cannot be loaded
            (the hub out of reach, no cached copy), the embedded sample, with a one-time
            `SampleDataWarning`.
            "sample": the embedded sample (12 items of original writing: the first 8 train,
            the last 4 eval), not the benchmark.
            A local json / jsonl / jsonl.gz / csv file or a directory of them, with the hub's
            fields. A JSON object holding one list per split uses the list named like the hub
            split (or "train" / "eval"); any other file is one list, of which the last 20% are
            the eval split. The first 1100 records of each split are used, as in the reference.
            A hub dataset id: loaded with `datasets`, reference splits and slices, no fallback.
            A mapping {"train": source, "eval": source}: each split from its own source.
        split: default split for `reset`: "train" or "eval", or "all": the train items then
            the eval items (hub: both reference slices, 2200 texts; the sample: all 12), with
            ids prefixed by their split ("train/0", "eval/0": TLDR ids are per-split indices).
        memory: how much of its own history an agent sees: "full", "last" or "none".
        horizon: turns per episode (reference: 1). With more, each agent gets the team score
            and the level breakdown after every turn and is asked to revise its text.
        single_agent: one agent, `writer`, writes both parts in one answer, separated by the
            marker `[PARAGRAPH_SPLIT]` (the reference single-model baseline).
        transitions: "substring" (reference: phrases match inside words) or "words".
        vocabulary_stopwords: True (reference) counts stopwords in the unique-word ratio.
        render_mode: "ansi" makes `render()` return a text picture of the episode so far;
            "human" prints it at every reset and step; None (default) leaves rendering off.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "writing_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
        "multiline_answers": True,  # paragraphs and the single-agent marker line
    }
    default_horizon = 1
    max_reward = rewards.MAX_SCORE
    team_roles: ClassVar[tuple[str, str]] = ("first", "second")
    solo_role: ClassVar[str] = "writer"
    title: ClassVar[str] = ""
    source_name: ClassVar[str] = "source"
    hub_id: ClassVar[str] = ""
    hub_splits: ClassVar[Mapping[str, str]] = {"train": "train", "eval": "test"}
    sample_file: ClassVar[str] = ""
    fields: ClassVar[tuple[str, ...]] = ()
    reward_rules: ClassVar[rewards.WritingRules] = rewards.TLDR_RULES
    part_names: ClassVar[Mapping[str, str]] = {}
    """Role -> what its text is called in prompts and feedback ("concise summary")."""
    level_texts: ClassVar[tuple[str, str, str, str]] = ("", "", "", "")
    """What each level asks for, shown in the feedback."""

    def __init__(
        self,
        *,
        data: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        split: str = "train",
        memory: str = "full",
        horizon: int | None = None,
        single_agent: bool = False,
        transitions: str = "substring",
        vocabulary_stopwords: bool = True,
        render_mode: str | None = None,
    ) -> None:
        if not isinstance(single_agent, bool):
            raise TypeError(f"single_agent must be a bool, got {single_agent!r}")
        if not isinstance(vocabulary_stopwords, bool):
            raise TypeError(f"vocabulary_stopwords must be a bool, got {vocabulary_stopwords!r}")
        if transitions not in rewards.TRANSITION_MODES:
            raise ValueError(
                f"transitions must be one of {rewards.TRANSITION_MODES}, got {transitions!r}"
            )
        if isinstance(data, Mapping):
            if set(data) != set(REFERENCE_SPLITS):
                raise ValueError(
                    f"a data mapping needs exactly the keys {REFERENCE_SPLITS}, got {set(data)}"
                )
            data = dict(data)
        elif data is not None and not isinstance(data, (str, os.PathLike)):
            raise TypeError(
                "data must be None, 'sample', a path, a hub dataset id, or a mapping "
                f"{{'train': ..., 'eval': ...}}; got {type(data).__name__}"
            )
        self.single_agent = single_agent
        self.roles = (self.solo_role,) if single_agent else self.team_roles
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        self.transitions = transitions
        self.vocabulary_stopwords = vocabulary_stopwords
        self._data = data
        self._last: tuple[tuple[str, str], RewardBreakdown, bool] | None = None

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[WritingItem]:
        if split == ALL:  # both reference slices, train first; ids made unique by their split
            return [
                replace(item, item_id=f"{part}/{item.item_id}")
                for part in REFERENCE_SPLITS
                for item in self.items(part)
            ]
        if isinstance(self._data, dict):
            records, label = self._records_from(self._data[split], split, own_split=True)
        elif self._data is None:
            records, label = self._default_records(split)
        else:
            records, label = self._records_from(self._data, split)
        return [
            self._item_from_record(record, index, label)
            for index, record in enumerate(records[:REFERENCE_ITEMS])
        ]

    def _records_from(
        self, source: Any, split: str, own_split: bool = False
    ) -> tuple[list[dict], str]:
        """Records of `split` from "sample", a local path or a hub id. `own_split`: the source
        was given for this split alone, so a plain list of records is used whole."""
        if isinstance(source, str) and source == SAMPLE:
            return self._local_records(SAMPLE_DIR / self.sample_file, split), SAMPLE
        if not isinstance(source, (str, os.PathLike)):
            raise TypeError(f"a data source must be a path or a hub id, got {source!r}")
        path = Path(source).expanduser()
        if path.exists():
            return self._local_records(path, split, own_split), str(source)
        return self._hub_records(str(source), split), str(source)

    def _hub_records(self, hub_id: str, split: str) -> list[dict]:
        """The reference slice of a hub dataset's split, through `datasets` (cached by it)."""
        hub_split = self.hub_splits[split]
        try:
            return load_records(hub_id, split=f"{hub_split}[:{REFERENCE_ITEMS}]")
        except FileNotFoundError:  # neither a path nor an owner/name id: its message says so
            raise
        except Exception as error:
            raise RuntimeError(
                f"could not load {hub_id!r} (split {hub_split!r}) from the Hugging Face hub "
                f"({type(error).__name__}: {str(error)[:300]}). Without network access, pass "
                f"a local copy (data='path/to/file.jsonl' with the fields "
                f"{', '.join(self.fields)}) or data='sample' for the embedded sample"
            ) from error

    def _local_records(self, path: Path, split: str, own_split: bool = False) -> list[dict]:
        lists = _per_split_lists(path)
        if lists is None:
            records = load_records(path)
            return records if own_split else train_eval_split(records, split)
        for key in (self.hub_splits[split], split):
            if key in lists:
                records = lists[key]
                if not all(isinstance(r, dict) for r in records):
                    raise ValueError(f"{path}: the {key!r} list must hold JSON objects")
                return records
        raise ValueError(
            f"{path}: holds lists {sorted(lists)}, none of them for the {split!r} split "
            f"(expected {self.hub_splits[split]!r} or {split!r})"
        )

    def _default_records(self, split: str) -> tuple[list[dict], str]:
        """The hub's reference slice; the embedded sample when it cannot be loaded (decided
        once per process and dataset, and then warned about once). An unreachable hub costs
        one quick check per process, then only a look in the local `datasets` cache
        (`collabzoo.envs.hub`)."""
        reason = _hub_failures.get(self.hub_id)
        if reason is None:
            try:
                return self._hub_records(self.hub_id, split), self.hub_id
            except Exception as error:
                cause = error.__cause__ or error
                reason = one_line(cause)
        if self.hub_id not in _hub_failures:
            _hub_failures[self.hub_id] = reason
            warnings.warn(self.fallback_message(reason), SampleDataWarning, stacklevel=5)
        return self._local_records(SAMPLE_DIR / self.sample_file, split), SAMPLE

    @classmethod
    def fallback_message(cls, reason: str) -> str:
        """The one-time warning when the embedded sample stands in for the hub data."""
        return (
            f"{cls.title}: could not load {cls.hub_id!r} from the Hugging Face hub ({reason}). "
            f"Using the embedded sample instead: 12 short {cls.source_name}s of original "
            "writing (8 train, 4 eval), NOT the benchmark, so scores on it are not comparable "
            "to published results. For the real data: allow network access (the dataset is "
            "then cached, and later runs without network read that cache; HF_HUB_OFFLINE=1 "
            "skips the network check), or "
            f"pass data= a local copy (json / jsonl / jsonl.gz / csv with the fields "
            f"{', '.join(cls.fields)}). Pass data='sample' to choose the sample without this "
            "warning."
        )

    def _item_from_record(self, record: Mapping[str, Any], index: int, label: str) -> WritingItem:
        raise NotImplementedError

    def _item_id(self, item: WritingItem) -> str:
        return item.item_id

    def _begin_episode(self, item: WritingItem, options: Mapping[str, Any]) -> dict[str, Any]:
        self._last = None
        return {"dataset": item.dataset}

    # ----- prompts --------------------------------------------------------------------------
    def _source_block(self) -> str:
        name = self.source_name
        return f"--- {name} ---\n{self.item.source}\n--- end of {name} ---"

    def _role_prompt(self, agent: str) -> str:
        raise NotImplementedError

    # ----- a turn ---------------------------------------------------------------------------
    def score(self, first: str, second: str) -> RewardBreakdown:
        """The task's reward of two texts, with this env's reward variant."""
        return rewards.score_writing(
            first,
            second,
            self.reward_rules,
            transitions=self.transitions,
            vocabulary_stopwords=self.vocabulary_stopwords,
        )

    def _texts(self, answers: Mapping[str, str]) -> tuple[tuple[str, str], bool]:
        """The two texts scored, and whether the single-agent marker was found."""
        if self.single_agent:
            answer = answers[self.solo_role]
            return rewards.split_single_answer(answer), rewards.SPLIT_MARKER in answer
        first, second = self.team_roles
        return (answers[first], answers[second]), True

    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        texts, marker_found = self._texts(answers)
        breakdown = self.score(*texts)
        self._last = (texts, breakdown, marker_found)
        counts = {
            role: {"words": len(text.split()), "characters": len(text)}
            for role, text in zip(self.team_roles, texts, strict=True)
        }
        if self.single_agent:
            parsed = {self.solo_role: {"marker_found": marker_found, **counts}}
        else:
            parsed = {role: counts[role] for role in self.team_roles}
        return TurnResult(
            breakdown=breakdown,
            parsed=parsed,
            feedback={a: self._feedback(a, texts, breakdown) for a in self.possible_agents},
        )

    # ----- feedback -------------------------------------------------------------------------
    length_band: ClassVar[tuple[float, float]] = (1.6, 3.2)
    """The length ratio (characters, second / first) that earns all of level 2."""
    vocabulary_band: ClassVar[tuple[float, float]] = (2.0, math.inf)
    """The distinct-word ratio (second / first) that earns all of level 3."""

    def _level_lines(self, breakdown: RewardBreakdown) -> list[str]:
        """One line per level: what it asks, what the team's texts measured, what it earned."""
        parts, m = breakdown.components, breakdown.metrics
        reached = int(m["level"])
        low, high = self.reward_rules.words
        first, second = (self.part_names[r] for r in self.team_roles)
        measured = (
            f"the {first} has {int(m['words_1'])} words, the {second} {int(m['words_2'])} "
            f"(each must have {low}-{high})",
            f"{second} length / {first} length (characters) = {m['length_ratio']:.2f}",
            f"distinct words in the {second} / in the {first} = {m['unique_ratio']:.2f}",
            f"{int(m['transition_categories'])} of 12 kinds of transition words; shared key "
            f"words (Jaccard of the word sets without stopwords) {m['jaccard']:.3f}",
        )
        earned = (
            f"+{parts['structure']:.2f} of {rewards.STRUCTURE_REWARD:.2f}",
            f"+{parts['coordination']:.2f} of {rewards.COORDINATION_REWARD:.2f}",
            f"+{parts['vocabulary']:.2f} of {rewards.VOCABULARY_REWARD:.2f}",
            f"+{parts['transitions']:.2f} of {rewards.TRANSITION_WEIGHT:.2f} for transitions, "
            f"+{parts['jaccard']:.2f} of {rewards.JACCARD_WEIGHT:.2f} for shared words",
        )
        lines = []
        for level in range(4):
            head = f"Level {level + 1} ({self.level_texts[level]})"
            if level < reached:
                lines.append(f"{head}: {measured[level]}: {earned[level]}.")
            elif level == reached:
                lines.append(f"{head}: {measured[level]}: not met, so scoring stopped here.")
            else:
                lines.append(f"{head}: not scored.")
        return lines

    def _hints(self, agent: str, breakdown: RewardBreakdown) -> list[str]:
        """What this agent could change, judged from the first level that fell short."""
        m = breakdown.metrics
        reached = int(m["level"])
        first, second = self.team_roles
        own = self.team_roles if agent == self.solo_role else (agent,)
        name = {
            r: ("the " if agent == self.solo_role else "your ") + self.part_names[r] for r in own
        }
        if reached == 0:
            low, high = self.reward_rules.words
            counts = dict(zip(self.team_roles, (m["words_1"], m["words_2"]), strict=True))
            return [
                f"Give {name[r]} {low} to {high} words (it had {int(counts[r])})."
                for r in own
                if not low <= counts[r] <= high
            ] or ["Your partner's text was out of the length range; keep yours as it is."]
        for level, label, value, (low, high), grow, shrink in (
            (1, "length", m["length_ratio"], self.length_band, "longer", "shorter"),
            (
                2,
                "distinct-word",
                m["unique_ratio"],
                self.vocabulary_band,
                "richer in distinct words",
                "plainer, with fewer distinct words",
            ),
        ):
            if reached == level or (reached > level and not low <= value <= high):
                second_grows = value < low
                wanted = f"{low:g}-{high:g}" if math.isfinite(high) else f"at least {low:g}"
                hints = [f"The {label} ratio was {value:.2f}; it should be {wanted}."]
                if second in own:
                    hints.append(f"Make {name[second]} {grow if second_grows else shrink}.")
                if first in own:
                    hints.append(f"Make {name[first]} {shrink if second_grows else grow}.")
                return [" ".join(hints)]
        hints = []
        if m["transition_categories"] < 12 and (
            self.reward_rules.transitions_in_both or second in own
        ):
            hints.append("Use transition words of more kinds (contrast, cause, example, ...).")
        if m["jaccard"] < self.reward_rules.jaccard_cap:
            hints.append("Reuse more of the source's key words, as your partner will.")
        return hints

    def _feedback(self, agent: str, texts: tuple[str, str], breakdown: RewardBreakdown) -> str:
        reached = int(breakdown.metrics["level"])
        lines = [
            f"Your team's score: {breakdown.total:.2f} of {rewards.MAX_SCORE:.2f} "
            f"({reached} of 4 levels reached).",
            *self._level_lines(breakdown),
            *self._hints(agent, breakdown),
            self._revise_request(agent),
        ]
        return "\n".join(lines)

    def _revise_request(self, agent: str) -> str:
        if agent == self.solo_role:
            first, second = (self.part_names[r] for r in self.team_roles)
            return (
                f"Revise both parts to raise the score. Answer with the {first}, then a line "
                f"{rewards.SPLIT_MARKER}, then the {second}, and nothing else."
            )
        return (
            f"Revise your {self.part_names[agent]} to raise the team's score. Answer with the "
            "revised text only."
        )

    # ----- render ---------------------------------------------------------------------------
    def _render_ansi(self) -> str:
        item = self.item
        header = (
            f"{self.title} {self.source_name} {item.item_id!r} (data: {item.dataset}), after "
            f"turn {self.turn} of {self.horizon}"
        )
        source = item.source
        if len(source) > SOURCE_SHOWN_CHARS:
            source = source[:SOURCE_SHOWN_CHARS].rstrip() + f" ... [{len(item.source)} chars]"
        lines = [header, f"--- {self.source_name} ---", source]
        if self._last is None:
            return "\n".join(lines)
        texts, breakdown, marker_found = self._last
        for role, text in zip(self.team_roles, texts, strict=True):
            lines.append(f"--- {self.part_names[role]} ({len(text.split())} words) ---")
            lines.append(text if text.strip() else "(empty)")
        if self.single_agent and not marker_found:
            lines.append(f"(no {rewards.SPLIT_MARKER} marker: the whole answer was part one)")
        parts = "  ".join(f"{k} {v:+.2f}" for k, v in breakdown.components.items() if v)
        lines.append(
            f"score {breakdown.total:.3f} / {rewards.MAX_SCORE:g}  [{parts or 'nothing earned'}]  "
            f"levels {int(breakdown.metrics['level'])}/4"
        )
        lines += self._level_lines(breakdown)
        return "\n".join(lines)


def _strip_tldr_cue(prompt: str) -> str:
    """A trl-lib/tldr prompt without its trailing 'TL;DR:' cue."""
    text = prompt.rstrip()
    if text.upper().endswith("TL;DR:"):
        text = text[: -len("TL;DR:")]
    return text.strip()


def _required(record: Mapping[str, Any], fields: Sequence[str], dataset: str) -> None:
    missing = [f for f in fields if f not in record or record[f] is None]
    if missing:
        raise ValueError(
            f"{dataset}: a record lacks the field(s) {missing}; records need {list(fields)} "
            f"(found {sorted(record)})"
        )


class TLDREnv(WritingEnv):
    __doc__ = (
        "TLDR: summarize a Reddit post twice, concisely and in detail (hub `trl-lib/tldr`; "
        "reference train train[:1100], eval test[:1100]).\n\n"
        + (WritingEnv.__doc__ or "").split("\n\n", 1)[1]
    )
    metadata: ClassVar[dict[str, Any]] = {**WritingEnv.metadata, "name": "tldr_v0"}
    team_roles = ("concise", "detailed")
    title = "TLDR"
    source_name = "post"
    hub_id = "trl-lib/tldr"
    hub_splits: ClassVar[Mapping[str, str]] = {"train": "train", "eval": "test"}
    sample_file = "tldr_sample.json"
    fields = ("prompt", "completion")
    reward_rules = rewards.TLDR_RULES
    part_names: ClassVar[Mapping[str, str]] = {
        "concise": "concise summary",
        "detailed": "detailed summary",
    }
    level_texts = (
        "length",
        "detailed is 1.6-3.2x the concise length",
        "detailed has at least 2x the distinct words",
        "style",
    )
    length_band = (1.6, 3.2)

    def _item_from_record(self, record: Mapping[str, Any], index: int, label: str) -> WritingItem:
        _required(record, ("prompt",), label)
        return WritingItem(
            item_id=str(index),
            source=_strip_tldr_cue(str(record["prompt"])),
            reference=str(record.get("completion") or "").strip(),
            dataset=label,
        )

    def _role_prompt(self, agent: str) -> str:
        post = self._source_block()
        concise_length = (
            "one to three sentences, about 15 to 40 words (never fewer than 8 or more than 256)"
        )
        if agent == "concise":
            return (
                "You and a partner are summarizing the same Reddit post. Your part: the concise "
                "summary. Your partner, whose text you will not see, writes a detailed summary "
                "of the same post.\n\n"
                f"{post}\n\n"
                "Write a concise, factual summary of the post: the situation and what the poster "
                f"wants, nothing invented. Length: {concise_length}. Your partner's detailed "
                "summary should come out about 1.6 to 3.2 times as long as yours, so keep yours "
                "short.\nAnswer with the summary only."
            )
        if agent == "detailed":
            return (
                "You and a partner are summarizing the same Reddit post. Your part: the "
                "detailed summary. Your partner, whose text you will not see, writes a concise "
                f"summary of {concise_length}.\n\n"
                f"{post}\n\n"
                "Write a detailed summary of the post: the situation, the important facts and "
                "context, and what the poster is asking. Use a varied vocabulary, with at least "
                "twice as many different words as a concise summary has, and connect your "
                "points with transition words of many kinds (for example, moreover, however, as "
                "a result, in fact, similarly, if, while, overall). Length: about 1.6 to 3.2 "
                "times the concise summary, roughly 50 to 120 words (at most 256). Keep the "
                "post's key terms, as the concise summary will.\nAnswer with the summary only."
            )
        return (
            "Summarize this Reddit post twice. Your part: both the concise and the detailed "
            "summary.\n\n"
            f"{post}\n\n"
            f"First write a concise, factual summary: {concise_length}. Then write a detailed "
            "summary of the same post, about 1.6 to 3.2 times as long (at most 256 words), with "
            "at least twice as many different words and transition words of many kinds "
            "(moreover, however, as a result, in fact, similarly, if, while, overall). Use the "
            "post's key terms in both.\n"
            f"Answer with the concise summary, then a line {rewards.SPLIT_MARKER}, then the "
            "detailed summary, and nothing else."
        )


class ArXivEnv(WritingEnv):
    __doc__ = (
        "arXiv expansion: turn a paper abstract into the two halves of an introduction (hub "
        "`OpenMLRL/arXiv_abstract`; reference train train[:1100], eval val[:1100]).\n\n"
        + (WritingEnv.__doc__ or "").split("\n\n", 1)[1]
    )
    metadata: ClassVar[dict[str, Any]] = {**WritingEnv.metadata, "name": "arxiv_v0"}
    team_roles = ("background", "methodology")
    title = "ArXiv"
    source_name = "abstract"
    hub_id = "OpenMLRL/arXiv_abstract"
    hub_splits: ClassVar[Mapping[str, str]] = {"train": "train", "eval": "val"}
    sample_file = "arxiv_sample.json"
    fields = ("article_id", "abstract_text", "token_count")
    reward_rules = rewards.ARXIV_RULES
    part_names: ClassVar[Mapping[str, str]] = {
        "background": "background and motivation",
        "methodology": "methodology and implications",
    }
    level_texts = (
        "length",
        "methodology is 1.3-1.6x the background length",
        "both parts have a similar number of distinct words",
        "style",
    )
    length_band = (1.3, 1.6)
    vocabulary_band = (0.7, 1.3)

    def _item_from_record(self, record: Mapping[str, Any], index: int, label: str) -> WritingItem:
        _required(record, ("article_id", "abstract_text"), label)
        return WritingItem(
            item_id=str(record["article_id"]),
            source=str(record["abstract_text"]).strip(),
            reference="",
            dataset=label,
        )

    def _role_prompt(self, agent: str) -> str:
        abstract = self._source_block()
        common = (
            "Use the abstract's own key terms, so that the two parts read as one introduction, "
            "and connect your sentences with transition words of many kinds (for example, "
            "however, moreover, as a result, in particular, similarly, if, while, overall)."
        )
        if agent == "background":
            return (
                "You and a partner are expanding a paper abstract into an introduction. Your "
                "part: the background and motivation. Your partner, whose text you will not "
                "see, writes the methodology and implications, so leave those out.\n\n"
                f"{abstract}\n\n"
                "Write only the background and motivation: the problem, why it matters, and "
                f"what earlier work leaves open. {common} Length: 128 to 256 words; aim for "
                "about 140 to 170, because your partner's part should be 1.3 to 1.6 times as "
                "long as yours.\nAnswer with the text only."
            )
        if agent == "methodology":
            return (
                "You and a partner are expanding a paper abstract into an introduction. Your "
                "part: the methodology and implications. Your partner, whose text you will not "
                "see, writes the background and motivation (about 140 to 170 words), so leave "
                "those out.\n\n"
                f"{abstract}\n\n"
                "Write only the methodology and implications: what was done and how, what was "
                f"found, and what it means. {common} Length: 128 to 256 words; aim for about "
                "190 to 240, 1.3 to 1.6 times the background part.\nAnswer with the text only."
            )
        return (
            "Expand this paper abstract into an introduction in two parts. Your part: both "
            "parts.\n\n"
            f"{abstract}\n\n"
            "Part one: the background and motivation only (the problem, why it matters, what "
            "earlier work leaves open), 128 to 256 words, about 140 to 170. Part two: the "
            "methodology and implications only (what was done, found, and what it means), "
            f"128 to 256 words, 1.3 to 1.6 times as long as part one. {common}\n"
            f"Answer with part one, then a line {rewards.SPLIT_MARKER}, then part two, and "
            "nothing else."
        )
