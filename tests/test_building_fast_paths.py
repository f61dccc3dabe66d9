"""The building games' fast paths equal a plain statement of the same rules.

The parsers inline the shared line rules, the StrBuild score visits only filled cells, prompts
and texts are cached and the env's generator is built on first use. Each is checked here
against the straightforward computation, on the benchmark's messy answers and on fuzzed lines.
"""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
from gymnasium.error import Error as GymnasiumError
from gymnasium.utils import seeding

import collabzoo
from collabzoo.rewards.breakdown import RewardBreakdown
from collabzoo.rewards.commands import (
    SMALL_INTS,
    ParsedAnswer,
    Rejection,
    block_id,
    command_text,
    commands_under_cap,
)
from collabzoo.tasks.building.envs.housebuild import merged_boxes
from collabzoo.tasks.building.envs.letter_font import render_text
from collabzoo.tasks.building.rewards import housebuild as house_rules
from collabzoo.tasks.building.rewards import strbuild as str_rules
from tests.conftest import benchmark_module

AIR = "air"


def env_steps_benchmark():
    """`benchmarks/env_steps.py` (not a package): its messy answers are the inputs here."""
    return benchmark_module("env_steps", "env_steps_benchmark")


# ----- plain statements of the rules -----------------------------------------------------------
def plain_strbuild_parse(text, *, width, height, palette, max_commands) -> ParsedAnswer:
    allowed = set(palette) | {AIR}
    parsed = ParsedAnswer()
    for line, tokens in commands_under_cap(text, parsed, max_commands):
        if tokens[0] != "setblock":
            reason = f"unknown command {tokens[0]!r}: StrBuild accepts only /setblock"
            parsed.rejected.append(Rejection(line, reason))
            continue
        if len(tokens) < 5:
            parsed.rejected.append(Rejection(line, "expected /setblock x y z block"))
            continue
        try:
            x, y, z = map(int, tokens[1:4])
        except ValueError:
            reason = "coordinates must be absolute integers (no ~ or ^)"
            parsed.rejected.append(Rejection(line, reason))
            continue
        block = block_id(tokens[4])
        if block not in allowed:
            reason = f"block {block!r} is not in this agent's palette {sorted(allowed)}"
            parsed.rejected.append(Rejection(line, reason))
            continue
        if not (0 <= x < width and 0 <= y < height and z == 0):
            reason = (
                f"({x}, {y}, {z}) is outside the build area [0,0,0]..[{width - 1},{height - 1},0]"
            )
            parsed.rejected.append(Rejection(line, reason))
            continue
        parsed.accepted.append(("setblock", x, y, z, block))
    return parsed


def plain_strbuild_score(target, world, palettes) -> RewardBreakdown:
    """Every cell of the plane visited, in index order."""
    cells, blocks, w, h = target.cells, world.blocks, world.width, world.height
    filled = [b != AIR for b in blocks]
    covered = sum(1 for i in cells if filled[i])
    extra = sum(filled) - covered
    background = w * h - len(cells)
    coverage = covered / len(cells)
    extra_ratio = extra / background if background else 0.0
    textures = [str_rules.texture(b) if f else None for b, f in zip(blocks, filled, strict=True)]
    pairs = same = 0
    for i, tex in enumerate(textures):
        if tex is None:
            continue
        for j in ([i + 1] if i % w != w - 1 else []) + ([i + w] if i + w < w * h else []):
            if textures[j] is not None:
                pairs += 1
                same += textures[j] == tex
    adjacency = same / pairs if pairs else 0.0
    present = {b for b, f in zip(blocks, filled, strict=True) if f}
    missing = sum(1 for p in palettes if not {b for b in p if b != AIR} <= present)
    components = {
        "coverage": 2.0 * coverage,
        "extra_penalty": -1.5 * extra_ratio,
        "adjacency_penalty": -1.0 * adjacency,
        "palette_penalty": -0.25 * missing,
    }
    union = len(cells) + extra
    metrics = {
        "coverage": coverage,
        "extra": extra_ratio,
        "adjacency": adjacency,
        "touching_pairs": float(pairs),
        "iou": covered / union if union else 0.0,
        "missing_palettes": float(missing),
    }
    return RewardBreakdown(sum(components.values()), components, metrics)


