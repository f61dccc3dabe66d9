"""Team steps and one-turn episodes per second of the building games, on one core.

Two answer sets per game, precomputed so that only the env is timed:

- oracle: StrBuild, the oracle team's answers; HouseBuild, an even mix of oracle and naive
  answers (the set the Performance page has always used).
- messy: `MESSY_PAIRS` answer pairs drawn from a seed, written the way LLMs write them: valid
  commands mixed with out-of-range coordinates, other builders' or made-up blocks, relative or
  comma-separated coordinates, unknown commands, prose, comments, list bullets, markdown fences
  (two of them, unclosed, tagged or not), duplicated lines, empty answers and answers far over
  the command cap. A reward function sees these far more often than clean answers.

Measured per set, each the best of `ROUND_S` rounds in `--seconds`:

- team steps/s: `env.step` in episodes of the default horizon, the resets inside the timed loop;
- episodes/s: one-turn episodes, `reset(seed=..., options=...)` and one `step` (horizon 1);
- step alone/s: the same steps with only `step` timed;
- scorer/s: `collabzoo.rewards`' score function alone on the same answers.

The reference task repository's pure-Python reward functions are not installable here, so their
throughput is given as figures measured apart (REFERENCE_PER_S, one core of this project's 2-core
machines). With `--reference DIR` (a checkout of the reference task repository) the benchmark
times its StrBuild and HouseBuild reward functions side by side, on the same answers and tasks.

    python benchmarks/env_steps.py [--seconds 3] [--json [PATH]] [--reference DIR]

`--json` alone writes benchmarks/results/env_steps.json, from which `env_steps_table` builds the
Performance page's table.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import itertools
import platform
import random
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import collabzoo
from collabzoo.envs.records import train_eval_split
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.tasks.building.envs.house_generator import generate_houses
from collabzoo.tasks.building.envs.housebuild import EMBEDDED_HOUSES
from collabzoo.tasks.building.rewards.housebuild import score_housebuild
from collabzoo.tasks.building.rewards.strbuild import score_strbuild

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, thousands, times, write_results
from side_by_side import pin_to_one_core

GAMES = ("strbuild", "housebuild")
ANSWER_SETS = ("oracle", "messy")
MESSY_PAIRS = 360
MESSY_SEED = 17
# Reference reward-function calls per second on one core, measured apart (not re-run here):
# StrBuild on oracle answers and on messy ones; HouseBuild on mixed oracle and naive answers
# (no messy HouseBuild figure was measured apart: the same one stands for both).
REFERENCE_PER_S = {
    ("strbuild", "oracle"): 2100.0,
    ("strbuild", "messy"): 1850.0,
    ("housebuild", "oracle"): 850.0,
    ("housebuild", "messy"): 850.0,
}
TARGET_VS_REFERENCE = 2.0  # one-turn episodes, reset included, on messy answers

Case = tuple[str, int, dict[str, str]]  # (split, task index, answer by agent)


# ----- the answer sets ------------------------------------------------------------------------
def _tasks(env) -> list[tuple[str, int]]:
    return [(split, i) for split in ("train", "eval") for i in range(len(env.items(split)))]


def oracle_cases(game: str) -> list[Case]:
    """(split, task index, answers) for every task; HouseBuild alternates oracle and naive."""
    env = collabzoo.make(game)
    cases = []
    for split, index in _tasks(env):
        kind = "naive" if game == "housebuild" and index % 2 else "oracle"
        obs, _ = env.reset(seed=index, options={"split": split, "task": index})
        cases.append((split, index, scripted_team(game, kind)(obs)))
    return cases


PROSE = (
    "Sure! Here are my commands:",
    "Here is my part of the build.",
    "I'll take the cells where x + y is even and leave the rest to my partner.",
    "Note: no two blocks of the same texture should touch.",
    "Let me place the blocks row by row, starting from the bottom.",
    "This should cover about half of the target cells.",
    "I apologize, I cannot see the partner's commands, so I will guess.",
    "Final answer:",
    "Commands:",
    "The build is complete. Let me know if you need anything else!",
)
COMMENTS = ("# bottom row", "// left half", "### Commands", "**Row y=2:**", "--- my part ---")
BULLETS = ("- ", "* ", "1. ", "2) ", "10. ", "-- ")
FENCE_TAGS = ("mcfunction", "", "minecraft", "text", "bash")


def _pick(rng: random.Random, weighted: dict[str, int]) -> str:
    return rng.choices(list(weighted), weights=list(weighted.values()))[0]


def _styled(rng: random.Random, name: str, rest: str) -> str:
    """A command as LLMs vary it: slash or not, case, a space after the slash."""
    head = _pick(rng, {f"/{name}": 12, name: 3, f"/{name.upper()}": 1, f"/ {name}": 1})
    return f"{head} {rest}" if rest else head


def _strbuild_line(rng: random.Random, env, me: int, good: list[str], previous: str) -> str:
    target = env.item.target
    w, h = target.width, target.height
    own, other = env.palettes[me], env.palettes[1 - me]
    x, y = rng.randrange(w), rng.randrange(h)
    kind = _pick(
        rng,
        {
            "good": 30,
            "valid": 16,
            "range": 9,
            "block": 9,
            "relative": 3,
            "comma": 5,
            "short": 3,
            "command": 5,
            "prose": 7,
            "comment": 4,
            "bullet": 6,
            "duplicate": 4,
        },
    )
    if kind == "good" and good:
        return rng.choice(good)
    if kind == "duplicate" and previous:
        return previous
    if kind == "range":
        x, y, z = rng.choice(((w + rng.randrange(4), y, 0), (x, h, 0), (-1, y, 0), (x, y, 1)))
        return _styled(rng, "setblock", f"{x} {y} {z} {rng.choice(own)}")
    if kind == "block":
        block = rng.choice((*other, "Stone", "oak_plank", "red_concrete", "glass", "planks"))
        return _styled(rng, "setblock", f"{x} {y} 0 {block}")
    if kind == "relative":
        return _styled(rng, "setblock", f"~{x} ~ ~ {own[0]}")
    if kind == "comma":
        coords = rng.choice((f"{x}, {y}, 0,", f"({x}, {y}, 0)", f"{x},{y},0"))
        return _styled(rng, "setblock", f"{coords} {rng.choice(own)}")
    if kind == "short":
        return _styled(rng, "setblock", rng.choice((f"{x} {y} {own[0]}", "")))
    if kind == "command":
        return rng.choice(
            (f"/fill 0 0 0 {w - 1} 0 0 {own[0]}", "/give @p stone 64", "/tp @s 0 0 0", "/kill")
        )
    if kind == "prose":
        return rng.choice(PROSE)
    if kind == "comment":
        return rng.choice(COMMENTS)
    block = rng.choice((*own, "air", f"minecraft:{own[-1]}"))
    line = _styled(rng, "setblock", f"{x} {y} 0 {block}" + rng.choice(("", "", " replace")))
    return rng.choice(BULLETS) + line if kind == "bullet" else line


def _housebuild_line(rng: random.Random, env, me: int, good: list[str], previous: str) -> str:
    house = env.item
    sx, sy, sz = house.size
    blocks = [b for b in house.blocks if b != "air"]
    x1, x2 = sorted((rng.randrange(sx), rng.randrange(sx)))
    y = rng.randrange(sy)
    z1, z2 = sorted((rng.randrange(sz), rng.randrange(sz)))
    block = rng.choice((*blocks, "air"))
    kind = _pick(
        rng,
        {
            "good": 30,
            "valid": 14,
            "range": 8,
            "block": 8,
            "mode": 6,
            "setblock": 6,
            "kill": 5,
            "relative": 2,
            "comma": 4,
            "short": 3,
            "prose": 7,
            "comment": 4,
            "bullet": 5,
            "duplicate": 4,
        },
    )
    if kind == "good" and good:
        return rng.choice(good)
    if kind == "duplicate" and previous:
        return previous
    if kind == "range":
        x2, y, z2 = rng.choice(((sx, y, z2), (x2, sy + 1, z2), (x2, y, sz + 2), (-1, y, z2)))
        return _styled(rng, "fill", f"{x1} {y} {z1} {x2} {y} {z2} {block}")
    if kind == "block":
        wrong = rng.choice(("oak_planks", "Planks", "stone", "white_wool", "minecraft:dirt"))
        return _styled(rng, "fill", f"{x1} {y} {z1} {x2} {y} {z2} {wrong}")
    if kind == "mode":
        mode = rng.choice(("replace", "hollow", "keep"))
        return _styled(rng, "fill", f"{x1} {y} {z1} {x2} {y} {z2} {block} {mode}")
    if kind == "setblock":
        return _styled(rng, "setblock", f"{x1} {y} {z1} {block}")
    if kind == "kill":
        return rng.choice(("/kill", "/kill @e[type=spider]", "kill spiders", "/KILL"))
    if kind == "relative":
        return _styled(rng, "fill", f"~ ~ ~ ~{x2} ~{y} ~{z2} {block}")
    if kind == "comma":
        return _styled(rng, "fill", f"{x1}, {y}, {z1}, {x2}, {y}, {z2}, {block}")
    if kind == "short":
        return _styled(rng, "fill", f"{x1} {y} {z1} {x2} {y} {z2}")
    if kind == "prose":
        return rng.choice(PROSE)
    if kind == "comment":
        return rng.choice(COMMENTS)
    line = _styled(rng, "fill", f"{x1} {y} {z1} {x2} {y} {z2} {block}")
    return rng.choice(BULLETS) + line if kind == "bullet" else line


def _fenced(rng: random.Random, body: str) -> str:
    tag = rng.choice(FENCE_TAGS)
    before = rng.choice(("", f"{rng.choice(PROSE)}\n\n"))
    after = rng.choice(("", f"\n\n{rng.choice(PROSE)}"))
    return f"{before}```{tag}\n{body}\n```{after}"


def messy_answer(rng: random.Random, env, me: int, good: str) -> str:
    """One builder's answer in one of the shapes LLMs give (see the module docstring)."""
    make_line = _strbuild_line if env.metadata["name"].startswith("strbuild") else _housebuild_line
    good_lines = good.splitlines()

    def lines(count: int) -> list[str]:
        out: list[str] = []
        for _ in range(count):
            out.append(make_line(rng, env, me, good_lines, out[-1] if out else ""))
        return out

    shape = _pick(
        rng,
        {"mixed": 56, "clean": 10, "empty": 4, "prose": 6, "long": 8, "one_line": 4, "fences": 12},
    )
    if shape == "clean":
        return rng.choice((good, _fenced(rng, good)))
    if shape == "empty":
        return rng.choice(("", " ", "\n\n"))
    if shape == "prose":
        return " ".join(rng.sample(PROSE, rng.randint(1, 4)))
    if shape == "long":  # a model that loops, far over the cap
        body = good_lines * rng.randint(3, 6) + lines(rng.randint(20, 120))
        return "\n".join(body)
    if shape == "one_line":
        return rng.choice(("; ", " ", ", ")).join(lines(rng.randint(2, 12)))
    body = "\n".join(lines(rng.randint(1, 2 * len(good_lines) + 6)))
    if shape == "fences":
        return rng.choice(
            (
                f"```\nPlan: split the cells with my partner.\n```\n{_fenced(rng, body)}",
                f"{rng.choice(PROSE)}\n```mcfunction\n{body}",  # never closed
                f"{_fenced(rng, body)}\n{_fenced(rng, good)}",  # only the first block is read
            )
        )
    return rng.choice((body, body, _fenced(rng, body), f"{rng.choice(PROSE)}\n{body}"))


