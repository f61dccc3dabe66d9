"""Bad input about models and data, refused at once in one line: a mistyped model name, a hub id
the hub cannot serve, another task's data file, a code env without its data, and HumanEval's
oracle, which the bench and `scripted_team` both play.

The hub is made unreachable inside each test: HF_ENDPOINT points at a loopback port that is
closed, or that accepts each connection, records its request line and closes it unanswered (so
the tries can be counted), and the Hugging Face caches are empty folders of the test. Commands
run in a fresh interpreter, since `huggingface_hub` and `datasets` read these variables once, at
import."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import collabzoo
from collabzoo.bench.teams import scripted_policy
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.model_names import KNOWN_MODELS, ModelNotFound, check_model_name
from tests.conftest import REPOSITORY, require
from tests.optional import require_module

TYPO = "smollm2-135m-instruc"
"""One letter off the registry's smollm2-135m-instruct."""
AT_ONCE_S = 10.0
"""A refusal "at once": the hub's retries alone took about 50 s before."""
NETWORK_VARIABLES = (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_ETAG_TIMEOUT",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)
DATA = {
    "coophumaneval": "coophumaneval/CoopHumanEval.json",
    "humaneval": "humaneval/HumanEval.jsonl.gz",
    "mbpp": "mbpp/MBPP.json",
}
PREFIX = {"coophumaneval": "CoopHumanEval/", "humaneval": "HumanEval/", "mbpp": "MBPP/"}


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def hub() -> Iterator[tuple[int, list[str]]]:
    """A loopback port that accepts each connection, records its first request line ("" for a
    bare connection) and closes it unanswered: a hub that serves nothing."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(2)
                received = b""
                with contextlib.suppress(OSError):
                    while b"\r\n" not in received and (chunk := connection.recv(4096)):
                        received += chunk
            seen.append(received.split(b"\r\n", 1)[0].decode("latin-1"))

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    yield server.getsockname()[1], seen
    stop.set()
    worker.join(3)
    server.close()


def model_requests(seen: list[str], model: str) -> list[str]:
    """The requests about `model` (huggingface_hub also fetches, once a day, its own list of
    agent harnesses from the endpoint: not a try of the model)."""
    return [line for line in seen if f"/{model}/" in line]


def offline_env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    """A process whose hub is 127.0.0.1:port and whose Hugging Face caches are empty."""
    env = {k: v for k, v in os.environ.items() if k not in NETWORK_VARIABLES}
    cache = tmp_path / "hf-home"
    env.update(
        HF_ENDPOINT=f"http://127.0.0.1:{port}",
        HF_HOME=str(cache),
        HF_DATASETS_CACHE=str(cache / "datasets"),
        COLLABZOO_CACHE=str(tmp_path / "collabzoo-cache"),
        PYTHONPATH=str(REPOSITORY),
        OMP_NUM_THREADS="1",
        **extra,
    )
    return env


def run_cli(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "collabzoo.cli", *args],
        text=True,
        capture_output=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=REPOSITORY,
    )
    return done, time.perf_counter() - started


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The single 'collabzoo: error:' line of a refused command (exit 2, nothing else)."""
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("collabzoo: error: "), lines
    return lines[0]


def data_file(shared_data: Path, task: str) -> str:
    return str(require(shared_data / DATA[task], f"the {task} data"))


# ----- 1. model names ------------------------------------------------------------------------
def typo_commands(folder: Path) -> dict[str, list[str]]:
    out = str(folder)
    return {
        "bench hf:": ["bench", "--env", "tldr", "--team", f"hf:{TYPO}", "--output", out],
        "bench vllm:": ["bench", "--env", "tinycoop", "--team", f"vllm:{TYPO}", "--output", out],
        "export": ["export", "strbuild", "--team", f"hf:{TYPO}", "--episodes", "1", "-o", out],
        "train --model": ["train", "magrpo", "--env", "tinycoop", "--model", TYPO, "--output", out],
        "sft --model": ["sft", f"{out}/dataset", "--model", TYPO, "--output", out],
        "model pull": ["model", "pull", TYPO],
    }


@pytest.mark.parametrize("command", list(typo_commands(Path("."))))
def test_a_mistyped_model_name_fails_at_once_naming_the_registry_name(
    tmp_path: Path, hub: tuple[int, list[str]], command: str
) -> None:
    port, seen = hub
    done, elapsed = run_cli(typo_commands(tmp_path)[command], offline_env(tmp_path, port))
    line = one_error_line(done)
    assert repr(TYPO) in line and "did you mean smollm2-135m-instruct?" in line, line
    assert "collabzoo model list" in line
    assert seen == [], "a name of no valid form never reaches the hub"
    assert elapsed < AT_ONCE_S, elapsed
    assert not (tmp_path / "collabzoo-cache").exists(), "nothing pulled"


def test_what_a_model_name_may_be(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "weights.gguf").write_text("not a folder")
    assert check_model_name(str(folder)) == "folder"
    assert check_model_name("SmolLM2-135M-Instruct") == "registry" and KNOWN_MODELS
    assert check_model_name("Qwen/Qwen2.5-Coder-3B") == "hub"
    assert check_model_name("tiny", also=("tiny",)) == "also"
    for wrong, fragment in [
        (str(tmp_path / "weights.gguf"), "it is a file"),
        (str(tmp_path / "no" / "such-folder"), "not a registry name, an existing folder"),
        ("gpt2", "the registry names are smollm2-135m-instruct"),
        ("some/../model", "not a registry name"),
        ("", "non-empty"),
    ]:
        with pytest.raises(ModelNotFound, match=fragment):
            check_model_name(wrong)
    assert issubclass(ModelNotFound, OSError), "callers that catch OSError keep working"


@pytest.mark.parametrize("command", ["bench", "train"])
def test_a_hub_id_the_hub_cannot_serve_is_tried_once_and_says_what_to_do(
    tmp_path: Path, hub: tuple[int, list[str]], command: str
) -> None:
    require_module("torch", "train")
    port, seen = hub
    model = "someone/some-model"
    args = {
        "bench": ["bench", "--env", "tinycoop", "--team", f"hf:{model}", "--episodes", "1"],
        "train": ["train", "magrpo", "--env", "tinycoop", "--model", model],
    }[command] + ["--output", str(tmp_path / "out")]
    done, _ = run_cli(args, offline_env(tmp_path, port))
    line = one_error_line(done)
    assert f"{model!r}" in line and "cannot be reached" in line and "one try of 5 s" in line
    assert "collabzoo model pull NAME" in line and "pass a model folder" in line
    assert "HF_HUB_OFFLINE=1" in line
    head = f"HEAD /{model}/resolve/main/config.json HTTP/1.1"
    assert model_requests(seen, model) == [head], f"one try, no retries: {seen}"


def test_hf_hub_offline_refuses_an_uncached_hub_id_without_a_connection(
    tmp_path: Path, hub: tuple[int, list[str]]
) -> None:
    require_module("torch", "train")
    port, seen = hub
    args = ["bench", "--env", "tinycoop", "--team", "hf:someone/some-model", "--episodes", "1"]
    done, _ = run_cli(
        [*args, "--output", str(tmp_path / "out")], offline_env(tmp_path, port, HF_HUB_OFFLINE="1")
    )
    line = one_error_line(done)
    assert "offline mode is set (HF_HUB_OFFLINE)" in line and "collabzoo model pull" in line
    assert seen == []


def test_a_hub_model_in_the_local_cache_plays_with_the_hub_out_of_reach(
    tmp_path: Path, hub: tuple[int, list[str]]
) -> None:
    """The one try fails, and the copy in the Hugging Face cache loads from its folder: the
    cache laid out as huggingface_hub lays it out (refs/main naming a snapshot folder)."""
    require_module("torch", "train")
    from collabzoo.algos.policies.model_loading import tiny_causal_lm

    port, seen = hub
    env = offline_env(tmp_path, port)
    repo = Path(env["HF_HOME"]) / "hub" / "models--someone--tiny-model"
    commit = "0123456789abcdef0123456789abcdef01234567"
    model, tokenizer = tiny_causal_lm(0)
    model.save_pretrained(repo / "snapshots" / commit)
    tokenizer.save_pretrained(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    args = ["bench", "--env", "tinycoop", "--team", "hf:someone/tiny-model", "--episodes", "1"]
    args += ["--greedy", "--max-new-tokens", "4", "--output", str(tmp_path / "out")]
    done, _ = run_cli([*args, "--no-progress"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (tmp_path / "out").glob("*.json")
    document = json.loads(results.read_text())
    assert len(document["episodes"]) == 1
    assert document["team"]["spec"] == "hf:someone/tiny-model"
    tried = model_requests(seen, "someone/tiny-model")
    assert len(tried) == 1, f"tried once, then the cache: {seen}"


# ----- 2. another task's data, and files that are no data -------------------------------------
@pytest.mark.parametrize(
    ("task", "other"),
    [("coophumaneval", "mbpp"), ("humaneval", "coophumaneval"), ("mbpp", "humaneval")],
)
def test_another_tasks_data_is_refused_unless_allowed(
    shared_data: Path, task: str, other: str
) -> None:
    path = data_file(shared_data, other)
    with pytest.raises(ValueError) as caught:
        collabzoo.make(task, data=path)
    message = str(caught.value)
    assert "\n" not in message
    assert f"ids like '{PREFIX[other]}0'" in message, message
    assert f"'{PREFIX[task]}N'" in message and "allow_foreign_data=True" in message
    env = collabzoo.make(task, data=path, allow_foreign_data=True, split="all")
    _, infos = env.reset(seed=0)
    assert infos["aux"]["task_id"].startswith(PREFIX[other])
    own = collabzoo.make(task, data=data_file(shared_data, task), split="all")
    assert own.reset(seed=0)[1]["aux"]["task_id"].startswith(PREFIX[task])


def test_a_file_that_is_no_code_dataset_is_a_clear_error_at_make(tmp_path: Path) -> None:
    rows = [{"task_id": "CoopHumanEval/0", "prompt": "def f(x):\n    pass\n"}]
    (tmp_path / "fields.json").write_text(json.dumps(rows))
    (tmp_path / "broken.jsonl").write_text('{"task_id": "CoopHumanEval/0"\n')
    (tmp_path / "binary.json").write_bytes(bytes(range(256)))
    (tmp_path / "notes.txt").write_text("CoopHumanEval/0")
    for name, error, fragments in [
        ("fields.json", ValueError, ["row 0 lacks test, entry_point", "has prompt, task_id"]),
        ("broken.jsonl", ValueError, ["broken.jsonl:1: not valid JSON"]),
        ("binary.json", ValueError, ["not UTF-8 text"]),
        ("notes.txt", ValueError, ["unsupported file type"]),
        ("missing.json", FileNotFoundError, ["neither an existing file"]),
    ]:
        with pytest.raises(error) as caught:
            collabzoo.make("coophumaneval", data=str(tmp_path / name))
        message = str(caught.value)
        assert message.startswith("CoopHumanEval: ") and "\n" not in message, message
        assert all(f in message for f in fragments), message


def test_play_refuses_another_tasks_data_in_one_line(shared_data: Path, tmp_path: Path) -> None:
    data = json.dumps(data_file(shared_data, "mbpp"))
    done, _ = run_cli(
        ["play", "coophumaneval", "--env-arg", f"data={data}"],
        offline_env(tmp_path, closed_port()),
    )
    line = one_error_line(done)
    assert "holds another task's rows" in line and "ids like 'MBPP/0'" in line


# ----- 3. a code env without its data fails at make --------------------------------------------
MAKE_WITHOUT_DATA = """
import json, time
import collabzoo
from collabzoo.envs.hub import DatasetUnavailable
started = time.perf_counter()
report = {}
try:
    env = collabzoo.make("coophumaneval")
    report["made"] = True
    report["make_seconds"] = time.perf_counter() - started
    env.reset(seed=0)
except DatasetUnavailable as error:
    report.update(
        failed_at="reset" if report.get("made") else "make",
        message=str(error),
        chained=error.__cause__ is not None or not error.__suppress_context__,
    )
print(json.dumps(report))
"""


def make_without_data(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", MAKE_WITHOUT_DATA],
        text=True,
        capture_output=True,
        timeout=120,
        env=env,
        cwd=REPOSITORY,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("offline", ["unreachable", "HF_HUB_OFFLINE"])
def test_a_code_env_without_data_fails_at_make_in_one_line(
    tmp_path: Path, hub: tuple[int, list[str]], offline: str
) -> None:
    port, seen = hub
    extra = {"HF_HUB_OFFLINE": "1"} if offline == "HF_HUB_OFFLINE" else {}
    port = port if extra else closed_port()
    report = make_without_data(offline_env(tmp_path, port, **extra))
    assert report.get("failed_at") == "make", report
    message = report["message"]
    assert "\n" not in message and not report["chained"]
    assert message.startswith("CoopHumanEval: cannot load 'OpenMLRL/CoopHumanEval'")
    assert "pass a local copy instead: collabzoo.make('CoopHumanEval', data=PATH)" in message
    assert seen == [], "HF_HUB_OFFLINE: no connection at all"


def test_where_the_hub_answers_make_leaves_the_download_to_the_first_reset(
    tmp_path: Path, hub: tuple[int, list[str]]
) -> None:
    """A hub that accepts connections passes the quick check: `make` loads nothing (the
    download, here failing, comes at reset)."""
    port, seen = hub
    report = make_without_data(offline_env(tmp_path, port))
    assert report["made"] and report.get("failed_at") == "reset", report
    assert len(seen) >= 1


# ----- 4. HumanEval's oracle ----------------------------------------------------------------------
def test_scripted_team_plays_the_humaneval_oracle_the_bench_plays(
    shared_data: Path, code_sandbox
) -> None:
    env = collabzoo.make(
        "humaneval", data=data_file(shared_data, "humaneval"), split="eval", sandbox=code_sandbox
    )
    team = scripted_team("humaneval", "oracle", env=env)
    bench_policy = scripted_policy("oracle", "humaneval", env)
    observations, _ = env.reset(options={"task": 0})
    answers = team(observations)
    assert answers == {a: bench_policy(o) for a, o in observations.items()}
    *_, infos = env.step(answers)
    assert infos["main"]["metrics"]["pass"] == 1.0, infos["main"]["metrics"]
    with pytest.raises(ValueError, match="pass the env it plays"):
        scripted_team("humaneval", "oracle")
    coop = collabzoo.make("coophumaneval", data=data_file(shared_data, "coophumaneval"))
    with pytest.raises(ValueError, match="CoopHumanEval/0 has no reference solution"):
        scripted_team("coophumaneval", "oracle", env=coop)
    from collabzoo.envs.scripted_teams import listed_games

    oracle_games = listed_games("oracle")  # the seed's four, and the families added since
    assert {"housebuild", "humaneval", "strbuild", "tinycoop"} <= set(oracle_games)
    with pytest.raises(ValueError, match=re.escape(f"oracle: {', '.join(oracle_games)}")):
        scripted_team("tldr", "oracle")


def test_play_seats_the_humaneval_oracle_as_a_partner(shared_data: Path, tmp_path: Path) -> None:
    """`collabzoo play humaneval --partner oracle`: the human writes aux, the oracle main."""
    aux = (
        "def aux(numbers, threshold):\n"
        "    for i, a in enumerate(numbers):\n"
        "        for j, b in enumerate(numbers):\n"
        "            if i != j and abs(a - b) < threshold:\n"
        "                return True\n"
        "    return False\nEND\n"
    )
    data = json.dumps(data_file(shared_data, "humaneval"))
    args = ["play", "humaneval", "--partner", "oracle", "--seat", "aux", "--split", "eval"]
    args += ["--task", "HumanEval/0", "--env-arg", f"data={data}", "--env-arg", "horizon=1"]
    done = subprocess.run(
        [sys.executable, "-m", "collabzoo.cli", *args],
        input=aux,
        text=True,
        capture_output=True,
        timeout=240,
        env=offline_env(tmp_path, closed_port()),
        cwd=REPOSITORY,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the scripted oracle team plays: main" in done.stdout
    assert "return aux(numbers, threshold)" in done.stdout and "tests 7/7" in done.stdout
