"""The reference constants and defaults of tasks.md, each pinned by a case on its boundary.

A leaderboard row compares only if every number of the reference setting is the one tasks.md
states, and many of those numbers never show in a score on the shipped cases (a default
nobody passes, a band edge no recorded answer reaches). Each test here sits on one such edge,
worked out by hand from tasks.md, so that changing the constant makes it fail. Where a
constant is an argument default, the default is also read from the signature, but the case
is the test that matters. Groups follow the sections of tasks.md.

Constants that other tests already pin (the reward weights and the band edges in
tests/test_writing_rewards.py, tests/test_code_rewards.py, tests/test_strbuild_rules.py and
tests/test_housebuild_rules.py; the reward's three timed-out tests in
tests/test_mutants_killed.py) are left to them: this file holds the ones whose change no other
test noticed, found by changing each constant of tasks.md in a copy of the checkout.

Writing texts are built from tokens `zk0`, `zk1`, ...: no transition phrase and no stopword
occurs in them, even as a substring. Trailing spaces pad a text to an exact length in
characters without changing its words or its word sets.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

import collabzoo
from collabzoo.sandbox import ExecResult, Job
from collabzoo.tasks.building.rewards import housebuild as housebuild_rules
from collabzoo.tasks.code import envs as code_envs
from collabzoo.tasks.code import rewards as code_rules
from collabzoo.tasks.writing import envs as writing_envs
from collabzoo.tasks.writing import rewards as writing


def default(function, name: str):
    return inspect.signature(function).parameters[name].default


def zk(n: int, start: int = 0) -> list[str]:
    return [f"zk{i}" for i in range(start, start + n)]


def text(words: Sequence[str], chars: int | None = None) -> str:
    """The words joined by spaces, padded with trailing spaces to `chars` characters."""
    body = " ".join(words)
    if chars is None:
        return body
    assert len(body) <= chars, f"{len(body)} characters do not fit in {chars}"
    return body + " " * (chars - len(body))


# ===== 1-2. TLDR summarization and arXiv expansion ================================================
# tasks.md sections 1 and 2, "Reward (max 3.0)". tests/test_writing_rewards.py holds each band's
# outer edges; these are the joints between a band's pieces, where a changed inner bound
# (1.6 -> 1.5, say) moves no outer edge.


@pytest.mark.parametrize(
    ("score", "ratio", "coordination"),
    [
        (writing.score_tldr, 1.55, (1.55 - 1.1) / 0.5),  # just below the full band's 1.6
        (writing.score_tldr, 3.25, 1.0 - (3.25 - 3.2) / 1.8),  # just past its 3.2
        (writing.score_arxiv, 1.25, (1.25 - 0.8) / 0.5),  # just below 1.3
        (writing.score_arxiv, 1.65, 1.0 - (1.65 - 1.6) / 0.4),  # just past 1.6
    ],
    ids=["tldr-1.55", "tldr-3.25", "arxiv-1.25", "arxiv-1.65"],
)
def test_length_ratio_band_joints(score, ratio: float, coordination: float) -> None:
    """Level 2, r = len(c2) / len(c1) in characters: c1 is 1000 characters, c2 1000 r, both
    the same 130 words (inside both tasks' word ranges)."""
    words = zk(130)
    result = score(text(words, 1000), text(words, round(1000 * ratio)))
    assert result.metrics["level"] >= 2.0
    assert result.components["coordination"] == pytest.approx(coordination, abs=1e-9)


@pytest.mark.parametrize(
    ("score", "c1_unique", "c2_unique", "vocabulary"),
    [
        (writing.score_tldr, 20, 39, 0.5 * (1.95 - 1.3) / 0.7),  # u = 1.95, below 2.0
        (writing.score_arxiv, 100, 65, 0.5 * (0.65 - 0.5) / 0.2),  # u = 0.65, below 0.7
        (writing.score_arxiv, 100, 135, 0.5 * (1.0 - (1.35 - 1.3) / 0.4)),  # u = 1.35
    ],
    ids=["tldr-1.95", "arxiv-0.65", "arxiv-1.35"],
)
def test_unique_word_band_joints(score, c1_unique: int, c2_unique: int, vocabulary) -> None:
    """Level 3, u = unique words(c2) / unique words(c1): each text repeats its words up to 130
    (inside both word ranges); r = 1.6 earns all of level 2 in both tasks."""
    c1 = text([f"zk{i % c1_unique}" for i in range(130)], 1000)
    c2 = text([f"zk{i % c2_unique}" for i in range(max(130, c2_unique))], 1600)
    result = score(c1, c2)
    assert result.metrics["unique_ratio"] == c2_unique / c1_unique
    assert result.metrics["level"] == 4.0
    assert result.components["vocabulary"] == pytest.approx(vocabulary, abs=1e-9)


@pytest.mark.parametrize(
    ("k", "score"),
    [(0, 0.0), (1, 0.4), (2, 0.45), (12, 0.95), (13, 1.0), (20, 1.0)],
)
def test_transition_score(k: int, score: float) -> None:
    """T = 0 if k = 0, else min(1, 0.4 + min(0.05 (k - 1), 0.6)); with the lexicon's 12
    categories a text reaches 0.95 at most, so both caps show only at k = 12 and beyond."""
    assert writing.transition_score(k) == pytest.approx(score)
    assert len(writing.lexicon()[1]) == 12


@pytest.mark.parametrize(
    ("task", "hub_id", "eval_split", "record"),
    [
        ("tldr", "trl-lib/tldr", "test", {"prompt": "post TL;DR:", "completion": "c"}),
        ("arxiv", "OpenMLRL/arXiv_abstract", "val", {"article_id": "a", "abstract_text": "t"}),
    ],
)
def test_writing_envs_ask_the_hub_for_the_reference_slices(
    task: str, hub_id: str, eval_split: str, record: dict, monkeypatch
) -> None:
    """With no data given, the env reads the reference slices of its hub dataset: train[:1100]
    and, for eval, TLDR's test[:1100] (not validation) or arXiv's val[:1100]. The hub cannot be
    reached from the tests, so the loader is replaced by one that records what was asked."""
    asked = []

    def hub(source, *, split=None):
        asked.append((source, split))
        return [record]

    monkeypatch.setattr(writing_envs, "load_records", hub)
    monkeypatch.setattr(writing_envs, "_hub_failures", {})
    env = collabzoo.make(task)
    env.items("train"), env.items("eval")
    assert asked == [(hub_id, "train[:1100]"), (hub_id, f"{eval_split}[:1100]")]


# ===== Common shape: two agents and the horizon H =================================================
# tasks.md "Common shape" and the H of each section: 1, 1, 2, 4, 4.

ONE_CODE_PROBLEM = {
    "task_id": "slow",
    "prompt": 'def ident(n):\n    """Return n."""\n',
    "test": (
        "def check(candidate):\n"
        "    assert candidate(1) == 1\n"
        "    assert candidate(2) == 2\n"
        "    assert candidate(3) == 3\n"
        "    assert candidate(0) == 0\n"
        "    assert candidate(-1) == -1\n"
    ),
    "entry_point": "ident",
}
HELPER_PROBLEM = {
    "task_id": "helper",
    "prompt": (
        "from functools import reduce\n\n\n"
        "def double(x):\n    return 2 * x\n\n\n"
        'def quad(n):\n    """Return 4 n."""\n'
    ),
    "test": "def check(candidate):\n    assert candidate(1) == 4\n    assert candidate(2) == 8\n",
    "entry_point": "quad",
}


CODE_PREFIXES = {"coophumaneval": "CoopHumanEval/", "humaneval": "HumanEval/", "mbpp": "MBPP/"}


@pytest.fixture(scope="module")
def code_data(tmp_path_factory) -> dict[str, str]:
    """The two problems in the local-copy format of each code env, with its task ids."""
    folder = tmp_path_factory.mktemp("code")
    paths = {}
    for name, prefix in CODE_PREFIXES.items():
        rows = [
            {**problem, "task_id": prefix + problem["task_id"]}
            for problem in (ONE_CODE_PROBLEM, HELPER_PROBLEM)
        ]
        paths[name] = str(folder / f"{name}.json")
        Path(paths[name]).write_text(json.dumps(rows))
    return paths


@pytest.mark.parametrize(
    ("name", "horizon", "agents", "max_reward"),
    [
        ("tldr", 1, 2, 3.0),
        ("arxiv", 1, 2, 3.0),
        ("coophumaneval", 2, 2, 4.0),
        ("humaneval", 2, 2, 4.0),
        ("mbpp", 2, 2, 4.0),
        ("strbuild", 4, 2, 2.0),
        ("housebuild", 4, 2, 1.0),
    ],
)
def test_every_reference_task_has_two_agents_and_its_horizon(
    name: str, horizon: int, agents: int, max_reward: float, code_data: dict[str, str]
) -> None:
    """An episode ends for everyone after exactly H turns. The answers here reach no test of
    a code task (no entry point), so no sandbox is needed."""
    kwargs = {"tldr": {"data": "sample"}, "arxiv": {"data": "sample"}}.get(name, {})
    if name in code_data:
        kwargs = {"data": code_data[name], "split": "all"}
    env = collabzoo.make(name, **kwargs)
    observations, _ = env.reset(seed=0)
    assert len(observations) == agents == len(env.possible_agents)
    assert env.max_reward == max_reward
    for turn in range(1, horizon + 1):
        _, _, terminations, _, _ = env.step(dict.fromkeys(env.agents, "pass"))
        assert all(terminations.values()) == (turn == horizon)
    assert env.agents == []


# ===== 3. Cooperative code generation =============================================================
# tasks.md section 3, "Reward (max 4.0)" and "Turn-2 feedback". Programs run in the session's
# code sandbox (tests/conftest.py: Docker).

AUX = "def aux(n):\n    return n"


def sleeps_from(first_slow: int) -> str:
    """An entry point that hangs for inputs >= first_slow and is right (via aux) otherwise;
    ONE_CODE_PROBLEM's tests call it with 1, 2, 3, then 0 and -1."""
    return (
        "def ident(n):\n"
        "    import time\n"
        f"    if n >= {first_slow}:\n"
        "        time.sleep(60)\n"
        "    return aux(n)"
    )


class Recorded:
    """The real sandbox, keeping every job it is given: what the settings sent to it were."""

    def __init__(self, sandbox) -> None:
        self.sandbox = sandbox
        self.jobs: list[Job] = []

    def run_many(self, jobs: Sequence[Job]) -> list[ExecResult]:
        self.jobs.extend(jobs)
        return self.sandbox.run_many(jobs)


@pytest.fixture(scope="module")
def sandbox(code_sandbox):
    return code_sandbox


def test_code_reward_sends_the_reference_test_limits(sandbox) -> None:
    """Scored with no options, the tests run with the reference's 10 s per test and 3
    timed-out tests at most (tests/test_mutants_killed.py shows the 3 at work), and the level
    feedback reports the first test only: a main right on inputs below 2 passes tests 0, 3
    and 4 of five, so its feedback says 1/1."""
    one = code_rules.CodeProblem.from_record(ONE_CODE_PROBLEM)
    main = "def ident(n):\n    if n < 2:\n        return aux(n)\n    return n + 1"
    recorded = Recorded(sandbox)
    (outcome,) = code_rules.evaluate_code_batch([(one, AUX, main)], recorded)
    assert outcome.result.passed == (True, False, False, True, True)
    assert [(job.timeout, job.max_timeouts) for job in recorded.jobs] == [(10.0, 3)]
    assert default(code_rules.evaluate_code_batch, "timeout") == 10.0
    feedback = code_rules.level_feedback(outcome, "main")
    assert "Tests: 1/1 passed (only the first of the 5 tests is reported)." in feedback


def test_code_env_counts_the_rest_failed_after_three_timeouts(code_data, sandbox) -> None:
    """The env's default max_timeouts is the reference's 3 (per-test timeout cut to 1 s here).
    Turn 1 hangs from input 1: tests 0-2 time out, tests 3-4 are never run and count as failed:
    0.4 + 0.6 + 0.5 = 1.5 (with 5 allowed, tests 3-4 would pass: 3.4). Turn 2 hangs from 2:
    two time-outs, so tests 0, 3 and 4 run and pass: 1.5 + 3/5 + 0.5 + 1.0 = 3.6. The level
    feedback between them (the default) reports the first of the five tests only."""
    recorded = Recorded(sandbox)
    env = collabzoo.make(
        "coophumaneval",
        data=code_data["coophumaneval"],
        split="all",
        sandbox=recorded,
        test_timeout=1.0,
    )
    env.reset(seed=0, options={"task": "CoopHumanEval/slow"})
    observations, rewards, _, _, infos = env.step({"aux": AUX, "main": sleeps_from(1)})
    assert rewards["main"] == pytest.approx(1.5)
    assert infos["main"]["metrics"]["tests_passed"] == 0.0
    assert "Diagnostics of your team's program" in observations["main"]
    assert "Tests: 0/1 passed (only the first of the 5 tests is reported)." in observations["main"]
    _, rewards, terminations, _, _ = env.step({"aux": AUX, "main": sleeps_from(2)})
    assert rewards["main"] == pytest.approx(3.6)
    assert all(terminations.values())
    assert [job.max_timeouts for job in recorded.jobs] == [3, 3]
    assert default(code_envs.CodeEnv.__init__, "max_timeouts") == 3


def test_code_env_defaults_are_the_reference_rules(code_data, sandbox) -> None:
    """Made with no options, the env sends the reference's 10 s per test, joins only the
    prompt's imports to the program (a main calling the prompt's `double` fails its tests:
    1.5) and applies the reference's narrow aux-ignored rule (a bare `aux(n)` costs nothing:
    4.0)."""
    recorded = Recorded(sandbox)
    env = collabzoo.make(
        "coophumaneval", data=code_data["coophumaneval"], split="all", sandbox=recorded
    )
    env.reset(seed=0, options={"task": "CoopHumanEval/helper"})
    _, rewards, _, _, _ = env.step(
        {"aux": AUX, "main": "def quad(n):\n    return double(double(n))"}
    )
    assert rewards["main"] == pytest.approx(1.5)
    env.reset(seed=0, options={"task": "CoopHumanEval/slow"})
    _, rewards, _, _, _ = env.step({"aux": AUX, "main": "def ident(n):\n    aux(n)\n    return n"})
    assert rewards["main"] == pytest.approx(4.0)
    assert [job.timeout for job in recorded.jobs] == [10.0, 10.0]
    assert default(code_envs.CodeEnv.__init__, "test_timeout") == 10.0
    assert default(code_envs.CodeEnv.__init__, "feedback") == "level"
    assert default(code_envs.CodeEnv.__init__, "feedback_tests") == 1


@pytest.mark.parametrize(
    ("name", "hub_id"),
    [
        ("coophumaneval", "OpenMLRL/CoopHumanEval"),
        ("humaneval", "openai/openai_humaneval"),
        ("mbpp", "OpenMLRL/MBPP"),
    ],
)
def test_code_envs_ask_the_hub_for_their_dataset(name: str, hub_id: str, monkeypatch) -> None:
    """With no data given, each code env reads the `test` split of its hub dataset (the only
    split they have). The hub cannot be reached from the tests, so the loader is replaced by
    one that records what was asked."""
    asked = []

    def hub(source, *, split=None):
        asked.append((source, split))
        return [{**ONE_CODE_PROBLEM, "task_id": CODE_PREFIXES[name] + "0"}]

    monkeypatch.setattr(code_envs, "load_records", hub)
    assert len(collabzoo.make(name).items("all")) == 1
    assert asked == [(hub_id, "test")]


HANGING_THEN_QUICK = (
    "import time\n\ndef ident(n):\n    if n > 0:\n        time.sleep(60)\n    return n",
    (
        "assert candidate(1) == 1",
        "assert candidate(2) == 2",
        "assert candidate(3) == 3",
        "assert candidate(0) == 0",
        "assert candidate(-1) == -1",
    ),
)


def test_sandbox_defaults_stop_after_three_timeouts(sandbox) -> None:
    """The sandbox's own defaults (a `Job` and `Sandbox.run` given no limits) are the
    reference's: three timed-out tests, then the rest are not run (the two quick ones fail);
    10 s per test."""
    program, tests = HANGING_THEN_QUICK
    (job_result,) = sandbox.run_many([Job(program, tests, "ident", timeout=1.0)])
    assert job_result.passed == (False,) * 5 and job_result.timed_out
    run_result = sandbox.run(program, list(tests), 1.0, entry_point="ident")
    assert run_result.passed == (False,) * 5 and run_result.timed_out
    assert (Job("", ()).timeout, Job("", ()).max_timeouts) == (10.0, 3)
    assert default(type(sandbox).run, "timeout") == 10.0
    assert default(type(sandbox).run, "max_timeouts") == 3


# ===== 4. StrBuild ================================================================================
# tasks.md section 4: targets, actions, palettes, feedback.


def test_strbuild_env_defaults_are_the_reference_game() -> None:
    """Made with no options: the ten reference words, first 8 train and last 2 eval; 150
    accepted commands per agent (the 151st line is rejected); agent 1's palette oak_planks and
    stone, agent 2's white_concrete and obsidian; the position feedback (the target cells,
    split the work between you)."""
    env = collabzoo.make("strbuild")
    assert [t.task_id for t in env.items("train")] == ["I", "C", "M", "L", "MC", "CM", "LI", "LLM"]
    assert [t.task_id for t in env.items("eval")] == ["ICML", "CLIM"]
    env.reset(seed=0, options={"task": "I"})
    first = "\n".join(["/setblock 0 4 0 stone"] * 151 + ["/setblock 1 4 0 white_concrete"])
    second = "/setblock 1 4 0 obsidian\n/setblock 2 4 0 white_concrete\n/setblock 3 4 0 stone"
    observations, _, _, _, infos = env.step({"first_builder": first, "second_builder": second})
    one, two = infos["first_builder"]["parsed"], infos["second_builder"]["parsed"]
    assert len(one["accepted"]) == 150
    assert [r["reason"] for r in one["rejected"]] == ["over the cap of 150 commands per agent"] * 2
    assert (
        len(two["accepted"]) == 2 and "not in this agent's palette" in two["rejected"][0]["reason"]
    )
    assert "Target cells (x,y,z): (0,0,0), (1,0,0)" in observations["first_builder"]
    assert "Take about half of these cells" in observations["second_builder"]


# ===== 5. HouseBuild ==============================================================================
# tasks.md section 5: the reference houses, actions, resources, spiders, feedback.


def test_housebuild_env_defaults_are_the_reference_game(reference_houses_path: Path) -> None:
    """Made with the reference houses and no options: 8 train and 2 eval houses of 6 x 7 x 7;
    resources on (house_build_0002 needs 2 planks, so each agent may place ceil(2/2) +
    floor(2/4) = 1 and a 2-block fill is rejected); 300 accepted commands per agent; three
    spiders attack and the prompt names the player's 5 HP; the score feedback (no cells to
    fix, no resource schedule)."""
    env = collabzoo.make("housebuild", data=str(reference_houses_path))
    assert (len(env.items("train")), len(env.items("eval"))) == (8, 2)
    assert {house.size for house in env.items("all")} == {(6, 7, 7)}
    observations, infos = env.reset(seed=0, options={"task": "house_build_0002"})
    attacks = infos["first_builder"]["spider_attacks"]
    assert len(attacks) == 3 and set(attacks) <= {1, 2, 3}
    assert "you have 5 HP" in observations["first_builder"]
    first = "/fill 2 1 1 3 1 1 planks\n/fill 2 1 1 2 1 1 planks\n" + "/kill\n" * 300
    observations, _, _, _, infos = env.step({"first_builder": first, "second_builder": ""})
    parsed = infos["first_builder"]["parsed"]
    assert len(parsed["accepted"]) == 300
    reasons = [r["reason"] for r in parsed["rejected"]]
    assert reasons[0].startswith("not enough planks") and reasons[1:] == [
        "over the cap of 300 commands per agent"
    ]
    assert "Cells to fix" not in observations["first_builder"]
    assert "Blocks placed by" not in observations["first_builder"]


def test_housebuild_reference_inventory() -> None:
    """A house given without an inventory reads its plan through the reference one: C
    white_concrete, O obsidian, S stone_stairs, B stone_bricks, D planks, A air."""
    spec = {"target_spec": {"size": [6, 1, 1], "layers": [{"y": 0, "rows": ["COSBDA"]}]}}
    house = housebuild_rules.House.from_spec(spec)
    assert [house.blocks[i] for i in house.grid[:, 0, 0]] == [
        "white_concrete",
        "obsidian",
        "stone_stairs",
        "stone_bricks",
        "planks",
        "air",
    ]