def messy_cases(game: str, pairs: int = MESSY_PAIRS, seed: int = MESSY_SEED) -> list[Case]:
    """`pairs` messy answer pairs, the tasks of both splits in turn; the same for a seed."""
    rng = random.Random(seed)
    env = collabzoo.make(game)
    oracle = scripted_team(game, "oracle")
    tasks = _tasks(env)
    cases = []
    for k in range(pairs):
        split, index = tasks[k % len(tasks)]
        obs, _ = env.reset(seed=k, options={"split": split, "task": index})
        good = oracle(obs)
        answers = {
            agent: messy_answer(rng, env, me, good[agent])
            for me, agent in enumerate(env.possible_agents)
        }
        cases.append((split, index, answers))
    return cases


# ----- the timed loops ------------------------------------------------------------------------
ROUND_S = 0.5
"""Each measurement is the best of rounds this long: the machine is shared, and the best round
is the one least disturbed by other work (as `timeit` advises)."""


def time_loop(step: Callable[[], object], seconds: float) -> float:
    """Calls of `step` per second, the best round of those in `seconds`."""
    best, end = 0.0, time.perf_counter() + seconds
    while True:
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < min(ROUND_S, seconds):
            for _ in range(50):
                step()
            count += 50
        best = max(best, count / elapsed)
        if time.perf_counter() >= end:
            return best


