"""ClassEval-v0: two programmers complete one Python class together (tasks-2.md section 6).

The methods of the skeleton are split by the reference's rule (one parameter: `agent_0`;
more: `agent_1`); each agent writes its methods as `def` blocks, the owner's blocks that parse
are merged into the skeleton, and the class runs ClassEval's unittest suites in the sandbox
(`collabzoo.tasks.classeval.rewards`, max 6.0). Two turns by default; the second prompt holds
the agent's history, the skeleton and the diagnostics of the joint program, as the reference's
`code_feedback` mode builds it.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from collabzoo.envs.hub import (
    DatasetUnavailable,
    hub_unreachable_reason,
    offline_mode,
    one_line,
)
from collabzoo.envs.records import ALL, hub_dataset_id, load_records, slice_splits
from collabzoo.envs.text_env import TextCollabEnv, TurnResult, check_choice, check_positive_int
from collabzoo.tasks.classeval import rewards as rules

ROLES = ("agent_0", "agent_1")
HUB_ID = "FudanSELab/ClassEval"
HUB_SPLIT = "test"
REFERENCE_SLICES = {"train": (0, 66), "eval": (66, 82)}
"""The reference's `test[:66]` and `test[66:82]`; rows 82..99 are only in split "all"."""
RECORD_FIELDS = ("task_id", "skeleton", "test")
RECORD_FORMAT = (
    "a json / jsonl file or a folder of them, records holding task_id, skeleton, test (and "
    "solution_code, test_classes, methods_info as ClassEval has them)"
)
LOCAL_FILE = "ClassEval_data.json"
TASK_PREFIX = "ClassEval_"
SplitSlices = Mapping[str, tuple[int | None, int | None]]


def _first_prompt(task: rules.ClassTask, agent: int) -> str:
    methods = task.assigned(agent)
    listed = "\n".join(f"- {m}" for m in methods) if methods else "(none)"
    return (
        f"You are {ROLES[agent]}, one of two programmers completing the Python class "
        f"'{task.class_name}' together. You write only these methods:\n{listed}\n\n"
        "Rules for your answer:\n"
        "- Write only Python function definitions (`def ...`) of your own methods, with the "
        "names given above.\n"
        "- No class header, no imports, no markdown code fences, no explanation.\n"
        "- If you have no methods, give an empty answer.\n\n"
        f"SKELETON START\n{task.shown_skeleton}\nSKELETON END"
    )


