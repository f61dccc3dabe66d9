"""Bad input: clear errors for API misuse and on the command line (one line, exit status 2,
before anything is built); any text at all is a legal, scored action."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import collabzoo
from collabzoo.rewards.commands import command_lines
from collabzoo.tasks.building.rewards.housebuild import House, parse_housebuild_answer
from collabzoo.tasks.building.rewards.strbuild import parse_strbuild_answer
from tests.optional import require_module

GAMES = ["strbuild", "housebuild"]
MAX_SCORE = {"strbuild": 2.0, "housebuild": 1.0}


@pytest.fixture(scope="module")
def house() -> House:
    return collabzoo.make("housebuild").items("train")[0]


@pytest.mark.parametrize("game", GAMES)
def test_api_misuse_gets_a_clear_error(game: str) -> None:
    env = collabzoo.make(game)
    with pytest.raises(RuntimeError, match="call reset"):
        env.step({a: "" for a in env.possible_agents})
    with pytest.raises(RuntimeError, match="reset"):
        env.state()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"missing: \['second_builder'\]"):
        env.step({"first_builder": ""})
    with pytest.raises(ValueError, match=r"unknown: \['third_builder'\]"):
        env.step({"first_builder": "", "second_builder": "", "third_builder": ""})
    for bad in (b"/kill", None, 42, ["/kill"]):
        with pytest.raises(TypeError, match="'first_builder' must be a str"):
            env.step({"first_builder": bad, "second_builder": ""})
    with pytest.raises(TypeError, match="dict mapping each live agent"):
        env.step(["", ""])
    with pytest.raises(KeyError, match="first_builder"):
        env.observation_space("nobody")
    while env.agents:
        env.step({a: "" for a in env.agents})
    with pytest.raises(RuntimeError, match="episode has ended"):
        env.step({a: "" for a in env.possible_agents})


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"bogus": 1}, TypeError, "it accepts"),
        ({"memory": "some"}, ValueError, "memory must be one of"),
        ({"split": "test"}, ValueError, "split must be one of"),
        ({"horizon": 0}, ValueError, "horizon must be a positive int"),
        (
            {"render_mode": "rgb_array"},
            ValueError,
            "render_mode must be one of \\(None, .ansi., .human.\\)",
        ),
        ({"feedback": "loud"}, ValueError, "feedback must be one of"),
        ({"max_commands": 0}, ValueError, "max_commands must be a positive int"),
        ({"data": "no/such/file.json"}, FileNotFoundError, "neither an existing file"),
    ],
)
@pytest.mark.parametrize("game", GAMES)
def test_bad_constructor_arguments(game: str, kwargs: dict, error: type, fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        env = collabzoo.make(game, **kwargs)
        env.reset(seed=0)


def test_bad_task_options_and_targets(tmp_path) -> None:
    env = collabzoo.make("strbuild")
    with pytest.raises(ValueError, match="task index 99 out of range"):
        env.reset(options={"task": 99})
    with pytest.raises(
        ValueError,
        match="unknown task id 'ZZ': no split of StrBuildEnv holds it; split 'train' has: I, C",
    ):
        env.reset(options={"task": "ZZ"})
    with pytest.raises(ValueError, match="only the capital letters A-Z"):
        collabzoo.make("strbuild", targets=["icml"])
    with pytest.raises(TypeError, match="list of words"):
        collabzoo.make("strbuild", targets="ICML")
    with pytest.raises(ValueError, match="spider_attacks"):
        collabzoo.make("housebuild").reset(options={"spider_attacks": "many"})
    broken = tmp_path / "houses.json"
    broken.write_text("[{")
    with pytest.raises(ValueError, match="not valid JSON"):
        collabzoo.make("housebuild", data=str(broken)).reset()
    broken.write_text(
        '[{"task_id": "x", "target_spec": {"size": [2, 1, 2], "layers": '
        '[{"y": 0, "rows": ["AA"]}]}}]'
    )
    with pytest.raises(ValueError, match="must have 2 rows of 2 characters"):
        collabzoo.make("housebuild", data=str(broken)).reset()
    with pytest.raises(ValueError, match=r"unknown environment 'chess'; known names: .*housebuild"):
        collabzoo.make("chess")


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\x00\x01\x02\xff\udcff" * 1000,
        bytes(range(256)).decode("latin-1") * 40,
        "x" * 10_000_000,
        "\n".join(["/setblock 0 0 0 stone", "/fill 0 0 0 0 0 0 white_concrete", "/kill"] * 40_000),
        "```" * 5000,
    ],
    ids=["empty", "binary", "latin1", "10MB-line", "120k-commands", "fences"],
)
def test_any_string_is_a_legal_action(game: str, junk: str) -> None:
    env = collabzoo.make(game, horizon=1)
    env.reset(seed=0)
    _, rewards, terms, _, infos = env.step({a: junk for a in env.possible_agents})
    reward = rewards["first_builder"]
    assert math.isfinite(reward) and reward <= MAX_SCORE[game] and all(terms.values())
    report = infos["first_builder"]["parsed"]
    assert len(report["accepted"]) + len(report["rejected"]) == len(command_lines(junk))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_parsers_account_for_every_line(text: str) -> None:
    lines = command_lines(text)
    parsed = parse_strbuild_answer(text, width=12, height=5, palette=("oak_planks", "stone"))
    assert len(parsed.accepted) + len(parsed.rejected) == len(lines)
    for _, x, y, z, block in parsed.accepted:
        assert 0 <= x < 12 and 0 <= y < 5 and z == 0 and block in ("oak_planks", "stone", "air")


COMMAND_WORDS = st.sampled_from(
    ["/setblock", "setblock", "/fill", "/kill", "/FILL", "- /fill", "1. /setblock", "```", "/"]
)
TOKENS = st.one_of(
    st.integers(-3, 12).map(str),
    st.sampled_from(
        [
            "stone",
            "oak_planks",
            "white_concrete",
            "minecraft:obsidian",
            "air",
            "stone_bricks",
            "planks",
            "~1",
            "^",
            "replace",
            "١",
            "1_0",
        ]
    ),
    st.text(max_size=4),
)
COMMAND_LINE = st.builds(
    lambda word, tokens: " ".join([word, *tokens]), COMMAND_WORDS, st.lists(TOKENS, max_size=9)
)
ANSWER = st.one_of(st.text(), st.lists(COMMAND_LINE, max_size=40).map("\n".join))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANSWER)
def test_housebuild_parser_keeps_fills_legal(house: House, text: str) -> None:
    parsed = parse_housebuild_answer(text, house, resource_limits=house.resource_limits)
    assert len(parsed.accepted) + len(parsed.rejected) == len(command_lines(text))
    sx, sy, sz = house.size
    spent: dict[str, int] = {}
    for command in parsed.accepted:
        if command[0] == "kill":
            continue
        _, x1, y1, z1, x2, y2, z2, block = command
        assert 0 <= x1 <= x2 < sx and 0 <= y1 <= y2 < sy and 0 <= z1 <= z2 < sz
        if block != "air":
            spent[block] = spent.get(block, 0) + (x2 - x1 + 1) * (y2 - y1 + 1) * (z2 - z1 + 1)
    assert all(spent[b] <= house.resource_limits[b] for b in spent)


@pytest.mark.parametrize("game", GAMES)
def test_envs_score_random_answers_without_raising(game: str) -> None:
    env = collabzoo.make(game)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.tuples(ANSWER, ANSWER), min_size=4, max_size=4), st.integers(0, 50))
    def play(answers: list[tuple[str, str]], seed: int) -> None:
        env.reset(seed=seed)
        for first, second in answers:
            _, rewards, _, _, infos = env.step({"first_builder": first, "second_builder": second})
            reward = rewards["second_builder"]
            assert math.isfinite(reward) and reward <= MAX_SCORE[game]
            parts = infos["second_builder"]["reward_components"]
            assert math.isclose(sum(parts.values()), reward, abs_tol=1e-9)
        assert env.agents == []

    play()


# ----- the command line: bad numbers and --set values end in one line, exit 2 ---------------------
TRAIN = ["train", "magrpo", "--env", "tinycoop", "--model", "tiny"]


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run `collabzoo ARGV`: exit status 2, no traceback, and on stderr one "collabzoo: error:"
    line (returned), whether the command or argparse refused the value."""
    from collabzoo.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collabzoo: error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [*TRAIN, "--set", "max_new_tokens=abc"],
            "--set max_new_tokens: MAGRPOConfig.max_new_tokens is int (an integer), got 'abc'",
        ),
        (
            [*TRAIN, "--set", "temperature=hot"],
            "--set temperature: MAGRPOConfig.temperature is float (a number), got 'hot'",
        ),
        (
            [*TRAIN, "--set", "num_generations=2.5"],
            "--set num_generations: MAGRPOConfig.num_generations is int (an integer), got '2.5'",
        ),
        (
            ["train", "ippo", "--env", "tinycoop", "--set", "top_k=many"],
            "--set top_k: IPPOConfig.top_k is int | None (an integer or none), got 'many'",
        ),
        (
            ["train", "iac", "--env", "tinycoop", "--set", "do_sample=maybe"],
            "--set do_sample: IACConfig.do_sample is bool (true or false), got 'maybe'",
        ),
        (
            ["train", "cc", "--env", "tinycoop", "--set", 'agent_devices=["cpu"]'],
            "--set agent_devices: CentralCriticConfig.agent_devices is dict[str, str] | None "
            "(a JSON object or none), got '[\"cpu\"]'",
        ),
        (
            [*TRAIN, "--set", "max_new_token=3"],
            "--set max_new_token: MAGRPOConfig has no field 'max_new_token'; "
            "did you mean max_new_tokens?",
        ),
        (
            ["sft", "no-dataset", "--set", "max_steps=ten"],
            "--set max_steps: SupervisedConfig.max_steps is int | None (an integer or none), "
            "got 'ten'",
        ),
        (
            ["sft", "no-dataset", "--set", "learning_rate=fast"],
            "--set learning_rate: SupervisedConfig.learning_rate is float (a number), got 'fast'",
        ),
        (
            ["sft", "no-dataset", "--set", "per_device_batch_size=4"],
            "--set per_device_batch_size: SupervisedConfig has no field 'per_device_batch_size'; "
            "did you mean per_device_train_batch_size?",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_a_set_value_its_field_cannot_hold_is_one_usage_line(
    argv: list[str], message: str, tmp_path, capsys
) -> None:
    """Each --set value is read by its config field's type before anything is built (it used to
    reach the learner as a str and end in a traceback once the model was built)."""
    require_module("torch", "train")
    line = usage_error(capsys, [*argv, "--output", str(tmp_path / "run")])
    assert line == f"collabzoo: error: {message}"
    assert not (tmp_path / "run").exists()


def test_set_values_are_read_as_their_fields_types() -> None:
    from typing import Any, Literal

    from collabzoo.cli.config_values import Mismatch, config_settings, read_value

    require_module("torch", "train")
    from collabzoo.algos import IPPOConfig, SupervisedConfig

    pairs = [
        "max_new_tokens=8",
        "temperature=1",
        "top_k=none",
        "do_sample=true",
        "progress=off",
        "num_turns=2",
        "clip_range=null",
        "ray_address=auto",
        'agent_devices={"aux": "cpu"}',
        'extra={"note": [1, "x"]}',
    ]
    settings = config_settings(IPPOConfig, pairs, "num_generations=8")
    assert settings == {
        "max_new_tokens": 8,
        "temperature": 1.0,
        "top_k": None,
        "do_sample": True,
        "progress": False,
        "num_turns": 2,
        "clip_range": None,
        "ray_address": "auto",
        "agent_devices": {"aux": "cpu"},
        "extra": {"note": [1, "x"]},
    }
    assert type(settings["temperature"]) is float and type(settings["max_new_tokens"]) is int
    assert config_settings(SupervisedConfig, ["max_steps=3"], "max_steps=200") == {"max_steps": 3}
    assert read_value("cross", Literal["aligned", "cross"]) == "cross"
    assert read_value("[1, 2]", tuple[int, int]) == (1, 2)
    assert read_value("[1, 2.5]", list[float]) == [1, 2.5]
    assert read_value("plain text", Any) == "plain text"
    for raw, hint in [
        ("other", Literal["aligned", "cross"]),
        ("[1, 2, 3]", tuple[int, int]),
        ('["a"]', list[float]),
        ("nan", float),
        ("2", bool),
        ("true", int),
    ]:
        with pytest.raises(Mismatch):
            read_value(raw, hint)


BAD_NUMBERS = [
    (["train", "magrpo", "--env", "tinycoop", "--threads", "0"], "--threads: must be at least 1"),
    (
        ["train", "magrpo", "--env", "tinycoop", "--max-prompt-tokens", "0"],
        "--max-prompt-tokens: must be at least 1, got 0",
    ),
    (
        ["train", "magrpo", "--env", "tinycoop", "--vllm-gpu-memory-utilization", "1.5"],
        "--vllm-gpu-memory-utilization: must be a number above 0 and at most 1, got '1.5'",
    ),
    (["sft", "data", "--threads", "-2"], "--threads: must be at least 1, got -2"),
    (["sft", "data", "--max-prompt-tokens", "-1"], "--max-prompt-tokens: must be at least 1"),
    (["bench", "--rounds", "0"], "--rounds: must be at least 1, got 0"),
    (["bench", "--episodes", "-3"], "--episodes: must be at least 1, got -3"),
    (["bench", "--seed", "-1"], "--seed: must be at least 0, got -1"),
    (["bench", "--max-new-tokens", "0"], "--max-new-tokens: must be at least 1, got 0"),
    (["bench", "--temperature", "0"], "--temperature: must be a number above 0, got '0'"),
    (["bench", "--temperature", "hot"], "--temperature: expected a number, got 'hot'"),
    (["bench", "--top-p", "1.5"], "--top-p: must be a number above 0 and at most 1, got '1.5'"),
    (["bench", "--top-k", "-1"], "--top-k: must be at least 0, got -1"),
    (["bench", "--threads", "0"], "--threads: must be at least 1, got 0"),
    (["bench", "--episodes-at-once", "0"], "--episodes-at-once: must be at least 1, got 0"),
    (["bench", "--max-prompt-tokens", "0"], "--max-prompt-tokens: must be at least 1, got 0"),
    (["bench", "--concurrency", "0"], "--concurrency: must be at least 1, got 0"),
    (["bench", "--timeout", "-1"], "--timeout: must be a number above 0, got '-1'"),
    (["bench", "--retries", "-1"], "--retries: must be at least 0, got -1"),
    (["bench", "--sandbox-workers", "0"], "--sandbox-workers: must be at least 1, got 0"),
    (["bench", "--episodes", "2.5"], "--episodes: expected an integer, got '2.5'"),
    (["export", "tinycoop", "--episodes", "0"], "--episodes: must be at least 1, got 0"),
    (["export", "tinycoop", "--seed", "-4"], "--seed: must be at least 0, got -4"),
    (["export", "tinycoop", "--max-new-tokens", "0"], "--max-new-tokens: must be at least 1"),
    (["export", "tinycoop", "--temperature", "-1"], "--temperature: must be a number above 0"),
    (["rescore", "results.json", "--show", "-1"], "--show: must be at least 0, got -1"),
    (["demo", "--episodes-per-task", "0"], "--episodes-per-task: must be at least 1, got 0"),
    (["play", "strbuild", "--seed", "-1"], "--seed: must be at least 0, got -1"),
    (["serve", "tinycoop", "--port", "70000"], "--port: must be an integer from 0 to 65535"),
    (["serve", "tinycoop", "--max-sessions", "0"], "--max-sessions: must be at least 1, got 0"),
    (["serve", "tinycoop", "--session-timeout", "-1"], "--session-timeout: must be a number at"),
]
"""Every numeric flag of every command, out of its range (or not a number of its kind)."""


def _with_output(argv: list[str], tmp_path) -> list[str]:
    """`argv` with the options its command requires, writing under tmp_path."""
    out = str(tmp_path / "out")
    extra = {
        "train": ["--output", out],
        "sft": ["--output", out],
        "bench": ["--env", "tinycoop", "--team", "scripted:oracle", "--output", out],
        "export": ["--team", "scripted:oracle", "-o", out],
    }
    return [*argv, *extra.get(argv[0], [])]


@pytest.mark.parametrize(("argv", "fragment"), BAD_NUMBERS, ids=lambda v: " ".join(v))
def test_an_out_of_range_flag_is_refused_while_parsing(
    argv: list[str], fragment: str, tmp_path, capsys
) -> None:
    line = usage_error(capsys, _with_output(argv, tmp_path))
    assert line.startswith(f"collabzoo: error: argument {fragment}")
    assert not (tmp_path / "out").exists()


def test_negative_updates_train_nothing_and_save_nothing(tmp_path, capsys) -> None:
    """`--updates -5` used to exit 0 with a NaN return and a saved model."""
    out = tmp_path / "run"
    line = usage_error(capsys, [*TRAIN, "--output", str(out), "--updates", "-5"])
    assert line == "collabzoo: error: argument --updates: must be at least 1, got -5"
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*TRAIN, "--set", "max_new_tokens=0"], "max_new_tokens must be at least 1, got 0"),
        ([*TRAIN, "--set", "temperature=-1"], "temperature must be a positive number, got -1.0"),
        ([*TRAIN, "--set", "top_p=1.5"], "top_p must be in (0, 1], got 1.5"),
        ([*TRAIN, "--set", "num_generations=0"], "num_generations must be at least 1, got 0"),
        ([*TRAIN, "--set", "rollout_buffer_size=0"], "rollout_buffer_size must be at least 1"),
        ([*TRAIN, "--set", "seed=-1"], "seed must be at least 0, got -1"),
        ([*TRAIN, "--set", "discount=1.5"], "discount must be in [0, 1], got 1.5"),
        ([*TRAIN, "--set", "num_turns=0"], "num_turns must be at least 1 or None, got 0"),
        ([*TRAIN, "--set", "logprob_batch_size=0"], "logprob_batch_size must be at least 1"),
        ([*TRAIN, "--set", "generation_batch_size=0"], "generation_batch_size must be at least 1"),
        ([*TRAIN, "--set", "env_workers=0"], "env_workers must be at least 1, got 0"),
        ([*TRAIN, "--set", "save_total_limit=0"], "save_total_limit must be at least 1, got 0"),
        ([*TRAIN, "--set", "eval_num_samples=0"], "eval_num_samples must be at least 1, got 0"),
        ([*TRAIN, "--set", "agent_learning_rate=-1e-3"], "agent_learning_rate must be positive"),
        ([*TRAIN, "--set", "joint_mode=all"], "joint_mode must be one of ('aligned', 'cross')"),
        (
            ["train", "ippo", "--env", "tinycoop", "--set", "mini_batch_size=0"],
            "mini_batch_size must be at least 1 or None, got 0",
        ),
        (
            ["train", "ippo", "--env", "tinycoop", "--set", "critic_learning_rate=0"],
            "critic_learning_rate must be positive, got 0.0",
        ),
        (
            ["train", "iac", "--env", "tinycoop", "--set", "ac_epochs=0"],
            "ac_epochs must be at least 1, got 0",
        ),
        (["sft", "no-dataset", "--set", "max_steps=0"], "max_steps must be at least 1 or None"),
        (
            ["sft", "no-dataset", "--set", "per_device_train_batch_size=0"],
            "per_device_train_batch_size must be at least 1, got 0",
        ),
        (["sft", "no-dataset", "--set", "seed=-2"], "seed must be at least 0, got -2"),
        (["sft", "no-dataset", "--set", "adam_beta1=1"], "adam_beta1 must be in [0, 1), got 1.0"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_an_out_of_range_set_field_is_one_usage_line(
    argv: list[str], message: str, tmp_path, capsys
) -> None:
    """The configs' own checks refuse the value, and the command says so before any model (or
    the dataset) loads."""
    require_module("torch", "train")
    line = usage_error(capsys, [*argv, "--output", str(tmp_path / "run")])
    assert line.startswith(f"collabzoo: error: {message}")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_updates", -1, "max_updates must be at least 0, got -1"),
        ("num_generations", 0, "num_generations must be at least 1"),
        ("max_new_tokens", 0, "max_new_tokens must be at least 1"),
        ("adam_beta2", 1.0, r"adam_beta2 must be in \[0, 1\)"),
        ("adam_epsilon", 0.0, "adam_epsilon must be positive"),
        ("max_grad_norm", -1.0, "max_grad_norm must be positive"),
        ("vllm_gpu_memory_utilization", 0.0, r"vllm_gpu_memory_utilization must be in \(0, 1\]"),
        ("vllm_importance_sampling_cap", math.nan, "vllm_importance_sampling_cap must be positive"),
        ("save_steps", -1, "save_steps must be at least 0"),
        ("weight_decay", -0.1, "weight_decay must be at least 0"),
    ],
)
def test_every_learner_config_refuses_out_of_range_fields(
    field: str, value: float, message: str
) -> None:
    require_module("torch", "train")
    from collabzoo.algos import LEARNERS

    for config, _ in LEARNERS.values():
        with pytest.raises(ValueError, match=message):
            config(**{field: value})
        with pytest.raises(TypeError, match=f"{field} must be a number"):
            config(**{field: "3"})