def bench_team_steps(game: str, cases: list[Case], seconds: float) -> float:
    """Steps/s in episodes of the default horizon, each pair answering every turn of one."""
    env = collabzoo.make(game)
    cycle = itertools.cycle(cases)
    answers: dict[str, str] = {}

    def step() -> None:
        nonlocal answers
        if not env.agents:
            split, index, answers = next(cycle)
            env.reset(seed=index, options={"split": split, "task": index})
        env.step(answers)

    return time_loop(step, seconds)


def bench_episodes(game: str, cases: list[Case], seconds: float) -> tuple[float, float]:
    """(one-turn episodes/s, reset included; steps/s, only `step` timed): the best rounds of
    passes over every pair, each pair one episode (horizon 1)."""
    env = collabzoo.make(game, horizon=1)
    runs = [(k, {"split": s, "task": i}, a) for k, (s, i, a) in enumerate(cases)]
    clock = time.perf_counter
    best_episodes = best_steps = 0.0
    end = clock() + seconds
    while clock() < end:
        count, step_time, start = 0, 0.0, clock()
        while clock() - start < min(ROUND_S, seconds):
            for seed, options, answers in runs:
                env.reset(seed=seed, options=options)
                t = clock()
                env.step(answers)
                step_time += clock() - t
            count += len(runs)
        best_episodes = max(best_episodes, count / (clock() - start))
        best_steps = max(best_steps, count / step_time)
    return best_episodes, best_steps


