"""`benchmarks/gpu_scale.py --generation vllm` in its CPU mode, on a real vLLM engine: the path
a user runs on their own GPU, end to end at Qwen2.5-0.5B's width and vocabulary in bf16 (one
layer, one prompt of 4 tokens, K=2, 2 new tokens, so it fits the CI machine), for two separate
models (the weights reloaded into each engine every step) and a LoRA team (one engine, its
adapters re-registered every step)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.optional import require_module

torch = require_module("torch", "train")
require_module("vllm", "vllm")

ROOT = Path(__file__).resolve().parent.parent.parent


def test_gpu_scale_trains_with_vllm_generation(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_scale

    out = tmp_path / "runs.json"
    # one process per run, as on a GPU; the engines' KV cache is kept small for this machine
    status = gpu_scale.main(
        [
            *("--device", "cpu", "--shape", "qwen2.5-0.5b", "--layers", "1"),
            *("--steps", "1", "--learners", "magrpo", "--teams", "separate,lora"),
            *("--prompts", "1", "--k", "2", "--prompt-tokens", "4", "--new-tokens", "2"),
            *(
                "--generation",
                "vllm",
                "--vllm-kwargs",
                json.dumps({"kv_cache_memory_bytes": 2**28}),
            ),
            *("--json", str(out)),
        ]
    )
    runs = json.loads(out.read_text())["runs"]
    assert status == 0, [r.get("error") for r in runs]
    assert [(r["team"], r["generation"]) for r in runs] == [
        ("separate", "vllm"),
        ("lora", "vllm"),
    ]
    for run in runs:
        assert run["updates"] == 2 and run["weights_changed"]
        # bf16 engine against the trainer's bf16 autocast: a real but small drift, reported
        assert 0.0 <= run["sampler_mean_abs_log_ratio"] < 0.1
