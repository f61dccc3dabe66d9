"""The Hugging Face hub offline: one quick check per process, no retries, HF_HUB_OFFLINE
honoured, a cached dataset still loading, and the one-line advice of an env without its data.

The hub is made unreachable inside each test: HF_ENDPOINT points at a closed port on the
loopback interface, or HF_HUB_OFFLINE is set (then a listening loopback socket checks that no
connection comes). Loads run in a fresh interpreter, since `datasets` and `huggingface_hub`
read these variables once, at import."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collabzoo.envs import hub, task_specs
from tests.conftest import REPOSITORY, skip_or_fail

RETRY_TOTAL_S = 1 + 2 + 4 + 8 + 8
"""What `datasets` spends retrying an unreachable hub, per dataset."""
FAST_S = 5.0
"""Well under RETRY_TOTAL_S: a load that took less did not wait on retries."""
CODE_ENVS = ("coophumaneval", "humaneval", "mbpp")
NETWORK_VARIABLES = (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def offline_env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    """The environment of a process whose hub is 127.0.0.1:port and whose caches are empty."""
    env = {k: v for k, v in os.environ.items() if k not in NETWORK_VARIABLES}
    cache = tmp_path / "hf-home"
    env.update(
        HF_ENDPOINT=f"http://127.0.0.1:{port}",
        HF_HOME=str(cache),
        HF_DATASETS_CACHE=str(cache / "datasets"),
        PYTHONPATH=str(REPOSITORY),
        **extra,
    )
    return env


def run_python(code: str, env: dict[str, str]) -> dict:
    """Run `code` in a fresh interpreter; it prints one JSON object as its last line."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        text=True,
        capture_output=True,
        timeout=120,
        env=env,
        cwd=REPOSITORY,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


MAKE_WITHOUT_DATA = """
import json, time
import collabzoo
from collabzoo.envs.hub import DatasetUnavailable
report = {}
for name in %r:
    started = time.perf_counter()
    try:
        collabzoo.make(name).reset(seed=0)
        report[name] = {"loaded": True}
    except DatasetUnavailable as error:
        report[name] = {"seconds": time.perf_counter() - started, "message": str(error)}
print(json.dumps(report))
"""


