"""Ctrl-C or SIGTERM keeps the finished episodes in the results file, and --resume plays the
rest: the finished run equals one that was never interrupted. A crash while the file is being
rewritten leaves the previous file whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collabzoo.bench import (
    BenchRun,
    Interrupted,
    PolicyTeam,
    find_results,
    parse_team,
    read_results,
    run_bench,
)
from collabzoo.envs.scripted_teams import strbuild_oracle, tinycoop_oracle
from tests.optional import require_module


def comparable(document: dict) -> list[dict]:
    """The episodes without their wall-clock times."""
    return [{k: v for k, v in e.items() if k != "time_s"} for e in document["episodes"]]


class InterruptAt:
    """The StrBuild oracle, until its `at`-th call: then a Ctrl-C (KeyboardInterrupt)."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0

    def __call__(self, observation: str) -> str:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return strbuild_oracle(observation)


def test_interrupt_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    episodes, calls_per_episode = 5, 2 * 4  # 2 builders x 4 turns
    whole = run_bench(
        BenchRun("strbuild", PolicyTeam("oracle", strbuild_oracle), episodes=episodes),
        tmp_path / "whole",
        progress=False,
    ).document

    stop = InterruptAt(3 * calls_per_episode + 5)  # in the middle of the 4th episode
    run = BenchRun("strbuild", PolicyTeam("oracle", stop), episodes=episodes)
    with pytest.raises(Interrupted) as caught:
        run_bench(run, tmp_path / "cut", progress=False)
    assert (caught.value.done, caught.value.planned) == (3, episodes)
    kept = read_results(caught.value.path)
    assert kept["status"] == "interrupted"
    assert [e["index"] for e in kept["episodes"]] == [0, 1, 2]
    assert comparable(kept)[:3] == comparable(whole)[:3]

    stop.at = -1  # no more interrupts
    resumed = run_bench(run, tmp_path / "cut", resume=True, progress=False).document
    assert resumed["status"] == "complete" and len(resumed["resumed"]) == 1
    assert comparable(resumed) == comparable(whole)
    # the two missing episodes were played, nothing else: 2 x 8 calls after the 3 x 8 + 5
    assert stop.calls == 3 * calls_per_episode + 5 + 2 * calls_per_episode


def test_resume_can_extend_a_finished_run(tmp_path: Path) -> None:
    team = parse_team("scripted:oracle")
    run_bench(BenchRun("tinycoop", team, episodes=2, split="train"), tmp_path, progress=False)
    longer = run_bench(
        BenchRun("tinycoop", team, episodes=5, split="train"), tmp_path, resume=True, progress=False
    )
    assert [e["index"] for e in longer.document["episodes"]] == [0, 1, 2, 3, 4]
    assert longer.summary["episodes"] == longer.summary["episodes_planned"] == 5


def default_sigint() -> None:
    """A shell without job control starts a background job with SIGINT ignored, and its
    children inherit that: a suite run as `pytest &` would see the CLI ignore its Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_on_the_command_line_keeps_finished_episodes(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """A real SIGINT (Ctrl-C) or SIGTERM (a job scheduler) to a real `collabzoo bench` process
    talking to a real endpoint, which answers 6 requests (3 episodes of 2 agents) and then
    holds every further request."""
    require_module("openai", "bench")
    from tests.chat_server import ChatServer

    with ChatServer(tinycoop_oracle, answer_limit=6) as server:
        args = [
            sys.executable,
            "-m",
            "collabzoo.cli",
            "bench",
            "--env",
            "tinycoop",
            "--split",
            "train",
            "--episodes",
            "8",
            "--team",
            server.team,
            "--concurrency",
            "1",
            "--output",
            str(tmp_path),
            "--no-progress",
        ]
        process = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
            preexec_fn=default_sigint,
        )
        path = None
        deadline = time.monotonic() + 300  # hang guards only: a loaded machine is slow
        while time.monotonic() < deadline:  # wait for the 3 episodes to be on disk
            found = list(tmp_path.glob("*.json"))
            if found:
                path = found[0]
                try:
                    if len(json.loads(path.read_text())["episodes"]) == 3:
                        break
                except (ValueError, KeyError):
                    pass
            if process.poll() is not None:
                break
            time.sleep(0.1)
        process.send_signal(stop)
        _, err = process.communicate(timeout=300)
        assert process.returncode == 130, err
        assert "interrupted: 3 of 8 episodes kept in" in err and "--resume" in err
        kept = read_results(path)
        assert kept["status"] == "interrupted" and len(kept["episodes"]) == 3

        server.release()  # the endpoint answers again: finish the run
        done = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    finished = read_results(path)
    assert finished["status"] == "complete"
    assert [e["index"] for e in finished["episodes"]] == list(range(8))
    assert comparable(finished)[:3] == comparable(kept)
    assert finished["summary"]["Win"]["mean"] == 100.0


CRASH_WHILE_WRITING = """
import json, os, signal, sys
from pathlib import Path
from collabzoo.bench.results import write_json_atomic

class KillWhenWritten:
    def __str__(self):  # json.dump reaches this after writing everything before it
        os.kill(os.getpid(), signal.SIGKILL)

path = Path(sys.argv[1])
document = json.loads(path.read_text())
document["episodes"] = document["episodes"] * 200 + [KillWhenWritten()]
write_json_atomic(path, document)
"""


def test_a_crash_while_the_file_is_rewritten_leaves_the_old_file_whole(tmp_path: Path) -> None:
    """A process killed (SIGKILL: no handler, no cleanup) half-way through rewriting a results
    file: the file is the old one byte for byte, resume finishes it, and the half-written
    temporary file is not taken for a run."""
    team = parse_team("scripted:oracle")
    run = BenchRun("strbuild", team, episodes=2)
    first = run_bench(run, tmp_path, progress=False)
    before = first.path.read_bytes()
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH_WHILE_WRITING, str(first.path)],
        capture_output=True,
        timeout=120,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    leftovers = [p for p in tmp_path.iterdir() if p != first.path]
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > len(before)  # half written
    assert first.path.read_bytes() == before
    documents, _ = find_results([tmp_path])
    assert [d["summary"]["episodes"] for d in documents] == [2]
    longer = BenchRun("strbuild", team, episodes=3)
    resumed = run_bench(longer, tmp_path, resume=True, progress=False).document
    assert [e["index"] for e in resumed["episodes"]] == [0, 1, 2]
    assert comparable(resumed)[:2] == comparable(json.loads(before))