def bench_scorer(game: str, cases: list[Case], seconds: float) -> float:
    env = collabzoo.make(game)
    jobs = []
    for k, (split, index, answers) in enumerate(cases):
        env.reset(seed=k, options={"split": split, "task": index})
        pair = [answers[a] for a in env.possible_agents]
        if game == "strbuild":
            target = env.item.target
            jobs.append(lambda t=target, p=pair: score_strbuild(t, p))
        else:
            house, attacks = env.item, env.spider_attacks
            jobs.append(lambda h=house, p=pair, s=attacks: score_housebuild(h, p, spider_attacks=s))
    cycle = itertools.cycle(jobs)
    return time_loop(lambda: next(cycle)(), seconds)


# ----- the reference, side by side (optional) --------------------------------------------------
REFERENCE_MODULES = {  # game: (folder names, newer first; reward module)
    "strbuild": (("str_build", "str_builder"), "str_builder_reward"),
    "housebuild": (("house_build",), "house_builder_reward"),
}
REFERENCE_CONFIGS = {  # the reference runs' settings (caps per team, palettes, spiders)
    "strbuild": {
        "max_commands": 300,
        "block_agent1": ["oak_planks", "stone"],
        "block_agent2": ["white_concrete", "obsidian"],
    },
    "housebuild": {
        "max_commands": 600,
        "limited_resource": True,
        "player": {"hp": 5},
        "spider": {"num": 3, "atk_values": [2, 2, 2]},  # fixed: its config draws them per episode
    },
}


