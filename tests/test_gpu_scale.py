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


@pytest.mark.slow(seconds=100)
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
            "4",
            "--new-tokens",
            "2",
            "--json",
            str(out),
        ]
    )
    results = json.loads(out.read_text())
    assert set(results["provenance"]) == {"commit", "date", "machine", "command"}
    (run,) = results["runs"]
    assert status == 0, run.get("error")
    assert run["parameters"] == QWEN25_05B_PARAMETERS
    assert run["updates"] == 2  # the warm-up and the timed one
    assert run["weights_changed"]  # the adapter was really stepped
    assert run["joint_samples_per_s"] > 0 and run["peak_memory_gib"] > 0.9  # bf16 weights
    assert sys.modules["gpu_scale"].even_share("t2 t3 t4 t5") == 0.5


def test_decode_rates_run_every_row_to_full_length_and_state_the_bound(monkeypatch) -> None:
    """`benchmarks/gpu_decode.py`'s decode table on the CPU: one layer of the 0.5B shape. No
    row may stop early (the tokens/s would flatter), and the bound is rows x bandwidth /
    weight bytes."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_decode

    args = gpu_decode.argparse.Namespace(
        device="cpu",
        shape="qwen2.5-0.5b",
        layers=1,
        batches="1,3",
        prompt_tokens=6,
        new_tokens=5,
        rounds=1,
    )
    rows = gpu_decode.decode_rates(args)
    assert [r["batch"] for r in rows] == [1, 3]
    assert [r["tokens"] for r in rows] == [5, 15]
    for row in rows:
        expected = row["batch"] * row["bandwidth_bytes_per_s"] / row["weight_bytes"]
        assert row["bound_tokens_per_s"] == pytest.approx(expected)
        assert row["share_of_bound"] == pytest.approx(row["tokens_per_s"] / expected)
    assert rows[0]["weight_bytes"] > 2 * 151_936 * 896  # the bf16 vocabulary alone
