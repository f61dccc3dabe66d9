"""The Performance page's speed plots, drawn from the stored results files (no benchmark rerun).

- speed_vs_comlrl.png: collabzoo's joint samples/s over CoMLRL's, per learner, on each machine
  and model the comparison ran (magrpo_vs_comlrl.json, actor_critic_vs_comlrl.json,
  pretrained_vs_comlrl.json, gpu_scale_h100_comlrl.json), beside the targets.
- speed_changes.png: what each of collabzoo's speed changes bought, after over before, measured
  side by side (generation_speed, bench_batching, prompt_order, sft_microbatches, decode_modes_*,
  gpu_compiled_*): a bar left of 1x is a change that lost, and the page says why it is not the
  default.
- sandbox_throughput.png: programs/s of each code harness (sandbox_throughput.json).
- env_steps.png: episodes/s of collabzoo's building games against the reference's reward
  function alone, side by side (env_steps.json).

    python benchmarks/plot_speed.py [--out docs/assets/plots]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import load_results, results_path

OUT = Path(__file__).resolve().parents[1] / "docs" / "assets" / "plots"
DPI = 160
STYLE = {"font.size": 12, "axes.spines.top": False, "axes.spines.right": False}
CPU, GPU = "#4c72b0", "#dd8452"


def comlrl_ratios() -> list[tuple[str, str, float, int]]:
    """(setting, learner, collabzoo / CoMLRL, the digits its table gives) for every pairing the
    results files hold."""
    found = []
    tiny = load_results(results_path("magrpo_vs_comlrl"))
    setting = "tiny model, 2-core CPU"
    found.append((setting, "MAGRPO", tiny["ratio"], 1))
    names = {"iac-separate": "IAC, separate critics", "iac-head": "IAC, value heads", "cc": "CC"}
    actor_critic = load_results(results_path("actor_critic_vs_comlrl"))
    for variant, row in actor_critic["throughput"].items():
        found.append((setting, names[variant], ratio_of(row), 1))
    pretrained = load_results(results_path("pretrained_vs_comlrl"))
    setting = "SmolLM2-135M, 2-core CPU"
    found.append((setting, "MAGRPO", pretrained["magrpo"]["ratio"], 2))
    for variant, row in pretrained["actor_critic"]["throughput"].items():
        found.append((setting, names[variant], ratio_of(row), 2))
    gpu = load_results(results_path("gpu_scale_h100_comlrl"))["ratios"]
    setting = "Qwen2.5-0.5B shape, H100"
    found.append((setting, "MAGRPO", gpu["magrpo collabzoo/comlrl"], 2))
    found.append((setting, "IAC, value heads", gpu["iac collabzoo/comlrl"], 2))
    return found


def ratio_of(row: dict[str, Any]) -> float:
    ours, theirs = row["collabzoo"], row["comlrl"]
    return row.get("ratio", ours["joint_samples_per_s"] / theirs["joint_samples_per_s"])


def change_speedups() -> list[tuple[str, float, bool]]:
    """(change, after / before, on a GPU) for each speed change measured side by side."""
    found = []
    pairs = {p["pair"]: p for p in load_results(results_path("generation_speed"))["pairs"]}
    found.append(("one prefill per prompt (K = 8)", pairs["shared_prefill"]["speedup"], False))
    found.append(("LoRA team in one mixed-adapter call", pairs["mixed_adapters"]["speedup"], False))
    names = {"tldr": "TLDR", "coophumaneval": "CoopHumanEval"}
    for row in load_results(results_path("bench_batching"))["rows"]:
        name = f"bench: all episodes batched ({names.get(row['env'], row['env'])})"
        found.append((name, row["batched_over_one_by_one"], False))
    order = load_results(results_path("prompt_order"))["runs"]
    shuffled, grouped = (
        statistics.median(r["seconds"] for r in order[k]) for k in ("shuffled", "prompt order")
    )
    found.append(("actor-critic loss passes in prompt order", shuffled / grouped, False))
    sft = load_results(results_path("sft_microbatches"))["runs"]
    whole, micro = (sum(r["seconds"] for r in sft[k]) for k in ("whole batch", "micro-batches"))
    found.append(("warm-start steps in micro-batches", whole / micro, False))
    for name, on_gpu in (("decode_modes_cpu", False), ("decode_modes_gpu", True)):
        runs = load_results(results_path(name))["runs"]
        for rows in sorted({r["rows"] for r in runs}):
            modes = {r["mode"]: r for r in runs if r["rows"] == rows}
            speedup = (
                modes["compiled"]["decode_tokens_per_s"] / modes["dynamic"]["decode_tokens_per_s"]
            )
            where = "H100" if on_gpu else "CPU"
            found.append((f"compiled decoding, {rows} rows ({where})", speedup, on_gpu))
    teams = {"lora": "LoRA team", "separate": "two models"}
    for name, chip in (("gpu_compiled_h100", "H100"), ("gpu_compiled_h200", "H200")):
        for key, ratio in load_results(results_path(name))["ratios"].items():
            learner, team, _ = key.split()
            found.append(
                (f"hf-compiled {learner.upper()} update, {teams[team]} ({chip})", ratio, True)
            )
    rows = {
        r["sampler"]: r for r in load_results(results_path("gpu_compiled_breakeven_h200"))["rows"]
    }
    steady = rows["hf"]["later_mean_s"] / rows["hf-compiled"]["later_mean_s"]
    found.append(("hf-compiled in a training run, per later update (H200)", steady, True))
    return found


def plot_vs_comlrl(path: Path) -> Path:
    found = comlrl_ratios()
    settings = list(dict.fromkeys(s for s, _, _, _ in found))
    learners = list(dict.fromkeys(n for _, n, _, _ in found))
    colours = dict(zip(learners, plt.get_cmap("tab10").colors, strict=False))
    width = 0.2
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(10, 5.4), layout="constrained")
        shown: set[str] = set()
        for position, setting in enumerate(settings):
            group = [(n, r, d) for s, n, r, d in found if s == setting]
            for index, (learner, ratio, digits) in enumerate(group):
                x = position + width * (index - (len(group) - 1) / 2)
                bars = axes.bar(
                    x,
                    ratio,
                    width * 0.92,
                    color=colours[learner],
                    label=None if learner in shown else learner,
                )
                shown.add(learner)
                axes.bar_label(bars, labels=[f"{ratio:.{digits}f}×"], padding=2, fontsize=10)
        axes.axhline(1.0, color="black", linewidth=0.8)
        axes.axhline(5.0, color="grey", linestyle=":", linewidth=1.2, label="MAGRPO target, 5×")
        axes.axhline(
            3.0, color="grey", linestyle="--", linewidth=1, label="actor-critic target, 3×"
        )
        axes.set_xticks(range(len(settings)), settings)
        axes.set_ylabel("collabzoo / CoMLRL, joint samples/s")
        axes.set_ylim(0, 5.6)
        figure.suptitle("Training throughput against CoMLRL 1.4.3, side by side (higher is faster)")
        axes.legend(loc="upper left", ncols=3, frameon=False, fontsize=10)
        figure.savefig(path, dpi=DPI)
        plt.close(figure)
    return path


def plot_changes(path: Path) -> Path:
    found = change_speedups()
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(10, 0.42 * len(found) + 1.6), layout="constrained")
        names = [name for name, _, _ in found][::-1]
        ratios = [ratio for _, ratio, _ in found][::-1]
        colours = [GPU if gpu else CPU for _, _, gpu in found][::-1]
        bars = axes.barh(names, ratios, color=colours)
        axes.bar_label(bars, labels=[f"{r:.2f}×" for r in ratios], padding=3, fontsize=10)
        axes.axvline(1.0, color="grey", linestyle="--", linewidth=1, zorder=0)
        axes.set_xlim(0, max(ratios) * 1.15)
        axes.set_xlabel("after / before, measured side by side (right of 1× is faster)")
        figure.suptitle("What each speed change bought")
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in (CPU, GPU)]
        axes.legend(handles, ["2-core CPU", "GPU"], loc="lower right", frameon=False)
        figure.savefig(path, dpi=DPI)
        plt.close(figure)
    return path


def plot_sandbox(path: Path) -> Path:
    import sandbox_throughput

    run = load_results(results_path("sandbox_throughput"))["runs"][-1]
    speed = sandbox_throughput.programs_per_s(run)
    names = [label for key, label in sandbox_throughput.HARNESSES.items() if key in speed]
    rates = [speed[key] for key in sandbox_throughput.HARNESSES if key in speed]
    names = [n.replace("`", "") for n in names]
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(10, 0.5 * len(names) + 1.5), layout="constrained")
        bars = axes.barh(names[::-1], rates[::-1], color=CPU)
        axes.bar_label(bars, labels=[f"{r:.3g}" for r in rates[::-1]], padding=3, fontsize=10)
        axes.set_xlim(0, max(rates) * 1.12)
        axes.set_xlabel("programs/s (the 164 HumanEval solutions, 2-core CPU)")
        figure.suptitle("Code sandbox throughput, side by side in one run")
        figure.savefig(path, dpi=DPI)
        plt.close(figure)
    return path


def plot_env_steps(path: Path) -> Path:
    import env_steps

    rows = load_results(results_path("env_steps"))["results"]
    labels = [
        f"{env_steps.GAME_NAMES[r['game']]}, "
        f"{env_steps.ANSWER_NAMES.get((r['game'], r['answers']), r['answers'])}\n"
        f"{r['episodes_vs_reference']:.1f}× the reference"
        for r in rows
    ]
    ours = [r["episodes_per_s"] for r in rows]
    theirs = [r["reference_scorer_steps_per_s"] for r in rows]
    positions = range(len(rows))
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(10, 4.8), layout="constrained")
        left = axes.bar(
            [p - 0.2 for p in positions], ours, 0.38, color=CPU, label="collabzoo: reset + step"
        )
        right = axes.bar(
            [p + 0.2 for p in positions],
            theirs,
            0.38,
            color="#999999",
            label="the reference's reward function alone",
        )
        axes.bar_label(left, labels=[f"{v:,.0f}" for v in ours], padding=2, fontsize=10)
        axes.bar_label(right, labels=[f"{v:,.0f}" for v in theirs], padding=2, fontsize=10)
        axes.set_xticks(list(positions), labels)
        axes.set_ylabel("one-turn episodes per second (one core)")
        axes.set_ylim(0, max(ours) * 1.15)
        axes.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
        figure.suptitle("Building games against the reference's reward function, side by side")
        axes.legend(frameon=False)
        figure.savefig(path, dpi=DPI)
        plt.close(figure)
    return path


PLOTS = {
    "speed_vs_comlrl.png": plot_vs_comlrl,
    "speed_changes.png": plot_changes,
    "sandbox_throughput.png": plot_sandbox,
    "env_steps.png": plot_env_steps,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, plot in PLOTS.items():
        print(plot(args.out / name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