def reference_reward(checkout: Path, game: str) -> Callable[..., list[float]]:
    """A reference reward function, loaded from a checkout of its task repository.

    Its modules import each other as the `LLM_Collab_Minecraft` package, so the checkout is
    registered under that name. Its training runs have wandb installed: when it is not, a stub
    stands in, so that a failed `import wandb` on every call is not charged to it.
    """
    package = types.ModuleType("LLM_Collab_Minecraft")
    package.__path__ = [str(checkout)]
    sys.modules.setdefault("LLM_Collab_Minecraft", package)
    if importlib.util.find_spec("wandb") is None:
        sys.modules.setdefault("wandb", types.SimpleNamespace(run=None))
    folders, name = REFERENCE_MODULES[game]
    folder = next((f for f in folders if (checkout / f / "rewards" / f"{name}.py").is_file()), None)
    if folder is None:
        raise FileNotFoundError(f"{checkout}: no {folders[0]}/rewards/{name}.py")
    module = importlib.import_module(f"LLM_Collab_Minecraft.{folder}.rewards.{name}")
    return module.get_reward_function(cfg={"task": REFERENCE_CONFIGS[game]}, num_agents=2)


def reference_item(env, game: str, split: str, index: int) -> dict:
    """The reference's batch item for the env's current task (the same target or house)."""
    if game == "strbuild":
        target = env.item.target
        return {
            "task_id": env.item.task_id,
            "string": env.item.text,
            "local_bbox_from": [0, 0, 0],
            "local_bbox_to": [target.width - 1, target.height - 1, 0],
            "target_rows_topdown": list(target.rows),
        }
    spec = train_eval_split(generate_houses(EMBEDDED_HOUSES), split)[index]
    assert spec["task_id"] == env.item.task_id, "the env's houses are the generated ones"
    sx, sy, sz = env.item.size
    return {
        "task_id": spec["task_id"],
        "inventory": spec["inventory"],
        "layers_by_y": {layer["y"]: layer["rows"] for layer in spec["target_spec"]["layers"]},
        "local_bbox_from": [0, 0, 0],
        "local_bbox_to": [sx - 1, sy - 1, sz - 1],
    }


def bench_reference(game: str, cases: list[Case], checkout: Path, seconds: float) -> float:
    """Reference reward-function calls per second on the same answers and tasks."""
    reward = reference_reward(checkout, game)
    env = collabzoo.make(game)
    jobs = []
    for k, (split, index, answers) in enumerate(cases):
        env.reset(seed=k, options={"split": split, "task": index})
        item = reference_item(env, game, split, index)
        a, b = ([answers[agent]] for agent in env.possible_agents)
        jobs.append(lambda a=a, b=b, item=item: reward(a, b, batch_items=[item]))
    cycle = itertools.cycle(jobs)
    return time_loop(lambda: next(cycle)(), seconds)