PROBE = """
import json
from collabzoo.envs import hub
print(json.dumps(hub.hub_unreachable_reason()))
"""


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A loopback port that accepts connections and records each one (then closes it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, address = server.accept()
            except OSError:
                continue
            seen.append(f"{address[0]}:{address[1]}")
            connection.close()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    yield server.getsockname()[1], seen
    stop.set()
    worker.join(2)
    server.close()


# ----- the probe ----------------------------------------------------------------------------
def test_the_hub_probe_is_bounded_cached_and_honours_offline_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []

    def no_route(address, timeout):
        calls.append((address, timeout))
        raise OSError("network is unreachable")

    monkeypatch.setattr(hub, "_probe_result", [])
    monkeypatch.setattr(socket, "create_connection", no_route)
    for name in NETWORK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.org:8443")
    reason = hub.hub_unreachable_reason(timeout=0.5)
    assert "hub.example.org:8443" in reason and "network is unreachable" in reason
    assert hub.hub_unreachable_reason() == reason
    assert calls == [(("hub.example.org", 8443), 0.5)], "probed once per process"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.hub_unreachable_reason() is None, "offline mode: nothing is tried"
    assert len(calls) == 1


# ----- code envs without their data ----------------------------------------------------------
def test_a_code_env_without_data_fails_fast_with_one_line_of_advice(tmp_path: Path) -> None:
    report = run_python(MAKE_WITHOUT_DATA % (CODE_ENVS,), offline_env(tmp_path, closed_port()))
    for name, title in zip(CODE_ENVS, ("CoopHumanEval", "HumanEval", "MBPP"), strict=True):
        outcome = report[name]
        assert outcome["seconds"] < FAST_S < RETRY_TOTAL_S, outcome
        message = outcome["message"]
        assert "\n" not in message
        assert message.startswith(f"{title}: cannot load ") and "Connection refused" in message
        assert f"pass a local copy instead: collabzoo.make({title!r}, data=PATH)" in message
        assert "no copy in the local datasets cache" in message


def test_hf_hub_offline_means_no_connection_at_all(
    tmp_path: Path, listener: tuple[int, list[str]]
) -> None:
    port, seen = listener
    offline = offline_env(tmp_path, port, HF_HUB_OFFLINE="1")
    report = run_python(MAKE_WITHOUT_DATA % (("humaneval", "tldr"),), offline)
    assert report["tldr"] == {"loaded": True}, "the writing envs fall back to their sample"
    humaneval = report["humaneval"]
    assert humaneval["seconds"] < FAST_S and "offline mode is set" in humaneval["message"]
    assert seen == [], "HF_HUB_OFFLINE=1: the hub address was never connected to"
    # the same hub address without offline mode is probed: the listener does record that
    assert run_python(PROBE, offline_env(tmp_path, port)) is None
    assert len(seen) == 1


BUILD_CACHE = """
import glob, json, os, shutil, sys
import datasets
cache, name = sys.argv[1], sys.argv[2]
records = os.path.join(cache, "records.jsonl")
with open(records, "w") as f:
    for k in range(5):
        f.write(json.dumps({"task_id": f"T/{k}", "value": k}) + "\\n")
datasets.load_dataset("json", data_files={"test": records}, cache_dir=cache)
built = glob.glob(os.path.join(cache, "json", "*", "*", "*", "json-test.arrow"))[0]
target = os.path.join(cache, f"someone___{name}", "default", "0.0.0", "0" * 8)
shutil.copytree(os.path.dirname(built), target)
os.rename(os.path.join(target, "json-test.arrow"), os.path.join(target, f"{name}-test.arrow"))
rows = datasets.load_dataset(f"someone/{name}", split="test")  # HF_HUB_OFFLINE=1 here
print(json.dumps(len(rows)))
"""
LOAD_CACHED = """
import json, time
from collabzoo.envs.records import load_records
started = time.perf_counter()
rows = load_records("someone/tiny_set", split="test")
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - started}))
"""


def test_a_cached_dataset_loads_without_the_hub(tmp_path: Path) -> None:
    """A dataset in the local `datasets` cache loads offline, with HF_HUB_OFFLINE=1 and with an
    unreachable hub alone (no variable set)."""
    port = closed_port()
    env = offline_env(tmp_path, port, HF_HUB_OFFLINE="1")
    cache = env["HF_DATASETS_CACHE"]
    os.makedirs(cache)
    built = subprocess.run(
        [sys.executable, "-c", BUILD_CACHE, cache, "tiny_set"],
        text=True,
        capture_output=True,
        timeout=120,
        env=env,
    )
    if built.returncode != 0:
        skip_or_fail(
            "this datasets version cannot be given a cache entry here (install the `datasets` "
            f"version pyproject.toml names to run this): {built.stderr}"
        )
    expected = [{"task_id": f"T/{k}", "value": k} for k in range(5)]
    for extra in ({"HF_HUB_OFFLINE": "1"}, {}):
        loaded = run_python(LOAD_CACHED, offline_env(tmp_path, port, **extra))
        assert loaded["rows"] == expected and loaded["seconds"] < FAST_S, extra


# ----- the bench ------------------------------------------------------------------------------
def test_bench_env_all_offline_skips_each_code_env_in_one_line(tmp_path: Path) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "collabzoo.cli",
            "bench",
            "--env",
            "all",
            "--team",
            "scripted:naive",
            "--team",
            "scripted:oracle",
            "--episodes",
            "1",
            "--output",
            str(tmp_path / "results"),
            "--no-progress",
        ],
        text=True,
        capture_output=True,
        timeout=240,
        env=offline_env(tmp_path, closed_port()),
        cwd=REPOSITORY,
    )
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    for name in CODE_ENVS:
        about = [line for line in lines if line.startswith(f"skipped {name}")]
        assert len(about) == 1, about
        assert f"pass --data {name}=PATH, PATH a json / jsonl / jsonl.gz file" in about[0]
        assert "cannot load" in about[0] and "Connection refused" in about[0]
    played = {p.name.split("__")[0] for p in (tmp_path / "results").glob("*.json")}
    offline = {s.short_name for s in task_specs() if s.offline is not None}
    assert played == offline >= {"strbuild", "housebuild", "tldr", "arxiv", "tinycoop"}
    # three code datasets' retries alone would take 3 * RETRY_TOTAL_S = 69 s
    assert elapsed < 2 * RETRY_TOTAL_S, elapsed


def test_play_without_data_is_a_one_line_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "collabzoo.cli", "play", "mbpp"],
        text=True,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=offline_env(tmp_path, closed_port()),
        cwd=REPOSITORY,
    )
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("collabzoo: error: MBPP: cannot load 'OpenMLRL/MBPP'")
    assert "pass --env-arg data=PATH, PATH a json / jsonl / jsonl.gz file" in line
