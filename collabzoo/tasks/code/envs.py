"""CoopHumanEval-v0, HumanEval-v0, MBPP-v0: two programmers solve a problem together (tasks.md
section 3).

Agent `aux` writes a helper `aux(...)`, agent `main` writes the problem's entry-point function
and may call it; the joint program is tested in a sandbox and scored by
`collabzoo.tasks.code.rewards` (max 4.0). The env picks the problem, writes the prompts and the turn
feedback, and reports the score, its parts and the metrics. With `single_agent=True` one agent
(`solver`) writes the whole solution, for single-model baselines.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from collabzoo.envs.hub import (
    DatasetUnavailable,
    hub_unreachable_reason,
    offline_mode,
    one_line,
)
from collabzoo.envs.records import ALL, hub_dataset_id, load_records, slice_splits
from collabzoo.envs.text_env import (
    TextCollabEnv,
    TurnResult,
    check_choice,
    check_positive_int,
)
from collabzoo.tasks.code import rewards as rules

FEEDBACK_MODES = ("level", "plain")
TEAM_ROLES = ("aux", "main")
SOLO_ROLES = ("solver",)
SplitSlices = Mapping[str, tuple[int | None, int | None]]
"""{split: (start, stop)}: which records of the dataset each split holds."""
RECORD_FORMAT = (
    "a json / jsonl / jsonl.gz file or a folder of them, records holding task_id, prompt, test, "
    "entry_point"
)
"""What a local copy of a code dataset is, for the errors that ask for one."""
RECORD_FIELDS = ("task_id", "prompt", "test", "entry_point")
"""The fields every row of a code dataset has (HumanEval's also canonical_solution)."""


def _signature(problem: rules.CodeProblem) -> str:
    """`def name(params):` of the entry point as the prompt writes it (for the answer format)."""
    try:
        tree = rules.parse_python(problem.prompt)
    except (SyntaxError, ValueError):
        return f"def {problem.entry_point}(...):"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point:
            return f"def {node.name}({ast.unparse(node.args)}):"
    return f"def {problem.entry_point}(...):"


class CodeEnv(TextCollabEnv[rules.CodeProblem]):
    """The cooperative code-generation tasks (H = 2 by default); subclasses name the dataset.

    Args:
        data: a local copy of the dataset replacing the hub: a json / jsonl / jsonl.gz file or
            a directory of them, with records holding task_id, prompt, test, entry_point (the
            layout of the hub split); the reference slices below still apply. A hub dataset id
            works too. A local copy is read and checked by `make`: rows without those fields,
            or whose ids are another task's (MBPP's rows given to CoopHumanEval), are refused
            there. Offline (the hub unreachable, or HF_HUB_OFFLINE set), a hub dataset fails at
            `make` too, at once and in one line saying to pass data=PATH, unless the local
            `datasets` cache holds it; where the hub answers, it downloads at the first reset.
        allow_foreign_data: play rows whose task ids are not this task's (e.g. MBPP's problems
            as CoopHumanEval episodes); off by default, so that a wrong file is an error rather
            than a benchmark of the wrong task.
        split: default split for `reset`: "train" or "eval" (the reference slices) or "all"
            (every problem, in the dataset's order).
        memory: how much of its own history an agent sees: "full", "last" or "none".
        feedback: "level" (reference default: diagnostics of the joint program) or "plain"
            (just a request to revise).
        horizon: turns per episode (reference: 2).
        single_agent: one agent, `solver`, writes the whole solution; its answer is scored as
            both the aux answer and the main answer, so defining `aux(...)` and calling it
            from the entry point still earns those levels.
        sandbox: where tests run (an object with `run_many`, e.g. `collabzoo.sandbox.
            get_sandbox("process")`); default: `collabzoo.sandbox.default_sandbox()`, made
            when a test first has to run. Copies of the env share it.
        test_timeout: seconds per test (reference: 10).
        max_timeouts: after this many timed-out tests (reference: 3) the rest count as failed.
        feedback_tests: how many of the first tests the level feedback reports (reference: 1;
            None: all).
        aux_ignored_rule: the -0.5 rule: "reference" (its narrow pattern), "statement" (any
            bare `aux(...)` statement) or "off".
        prompt_context: what of the prompt joins the program: "imports" (reference) or
            "definitions" (also its other top-level functions, e.g. HumanEval/10's helper).
        answer_reading: how answers and tests are read: "reference" (default: the reference's
            text rules, so rewards equal the published ones on real output; see
            `collabzoo.tasks.code.rewards.reference_reading`) or "clean" (balanced fences, functions
            and returns found by Python's parser, tests split by the AST).
        splits: {"train": (start, stop), "eval": (start, stop)} slices of the dataset's
            records; default: the reference slices of the task. Split "all" is always every
            record.
        render_mode: "ansi" makes `render()` return a text picture of the episode so far;
            "human" prints it at every reset and step; None (default) leaves rendering off.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "code_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
        "multiline_answers": True,  # answers are code: blank lines do not end them
    }
    roles = TEAM_ROLES
    default_horizon = 2
    max_reward = rules.MAX_SCORE
    _shared_on_copy = ("_items_by_split", "sandbox")
    hub_id: ClassVar[str] = ""
    hub_split: ClassVar[str] = "test"
    reference_splits: ClassVar[SplitSlices] = {}
    title: ClassVar[str] = ""
    local_file: ClassVar[str] = ""
    task_prefix: ClassVar[str] = ""
    """How the task's ids begin ("HumanEval/" for "HumanEval/0"): rows whose ids do not are
    another task's, refused unless `allow_foreign_data`."""

    def __init__(
        self,
        *,
        data: str | None = None,
        split: str = "train",
        memory: str = "full",
        feedback: str = "level",
        horizon: int | None = None,
        single_agent: bool = False,
        sandbox: rules.CodeRunner | None = None,
        test_timeout: float = rules.DEFAULT_TEST_TIMEOUT,
        max_timeouts: int = rules.DEFAULT_MAX_TIMEOUTS,
        feedback_tests: int | None = 1,
        aux_ignored_rule: str = "reference",
        prompt_context: str = "imports",
        answer_reading: str = "reference",
        splits: SplitSlices | None = None,
        render_mode: str | None = None,
        allow_foreign_data: bool = False,
    ) -> None:
        if not isinstance(single_agent, bool):
            raise TypeError(f"single_agent must be a bool, got {single_agent!r}")
        self.single_agent = single_agent
        self.roles = SOLO_ROLES if single_agent else TEAM_ROLES
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        self.feedback = check_choice("feedback", feedback, FEEDBACK_MODES)
        if sandbox is not None and not callable(getattr(sandbox, "run_many", None)):
            raise TypeError("sandbox must have a run_many(jobs) method (see collabzoo.sandbox)")
        self.sandbox = sandbox
        if isinstance(test_timeout, bool) or not isinstance(test_timeout, (int, float)):
            raise ValueError(f"test_timeout must be positive seconds, got {test_timeout!r}")
        if not test_timeout > 0:
            raise ValueError(f"test_timeout must be positive seconds, got {test_timeout!r}")
        self.test_timeout = float(test_timeout)
        self.max_timeouts = check_positive_int("max_timeouts", max_timeouts)
        if feedback_tests is not None:
            check_positive_int("feedback_tests", feedback_tests)
        self.feedback_tests = feedback_tests
        self.aux_ignored_rule = check_choice(
            "aux_ignored_rule", aux_ignored_rule, rules.AUX_IGNORED_RULES
        )
        self.prompt_context = check_choice("prompt_context", prompt_context, rules.PROMPT_CONTEXTS)
        self.answer_reading = check_choice("answer_reading", answer_reading, rules.ANSWER_READINGS)
        self.splits = slice_splits(self.reference_splits if splits is None else splits)
        if data is not None and not isinstance(data, (str, os.PathLike)):
            raise TypeError(
                f"data must be a path or a hub dataset id, got {type(data).__name__}: "
                f"{RECORD_FORMAT}"
            )
        if not isinstance(allow_foreign_data, bool):
            raise TypeError(f"allow_foreign_data must be a bool, got {allow_foreign_data!r}")
        self.allow_foreign_data = allow_foreign_data
        self._data = data
        self._last: rules.CodeOutcome | None = None
        self._check_data()

    def _check_data(self) -> None:
        """Read the problems now, so that missing or wrong data fails at `make`, unless they
        come from a hub that answers (one quick check per process, `collabzoo.envs.hub`): then
        they download at the first reset, as `datasets` caches them."""
        source = self.hub_id if self._data is None else self._data
        from_hub = hub_dataset_id(source) is not None
        if from_hub and not offline_mode() and hub_unreachable_reason() is None:
            return
        self.items(ALL)

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[rules.CodeProblem]:
        if split != ALL:  # a slice of "all": the dataset is read once for every split
            start, stop = self.splits[split]
            return list(self.items(ALL)[slice(start, stop)])
        source = self.hub_id if self._data is None else self._data
        try:
            records = load_records(source, split=self.hub_split)
        except Exception as error:
            if self._data is not None and not isinstance(error, ConnectionError):
                if isinstance(error, (ValueError, OSError)):  # a bad local path or file
                    kind = ValueError if isinstance(error, ValueError) else OSError
                    kind = FileNotFoundError if isinstance(error, FileNotFoundError) else kind
                    raise kind(f"{self.title}: {error}") from None
                raise
            expected = f"{RECORD_FORMAT} (e.g. {self.local_file})"
            raise DatasetUnavailable(self.title, str(source), one_line(error), expected) from None
        self._check_records(records, str(source))
        return [rules.CodeProblem.from_record(r) for r in records]

    def _check_records(self, records: Sequence[Mapping[str, Any]], source: str) -> None:
        """ValueError, in one line, when the rows are not code problems, or (unless
        `allow_foreign_data`) are another task's: what was found, and what was expected."""
        expected = f"expected {RECORD_FORMAT} (e.g. {self.local_file})"
        lacking = [
            (index, [k for k in RECORD_FIELDS if k not in record])
            for index, record in enumerate(records)
        ]
        lacking = [(index, missing) for index, missing in lacking if missing]
        if lacking:
            index, missing = lacking[0]
            found = ", ".join(sorted(map(str, records[index]))) or "no fields"
            raise ValueError(
                f"{self.title}: data {source!r} is not a code dataset: {len(lacking)} of "
                f"{len(records)} rows lack fields (row {index} lacks {', '.join(missing)}; it "
                f"has {found}); {expected}"
            )
        foreign = [
            str(r["task_id"]) for r in records if not str(r["task_id"]).startswith(self.task_prefix)
        ]
        if foreign and not self.allow_foreign_data:
            like = ", ".join(repr(i) for i in foreign[:2])
            raise ValueError(
                f"{self.title}: data {source!r} holds another task's rows: {len(foreign)} of "
                f"{len(records)} have ids like {like}, where {self.title}'s are "
                f"'{self.task_prefix}N' (e.g. {self.local_file}); pass {self.title}'s own data, "
                "or allow_foreign_data=True to play these rows as this task"
            )

    def _item_id(self, item: rules.CodeProblem) -> str:
        return item.task_id

    def _begin_episode(self, item: rules.CodeProblem, options: Mapping[str, Any]) -> dict[str, Any]:
        self._last = None
        return {"entry_point": item.entry_point, "tests": len(item.tests_for(self.answer_reading))}

    # ----- prompts --------------------------------------------------------------------------
    def _role_prompt(self, agent: str) -> str:
        problem = self.item
        entry = problem.entry_point
        signature = _signature(problem)
        statement = f"Problem:\n{problem.prompt.strip()}\n\n"
        rules_for_code = (
            "Answer with Python code only: no explanation, no example usage, no tests, no "
            "markdown fences."
        )
        if agent == "aux":
            return (
                "You are one of two programmers solving a coding problem together. Your partner "
                f"writes the function `{entry}`; you write a helper function named `aux` that "
                f"`{entry}` can call to do a useful part of the work.\n\n"
                f"{statement}"
                f"Write `def aux(...)` with whatever parameters suit it; it must return its "
                f"result. Do not write `{entry}` yourself.\n"
                f"{rules_for_code}\nFormat:\ndef aux(...):\n    ...\n    return result"
            )
        if agent == "main":
            return (
                "You are one of two programmers solving a coding problem together. Your partner "
                f"writes a helper function `aux(...)`; you write the function `{entry}`.\n\n"
                f"{statement}"
                f"Implement `{entry}` exactly as specified. The helper `aux(...)` will be "
                "defined next to your function: call it where it helps and use what it "
                "returns. Do not define `aux` yourself.\n"
                f"{rules_for_code}\nFormat:\n{signature}\n    ...\n    return result"
            )
        return (
            "Solve this coding problem.\n\n"
            f"{statement}"
            f"Write a helper function `aux(...)` that does a useful part of the work, and "
            f"implement `{entry}` exactly as specified, calling `aux`. Both functions must "
            "return their results.\n"
            f"{rules_for_code}\nFormat:\ndef aux(...):\n    ...\n    return result\n\n"
            f"{signature}\n    ...\n    return result"
        )

    # ----- a turn ---------------------------------------------------------------------------
    def _answers_as_pair(self, answers: Mapping[str, str]) -> tuple[str, str]:
        if self.single_agent:
            return answers["solver"], answers["solver"]
        return answers["aux"], answers["main"]

    def _parsed(self, agent: str, outcome: rules.CodeOutcome) -> dict[str, Any]:
        a = outcome.analysis
        report: dict[str, Any] = {}
        if agent in ("aux", "solver"):
            report["aux"] = {
                "found": a.aux is not None,
                "has_return": a.aux_defined,
                "code": a.aux.source if a.aux else "",
            }
        if agent in ("main", "solver"):
            report["main"] = {
                "function": outcome.problem.entry_point,
                "found": a.main is not None,
                "has_return": a.main_defined,
                "code": a.main.source if a.main else "",
                "calls_aux": a.aux_called,
                "thin_wrapper": a.aux_called and a.thin_wrapper,
                "shadows_aux": a.aux_shadowed,
            }
            if agent == "main":
                report["main"]["also_defines_aux"] = a.main_answer_defines_aux
        return report

    def _feedback(self, agent: str, outcome: rules.CodeOutcome) -> str:
        if self.feedback == "plain":
            return rules.plain_feedback(agent, outcome.problem.entry_point)
        return rules.level_feedback(outcome, agent, tests_shown=self.feedback_tests)

    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        aux_answer, main_answer = self._answers_as_pair(answers)
        outcome = rules.evaluate_code(
            self.item,
            aux_answer,
            main_answer,
            self.sandbox,
            timeout=self.test_timeout,
            max_timeouts=self.max_timeouts,
            aux_ignored_rule=self.aux_ignored_rule,
            prompt_context=self.prompt_context,
            answer_reading=self.answer_reading,
        )
        self._last = outcome
        return TurnResult(
            breakdown=outcome.breakdown,
            parsed={a: self._parsed(a, outcome) for a in self.possible_agents},
            feedback={a: self._feedback(a, outcome) for a in self.possible_agents},
        )

    def _render_ansi(self) -> str:
        problem = self.item
        tests = len(problem.tests_for(self.answer_reading))
        header = (
            f"{self.title} {problem.task_id} (entry point {problem.entry_point}, "
            f"{tests} tests), after turn {self.turn} of {self.horizon}"
        )
        if self._last is None:
            return header
        a = self._last.analysis
        lines = [header]
        for label, found in (("aux", a.aux), (problem.entry_point, a.main)):
            lines.append(f"--- {label} ---")
            lines.append(found.source if found is not None else "(not found)")
        b = self._last.breakdown
        parts = "  ".join(f"{k} {v:+.2f}" for k, v in b.components.items() if v)
        m = b.metrics
        lines.append(
            f"score {b.total:.3f} / {rules.MAX_SCORE:g}  [{parts or 'nothing earned'}]  "
            f"tests {int(m['tests_passed'])}/{int(m['tests_total'])}  "
            f"aux_used {int(m['aux_used'])}"
        )
        result = self._last.result
        if result is not None and result.error:
            lines.append(f"first failure: {result.error[:300]}")
        elif a.syntax is not None:
            lines.append(
                f"syntax error at line {a.syntax.line}, column {a.syntax.column}: "
                f"{a.syntax.message}"
            )
        return "\n".join(lines)


class CoopHumanEvalEnv(CodeEnv):
    __doc__ = (
        "CoopHumanEval: 82 problems made for splitting into a helper and a main function "
        "(hub `OpenMLRL/CoopHumanEval`, split test; reference train test[16:] = 66, eval "
        "test[:16] = 16; split all = the 82 in order).\n\n"
        + (CodeEnv.__doc__ or "").split("\n\n", 1)[1]
    )
    metadata: ClassVar[dict[str, Any]] = {**CodeEnv.metadata, "name": "coophumaneval_v0"}
    hub_id = "OpenMLRL/CoopHumanEval"
    reference_splits: ClassVar[SplitSlices] = {"train": (16, None), "eval": (0, 16)}
    title = "CoopHumanEval"
    local_file = "CoopHumanEval.json"
    task_prefix = "CoopHumanEval/"


class HumanEvalEnv(CodeEnv):
    __doc__ = (
        "HumanEval: OpenAI's 164 problems (hub `openai/openai_humaneval`, split test; reference "
        "train test[33:163] = 130, eval test[:32] = 32, so HumanEval/32 and /163 are only in "
        "split all = the 164 in order, the set HumanEval scores are usually reported on).\n\n"
        + (CodeEnv.__doc__ or "").split("\n\n", 1)[1]
    )
    metadata: ClassVar[dict[str, Any]] = {**CodeEnv.metadata, "name": "humaneval_v0"}
    hub_id = "openai/openai_humaneval"
    reference_splits: ClassVar[SplitSlices] = {"train": (33, 163), "eval": (0, 32)}
    title = "HumanEval"
    local_file = "HumanEval.jsonl.gz"
    task_prefix = "HumanEval/"


class MBPPEnv(CodeEnv):
    __doc__ = (
        "MBPP: 257 sanitized MBPP problems in HumanEval form (hub `OpenMLRL/MBPP`, split test; "
        "eval test[:15] = 15 as in the reference's evaluation script, train test[15:] = 242, "
        "the rest, as no training slice is published; split all = the 257 in order).\n\n"
        + (CodeEnv.__doc__ or "").split("\n\n", 1)[1]
    )
    metadata: ClassVar[dict[str, Any]] = {**CodeEnv.metadata, "name": "mbpp_v0"}
    hub_id = "OpenMLRL/MBPP"
    reference_splits: ClassVar[SplitSlices] = {"train": (15, None), "eval": (0, 15)}
    title = "MBPP"
    local_file = "MBPP.json"
    task_prefix = "MBPP/"
