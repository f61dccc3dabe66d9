"""`benchmarks/gpu_scale.py` in its CPU mode: one update at the real Qwen2.5-0.5B shape.

The GPU figures need a GPU; this proves the real-shape path runs end to end anywhere: the
written config (494M parameters, the 151,936-token vocabulary), the word-level tokenizer over
that vocabulary, a LoRA team's rollout, scoring and optimizer step. The workload is cut to one
prompt, K=2 and 4 new tokens so it fits the CI machine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

ROOT = Path(__file__).resolve().parent.parent
QWEN25_05B_PARAMETERS = 494_032_768  # Qwen2.5-0.5B's published parameter count


@pytest.mark.slow
def test_cpu_mode_runs_an_update_at_the_real_0_5b_shape(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_scale

    out = tmp_path / "runs.json"
    status = gpu_scale.main(
        [
            "--device",
            "cpu",
            "--shape",
            "qwen2.5-0.5b",
            "--steps",
            "1",
            "--learners",
            "magrpo",
            "--teams",
            "lora",
            "--prompts",
            "1",
            "--k",
            "2",
            "--prompt-tokens",
            "8",
            "--new-tokens",
            "4",
            "--json",
            str(out),
        ]
    )
    (run,) = json.loads(out.read_text())
    assert status == 0, run.get("error")
    assert run["parameters"] == QWEN25_05B_PARAMETERS
    assert run["updates"] == 2  # the warm-up and the timed one
    assert run["weights_changed"]  # the adapter was really stepped
    assert run["joint_samples_per_s"] > 0 and run["peak_memory_gib"] > 0.9  # bf16 weights
    assert sys.modules["gpu_scale"].even_share("t2 t3 t4 t5") == 0.5
