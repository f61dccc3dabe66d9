"""The bench's scripted and endpoint teams work where torch is not installed (here: where
importing torch, transformers or peft fails), an hf: team says what to install, and the
README's offline leaderboard round needs nothing beyond the base install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from collabzoo.envs.scripted_teams import strbuild_oracle, tinycoop_oracle
from tests.optional import require_module

TRAIN_EXTRA = ("torch", "transformers", "peft", "accelerate")
BENCH_EXTRA = ("openai", "matplotlib", "tqdm")
NOT_INSTALLED = """
import sys

missing = set(sys.argv[1].split(","))

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in missing:
            raise ImportError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NotInstalled())
from collabzoo.cli import main
code = main(sys.argv[2:])
assert not missing & set(sys.modules)
sys.exit(code)
"""


def either_game(prompt: str) -> str:
    """The endpoint's model: the TinyCoop oracle, or the StrBuild one where that cannot read it."""
    try:
        return tinycoop_oracle(prompt)
    except ValueError:
        return strbuild_oracle(prompt)


def run_without(missing: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", NOT_INSTALLED, ",".join(missing), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_without_torch(*args: str) -> subprocess.CompletedProcess[str]:
    return run_without(TRAIN_EXTRA, *args)


def test_scripted_and_endpoint_teams_need_no_torch(tmp_path: Path) -> None:
    require_module("openai", "bench")
    from tests.chat_server import ChatServer

    with ChatServer(either_game) as server:
        done = run_without_torch(
            "bench",
            "--env",
            "tinycoop,strbuild",
            "--team",
            "scripted:oracle",
            "--team",
            f"openai:{server.base_url}/{server.model}",
            "--protocol",
            "all",
            "--episodes",
            "1",
            "--output",
            str(tmp_path),
            "--no-progress",
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list(tmp_path.glob("*.json"))) == 2 * 2 * 4
    board = run_without_torch("leaderboard", str(tmp_path))
    assert board.returncode == 0 and "## TinyCoop" in board.stdout, board.stderr


def test_an_hf_team_without_torch_says_what_to_install(tmp_path: Path) -> None:
    done = run_without_torch(
        "bench", "--env", "tinycoop", "--team", "hf:tiny", "--output", str(tmp_path)
    )
    assert done.returncode == 2
    assert "hf: teams need torch and transformers" in done.stderr
    assert "pip install 'collabzoo[train]'" in done.stderr


def test_the_offline_leaderboard_round_needs_only_the_base_install(tmp_path: Path) -> None:
    """The README's main job: scripted teams on every embedded task, then the table."""
    teams = [
        "--team",
        "scripted:oracle",
        "--team",
        "scripted:heuristic",
        "--team",
        "scripted:naive",
    ]
    done = run_without(
        TRAIN_EXTRA + BENCH_EXTRA,
        "bench",
        "--env",
        "embedded",
        *teams,
        "--protocol",
        "single,parallel",
        "--output",
        str(tmp_path),
        "--overwrite",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tinycoop scripted:oracle parallel: 2/2 Win 100.0" in done.stderr  # plain progress
    board = run_without(TRAIN_EXTRA + BENCH_EXTRA, "leaderboard", str(tmp_path))
    assert board.returncode == 0, board.stderr
    assert "## HouseBuild" in board.stdout and "Raw model (published)" in board.stdout
    plot = run_without(BENCH_EXTRA, "leaderboard", str(tmp_path), "--plot", str(tmp_path / "p.png"))
    assert plot.returncode == 2 and "--plot needs matplotlib" in plot.stderr


def test_an_endpoint_team_without_the_client_says_what_to_install(tmp_path: Path) -> None:
    team = "openai:http://127.0.0.1:9/v1/some-model"
    done = run_without(
        BENCH_EXTRA, "bench", "--env", "tinycoop", "--team", team, "--output", str(tmp_path)
    )
    assert done.returncode == 2
    assert "openai: teams need the openai client: pip install 'collabzoo[bench]'" in done.stderr