def plain_housebuild_parse(text, house, *, resource_limits, max_commands) -> ParsedAnswer:
    sx, sy, sz = house.size
    allowed = set(house.blocks)
    used: dict[str, int] = {}
    parsed = ParsedAnswer()
    for line, tokens in commands_under_cap(text, parsed, max_commands):
        if tokens[0] == "kill":
            parsed.accepted.append(("kill",))
            continue
        if tokens[0] != "fill":
            reason = f"unknown command {tokens[0]!r}: HouseBuild accepts /fill and /kill"
            parsed.rejected.append(Rejection(line, reason))
            continue
        if len(tokens) != 8:
            reason = "expected exactly /fill x1 y1 z1 x2 y2 z2 block (no fill mode)"
            parsed.rejected.append(Rejection(line, reason))
            continue
        try:
            x1, y1, z1, x2, y2, z2 = map(int, tokens[1:7])
        except ValueError:
            reason = "coordinates must be absolute integers (no ~ or ^)"
            parsed.rejected.append(Rejection(line, reason))
            continue
        block = block_id(tokens[7])
        if block not in allowed:
            reason = f"block {block!r} is not in the palette {sorted(allowed)}"
            parsed.rejected.append(Rejection(line, reason))
            continue
        corners = zip((x1, x2, y1, y2, z1, z2), (sx, sx, sy, sy, sz, sz), strict=True)
        if not all(0 <= v < n for v, n in corners):
            reason = f"a corner is outside the build area [0,0,0]..[{sx - 1},{sy - 1},{sz - 1}]"
            parsed.rejected.append(Rejection(line, reason))
            continue
        lo = (min(x1, x2), min(y1, y2), min(z1, z2))
        hi = (max(x1, x2), max(y1, y2), max(z1, z2))
        if resource_limits is not None and block != AIR:
            volume = (hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1) * (hi[2] - lo[2] + 1)
            limit, spent = resource_limits.get(block, 0), used.get(block, 0)
            if spent + volume > limit:
                reason = (
                    f"not enough {block}: this fill needs {volume}, "
                    f"{limit - spent} of your {limit} left"
                )
                parsed.rejected.append(Rejection(line, reason))
                continue
            used[block] = spent + volume
        parsed.accepted.append(("fill", *lo, *hi, block))
    return parsed


# ----- inputs ----------------------------------------------------------------------------------
ODD_TOKENS = (
    "-0", "+3", "07", "1_0", "٣", "99", "100", "-10", "1.5", "~", "~1", "^", "x", "(1,", "2,",
)  # fmt: skip
ODD_BLOCKS = (
    "stone", "oak_planks", "white_concrete", "obsidian", "air", "minecraft:stone",
    "minecraft:", "MINECRAFT:stone", "Stone", "planks", "stone_bricks", "stone_stairs",
    "minecraft:white_concrete", "glass", "minecraft_stone_bricks",
)  # fmt: skip
ODD_HEADS = (
    "/setblock", "setblock", "/SETBLOCK", "/ setblock", "//setblock", "/fill", "fill", "/Fill",
    "/kill", "kill", "/", "-", "1.", "2)", "* /setblock", "- /fill", "```", "#", "say",
)  # fmt: skip