# ----- the layering: the CLI imports the bench, never the other way round ----------------------
def test_the_bench_imports_nothing_of_the_cli() -> None:
    """The bench's commands live in collabzoo.cli.bench; collabzoo.bench is the logic alone."""
    code = """
import importlib, pkgutil, sys
import collabzoo.bench as bench
for found in pkgutil.iter_modules(bench.__path__):
    importlib.import_module(f"collabzoo.bench.{found.name}")
print(sorted(name for name in sys.modules if name.startswith("collabzoo.cli")))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert importlib.util.find_spec("collabzoo.bench.command") is None
    from collabzoo.cli import COMMAND_GROUPS, bench

    assert bench in COMMAND_GROUPS


def test_no_import_cycle_between_the_package_parts() -> None:
    """What the acyclic_siblings contracts of pyproject.toml check, type-checking imports
    included: no two parts of collabzoo (nor of collabzoo.algos, at any depth) import each
    other, however indirectly."""
    import grimp

    graph = grimp.build_graph("collabzoo", cache_dir=None)
    packages = ["collabzoo", "collabzoo.algos"]
    packages += sorted(
        m for m in graph.find_descendants("collabzoo.algos") if graph.find_children(m)
    )
    for package in packages:
        assert graph.nominate_cycle_breakers(package) == set(), package
