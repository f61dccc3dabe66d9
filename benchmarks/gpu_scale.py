"""Training at real model shapes on a GPU: collabzoo against CoMLRL 1.4.3, side by side.

Models: randomly initialised Qwen2 models with the exact shapes of Qwen2.5-0.5B or -1.5B
(`collabzoo.algos.policies.model_loading.QWEN25_SHAPES`: written configs, no download) in bf16. The
tokenizer is a word-level one over the whole 151,936-token vocabulary ("t0" ... "t151935"),
built here, so prompts and completions are ids drawn inside the vocabulary and every id
round-trips through text; the end-of-sequence token is one id of 151,936, so every row
generates the full `--new-tokens` in both libraries (a random model draws it about once in
600 rows of 256 tokens; a batch runs until its longest row ends anyway).

Work (the issue's): 2 agents, `--prompts` 8 x K=`--k` 4 x `--new-tokens` 256, one turn, the
reference sampling settings; MAGRPO and IAC (value heads on the actors); teams of two separate
models on one device, and one base model with a LoRA adapter per agent (rank 8, all linear
layers). Reward: the share of even ids in both answers (cheap; the same function for both).

Per run: one warm-up update, then `--steps` timed updates. Reported: joint samples/s (prompts x
K joint answers per update), generated tokens/s (both agents' tokens), and peak memory: on CUDA
`torch.cuda.max_memory_allocated` over the whole run, on the CPU the peak resident set. Every
run is its own process; with `--comlrl` (CoMLRL installed: `pip install --no-deps
comlrl==1.4.3` plus wandb), CoMLRL's `MAGRPOTrainer` / `IACTrainer` run the same teams of
separate models right after collabzoo's, one process each, and the table gives the ratios.

With `--generation hf,vllm` (the `vllm` extra installed), collabzoo's runs are made twice: with
transformers' `generate` and with colocated vLLM engines (`generation_backend="vllm"`, weights
synced after every step), and the table gives the ratio; `hf-compiled` in the list adds runs
with a static cache and a compiled decode step (`generation_backend="hf-compiled"`).
`--vllm-kwargs JSON` passes engine settings (e.g. '{"gpu_memory_utilization": 0.4}'); the peak
memory of a vLLM run includes the engines' reserved KV cache.

On a machine without CUDA, `--device cpu --shape qwen2.5-0.5b --steps 1` proves the real-shape
path end to end (a test runs it with a smaller workload).

    python benchmarks/gpu_scale.py --device cuda --shape qwen2.5-0.5b [--comlrl] [--json [F]]
    python benchmarks/gpu_scale.py --device cuda --generation hf,vllm --teams separate,lora

`--json` alone writes benchmarks/results/gpu_scale.json: every run and the ratios the targets
name (`ratios`). The Performance page's GPU tables come from such files (`runs_table`,
`comlrl_table`, `sampler_table`) and from files of GPU training runs made by other commands,
`collabzoo train` and `benchmarks/learn_real_model.py` (`train_runs_table`,
`compiled_training_table`, `compiled_breakeven_table`). A file whose section the summary
shows through another file says `"summary": false`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, significant, thousands, write_results

SAMPLING = {"temperature": 0.6, "top_p": 0.6, "top_k": 50}
LEARNING_RATE = 5e-6
EOS = 151_643
AGENTS = ("a", "b")
TOKEN = re.compile(r"t(\d+)")
TARGETS = {"magrpo_vs_comlrl": 5.0, "lora_memory_share": 0.6}


def word_tokenizer(vocab: int) -> Any:
    """A real fast tokenizer whose words are the vocabulary's ids ("t0" ... ): text in, ids
    out, for both libraries."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"t{i}": i for i in range(vocab)}
    core = Tokenizer(models.WordLevel(words, unk_token="t0"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token=f"t{EOS}", pad_token=f"t{EOS}", padding_side="left"
    )


def prompt_texts(count: int, tokens: int, vocab: int, seed: int) -> list[str]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, EOS, (count, tokens), generator=generator)
    return [" ".join(f"t{i}" for i in row) for row in ids.tolist()]


def even_share(*answers: str) -> float:
    ids = [int(m) for answer in answers for m in TOKEN.findall(answer)]
    return sum(1 for i in ids if i % 2 == 0) / max(1, len(ids))