def fuzzed_answer(rng: random.Random) -> str:
    """Lines shaped like commands (3 or 6 numbers, mostly small ones) with odd parts mixed in."""
    lines = []
    for _ in range(rng.randint(0, 40)):
        arity = rng.choice((3, 3, 6, 6, 0, 2, 4, 5, 7))
        numbers = [
            rng.choice(ODD_TOKENS) if rng.random() < 0.2 else str(rng.randint(-2, 12))
            for _ in range(arity)
        ]
        words = [rng.choice(ODD_HEADS), *numbers, rng.choice(ODD_BLOCKS)]
        if rng.random() < 0.1:
            words.append(rng.choice(("replace", "keep")))
        lines.append(rng.choice((" ", "  ", "\t")).join(words))
    text = "\n".join(lines)
    return rng.choice((text, f"```mcfunction\n{text}\n```", f"Here:\n{text}"))


def test_small_int_table_holds_what_int_reads() -> None:
    assert SMALL_INTS and all(isinstance(v, int) and v == int(k) for k, v in SMALL_INTS.items())
    assert all(str(v) == k for k, v in SMALL_INTS.items())


@pytest.fixture(scope="module")
def env_steps_script():
    """benchmarks/env_steps.py, for its messy answers (not named `benchmark`: pytest-benchmark,
    which the interop extra's libraries install, owns a fixture of that name)."""
    return env_steps_benchmark()


@pytest.fixture(scope="module")
def messy(env_steps_script) -> dict[str, list]:
    return {
        game: env_steps_script.messy_cases(game, pairs=120, seed=3)
        for game in ("strbuild", "housebuild")
    }


def same_parse(fast: ParsedAnswer, plain: ParsedAnswer) -> None:
    assert fast.accepted == plain.accepted
    assert fast.rejected == plain.rejected
    assert fast.report() == {
        "accepted": [command_text(c) for c in plain.accepted],
        "rejected": [{"line": r.line, "reason": r.reason} for r in plain.rejected],
    }


# ----- the checks ------------------------------------------------------------------------------
def test_strbuild_parser_equals_the_plain_rules(messy) -> None:
    env = collabzoo.make("strbuild")
    texts = [(k, a) for k, (_, _, pair) in enumerate(messy["strbuild"]) for a in pair.values()]
    rng = random.Random(0)
    texts += [(k, fuzzed_answer(rng)) for k in range(400)]
    palettes = (*str_rules.REFERENCE_PALETTES, ("stone", "minecraft:stone", "glass"))
    for k, text in texts:
        target = env.items("train")[k % len(env.items("train"))].target
        for palette in palettes:
            for cap in (150, 3):
                kwargs = dict(width=target.width, height=target.height, palette=palette)
                same_parse(
                    str_rules.parse_strbuild_answer(text, max_commands=cap, **kwargs),
                    plain_strbuild_parse(text, max_commands=cap, **kwargs),
                )


def test_housebuild_parser_equals_the_plain_rules(messy) -> None:
    env = collabzoo.make("housebuild")
    houses = env.items("train")
    texts = [(k, a) for k, (_, _, pair) in enumerate(messy["housebuild"]) for a in pair.values()]
    rng = random.Random(1)
    texts += [(k, fuzzed_answer(rng)) for k in range(400)]
    for k, text in texts:
        house = houses[k % len(houses)]
        for limits, cap in ((house.resource_limits, 300), (None, 300), (house.resource_limits, 4)):
            same_parse(
                house_rules.parse_housebuild_answer(
                    text, house, resource_limits=limits, max_commands=cap
                ),
                plain_housebuild_parse(text, house, resource_limits=limits, max_commands=cap),
            )


@pytest.mark.parametrize("word", ["I", "LLM", "ICML", "Q"])
def test_strbuild_score_equals_a_scan_of_every_cell(word: str) -> None:
    target = str_rules.StrBuildTarget(render_text(word))
    w, h = target.width, target.height
    rng = random.Random(word)
    palettes = (*str_rules.REFERENCE_PALETTES, ("glass", "oak_planks"))
    kinds = ("stone", "oak_planks", "birch_planks", "white_concrete", "red_concrete", "obsidian")
    for density in (0.0, 0.05, 0.3, 0.7, 1.0):
        for _ in range(60):
            blocks = tuple(
                rng.choice(kinds) if rng.random() < density else AIR for _ in range(w * h)
            )
            world = str_rules.StrBuildWorld(w, h, blocks, tuple([-1] * (w * h)))
            for some in (palettes[:2], palettes):
                fast = str_rules.score_world(target, world, some)
                assert fast == plain_strbuild_score(target, world, some)