class ClassEvalEnv(TextCollabEnv[rules.ClassTask]):
    """ClassEval: 100 Python classes (hub `FudanSELab/ClassEval`, split test; reference train
    test[:66] = 66, eval test[66:82] = 16; split all = the 100 in order).

    Args:
        data: a local copy of the dataset instead of the hub: a json / jsonl file or a folder
            of them with ClassEval's records (the benchmark's `data/ClassEval_data.json` is
            one), or a hub dataset id. A local copy is read and checked at `make`: rows
            without task_id, skeleton and test, or whose ids are not ClassEval's, are refused.
            Offline, a hub dataset fails at `make` in one line saying to pass data=PATH,
            unless the local `datasets` cache holds it.
        split: default split for `reset`: "train", "eval" or "all".
        memory: which earlier turns a later prompt shows: "full" (reference: every earlier
            prompt and answer), "last" or "none".
        feedback: "code_feedback" (reference: diagnostics of the joint program) or "plain".
        horizon: turns per episode (reference: 2).
        sandbox: where tests run (an object with `run_many`, e.g.
            `collabzoo.sandbox.get_sandbox("process")`); default: the shared
            `collabzoo.sandbox.default_sandbox(SANDBOX_PACKAGES)`, whose image holds the
            modules ClassEval imports (numpy, pandas, ...), made when a test first has to run.
        test_timeout: seconds per test (reference: 40); the whole run gets
            test_timeout x max_timeouts + 5.
        max_timeouts: timed-out tests after which the run stops, the rest uncounted (3).
        use_autopep8: pass the merged file through autopep8 as the reference does (True), or
            only normalize line ends, tabs and trailing spaces (False: the submitted code is
            not rewritten).
        self_select: every agent may write every method, a random valid block built where
            both wrote one (the reference's other strategy, drawn from the env's seeded
            generator rather than an unseeded one); off in the reference runs.
        cache: keep test runs by program hash, as the reference does (256 programs).
        splits: {"train": (start, stop), "eval": (start, stop)} slices of the records;
            default the reference's.
        allow_foreign_data: play rows whose ids are not ClassEval's.
        render_mode: "ansi" or "human".
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "classeval_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
        "multiline_answers": True,
    }
    roles = ROLES
    default_horizon = 2
    max_reward = rules.MAX_SCORE
    _shared_on_copy = ("_items_by_split", "sandbox", "cache")
    title = "ClassEval"
    hub_id: ClassVar[str] = HUB_ID
    local_file: ClassVar[str] = LOCAL_FILE
    """The benchmark's file, which a local copy of the data may be (`data=`)."""

    def __init__(
        self,
        *,
        data: str | os.PathLike[str] | None = None,
        split: str = "train",
        memory: str = "full",
        feedback: str = "code_feedback",
        horizon: int | None = None,
        sandbox: rules.ClassEvalRunner | None = None,
        test_timeout: float = rules.TEST_TIMEOUT,
        max_timeouts: int = rules.MAX_TIMEOUTS,
        use_autopep8: bool = True,
        self_select: bool = False,
        cache: bool = True,
        splits: SplitSlices | None = None,
        allow_foreign_data: bool = False,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        self.feedback = check_choice("feedback", feedback, rules.FEEDBACK_MODES)
        if sandbox is not None and not callable(getattr(sandbox, "run_many", None)):
            raise TypeError("sandbox must have a run_many(jobs) method (see collabzoo.sandbox)")
        self.sandbox = sandbox
        if isinstance(test_timeout, bool) or not isinstance(test_timeout, (int, float)):
            raise ValueError(f"test_timeout must be positive seconds, got {test_timeout!r}")
        if not test_timeout > 0:
            raise ValueError(f"test_timeout must be positive seconds, got {test_timeout!r}")
        self.test_timeout = float(test_timeout)
        self.max_timeouts = check_positive_int("max_timeouts", max_timeouts)
        for name, value in (
            ("use_autopep8", use_autopep8),
            ("self_select", self_select),
            ("cache", cache),
            ("allow_foreign_data", allow_foreign_data),
        ):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {value!r}")
        self.use_autopep8 = use_autopep8
        self.self_select = self_select
        self.cache = rules.ResultCache() if cache else None
        self.allow_foreign_data = allow_foreign_data
        self.splits = slice_splits(REFERENCE_SLICES if splits is None else splits)
        if data is not None and not isinstance(data, (str, os.PathLike)):
            raise TypeError(f"data must be a path or a hub dataset id: {RECORD_FORMAT}")
        self._data = data
        self._last: rules.ClassEvalOutcome | None = None
        self._check_data()

    def _check_data(self) -> None:
        """Read the tasks now, so that missing or wrong data fails at `make`, unless they come
        from a hub that answers (then they download at the first reset)."""
        source = HUB_ID if self._data is None else self._data
        from_hub = hub_dataset_id(source) is not None
        if from_hub and not offline_mode() and hub_unreachable_reason() is None:
            return
        self.items(ALL)

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[rules.ClassTask]:
        if split != ALL:
            start, stop = self.splits[split]
            return list(self.items(ALL)[slice(start, stop)])
        source = HUB_ID if self._data is None else self._data
        try:
            records = load_records(source, split=HUB_SPLIT)
        except Exception as error:
            if self._data is not None and not isinstance(error, ConnectionError):
                if isinstance(error, (ValueError, OSError)):
                    kind = FileNotFoundError if isinstance(error, FileNotFoundError) else None
                    kind = kind or (ValueError if isinstance(error, ValueError) else OSError)
                    raise kind(f"{self.title}: {error}") from None
                raise
            expected = f"{RECORD_FORMAT} (e.g. {LOCAL_FILE})"
            raise DatasetUnavailable(self.title, str(source), one_line(error), expected) from None
        self._check_records(records, str(source))
        return [rules.ClassTask.from_record(r) for r in records]

    def _check_records(self, records: Sequence[Mapping[str, Any]], source: str) -> None:
        expected = f"expected {RECORD_FORMAT} (e.g. {LOCAL_FILE})"
        lacking = [(i, [k for k in RECORD_FIELDS if k not in r]) for i, r in enumerate(records)]
        lacking = [(i, missing) for i, missing in lacking if missing]
        if lacking:
            index, missing = lacking[0]
            found = ", ".join(sorted(map(str, records[index]))) or "no fields"
            raise ValueError(
                f"{self.title}: data {source!r} is not ClassEval data: {len(lacking)} of "
                f"{len(records)} rows lack fields (row {index} lacks {', '.join(missing)}; it "
                f"has {found}); {expected}"
            )
        foreign = [
            str(r["task_id"]) for r in records if not str(r["task_id"]).startswith(TASK_PREFIX)
        ]
        if foreign and not self.allow_foreign_data:
            like = ", ".join(repr(i) for i in foreign[:2])
            raise ValueError(
                f"{self.title}: data {source!r} holds another task's rows: {len(foreign)} of "
                f"{len(records)} have ids like {like}, where ClassEval's are '{TASK_PREFIX}N' "
                f"(e.g. {LOCAL_FILE}); pass ClassEval's own data, or allow_foreign_data=True"
            )

    def _item_id(self, item: rules.ClassTask) -> str:
        return item.task_id

    def _begin_episode(self, item: rules.ClassTask, options: Mapping[str, Any]) -> dict[str, Any]:
        self._last = None
        return {
            "class_name": item.class_name,
            "methods": list(item.methods),
            "assigned": {role: list(item.assigned(i)) for i, role in enumerate(ROLES)},
        }

    # ----- prompts --------------------------------------------------------------------------
    def _role_prompt(self, agent: str) -> str:
        return _first_prompt(self.item, ROLES.index(agent))

    def _compose(self, agent: str) -> str:
        """A later turn's prompt in the reference's layout (its history inside it): the
        remembered turns' prompts as the agent saw them and its answers cut to its own
        methods, the skeleton, the diagnostics and the request."""
        index = ROLES.index(agent)
        past = self._history[agent]
        seen = self._seen_prompts(agent)
        keep = {"full": len(past), "last": min(1, len(past)), "none": 0}[self.memory]
        history = [(seen[t], past[t][1]) for t in range(len(past) - keep, len(past))]
        first = len(past) - keep + 1
        diagnostics = None if self.feedback == "plain" else self._prompts[agent]
        return rules.followup_prompt(self.item, index, agent, history, diagnostics, first)

    def _seen_prompts(self, agent: str) -> list[str]:
        """The whole prompt the agent saw at each played turn."""
        seen = [self._role_prompt(agent)]
        past = self._history[agent]
        for turn in range(1, len(past)):
            keep = {"full": turn, "last": min(1, turn), "none": 0}[self.memory]
            history = [(seen[t], past[t][1]) for t in range(turn - keep, turn)]
            diagnostics = None if self.feedback == "plain" else past[turn][0]
            seen.append(
                rules.followup_prompt(
                    self.item, ROLES.index(agent), agent, history, diagnostics, turn - keep + 1
                )
            )
        return seen

    # ----- a turn ---------------------------------------------------------------------------
    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        task = self.item
        choose = None
        if self.self_select:
            seed = int(self.np_random.integers(2**32))
            choose = random.Random(seed).choice
        b = rules.build(
            task,
            answers[ROLES[0]],
            answers[ROLES[1]],
            use_autopep8=self.use_autopep8,
            self_select=self.self_select,
            choose=choose,
        )
        (run,) = rules.run_builds(
            [b],
            self.sandbox,
            test_timeout=self.test_timeout,
            max_timeouts=self.max_timeouts,
            cache=self.cache,
        )
        outcome = rules.ClassEvalOutcome(rules.breakdown(b, run), b, run)
        self._last = outcome
        text = rules.diagnostics(outcome)
        parsed = {}
        for i, role in enumerate(ROLES):
            report = b.reports[i].as_dict()
            if b.format_error:
                report["format_error"] = b.format_error
            parsed[role] = report
        return TurnResult(
            breakdown=outcome.breakdown, parsed=parsed, feedback=dict.fromkeys(ROLES, text)
        )

    def _render_ansi(self) -> str:
        task = self.item
        header = (
            f"ClassEval {task.task_id} ({task.class_name}, {len(task.methods)} methods to "
            f"write), after turn {self.turn} of {self.horizon}"
        )
        if self._last is None:
            return header
        b, run = self._last.build, self._last.run
        lines = [header]
        for method in task.methods:
            owner = ROLES[task.owner[method]]
            state = "built" if method in b.built else "stub"
            extra = " (both wrote it)" if method in b.overlap else ""
            lines.append(f"  {method:<28} {owner}  {state}{extra}")
        total = self._last.breakdown
        parts = "  ".join(f"{k} {v:+.2f}" for k, v in total.components.items() if v)
        compiled = "compiles" if b.compiles else f"does not compile ({b.compile_error})"
        lines.append(
            f"score {total.total:.3f} / {rules.MAX_SCORE:g}  [{parts or 'nothing earned'}]  "
            f"{compiled}; tests {run.passed}/{run.tests_run} ({run.status})"
        )
        return "\n".join(lines)