def prompt_env_class(prompts: list[str]):
    """One turn: both agents read prompt `seed % len(prompts)`; the team earns `even_share`."""
    from gymnasium import spaces
    from pettingzoo import ParallelEnv

    class PromptEnv(ParallelEnv):
        metadata: ClassVar[dict[str, Any]] = {"name": "gpu_scale_prompts_v0"}
        possible_agents: ClassVar[list[str]] = list(AGENTS)

        def __init__(self) -> None:
            self.agents: list[str] = []
            self._space = spaces.Text(max_length=1 << 20)

        def observation_space(self, agent):
            return self._space

        def action_space(self, agent):
            return self._space

        def reset(self, seed=None, options=None):
            self.agents = list(self.possible_agents)
            prompt = prompts[(seed or 0) % len(prompts)]
            return dict.fromkeys(self.agents, prompt), {a: {} for a in self.agents}

        def step(self, actions):
            reward = even_share(*actions.values())
            agents, self.agents = self.agents, []
            return (
                dict.fromkeys(agents, ""),
                dict.fromkeys(agents, reward),
                dict.fromkeys(agents, True),
                dict.fromkeys(agents, False),
                {a: {} for a in agents},
            )

    return PromptEnv


def models_for(params: dict[str, Any]) -> list[Any]:
    import torch

    from collabzoo.algos.policies.model_loading import shaped_causal_lm

    count = 1 if params["team"] == "lora" else len(AGENTS)
    made = []
    for seed in range(count):
        model = shaped_causal_lm(
            params["shape"],
            num_layers=params.get("layers"),
            dtype=torch.bfloat16,
            seed=seed,
            device=params["device"],
        )
        model.generation_config.eos_token_id = EOS
        model.generation_config.pad_token_id = EOS
        made.append(model)
    return made


def peak_memory(device: str) -> float:
    """GiB: CUDA's peak allocation, or the process's peak resident set."""
    import resource

    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def timed(step, warmup, params: dict[str, Any]) -> dict[str, Any]:
    import torch

    started = time.perf_counter()
    warmup()
    warm_seconds = time.perf_counter() - started
    if params["device"].startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(params["steps"]):
        step()
    if params["device"].startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    joint = params["steps"] * params["prompts"] * params["k"]
    return {
        "warmup_seconds": warm_seconds,
        "seconds": seconds,
        "joint_samples_per_s": joint / seconds,
        "generated_tokens_per_s": joint * len(AGENTS) * params["new_tokens"] / seconds,
        "peak_memory_gib": peak_memory(params["device"]),
    }


def run_collabzoo(params: dict[str, Any]) -> dict[str, Any]:
    import torch

    from collabzoo.algos import IACConfig, IACTrainer, LLMPolicy, MAGRPOConfig, MAGRPOTrainer
    from collabzoo.algos.policies.model_loading import QWEN25_VOCAB, lora_team

    tokenizer = word_tokenizer(QWEN25_VOCAB)
    models = models_for(params)
    if params["team"] == "lora":
        policies = lora_team(models[0], tokenizer, list(AGENTS))
    else:
        policies = {a: LLMPolicy(m, tokenizer) for a, m in zip(AGENTS, models, strict=True)}
    prompts = prompt_texts(params["prompts"], params["prompt_tokens"], QWEN25_VOCAB, 0)
    settings = dict(
        output_dir=params["workdir"],
        num_turns=1,
        rollout_buffer_size=params["prompts"],
        num_generations=params["k"],
        max_new_tokens=params["new_tokens"],
        tensorboard=False,
        progress=False,
        save_steps=0,
        device=params["device"],
        generation_backend=params.get("generation", "hf"),
        vllm_kwargs=params.get("vllm_kwargs"),
        **SAMPLING,
    )
    if params["learner"] == "iac":
        config = IACConfig(
            use_separate_critic=False,
            actor_learning_rate=LEARNING_RATE,
            critic_learning_rate=LEARNING_RATE,
            **settings,
        )
        trainer: Any = IACTrainer(prompt_env_class(prompts), policies, config)
    else:
        config = MAGRPOConfig(agent_learning_rate=LEARNING_RATE, **settings)
        trainer = MAGRPOTrainer(prompt_env_class(prompts), policies, config)
    torch.manual_seed(0)
    before = {n: p.detach().clone() for n, p in trainer.policies["a"].trainable_state().items()}
    last: dict[str, float] = {}

    def step() -> None:
        last.update(trainer.train_step())

    result = timed(step, step, params)
    after = trainer.policies["a"].trainable_state()
    trainer.close()
    return {
        "library": "collabzoo",
        **result,
        "updates": trainer.update,
        "parameters": sum(  # the models' own, without LoRA adapters
            p.numel() for m in models for n, p in m.named_parameters() if "lora_" not in n
        ),
        "weights_changed": any(not torch.equal(before[n], after[n]) for n in before),
        "sampler_mean_abs_log_ratio": last.get("sampler/mean_abs_log_ratio"),
    }


