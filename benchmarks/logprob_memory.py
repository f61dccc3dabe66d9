"""Memory and time of one scoring pass (forward + backward), method by method, side by side.

The pass every learner runs: 16 completions of 256 tokens after 256-token prompts, scored
under the reference sampling settings (temperature 0.6, top-p 0.6, top-k 50), then backward.
The model has Qwen2.5-0.5B's width and vocabulary (151,936 tokens) in bf16 with `--layers`
of its 24 layers (default 2), so what is measured is the scoring's own cost, not the body's
activations (`--hidden` makes a narrower Qwen2 at the same vocabulary, as
tests/test_scoring_memory.py does). Two prompt layouts: `shared` (16 / `--samples` prompts x
`--samples` samples each, 4 x 4 by default, as a rollout-tree node gives) and `distinct`
(16 prompts, the actor-critic layout).

Methods, each in its own process at each of `--threads`:
- `body`: the transformer's forward and backward alone (a loss on its hidden states, no head):
  the floor that any scoring without checkpointing pays on this model; `body+gc` the same
  with gradient checkpointing, the floor with it;
- `forward`: collabzoo before lean scoring, and still its way for a model whose logits are not
  head(body(x)) (forced here by a policy whose `body_and_head` answers None): logits at every
  position through `forward`, gathered, then the float32 sampling log-softmax (about 21 GiB:
  not in the default methods);
- `lean`: the transformer, then the LM head at completion tokens only, in checkpointed chunks;
- `lean+gc`: the same with gradient checkpointing (non-reentrant) on the transformer's layers;
- `trl`: TRL's way (`logits_to_keep`, logits / T, `trl.trainer.utils.selective_log_softmax`),
  which scores at temperature 1 after scaling and ignores top-k / top-p: a memory reference,
  not the same distribution (when TRL is installed).

"Above the model" is the peak during `--passes` passes minus the memory after a warm-up pass
that made the gradient buffers: on CUDA from `torch.cuda.max_memory_allocated`, on the CPU the
peak resident set (the kernel's `VmHWM`, reset through /proc/self/clear_refs, and a thread
sampling /proc/self/statm where that reset is refused), in the process's own allocator
settings: what a training run holds, freed blocks the allocator keeps included. The tied
embedding / LM head is frozen unless `--train-embeddings`: its [V, hidden] weight gradient
(0.25 GiB in bf16, plus autograd's sum of its uses) is a cost of the model's size, the same
for every method. It is reported in GiB and as a multiple of one bf16 [16, 256, V] logits
tensor (1.16 GiB). Each method also reports the sum of its log-probabilities, so the table
shows the methods agree.

    python benchmarks/logprob_memory.py [--device cuda] [--threads 1,2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, write_results

ROWS, PROMPT_TOKENS, COMPLETION_TOKENS, K = 16, 256, 256, 4
VOCAB = 151_936
"""Qwen2.5's vocabulary (`model_loading.QWEN25_VOCAB`)."""
LOGITS_TENSOR = ROWS * COMPLETION_TOKENS * VOCAB * 2
"""Bytes of one bf16 [16, 256, V] logits tensor: the unit of the figures."""
METHODS = ("body", "body+gc", "forward", "lean", "lean+gc", "trl")
DEFAULT_METHODS = ("body", "body+gc", "lean", "lean+gc", "trl")
LAYOUTS = ("shared", "distinct")
GIB = 2**30
LABELS = {
    "body": "the transformer alone over the 16 whole rows, no head",
    "body+gc": "the same with gradient checkpointing",
    "forward": "through `forward` (collabzoo before lean scoring)",
    "lean": "lean: head at completion tokens, chunked",
    "lean+gc": "lean + gradient checkpointing",
    "trl": "TRL's `selective_log_softmax` (temperature only, no top-k/top-p)",
}


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


