"""Generation tokens/s: a vLLM engine against transformers' `generate` (through `LLMPolicy`),
side by side on the same model, prompts and sampling settings, alternating for `--rounds`.

Models: `tiny` (a byte-level Qwen2 model with hidden 128 and 2 heads, random weights: vLLM's
CPU attention needs head_dim 64), `qwen2.5-0.5b` (the exact shape of Qwen2.5-0.5B,
`collabzoo.algos.policies.model_loading.shaped_causal_lm`, random weights in bf16), both saved to a
temporary folder first, and `smollm2-135m-instruct`, the real pretrained model
(`collabzoo model pull`, float32).
Both sides get the same prompt token ids and generate `--new-tokens` tokens per row: the stop
token is one of the vocabulary's ids and the rows run to the end whatever is sampled.

Runs where vLLM is installed (on a CPU machine: `.ci/vllm-tests` makes such an environment,
`.venv-vllm`):

    .venv-vllm/bin/python benchmarks/vllm_generation.py --model tiny --rows 32 --new-tokens 64

`--json` alone writes benchmarks/results/vllm_generation.json; `--append` adds the run (one
model) to the runs already there. `vllm_table` builds the Performance page's table, a row per
run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import load_results, markdown_table, results_path, write_results


def save_model(kind: str, folder: Path) -> None:
    import torch

    from collabzoo.algos.policies.model_loading import shaped_causal_lm, tiny_causal_lm

    if kind == "tiny":
        model, tokenizer = tiny_causal_lm(0, hidden_size=128, num_heads=2, num_kv_heads=1)
        tokenizer.save_pretrained(folder)
    else:
        model = shaped_causal_lm(kind, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = None  # rows run to --new-tokens on both sides
    model.save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model", default="tiny", choices=("tiny", "qwen2.5-0.5b", "smollm2-135m-instruct")
    )
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("vllm_generation")),
        help="write the run here (alone: benchmarks/results/vllm_generation.json)",
    )
    parser.add_argument("--append", action="store_true", help="add the run to the file's runs")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM
    from vllm import LLM, SamplingParams

    from collabzoo.algos.policies.llm import LLMPolicy
    from collabzoo.algos.policies.sampling import Sampling
    from collabzoo.algos.rollout.vllm_engine import cpu_engine_settings

    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "smollm2-135m-instruct":
            from collabzoo.algos.policies.pretrained import resolve_model

            folder = Path(resolve_model(args.model))
        else:
            folder = Path(tmp) / args.model
            save_model(args.model, folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype="auto")
        vocab = model.config.vocab_size

        class Ids:  # token ids in, token ids out: no tokenizer needed on either side
            pad_token_id = 0
            eos_token_id = None

            def decode(self, ids, skip_special_tokens=True):
                return ""

        policy = LLMPolicy(model, Ids())
        policy.stop_ids = []
        generator = torch.Generator().manual_seed(0)
        prompts = torch.randint(1, vocab, (args.rows, args.prompt_tokens), generator=generator)
        prompts = prompts.tolist()
        sampling = Sampling(args.new_tokens, temperature=0.6, top_p=0.6, top_k=50)
        started = time.perf_counter()
        settings = {} if torch.cuda.is_available() else cpu_engine_settings(None)
        engine = LLM(model=str(folder), dtype="auto", seed=0, skip_tokenizer_init=True, **settings)
        engine_start = time.perf_counter() - started
        print(f"vLLM engine start: {engine_start:.1f} s", flush=True)
        params = SamplingParams(
            temperature=0.6, top_p=0.6, top_k=50, max_tokens=args.new_tokens, ignore_eos=True
        )
        tokens = args.rows * args.new_tokens
        best = {"transformers": float("inf"), "vllm": float("inf")}
        for _ in range(args.rounds):
            started = time.perf_counter()
            policy.generate_ids(prompts, sampling)
            best["transformers"] = min(best["transformers"], time.perf_counter() - started)
            started = time.perf_counter()
            engine.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
            best["vllm"] = min(best["vllm"], time.perf_counter() - started)
        for name, seconds in best.items():
            print(f"{name:13} {tokens / seconds:9.1f} tokens/s ({seconds:.2f} s, best round)")
        print(f"vLLM / transformers: {best['transformers'] / best['vllm']:.2f}x")
    if args.json:
        run = {
            "model": args.model,
            "dtype": str(model.dtype),
            "rows": args.rows,
            "prompt_tokens": args.prompt_tokens,
            "new_tokens": args.new_tokens,
            "rounds": args.rounds,
            "engine_start_s": engine_start,
            "tokens_per_s": {name: tokens / seconds for name, seconds in best.items()},
            "ratio": best["transformers"] / best["vllm"],
        }
        path = Path(args.json)
        runs = load_results(path)["runs"] if args.append and path.is_file() else []
        results = {"runs": [*runs, run]}
        write_results(path, {"headline": headline(results), **results})


# ----- the Performance page's table --------------------------------------------------------------
MODELS = {
    "tiny": "byte-level, hidden 128, random weights",
    "qwen2.5-0.5b": "Qwen2.5-0.5B's shape, random weights",
    "smollm2-135m-instruct": "SmolLM2-135M-Instruct",
}


def ratio(run: dict[str, Any]) -> float:
    """vLLM over transformers, of the unrounded times (a run's own), else of its rates."""
    return run.get("ratio", run["tokens_per_s"]["vllm"] / run["tokens_per_s"]["transformers"])


def rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.1f}"


def vllm_table(results: dict[str, Any]) -> str:
    """A row per run: the model, the rows, tokens/s of each side (best round), their ratio, and
    the engine's start."""
    cells = [
        [
            f"{MODELS.get(run['model'], run['model'])}, {run['dtype'].removeprefix('torch.')}",
            f"{run['rows']} × {run['new_tokens']} after {run['prompt_tokens']}",
            rate(run["tokens_per_s"]["vllm"]),
            rate(run["tokens_per_s"]["transformers"]),
            f"{ratio(run):.2f}×",
            f"{run['engine_start_s']:.0f} s",
        ]
        for run in results["runs"]
    ]
    header = [
        "model",
        "rows × new tokens after prompt tokens",
        "vLLM tokens/s",
        "transformers tokens/s",
        "vLLM / transformers",
        "engine start",
    ]
    return markdown_table(header, cells, "llrrrr")


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """The real model's run where the file has one, else the last run."""
    runs = results["runs"]
    run = next((r for r in runs if r["model"] == "smollm2-135m-instruct"), runs[-1])
    ours, theirs = run["tokens_per_s"]["vllm"], run["tokens_per_s"]["transformers"]
    model = MODELS.get(run["model"], run["model"])
    return {
        "benchmark": "vLLM's CPU engine against transformers",
        "figure": f"{rate(ours)} tokens/s against {rate(theirs)} ({model}, "
        f"{run['rows']} rows), after {run['engine_start_s']:.0f} s to start the engine",
        "ratio": round(ratio(run), 2),
        "section": "Generation",
    }


if __name__ == "__main__":
    main()