def run_comlrl(params: dict[str, Any]) -> dict[str, Any]:
    os.environ["WANDB_MODE"] = "disabled"
    import torch

    try:
        import datasets
        from comlrl.trainers.actor_critic import iac
        from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    except ImportError as error:
        return {"library": "comlrl", "error": f"CoMLRL not importable: {error}"}
    from collabzoo.algos.policies.model_loading import QWEN25_VOCAB

    tokenizer = word_tokenizer(QWEN25_VOCAB)
    model_a, model_b = models_for({**params, "team": "separate"})
    prompts = prompt_texts(params["prompts"], params["prompt_tokens"], QWEN25_VOCAB, 0)
    common = dict(
        num_train_epochs=1,
        num_turns=1,
        rollout_buffer_size=params["prompts"],
        num_generations=params["k"],
        max_new_tokens=params["new_tokens"],
        eval_interval=10**9,
        logging_steps=10**9,
        early_termination_threshold=None,
        agent_devices=params["device"],
        **SAMPLING,
    )
    data = dict(
        tokenizer=tokenizer,
        train_dataset=datasets.Dataset.from_list([{"prompt": p} for p in prompts]),
        reward_func=lambda a, b, batch_items=None, prompts=None: [
            even_share(x, y) for x, y in zip(a, b, strict=True)
        ],
        formatters=[lambda item: item["prompt"], lambda item: item["prompt"]],
    )
    if params["learner"] == "iac":
        trainer = iac.IACTrainer(
            agents=[model_a, model_b],
            args=iac.IACConfig(
                use_separate_critic=False,
                agent_learning_rate=LEARNING_RATE,
                critic_learning_rate=LEARNING_RATE,
                **common,
            ),
            **data,
        )
    else:
        trainer = MAGRPOTrainer(
            agents=[model_a, model_b],
            args=MAGRPOConfig(agent_learning_rate=LEARNING_RATE, **common),
            **data,
        )
    torch.manual_seed(0)
    return {"library": "comlrl", **timed(trainer.train, trainer.train, params)}


def child(params: dict[str, Any]) -> dict[str, Any]:
    runner = run_comlrl if params["library"] == "comlrl" else run_collabzoo
    return {**params, **runner(params)}


def spawn(params: dict[str, Any], timeout: float) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", json.dumps(params)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**params, "error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {**params, "error": done.stderr[-2000:] or f"exit status {done.returncode}"}
    return json.loads(lines[-1][len("RESULT ") :])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--layers", type=int, help="fewer layers than the shape's (CPU checks)")
    parser.add_argument("--learners", default="magrpo,iac")
    parser.add_argument("--teams", default="separate,lora")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--comlrl", action="store_true", help="also run CoMLRL 1.4.3")
    parser.add_argument(
        "--generation",
        default="hf",
        help="collabzoo's samplers, comma-separated: hf (transformers), hf-compiled (a static "
        "cache, the decode step compiled: CUDA graphs), vllm (the vllm extra)",
    )
    parser.add_argument("--vllm-kwargs", help="JSON settings of vllm.LLM for --generation vllm")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("gpu_scale")),
        help="write every run here (alone: benchmarks/results/gpu_scale.json)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    runs = []
    with tempfile.TemporaryDirectory() as workdir:
        for learner in args.learners.split(","):
            for team in args.teams.split(","):
                libraries = [("collabzoo", g) for g in args.generation.split(",")]
                if args.comlrl and team == "separate":
                    libraries.append(("comlrl", "hf"))
                for library, generation in libraries:
                    params = {
                        "library": library,
                        "generation": generation,
                        "vllm_kwargs": json.loads(args.vllm_kwargs) if args.vllm_kwargs else None,
                        "learner": learner,
                        "team": team,
                        "shape": args.shape,
                        "layers": args.layers,
                        "device": args.device,
                        "prompts": args.prompts,
                        "k": args.k,
                        "prompt_tokens": args.prompt_tokens,
                        "new_tokens": args.new_tokens,
                        "steps": args.steps,
                        "workdir": str(Path(workdir) / f"{library}-{generation}-{learner}-{team}"),
                    }
                    result = spawn(params, args.timeout)
                    runs.append(result)
                    print(describe(result), flush=True)
    for line in summary(runs):
        print(line)
    if args.json:
        for run in runs:
            run.pop("workdir", None)
        results = {"runs": runs, "ratios": ratios(runs)}
        write_results(args.json, {"headline": headline(results), **results})
    return 1 if any("error" in r for r in runs) else 0