# ----- the table ------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("env_steps")),
        help="also write the results to this file (alone: benchmarks/results/env_steps.json)",
    )
    parser.add_argument("--games", nargs="+", choices=GAMES, default=list(GAMES))
    parser.add_argument("--answers", nargs="+", choices=ANSWER_SETS, default=list(ANSWER_SETS))
    parser.add_argument(
        "--reference",
        type=Path,
        help="a checkout of the reference task repository: time its reward functions side by "
        "side on the same answers and tasks",
    )
    args = parser.parse_args()
    pinned = pin_to_one_core()
    rows = []
    for game in args.games:
        for answers in args.answers:
            cases = oracle_cases(game) if answers == "oracle" else messy_cases(game)
            episodes, steps = bench_episodes(game, cases, args.seconds)
            row = {
                "game": game,
                "answers": answers,
                "pairs": len(cases),
                "env_steps_per_s": round(bench_team_steps(game, cases, args.seconds)),
                "episodes_per_s": round(episodes),
                "steps_alone_per_s": round(steps),
                "scorer_steps_per_s": round(bench_scorer(game, cases, args.seconds)),
                "reference_scorer_steps_per_s": REFERENCE_PER_S[game, answers],
                "reference_measured": "apart",
            }
            if args.reference is not None:
                measured = bench_reference(game, cases, args.reference, args.seconds)
                row["reference_scorer_steps_per_s"] = round(measured)
                row["reference_measured"] = "side by side"
            reference = row["reference_scorer_steps_per_s"]
            row["episodes_vs_reference"] = round(episodes / reference, 2)
            row["steps_alone_vs_reference"] = round(steps / reference, 2)
            row["env_vs_reference"] = round(row["env_steps_per_s"] / reference, 2)
            rows.append(row)
    print(f"one core ({pinned}), Python {platform.python_version()}")
    header = ("game", "answers", "team steps", "episodes", "step alone", "scorer", "reference")
    print(f"{header[0]:<11}{header[1]:<8}" + "".join(f"{h:>12}" for h in header[2:]) + "  ep/ref")
    for r in rows:
        figures = ("env_steps_per_s", "episodes_per_s", "steps_alone_per_s", "scorer_steps_per_s")
        reference = f"{r['reference_scorer_steps_per_s']:.0f}" + (
            "*" if r["reference_measured"] == "apart" else ""
        )
        print(
            f"{r['game']:<11}{r['answers']:<8}"
            + "".join(f"{r[f]:>12}" for f in figures)
            + f"{reference:>12}{r['episodes_vs_reference']:>7.2f}x"
        )
    print(
        f"per second, best {ROUND_S} s round; team steps: episodes of the default horizon, "
        "resets included; episodes: one-turn episodes, reset + step; reference: its reward "
        "function alone; *: measured apart, not re-run here"
    )
    met = [
        f"{r['game']} {r['episodes_vs_reference']:.2f}x "
        + ("(met)" if r["episodes_vs_reference"] >= TARGET_VS_REFERENCE else "(NOT met)")
        for r in rows
        if r["answers"] == "messy"
    ]
    if met:
        print(f"target, messy episodes >= {TARGET_VS_REFERENCE}x the reference: {', '.join(met)}")
    if args.json:
        meta = {
            "python": platform.python_version(),
            "cpu": pinned,
            "messy_pairs": MESSY_PAIRS,
            "messy_seed": MESSY_SEED,
            "target_episodes_vs_reference": TARGET_VS_REFERENCE,
        }
        results = {"meta": meta, "results": rows}
        write_results(args.json, {"headline": headline(results), **results})


# ----- the Performance page's table --------------------------------------------------------------
GAME_NAMES = {"strbuild": "StrBuild", "housebuild": "HouseBuild"}
ANSWER_NAMES = {("housebuild", "oracle"): "oracle + naive"}


def env_steps_table(results: dict) -> str:
    """The page's table: figures to three significant digits (the rounds move more than that)."""
    rows = results["results"]
    side_by_side = all(r["reference_measured"] == "side by side" for r in rows)
    header = [
        "game",
        "answers",
        "episodes/s (reset + step)",
        "step alone",
        "team steps (H = 4)",
        "scorer only",
        "reference, side by side" if side_by_side else "reference (measured apart)",
        "episodes vs reference",
    ]
    cells = [
        [
            GAME_NAMES[r["game"]],
            ANSWER_NAMES.get((r["game"], r["answers"]), r["answers"]),
            *(
                thousands(round(r[key], -1))
                for key in (
                    "episodes_per_s",
                    "steps_alone_per_s",
                    "env_steps_per_s",
                    "scorer_steps_per_s",
                    "reference_scorer_steps_per_s",
                )
            ),
            times(r["episodes_vs_reference"], 1),
        ]
        for r in rows
    ]
    return markdown_table(header, cells)


def headline(results: dict) -> dict | list:
    """Messy StrBuild episodes against the reference: what a reward function mostly sees."""
    rows = [r for r in results["results"] if (r["game"], r["answers"]) == ("strbuild", "messy")]
    if not rows:
        return []  # a run without messy StrBuild answers has no summary row
    (row,) = rows
    episodes = thousands(round(row["episodes_per_s"], -1))
    reference = thousands(round(row["reference_scorer_steps_per_s"], -1))
    return {
        "benchmark": "Env steps of the building games",
        "figure": f"{episodes} messy StrBuild episodes/s, the reference reward {reference} calls/s",
        "ratio": round(row["episodes_vs_reference"], 1),
        "section": "Env steps of the building games",
    }


if __name__ == "__main__":
    main()
