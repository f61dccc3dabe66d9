"""The code-generation envs (CoopHumanEval-v0, HumanEval-v0, MBPP-v0) on the local data copies."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

import collabzoo
from collabzoo.envs.hub import DatasetUnavailable
from collabzoo.tasks.code import envs as code_envs
from collabzoo.tasks.code import rewards as rules
from tests.conftest import require

DATA = {
    "coophumaneval": ("coophumaneval/CoopHumanEval.json", 66, 16),
    "humaneval": ("humaneval/HumanEval.jsonl.gz", 130, 32),
    "mbpp": ("mbpp/MBPP.json", 242, 15),
}
AUX = "def aux(n):\n    return n > 1 and all(n % k for k in range(2, int(n ** 0.5) + 1))"
MAIN = "def x_or_y(n, x, y):\n    if aux(n):\n        return x\n    return y"


@pytest.fixture(scope="module")
def sandbox(code_sandbox):
    """The session's code sandbox (tests/conftest.py): Docker, or the process backend where
    no daemon answers outside CI."""
    return code_sandbox


def data_path(shared_data: Path, task: str) -> str:
    return str(require(shared_data / DATA[task][0], f"the {task} data"))


@pytest.fixture
def coop_env(shared_data: Path, sandbox):
    def make(**kwargs):
        kwargs.setdefault("sandbox", sandbox)
        return collabzoo.make(
            "coophumaneval", data=data_path(shared_data, "coophumaneval"), **kwargs
        )

    return make


@pytest.mark.parametrize("task", list(DATA))
def test_reference_splits_from_local_data(shared_data: Path, task: str) -> None:
    _, n_train, n_eval = DATA[task]
    env = collabzoo.make(task, data=data_path(shared_data, task))
    train, held_out = env.items("train"), env.items("eval")
    assert (len(train), len(held_out)) == (n_train, n_eval)
    assert not {p.task_id for p in train} & {p.task_id for p in held_out}
    assert env.max_reward == 4.0 == rules.MAX_SCORE
    assert env.possible_agents == ["aux", "main"] and env.horizon == 2
    directory = collabzoo.make(task, data=str(Path(data_path(shared_data, task)).parent))
    assert [p.task_id for p in directory.items("eval")] == [p.task_id for p in held_out]


def test_reference_slices_pick_the_published_problems(shared_data: Path) -> None:
    coop = collabzoo.make("coophumaneval", data=data_path(shared_data, "coophumaneval"))
    assert coop.items("eval")[0].task_id == "CoopHumanEval/0"
    assert coop.items("train")[0].task_id == "CoopHumanEval/16"
    he = collabzoo.make("humaneval", data=data_path(shared_data, "humaneval"))
    assert he.items("eval")[-1].task_id == "HumanEval/31"
    assert (he.items("train")[0].task_id, he.items("train")[-1].task_id) == (
        "HumanEval/33",
        "HumanEval/162",
    )
    custom = collabzoo.make(
        "humaneval",
        data=data_path(shared_data, "humaneval"),
        splits={"train": (0, None), "eval": (160, None)},
    )
    assert len(custom.items("train")) == 164 and len(custom.items("eval")) == 4


def test_unreachable_hub_says_how_to_pass_local_data(monkeypatch) -> None:
    def offline(source, *, split=None):
        raise ConnectionError(f"Couldn't reach {source!r} on the Hub")

    monkeypatch.setattr(code_envs, "load_records", offline)
    monkeypatch.setattr(code_envs, "hub_unreachable_reason", lambda: "no route (this test)")
    with pytest.raises(DatasetUnavailable, match="OpenMLRL/CoopHumanEval") as caught:
        collabzoo.make("coophumaneval")  # at make, not at the first reset
    message = str(caught.value)
    assert "\n" not in message, "one line"
    assert "collabzoo.make('CoopHumanEval', data=PATH)" in message
    assert "ConnectionError: Couldn't reach 'OpenMLRL/CoopHumanEval'" in message
    assert "e.g. CoopHumanEval.json" in message
    assert caught.value.hint("--data coophumaneval=PATH").count("--data coophumaneval=PATH") == 1


SPLIT_ALL = {"coophumaneval": ("CoopHumanEval", 82), "humaneval": ("HumanEval", 164)}
SPLIT_ALL["mbpp"] = ("MBPP", 257)


@pytest.mark.parametrize("task", list(DATA))
def test_split_all_is_every_problem_in_dataset_order(shared_data: Path, task: str) -> None:
    prefix, count = SPLIT_ALL[task]
    env = collabzoo.make(task, data=data_path(shared_data, task), split="all")
    every = env.items()
    assert [p.task_id for p in every] == [f"{prefix}/{k}" for k in range(count)]
    train_slice, eval_slice = (slice(*env.reference_splits[s]) for s in ("train", "eval"))
    assert list(env.items("train")) == list(every[train_slice])
    assert list(env.items("eval")) == list(every[eval_slice])
    seen = {env.reset(seed=s)[1]["main"]["task_id"] for s in range(60)}
    assert not seen <= {p.task_id for p in env.items("train")}, "the default split is all"
    _, infos = env.reset(options={"task": count - 1})
    assert infos["aux"]["task_id"] == f"{prefix}/{count - 1}"


def test_humaneval_32_and_163_are_only_in_split_all(shared_data: Path) -> None:
    env = collabzoo.make("humaneval", data=data_path(shared_data, "humaneval"))
    reference = {p.task_id for s in ("train", "eval") for p in env.items(s)}
    every = {p.task_id for p in env.items("all")}
    assert every - reference == {"HumanEval/32", "HumanEval/163"}
    for task in ("HumanEval/32", "HumanEval/163"):
        _, infos = env.reset(options={"task": task, "split": "all"})
        assert infos["main"]["task_id"] == task


@pytest.mark.parametrize(
    ("task", "asked", "holder"),
    [
        ("HumanEval/32", "train", "all"),
        ("HumanEval/163", "eval", "all"),
        ("HumanEval/3", "train", "eval"),
        ("HumanEval/40", "eval", "train"),
    ],
)
def test_a_task_id_in_another_split_is_named(
    shared_data: Path, task: str, asked: str, holder: str
) -> None:
    env = collabzoo.make("humaneval", data=data_path(shared_data, "humaneval"), split=asked)
    with pytest.raises(ValueError) as caught:
        env.reset(options={"task": task})
    message = str(caught.value)
    assert f"{task!r} is not in split {asked!r} but in split {holder!r}" in message
    assert f"options={{'split': {holder!r}}}" in message


def test_a_task_id_in_no_split_says_so(shared_data: Path) -> None:
    env = collabzoo.make("humaneval", data=data_path(shared_data, "humaneval"))
    with pytest.raises(ValueError, match="unknown task id 'HumanEval/999': no split of") as caught:
        env.reset(options={"task": "HumanEval/999", "split": "eval"})
    assert "split 'eval' has: HumanEval/0, HumanEval/1," in str(caught.value)
    with pytest.raises(ValueError, match=r"split 'all' is always every record"):
        collabzoo.make("humaneval", splits={"train": (0, 5), "eval": (5, 9), "all": (0, 9)})


def test_reset_by_task_id(coop_env) -> None:
    env = coop_env(split="eval")
    obs, infos = env.reset(seed=3, options={"task": "CoopHumanEval/0"})
    assert infos["aux"]["task_id"] == infos["main"]["task_id"] == "CoopHumanEval/0"
    assert infos["main"]["entry_point"] == "x_or_y" and infos["main"]["tests"] == 5
    assert "def x_or_y(n, x, y):" in obs["main"] and "def x_or_y(n, x, y):" in obs["aux"]
    assert "`aux`" in obs["aux"] and "Do not define `aux` yourself" in obs["main"]
    with pytest.raises(ValueError, match="unknown task id"):
        env.reset(options={"task": "CoopHumanEval/999"})


def test_two_turn_episode_with_level_feedback(coop_env) -> None:
    env = coop_env(split="eval", render_mode="ansi")
    env.reset(seed=0, options={"task": "CoopHumanEval/0"})
    wrong = "def x_or_y(n, x, y):\n    return y"
    obs, rewards, terms, truncs, infos = env.step({"aux": "no code, sorry", "main": wrong})
    assert rewards == {"aux": pytest.approx(1.5), "main": pytest.approx(1.5)}
    assert not any(terms.values()) and not any(truncs.values())
    info = infos["main"]
    assert math.isclose(sum(info["reward_components"].values()), rewards["main"])
    assert info["metrics"]["pass_fraction"] == pytest.approx(0.4)  # tests 2 and 4 want y
    assert info["parsed"]["main"]["found"] and not info["parsed"]["main"]["calls_aux"]
    assert infos["aux"]["parsed"] == {"aux": {"found": False, "has_return": False, "code": ""}}
    aux_view, main_view = obs["aux"], obs["main"]
    assert "- aux: MISSING." in aux_view and "- x_or_y: found, with a return statement." in aux_view
    assert "- Syntax: OK." in main_view
    assert "- Tests: 0/1 passed (only the first of the 5 tests is reported)." in main_view
    assert "First failing test: assert candidate(7, 34, 12) == 34 -> AssertionError" in main_view
    assert "- Use of aux: x_or_y does not call aux." in main_view
    assert "Use of aux" not in aux_view, "usage notes are for main only"
    assert wrong in main_view and wrong not in aux_view, "agents see only their own answers"
    assert main_view.rstrip().endswith("Answer with the code only, no explanation.")
    obs, rewards, terms, _, infos = env.step({"aux": AUX, "main": MAIN})
    assert rewards["aux"] == pytest.approx(4.0) and all(terms.values()) and env.agents == []
    assert infos["aux"]["metrics"]["pass"] == 1.0 and infos["aux"]["metrics"]["aux_used"] == 1.0
    shown = env.render()
    assert "CoopHumanEval/0" in shown and AUX in shown and MAIN in shown
    assert "score 4.000" in shown and "not_wrapper +1.00" in shown


def test_feedback_can_report_every_test_and_plain_mode(coop_env) -> None:
    env = coop_env(split="eval", feedback_tests=None)
    env.reset(options={"task": "CoopHumanEval/0"})
    obs, *_ = env.step({"aux": AUX, "main": MAIN.replace("return y", "return y + 1")})
    assert "- Tests: 3/5 passed." in obs["main"]
    assert "First failing test: assert candidate(15, 8, 5) == 5" in obs["main"]
    plain = coop_env(split="eval", feedback="plain")
    plain.reset(options={"task": "CoopHumanEval/0"})
    obs, *_ = plain.step({"aux": AUX, "main": MAIN})
    assert obs["main"].endswith(
        "Revise your x_or_y(...) function if needed. Answer with the code only, no explanation."
    )
    assert "Diagnostics" not in obs["main"]


def test_single_agent_mode(coop_env) -> None:
    env = coop_env(split="eval", single_agent=True)
    assert env.possible_agents == ["solver"]
    obs, _ = env.reset(options={"task": "CoopHumanEval/0"})
    assert "helper function `aux(...)`" in obs["solver"]
    _, rewards, _, _, infos = env.step({"solver": f"```python\n{AUX}\n\n{MAIN}\n```"})
    assert rewards["solver"] == pytest.approx(4.0)
    assert set(infos["solver"]["parsed"]) == {"aux", "main"}
    obs, rewards, *_ = env.step({"solver": MAIN.replace("aux(n)", "n in (2, 3, 5, 7, 11, 13)")})
    assert rewards["solver"] == pytest.approx(2.1), "no aux: no aux points, no bonus"
    assert "Your answer also defines aux" not in obs["solver"]


def test_deep_copy_shares_the_sandbox_and_the_data(coop_env, sandbox) -> None:
    env = coop_env(split="eval")
    env.reset(seed=1, options={"task": "CoopHumanEval/0"})
    env.step({"aux": AUX, "main": "def x_or_y(n, x, y):\n    return x"})
    branch = copy.deepcopy(env)
    assert branch.sandbox is env.sandbox is sandbox
    assert branch.items() is env.items()
    _, good, *_ = branch.step({"aux": AUX, "main": MAIN})
    _, bad, *_ = env.step({"aux": "", "main": ""})
    assert good["main"] == pytest.approx(4.0) and bad["main"] == 0.0


def test_default_sandbox_is_made_only_when_a_test_runs(coop_env, monkeypatch) -> None:
    made = []

    class Fake:
        def run_many(self, jobs):
            return [rules.ExecResult(passed=(True,) * len(j.tests)) for j in jobs]

    monkeypatch.setattr(rules, "default_sandbox", lambda: made.append(1) or Fake())
    env = coop_env(split="eval", sandbox=None)
    env.reset(options={"task": "CoopHumanEval/0"})
    env.step({"aux": "junk", "main": "junk"})
    assert made == [] and env.sandbox is None
    env.step({"aux": AUX, "main": MAIN})
    assert made == [1]


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"feedback": "loud"}, ValueError, "feedback must be one of"),
        ({"single_agent": "yes"}, TypeError, "single_agent must be a bool"),
        ({"sandbox": "docker"}, TypeError, "run_many"),
        ({"test_timeout": 0}, ValueError, "test_timeout"),
        ({"max_timeouts": 0}, ValueError, "max_timeouts"),
        ({"feedback_tests": 0}, ValueError, "feedback_tests"),
        ({"aux_ignored_rule": "strict"}, ValueError, "aux_ignored_rule"),
        ({"prompt_context": "all"}, ValueError, "prompt_context"),
        ({"splits": {"train": (0, 5)}}, ValueError, "splits needs"),
        ({"horizon": 0}, ValueError, "horizon"),
    ],
)
def test_bad_arguments(kwargs: dict, error: type, fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        collabzoo.make("mbpp", **kwargs)


def test_registered_with_descriptions() -> None:
    ids = {"collabzoo/CoopHumanEval-v0", "collabzoo/HumanEval-v0", "collabzoo/MBPP-v0"}
    assert ids <= set(collabzoo.names())
    entries = {e.id: e for e in collabzoo.envs.entries()}
    assert all(entries[i].description for i in ids)
    assert collabzoo.envs.resolve("coophumaneval").load().__name__ == "CoopHumanEvalEnv"
    assert collabzoo.envs.resolve("collabzoo/HumanEval-v0").load().__name__ == "HumanEvalEnv"


def test_many_envs_step_concurrently_on_one_sandbox(coop_env, sandbox) -> None:
    """A learner runs dozens of episodes at once: their steps share one sandbox pool."""
    import threading

    answers = {"aux": AUX, "main": MAIN}
    envs = [coop_env(split="eval", horizon=1) for _ in range(8)]
    rewards: dict[int, float] = {}

    def play(k: int) -> None:
        envs[k].reset(seed=k, options={"task": "CoopHumanEval/0"})
        _, r, *_ = envs[k].step(answers)
        rewards[k] = r["main"]

    threads = [threading.Thread(target=play, args=(k,)) for k in range(len(envs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert rewards == dict.fromkeys(range(len(envs)), 4.0)
    assert all(env.sandbox is sandbox for env in envs)