def ratios(runs: list[dict[str, Any]]) -> dict[str, float]:
    """The ratios `summary` prints, by name: "<learner> <team> <sampler>/hf",
    "<learner> collabzoo/comlrl" and "<learner> lora/separate peak"."""
    found = {
        (r["library"], r["learner"], r["team"]): r
        for r in runs
        if "error" not in r and r.get("generation", "hf") == "hf"
    }
    named: dict[str, float] = {}
    for r in runs:
        generation = r.get("generation", "hf")
        plain = found.get(("collabzoo", r["learner"], r["team"]))
        if "error" not in r and generation != "hf" and plain:
            named[f"{r['learner']} {r['team']} {generation}/hf"] = (
                r["joint_samples_per_s"] / plain["joint_samples_per_s"]
            )
    for learner in sorted({r["learner"] for r in runs}):
        ours = found.get(("collabzoo", learner, "separate"))
        theirs = found.get(("comlrl", learner, "separate"))
        lora = found.get(("collabzoo", learner, "lora"))
        if ours and theirs:
            named[f"{learner} collabzoo/comlrl"] = (
                ours["joint_samples_per_s"] / theirs["joint_samples_per_s"]
            )
        if ours and lora:
            named[f"{learner} lora/separate peak"] = (
                lora["peak_memory_gib"] / ours["peak_memory_gib"]
            )
    return named


def describe(run: dict[str, Any]) -> str:
    name = f"{run['library']:9} {run.get('generation', 'hf'):11} {run['learner']:6} {run['team']:8}"
    if "error" in run:
        return f"{name} FAILED: {run['error']}"
    text = (
        f"{name} {run['joint_samples_per_s']:8.3f} joint samples/s "
        f"{run['generated_tokens_per_s']:9.1f} tokens/s  peak {run['peak_memory_gib']:6.2f} GiB"
    )
    drift = run.get("sampler_mean_abs_log_ratio")
    return text if drift is None else f"{text}  drift {drift:.1e}"


def summary(runs: list[dict[str, Any]]) -> list[str]:
    """The ratios the targets name: collabzoo / CoMLRL joint samples/s; LoRA / separate peak;
    and each other sampler (hf-compiled, vllm) / transformers' plain generate for collabzoo's
    runs."""
    found = {
        (r["library"], r["learner"], r["team"]): r
        for r in runs
        if "error" not in r and r.get("generation", "hf") == "hf"
    }
    others = {
        (r["generation"], r["learner"], r["team"]): r
        for r in runs
        if "error" not in r and r.get("generation", "hf") != "hf"
    }
    lines = []
    for (generation, learner, team), run in others.items():
        plain = found.get(("collabzoo", learner, team))
        if plain:
            ratio = run["joint_samples_per_s"] / plain["joint_samples_per_s"]
            lines.append(
                f"{learner} {team}: {generation} / hf generation joint samples/s = {ratio:.2f}x"
            )
    for learner in ("magrpo", "iac"):
        ours, theirs = (
            found.get(("collabzoo", learner, "separate")),
            found.get(("comlrl", learner, "separate")),
        )
        if ours and theirs:
            ratio = ours["joint_samples_per_s"] / theirs["joint_samples_per_s"]
            lines.append(f"{learner}: collabzoo / CoMLRL joint samples/s = {ratio:.2f}x")
        lora, full = found.get(("collabzoo", learner, "lora")), ours
        if lora and full:
            share = lora["peak_memory_gib"] / full["peak_memory_gib"]
            lines.append(f"{learner}: LoRA team peak / two-model team peak = {share:.2f}")
    return lines


# ----- the Performance page's tables -----------------------------------------------------------
LEARNER_NAMES = {"magrpo": "MAGRPO", "iac": "IAC"}
TEAMS = {"separate": "two separate models", "lora": "one base + a LoRA adapter per agent"}
LIBRARIES = {"collabzoo": "collabzoo", "comlrl": "CoMLRL"}


