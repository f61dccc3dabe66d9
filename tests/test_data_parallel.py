"""Data-parallel training: `torchrun --nproc-per-node 2` (gloo, on this machine's loopback)
ends with the parameters of one process that rolls out the same two shards and learns from
both, after 3 updates on TinyCoop: MAGRPO with two separate models and with a LoRA team, and
IPPO (critics, advantages z-scored over both ranks, two epochs) with separate models. The
ranks' logs and checkpoints come from rank 0 alone, and their checkpoint resumes in one
process.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "data_parallel_run.py"
TOLERANCE = {"magrpo": 1e-4, "ippo": 5e-4}
"""float32 weights after 3 updates at learning rate 1e-2. The gradients are the same sums in
another order (each rank's half, then an all-reduce), about 1e-7 apart; AdamW divides each entry
by its own running scale, so an entry whose gradient is near zero can turn that into far more
movement. Measured: MAGRPO's runs end equal; IPPO's critic values each distinct state once, so
the ranks and the one process batch different sets of states, and one of the 32 entries of a
critic's head ended 1.2e-4 apart (1.3e-5 before, when every row was valued). 5e-4 is 5% of one
step; the sharded and the unsharded runs end 0.05-0.11 apart, more than 100x either bound."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.parametrize(
    ("learner", "kind"), [("magrpo", "separate"), ("magrpo", "lora"), ("ippo", "separate")]
)
@pytest.mark.slow(seconds=50)
def test_two_gloo_ranks_equal_one_process_with_the_same_shards(
    learner: str, kind: str, tmp_path
) -> None:
    common = [str(SCRIPT), "--team", kind, "--learner", learner]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    torchrun += ["--master-addr", "127.0.0.1", "--master-port", str(free_port())]
    run([*torchrun, *common, "--out", "ranks.pt", "--run-dir", "ranks"], tmp_path)
    run([sys.executable, *common, "--shards", "2", "--out", "one.pt", "--run-dir", "one"], tmp_path)
    run([sys.executable, *common, "--out", "plain.pt", "--run-dir", "plain"], tmp_path)

    ranks, one, plain = (
        torch.load(tmp_path / f, weights_only=False) for f in ("ranks.pt", "one.pt", "plain.pt")
    )
    assert ranks["world"] == 2 and one["world"] == 1
    assert ranks["state"].keys() == one["state"].keys()
    moved = 0.0
    for name, weights in ranks["state"].items():
        for key, value in weights.items():
            expected = one["state"][name][key]
            torch.testing.assert_close(value, expected, rtol=0, atol=TOLERANCE[learner])
            moved = max(moved, (value - plain["state"][name][key]).abs().max().item())
    assert moved > 100 * TOLERANCE[learner], "sharded sampling differs from unsharded: a real check"
    # rank 0 alone logged: one line per update, with both ranks' episodes counted
    lines = (tmp_path / "ranks" / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["update"] for r in records] == [1, 2, 3]
    assert records[-1]["env_steps"] == 3 * 8 * 8  # updates x episodes x K, both ranks' shares
    assert records[-1]["mean_return"] == pytest.approx(one["last"]["mean_return"])
    # the two ranks' checkpoint resumes in one process, which goes on from update 3
    resume = ["--shards", "2", "--updates", "4", "--resume", "--out", "resumed.pt"]
    run([sys.executable, *common, *resume, "--run-dir", "ranks"], tmp_path)
    resumed = torch.load(tmp_path / "resumed.pt", weights_only=False)
    assert resumed["update"] == 4 and resumed["world"] == 1
    lines = (tmp_path / "ranks" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in lines] == [1, 2, 3, 4]