class PeakRss:
    """The resident set's peak above `base` from start to stop: the kernel's high-water mark
    where it can be reset, and a thread reading /proc/self/statm every millisecond (what
    stands where it cannot). Above `cap` bytes the process stops at once with exit status 3,
    its last line saying so: a bound broken by gigabytes ends there, not in the machine's
    out-of-memory killer."""

    def __init__(self, base: int, cap: int | None = None) -> None:
        self.base, self.cap, self.sampled = base, cap, base
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.exact = rss_peak_reset()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        with open("/proc/self/statm") as statm:
            while not self.done.wait(0.001):
                statm.seek(0)
                now = int(statm.read().split()[1]) * self.page
                self.sampled = max(self.sampled, now)
                if self.cap is not None and now - self.base > self.cap:
                    print(json.dumps({"capped": now - self.base}), flush=True)
                    os._exit(3)

    def stop(self) -> int:
        """Bytes above the base at the peak."""
        self.done.set()
        self.thread.join()
        peak = max(self.sampled, rss("VmHWM")) if self.exact else self.sampled
        return max(0, peak - self.base)


def narrow_qwen2(hidden: int, layers: int, dtype: Any) -> Any:
    """A random Qwen2 of width `hidden` (4 heads, 2 key/value heads) at Qwen2.5's vocabulary,
    its embedding tied to the head as in Qwen2.5-0.5B: the head's cost at a real vocabulary
    with a body that costs almost nothing."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=PROMPT_TOKENS + COMPLETION_TOKENS,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151645,
        pad_token_id=151643,
    )
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        torch.manual_seed(0)
        return Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)


def measure(args: argparse.Namespace, method: str, layout: str, threads: int) -> dict[str, Any]:
    """One method, one layout, in this process: a warm-up pass, then `args.passes` passes."""
    import torch

    from collabzoo.algos import LLMPolicy, Sampling
    from collabzoo.algos.policies.model_loading import QWEN25_VOCAB, shaped_causal_lm

    assert QWEN25_VOCAB == VOCAB
    torch.set_num_threads(threads)
    device, dtype = args.device, getattr(torch, args.dtype)
    torch.manual_seed(0)
    if args.hidden:
        model = narrow_qwen2(args.hidden, args.layers, dtype).to(device)
    else:
        model = shaped_causal_lm("qwen2.5-0.5b", num_layers=args.layers, dtype=dtype, device=device)
    model.get_input_embeddings().weight.requires_grad_(args.train_embeddings)
    sampling = Sampling(COMPLETION_TOKENS, temperature=0.6, top_p=0.6, top_k=50)
    generator = torch.Generator().manual_seed(1)
    distinct = ROWS if layout == "distinct" else ROWS // args.samples
    prompt_ids = torch.randint(0, VOCAB, (distinct, PROMPT_TOKENS), generator=generator)
    prompts = [prompt_ids[row % distinct].tolist() for row in range(ROWS)]
    prompts.sort()  # the K samples of a prompt side by side, as a rollout gives them
    completions = torch.randint(0, VOCAB, (ROWS, COMPLETION_TOKENS), generator=generator)
    completions = completions.tolist()

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

    passes = []
    with policy.mode(train=True):
        run(2)  # warm-up: gradient buffers and kernels
        cuda = device.startswith("cuda")
        if cuda:
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
        else:
            base = rss("VmRSS")
        cap = None if cuda or not args.cap_gib else int(args.cap_gib * GIB)
        for _ in range(args.passes):
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            else:
                tracker = PeakRss(base, cap)
            started = time.perf_counter()
            total = run(ROWS)
            if cuda:
                torch.cuda.synchronize()
                above = max(0, torch.cuda.max_memory_allocated() - base)
            else:
                above = tracker.stop()
            passes.append(
                {"above_bytes": above, "seconds": time.perf_counter() - started, "sum": total}
            )
    above = max(p["above_bytes"] for p in passes)
    return {
        "method": method,
        "layout": layout,
        "threads": threads,
        "above_model_gib": above / GIB,
        "x_logits_tensor": above / LOGITS_TENSOR,
        "passes": passes,
        "log_prob_sum": passes[-1]["sum"],
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


def child_command(args: argparse.Namespace, method: str, layout: str, threads: int) -> list[str]:
    """The command that measures one method and layout at `threads` in a process of its own."""
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        f"{method}/{layout}",
        "--threads",
        str(threads),
        "--device",
        args.device,
        "--layers",
        str(args.layers),
        "--hidden",
        str(args.hidden),
        "--dtype",
        args.dtype,
        "--samples",
        str(args.samples),
        "--passes",
        str(args.passes),
        "--cap-gib",
        str(args.cap_gib),
        *(["--train-embeddings"] if args.train_embeddings else []),
    ]


def cell(rows: list[dict[str, Any]], method: str, layout: str, threads: int) -> str:
    found = [
        r for r in rows if (r["method"], r["layout"], r["threads"]) == (method, layout, threads)
    ]
    if not found:
        return "-"
    row = found[0]
    return f"{row['above_model_gib']:.2f} GiB ({row['x_logits_tensor']:.2f}×)"


def memory_table(results: dict[str, Any]) -> str:
    """Each method at each thread count: the higher pass's peak above the model, both layouts."""
    rows, setup = results["rows"], results["setup"]
    samples = setup["samples"]
    header = [
        "method",
        "torch threads",
        f"{ROWS // samples} prompts × K={samples}",
        f"{ROWS} distinct prompts",
    ]
    cells = []
    for method in [m for m in METHODS if any(r["method"] == m for r in rows)]:
        for threads in setup["threads"]:
            cells.append(
                [
                    LABELS[method],
                    str(threads),
                    *(cell(rows, method, layout, threads) for layout in LAYOUTS),
                ]
            )
    return markdown_table(header, cells, "lrrr")


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """The summary's row: lean scoring with checkpointing against TRL's, on shared prompts at
    the first thread count ([] when either is missing)."""
    rows, threads = results["rows"], results["setup"]["threads"][0]
    found = {(r["method"], r["layout"]): r for r in rows if r["threads"] == threads}
    lean, trl = found.get(("lean+gc", "shared")), found.get(("trl", "shared"))
    distinct = found.get(("lean+gc", "distinct"))
    if lean is None or trl is None or distinct is None:
        return []
    return {
        "benchmark": "Scoring memory",
        "figure": (
            f"one scoring pass at Qwen2.5's vocabulary: lean + checkpointing "
            f"{lean['x_logits_tensor']:.2f}× (shared prompts) and "
            f"{distinct['x_logits_tensor']:.2f}× (distinct) one bf16 [16, 256, V] logits "
            f"tensor, TRL's {trl['x_logits_tensor']:.2f}×"
        ),
        "ratio": round(trl["above_model_gib"] / lean["above_model_gib"], 1),
        "section": "Scoring memory",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=0, help="0: Qwen2.5-0.5B's width")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--samples", type=int, default=K, help="K of the shared layout")
    parser.add_argument("--threads", default="1", help="torch threads, comma-separated")
    parser.add_argument("--passes", type=int, default=2, help="measured passes per process")
    parser.add_argument("--cap-gib", type=float, default=0.0, help="stop a process above this")
    parser.add_argument("--train-embeddings", action="store_true")
    parser.add_argument("--json", default=str(results_path("logprob_memory")))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # METHOD/LAYOUT: run in this process
    args = parser.parse_args(argv)
    if ROWS % args.samples:
        parser.error(f"--samples must divide the {ROWS} rows, got {args.samples}")
    if args.one:
        method, layout = args.one.split("/")
        print(json.dumps(measure(args, method, layout, int(args.threads))))
        return 0
    try:
        import trl  # noqa: F401

        have_trl = True
    except ImportError:
        have_trl = False
    threads = [int(t) for t in args.threads.split(",")]
    rows = []
    for layout in args.layouts.split(","):
        for method in args.methods.split(","):
            if method == "trl" and not have_trl:
                print("trl: not installed, skipped", file=sys.stderr)
                continue
            for count in threads:
                command = child_command(args, method, layout, count)
                env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
                done = subprocess.run(command, capture_output=True, text=True, env=env)
                if done.returncode != 0:
                    print(f"{method}/{layout} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(
                    f"{layout:9} {method:8} {count} threads {row['above_model_gib']:7.2f} GiB "
                    f"{row['x_logits_tensor']:6.2f}x logits  "
                    + ", ".join(f"{p['seconds']:.0f}" for p in row["passes"])
                    + f" s  sum log pi {row['log_prob_sum']:.6g}",
                    flush=True,
                )
    setup = {
        "rows": ROWS,
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "vocab": VOCAB,
        "samples": args.samples,
        "layers": args.layers,
        "hidden": args.hidden or 896,
        "dtype": args.dtype,
        "device": args.device,
        "threads": threads,
        "passes": args.passes,
        "logits_tensor_bytes": LOGITS_TENSOR,
    }
    command = None if argv is None else [__file__, *argv]
    results = {"setup": setup, "rows": rows}
    write_results(args.json, {"headline": headline(results), **results}, argv=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