def gib(value: float) -> str:
    return f"{value:.1f} GiB"


def runs_table(results: dict[str, Any]) -> str:
    """A row per run: joint samples/s, generated tokens/s, peak memory; a failed run says why
    (a file's `note` for it, else the error's first line)."""
    cells = []
    for run in results["runs"]:
        team = TEAMS[run["team"]]
        if run["team"] == "separate" and run.get("parameters"):
            team += f" ({run['parameters'] / 1e9:.2f}B parameters)"
        name = f"{LIBRARIES[run['library']]} {LEARNER_NAMES[run['learner']]}, {team}"
        if "error" in run:
            cells.append([name, run.get("note") or run["error"].splitlines()[0], "", ""])
            continue
        cells.append(
            [
                name,
                f"{run['joint_samples_per_s']:.2f}",
                thousands(run["generated_tokens_per_s"]),
                gib(run["peak_memory_gib"]),
            ]
        )
    header = ["Run", "Joint samples/s", "Generated tokens/s", "Peak GPU memory"]
    return markdown_table(header, cells, "lrrr")


def comlrl_table(results: dict[str, Any]) -> str:
    """Each learner's two-model team in both libraries and their ratio (bold: the target's)."""
    runs = {(r["library"], r["learner"]): r for r in results["runs"] if r["team"] == "separate"}
    first = results["runs"][0]
    learners = {"magrpo": "MAGRPO", "iac": "IAC (value heads on the actors)"}
    cells = []
    for learner, name in learners.items():
        ours, theirs = runs.get(("collabzoo", learner)), runs.get(("comlrl", learner))
        if not ours or not theirs:
            continue
        ratio = results["ratios"][f"{learner} collabzoo/comlrl"]
        cells.append(
            [
                name,
                f"{ours['joint_samples_per_s']:.2f}",
                f"{theirs['joint_samples_per_s']:.2f}",
                f"**{ratio:.2f}×**",
                gib(ours["peak_memory_gib"]),
                gib(theirs["peak_memory_gib"]),
            ]
        )
    header = [
        f"Learner ({first['prompts']} prompts × K = {first['k']} × {first['new_tokens']} tokens, "
        "two separate models)",
        "collabzoo joint samples/s",
        "CoMLRL joint samples/s",
        "Ratio",
        "collabzoo peak",
        "CoMLRL peak",
    ]
    return markdown_table(header, cells, "lrrrrr")


def sampler_table(results: dict[str, Any], peak: Any = significant) -> str:
    """collabzoo's runs by team and sampler; another sampler's joint samples/s in bold with its
    ratio to `hf` on the same team; a failed run reads "failed" (and where, from its `note`)."""
    cells = []
    for run in results["runs"]:
        generation = run.get("generation", "hf")
        row = [TEAMS[run["team"]], f"`{generation}`"]
        if "error" in run:
            failed = f"failed ({run['note']})" if run.get("note") else "failed"
            cells.append([*row, failed, "", "", ""])
            continue
        rate = f"{run['joint_samples_per_s']:.2f}"
        if generation != "hf":
            ratio = results["ratios"][f"{run['learner']} {run['team']} {generation}/hf"]
            rate = f"**{rate} ({ratio:.2f}×)**"
        cells.append(
            [
                *row,
                rate,
                thousands(run["generated_tokens_per_s"]),
                f"{run['warmup_seconds']:.0f} s",
                f"{peak(run['peak_memory_gib'])} GiB",
            ]
        )
    header = [
        "Team",
        "Sampler",
        "Joint samples/s",
        "Generated tokens/s",
        "Warm-up update",
        "Peak GPU memory",
    ]
    return markdown_table(header, cells, "llrrrr")


def sampler_table_two_decimals(results: dict[str, Any]) -> str:
    """`sampler_table` with every peak to two decimals, as the H200 run's table gives them."""
    return sampler_table(results, peak=lambda value: f"{value:.2f}")


def spread(values: list[float], digits: int) -> str:
    """One figure, or the range "low–high" of several."""
    low, high = min(values), max(values)
    if f"{low:.{digits}f}" == f"{high:.{digits}f}":
        return f"{low:.{digits}f}"
    return f"{low:.{digits}f}–{high:.{digits}f}"