def test_env_steps_on_messy_answers_score_as_the_rules(messy) -> None:
    """Whole steps: the env's reward and parsed infos are the plain rules' on every pair."""
    env = collabzoo.make("strbuild", horizon=1)
    for k, (split, index, answers) in enumerate(messy["strbuild"]):
        env.reset(seed=k, options={"split": split, "task": index})
        target = env.item.target
        _, rewards, _, _, infos = env.step(answers)
        parsed = [
            plain_strbuild_parse(
                answers[a], width=target.width, height=target.height, palette=p, max_commands=150
            )
            for a, p in zip(env.possible_agents, env.palettes, strict=True)
        ]
        world = str_rules.build_world(target.width, target.height, parsed)
        plain = plain_strbuild_score(target, world, env.palettes)
        assert rewards == dict.fromkeys(env.possible_agents, plain.total)
        for agent, p in zip(env.possible_agents, parsed, strict=True):
            assert infos[agent]["parsed"] == p.report()
            assert infos[agent]["metrics"] == plain.metrics


def test_generator_built_on_first_use_is_the_seeded_one() -> None:
    """reset(seed=s) builds no generator until one is drawn from; the draws are those of
    gymnasium's generator for s, also after unseeded resets (which draw a task), in a copy
    made before the first draw, and after reseeding."""
    env = collabzoo.make("strbuild")
    tasks = len(env.items("train"))
    for seed in (0, 7, 2**40, 0):
        env.reset(seed=seed, options={"task": 0})
        clone = copy.deepcopy(env)
        expected, _ = seeding.np_random(seed)
        assert env.np_random.integers(10**9, size=4).tolist() == (
            expected.integers(10**9, size=4).tolist()
        )
        env.reset()
        env.reset()
        expected.integers(tasks)
        expected.integers(tasks)
        assert env.np_random.integers(10**9) == expected.integers(10**9)
        fresh, _ = seeding.np_random(seed)
        assert clone.np_random.integers(10**9, size=4).tolist() == (
            fresh.integers(10**9, size=4).tolist()
        )
    picks = []
    for _ in range(2):
        env.reset(seed=11)
        picks.append([env.reset()[1]["first_builder"]["task_id"] for _ in range(6)])
    assert picks[0] == picks[1]


@pytest.mark.parametrize("seed", [-1, 1.5, np.int64(3), "3"])
def test_bad_seeds_are_refused_at_reset_as_gymnasium_does(seed) -> None:
    env = collabzoo.make("strbuild")
    with pytest.raises(GymnasiumError):
        env.reset(seed=seed)


def test_cached_prompts_follow_the_env_settings() -> None:
    """Prompts are kept per target and settings: an env with other palettes or another cap on
    the same target gets its own text."""
    plain = collabzoo.make("strbuild")
    other = collabzoo.make(
        "strbuild", palettes=[["birch_planks"], ["red_concrete", "stone"]], max_commands=7
    )
    for env in (plain, other, plain):
        obs, _ = env.reset(seed=0, options={"task": "ICML", "split": "eval"})
        mine = obs["first_builder"]
        assert f"Your blocks: {', '.join(env.palettes[0])} (and air" in mine
        assert f"at most {env.max_commands}:" in mine
    house_env = collabzoo.make("housebuild")
    for house in house_env.items("train")[:3]:
        obs, _ = house_env.reset(seed=0, options={"task": house.task_id})
        assert f"build the house {house.task_id!r}" in obs["first_builder"]
        for x1, y, z1, x2, _, z2, block in merged_boxes(house):
            assert f"({x1}, {y}, {z1}, {x2}, {y}, {z2} {block})" in obs["second_builder"]
