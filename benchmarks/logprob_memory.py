"""Memory and time of one scoring pass (forward + backward), method by method, side by side.

The pass every learner runs: 16 completions of 256 tokens after 256-token prompts, scored
under the reference sampling settings (temperature 0.6, top-p 0.6, top-k 50), then backward.
The model has Qwen2.5-0.5B's width and vocabulary (151,936 tokens) in bf16 with `--layers`
of its 24 layers (default 2), so what is measured is the scoring's own cost, not the body's
activations. Two prompt layouts: `shared` (4 prompts x K=4 samples, as a rollout-tree node
gives) and `distinct` (16 prompts).

Methods, each in its own process:
- `body`: the transformer's forward and backward alone (a loss on its hidden states, no head):
  the floor that any scoring without checkpointing pays on this model; `body+gc` the same
  with gradient checkpointing, the floor with it;
- `forward`: collabzoo before lean scoring, and still its way for a model whose logits are not
  head(body(x)) (forced here by a policy whose `body_and_head` answers None): logits at every
  position through `forward`, gathered, then the float32 sampling log-softmax;
- `lean`: the transformer, then the LM head at completion tokens only, in checkpointed chunks;
- `lean+gc`: the same with gradient checkpointing (non-reentrant) on the transformer's layers;
- `trl`: TRL's way (`logits_to_keep`, logits / T, `trl.trainer.utils.selective_log_softmax`),
  which scores at temperature 1 after scaling and ignores top-k / top-p: a memory reference,
  not the same distribution (when TRL is installed).

"Above the model" is the peak during the pass minus the memory after a warm-up pass that made
the gradient buffers: on CUDA from `torch.cuda.max_memory_allocated`, on the CPU the peak
resident set (`VmHWM`, reset through /proc/self/clear_refs), with glibc's mmap threshold fixed
at 64 KiB (`MALLOC_MMAP_THRESHOLD_`): its default threshold grows after each large free, and the
heap then keeps freed tensors resident, so the RSS would show the allocator's history rather
than the live tensors. The tied embedding / LM head is frozen unless `--train-embeddings`: its
[V, hidden] weight gradient (0.25 GiB in bf16, plus autograd's sum of its uses) is a cost of
the model's size, the same for every method. It is reported in GiB and as a
multiple of one bf16 [16, 256, V] logits tensor (1.16 GiB). Each method also reports the sum of
its log-probabilities, so the table shows the methods agree.

    python benchmarks/logprob_memory.py [--device cuda] [--layers 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROWS, PROMPT_TOKENS, COMPLETION_TOKENS, K = 16, 256, 256, 4
METHODS = ("body", "body+gc", "forward", "lean", "lean+gc", "trl")
LAYOUTS = ("shared", "distinct")
GIB = 2**30


def rss_peak_reset() -> bool:
    """Reset the peak resident set (Linux); False where that is not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss(field: str) -> int:
    """VmRSS or VmHWM of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure(
    method: str, layout: str, device: str, layers: int, train_embeddings: bool
) -> dict[str, float]:
    """One method, one layout, in this process."""
    import torch

    from collabzoo.algos import LLMPolicy, Sampling
    from collabzoo.algos.policies.model_loading import QWEN25_VOCAB, shaped_causal_lm

    torch.manual_seed(0)
    model = shaped_causal_lm("qwen2.5-0.5b", num_layers=layers, dtype=torch.bfloat16, device=device)
    model.get_input_embeddings().weight.requires_grad_(train_embeddings)
    sampling = Sampling(COMPLETION_TOKENS, temperature=0.6, top_p=0.6, top_k=50)
    generator = torch.Generator().manual_seed(1)
    distinct = ROWS if layout == "distinct" else ROWS // K
    prompt_ids = torch.randint(0, QWEN25_VOCAB, (distinct, PROMPT_TOKENS), generator=generator)
    prompts = [prompt_ids[row % distinct].tolist() for row in range(ROWS)]
    prompts.sort()  # the K samples of a prompt side by side, as a rollout gives them
    completions = torch.randint(
        0, QWEN25_VOCAB, (ROWS, COMPLETION_TOKENS), generator=generator
    ).tolist()

    class NoTokenizer:  # the policy needs only pad / eos ids to score token ids
        pad_token_id = model.config.pad_token_id
        eos_token_id = model.config.eos_token_id

    policy = LLMPolicy(model, NoTokenizer())
    if method == "forward":
        policy.body_and_head = lambda: None  # the fallback path, as an unsplittable model takes
    if method.endswith("+gc"):
        policy.enable_gradient_checkpointing()

    def run(count: int) -> float:
        if method.startswith("body"):
            body = policy.body_and_head()[0]
            ids = torch.tensor([p + c for p, c in zip(prompts, completions, strict=True)])
            with policy.compute():
                states = body(input_ids=ids[:count].to(device), use_cache=False)
            total = states.last_hidden_state.float().mean()
            total.backward()
            return float(total.detach())
        if method == "trl":
            return trl_pass(model, prompts[:count], completions[:count], sampling, device)
        scored = policy.score(prompts[:count], completions[:count], sampling=sampling)
        total = scored.log_probs.sum()
        total.backward()
        return float(total.detach())

    with policy.mode(train=True):
        run(2)  # warm-up: gradient buffers and kernels
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        else:
            exact = rss_peak_reset()
            base = rss("VmRSS")
        started = time.perf_counter()
        total = run(ROWS)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
        else:
            peak = rss("VmHWM")  # since the reset; without one, since the process began
        seconds = time.perf_counter() - started
    logits_tensor = ROWS * COMPLETION_TOKENS * QWEN25_VOCAB * 2
    above = max(0, peak - base)
    return {
        "method": method,
        "layout": layout,
        "above_model_gib": above / GIB,
        "x_logits_tensor": above / logits_tensor,
        "seconds": seconds,
        "log_prob_sum": total,
        "peak_since_warm_up": device.startswith("cuda") or exact,
    }


def trl_pass(model, prompts, completions, sampling, device: str) -> float:
    """TRL GRPO's scoring: one row per sample, logits of the completion positions only
    (`logits_to_keep`), divided by the temperature, `selective_log_softmax`."""
    import torch
    from trl.trainer.utils import selective_log_softmax

    ids = torch.tensor([p + c for p, c in zip(prompts, completions, strict=True)], device=device)
    width = len(completions[0])
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        logits = model(input_ids=ids, logits_to_keep=width + 1).logits[:, :-1]
    logits = logits / sampling.temperature
    log_probs = selective_log_softmax(logits, ids[:, -width:])
    total = log_probs.sum()
    total.backward()
    return float(total.detach())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--train-embeddings", action="store_true")
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # METHOD/LAYOUT: run in this process
    args = parser.parse_args()
    if args.one:
        method, layout = args.one.split("/")
        measured = measure(method, layout, args.device, args.layers, args.train_embeddings)
        print(json.dumps(measured))
        return
    try:
        import trl  # noqa: F401

        have_trl = True
    except ImportError:
        have_trl = False
    rows = []
    for layout in args.layouts.split(","):
        for method in args.methods.split(","):
            if method == "trl" and not have_trl:
                print("trl: not installed, skipped", file=sys.stderr)
                continue
            command = [
                sys.executable,
                __file__,
                "--one",
                f"{method}/{layout}",
                "--device",
                args.device,
                "--layers",
                str(args.layers),
                *(["--train-embeddings"] if args.train_embeddings else []),
            ]
            env = dict(os.environ, TOKENIZERS_PARALLELISM="false", MALLOC_MMAP_THRESHOLD_="65536")
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                print(f"{method}/{layout} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"{layout:9} {method:8} {row['above_model_gib']:7.2f} GiB "
                f"{row['x_logits_tensor']:6.2f}x logits  {row['seconds']:7.1f} s  "
                f"sum log pi {row['log_prob_sum']:.6g}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