def train_runs_table(results: dict[str, Any]) -> str:
    """Training runs of a real model on a GPU (`collabzoo train`): seconds per update and joint
    samples/s over the updates after the first, beside the same workload on the CPU."""
    cells = [
        [
            row["workload"],
            LEARNER_NAMES[row["learner"]],
            spread(row["update_seconds"], 1),
            spread(row["joint_samples_per_s"], 2),
            f"{row['cpu_update_seconds']:.1f} s per update"
            if row.get("cpu_update_seconds")
            else "not run",
        ]
        for row in results["rows"]
    ]
    header = [
        "Workload",
        "Learner",
        "Seconds per update (updates 2 on)",
        "Joint samples/s",
        "Same workload on the 2-core CPU",
    ]
    return markdown_table(header, cells, "llrrr")


def compiled_training_table(results: dict[str, Any]) -> str:
    """A short `learn_real_model.py` run with each sampler: the untrained evaluation, the first
    updates with the next evaluation (or how long it ran before it was stopped), the return."""
    cells = []
    for row in results["rows"]:
        if row.get("first_part_s") is not None:
            part = f"{row['first_part_s']:.1f} s (about {row['update_s']:.0f} s an update)"
            end = f"{row['return_end']:.2f}"
        else:
            part = f"not done after {row['stopped_after_s']:.0f} s more (stopped)"
            end = "not reached"
        cells.append(
            [
                f"`{row['sampler']}`",
                f"{row['untrained_eval_s']:.1f} s",
                part,
                f"{row['return_start']:.2f} → {end}",
            ]
        )
    header = [
        "Sampler",
        "Untrained evaluation",
        f"{results['updates']} updates and the next evaluation",
        f"Held-out return, 0 → {results['env_steps']} env steps",
    ]
    return markdown_table(header, cells, "lrrl")


def compiled_breakeven_table(results: dict[str, Any]) -> str:
    """Each sampler's untrained evaluation, first update and later updates (mean ± sd over the
    updates it names); the fastest later update in bold."""
    fastest = min(row["later_mean_s"] for row in results["rows"])
    cells = []
    for row in results["rows"]:
        later = f"{row['later_mean_s']:.2f} ± {row['later_sd_s']:.2f} s"
        if row["later_mean_s"] == fastest:
            later = f"**{later}**"
        cells.append(
            [
                f"`{row['sampler']}`",
                f"{row['untrained_eval_s']:.1f} s",
                f"{row['update_1_s']:.1f} s",
                f"{later} ({row['later_over']})",
                str(row["updates_timed"]),
            ]
        )
    header = ["Sampler", "Untrained evaluation", "Update 1", "Each later update", "Updates timed"]
    return markdown_table(header, cells, "lrrrr")


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """The summary's row: collabzoo against CoMLRL where both ran, else the LoRA team's peak
    against two models'; none for a file marked `"summary": false`."""
    if results.get("summary") is False:
        return []
    named = results["ratios"]
    runs = {(r["library"], r["learner"], r["team"]): r for r in results["runs"] if "error" not in r}
    shape = results["runs"][0]["shape"]
    shape = "Qwen" + shape[4:].upper() if shape.startswith("qwen") else shape
    if "magrpo collabzoo/comlrl" in named:
        ours, theirs = runs["collabzoo", "magrpo", "separate"], runs["comlrl", "magrpo", "separate"]
        return {
            "benchmark": f"MAGRPO against CoMLRL at the {shape} shape",
            "figure": f"{ours['joint_samples_per_s']:.2f} against "
            f"{theirs['joint_samples_per_s']:.2f} joint samples/s, two separate models",
            "ratio": round(named["magrpo collabzoo/comlrl"], 2),
            "section": "On a GPU",
        }
    if "magrpo lora/separate peak" not in named:
        return []  # neither comparison ran
    lora, full = runs["collabzoo", "magrpo", "lora"], runs["collabzoo", "magrpo", "separate"]
    return {
        "benchmark": f"A LoRA team's GPU memory at the {shape} shape",
        "figure": f"peak {gib(lora['peak_memory_gib'])} against two models' "
        f"{gib(full['peak_memory_gib'])} (MAGRPO)",
        "ratio": round(named["magrpo lora/separate peak"], 2),
        "section": "The Qwen2.5-1.5B shape and a pretrained model (H200)",
    }


if __name__ == "__main__":
    sys.exit(main())
