"""The Hugging Face hub for the tasks' data: one quick connectivity check per process, offline
mode, and loading a dataset without `datasets`' network retries.

Unreachable, the hub costs `datasets` about 30 s of retries (1, 2, 4, 8, 8 s) per dataset, so an
offline newcomer running `collabzoo bench --env all` would wait minutes for the code tasks to be
skipped. Every hub load of the package goes through `load_hub_records`: one TCP connection
attempt per process (bounded by HUB_PROBE_TIMEOUT) decides whether the hub is reachable. When it
is not, or when HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set (then the network is not tried at
all), `datasets` runs in its offline mode: a copy in its local cache still loads, and a dataset
not cached fails at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

HUB_PROBE_TIMEOUT = 3.0
"""Seconds the one-time connectivity check waits for the hub (or the configured proxy)."""
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
"""Set to 1 (or true, yes, on), either one means: never try the network, read the cache."""
_TRUE = {"1", "true", "yes", "on"}

_probe_lock = threading.Lock()
_probe_result: list[str | None] = []  # [] until probed; then [None] (reachable) or [reason]
_offline_lock = threading.Lock()
_unavailable: dict[tuple[str, str | None], str] = {}  # (hub id, split) -> why, this process


class HubUnavailable(ConnectionError):
    """The hub cannot be used here (unreachable, or offline mode) and the local `datasets` cache
    holds no copy of the dataset."""


class DatasetUnavailable(RuntimeError):
    """A task's data could not be loaded. The message says, in one line, what to pass to
    `collabzoo.make` instead; `hint(flag)` says the same for a command line's own option."""

    def __init__(self, title: str, source: str, reason: str, expected: str) -> None:
        self.title, self.source, self.reason, self.expected = title, source, reason, expected
        super().__init__(
            f"{title}: {self.problem}; pass a local copy instead: "
            f"collabzoo.make({title!r}, data=PATH), PATH {expected}"
        )

    @property
    def problem(self) -> str:
        return f"cannot load {self.source!r} from the Hugging Face hub ({self.reason})"

    def hint(self, option: str) -> str:
        """The one-line advice with `option` (e.g. "--data humaneval=PATH") in place of data=."""
        return f"{self.problem}; pass {option}, PATH {self.expected}"


def one_line(error: BaseException, limit: int = 300) -> str:
    """`Type: message` of an error on one line, cut to `limit` characters of message."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:limit]}"


def offline_variable() -> str | None:
    """The variable (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE) that asks for no network, if any."""
    return next(
        (n for n in OFFLINE_VARIABLES if os.environ.get(n, "").strip().lower() in _TRUE), None
    )


def offline_mode() -> bool:
    """Whether HF_HUB_OFFLINE or HF_DATASETS_OFFLINE asks for no network at all."""
    return offline_variable() is not None


def _probe_address() -> tuple[str, int]:
    """(host, port) the hub is reached through: an HTTPS proxy if one is set, else the endpoint."""
    proxy = next(
        (
            os.environ[name]
            for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
            if os.environ.get(name)
        ),
        None,
    )
    url = urlparse(proxy or os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    return url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)


def hub_unreachable_reason(timeout: float = HUB_PROBE_TIMEOUT) -> str | None:
    """Why the hub cannot be reached, or None when it can (or when offline mode is set: then
    nothing is tried, and `datasets` reads its local cache). One TCP connection attempt per
    process, bounded by `timeout` including the name lookup."""
    if offline_mode():
        return None
    with _probe_lock:
        if not _probe_result:
            host, port = _probe_address()
            outcome: list[str | None] = []

            def attempt() -> None:
                try:
                    socket.create_connection((host, port), timeout=timeout).close()
                    outcome.append(None)
                except OSError as error:
                    outcome.append(f"cannot connect to {host}:{port} ({error})")

            worker = threading.Thread(target=attempt, daemon=True)
            worker.start()
            worker.join(timeout + 0.5)
            _probe_result.append(outcome[0] if outcome else f"no answer from {host}:{port}")
        return _probe_result[0]


@contextlib.contextmanager
def _datasets_offline() -> Iterator[bool]:
    """`datasets` and `huggingface_hub` in offline mode for the calls inside (they read the
    variables once, at import, so a process that found the hub unreachable switches them here).
    Yields False where this `datasets` has no such switch."""
    import datasets.config  # deferred: slow to import, and only needed for hub data

    modules: list[Any] = [datasets.config]
    with contextlib.suppress(ImportError):
        import huggingface_hub.constants

        modules.append(huggingface_hub.constants)
    with _offline_lock:
        saved = [
            (module, name, getattr(module, name))
            for module in modules
            for name in OFFLINE_VARIABLES
            if hasattr(module, name)
        ]
        for module, name, _ in saved:
            setattr(module, name, True)
        try:
            yield any(module is datasets.config for module, _, _ in saved)
        finally:
            for module, name, value in saved:
                setattr(module, name, value)


def load_hub_records(hub_id: str, split: str | None = None) -> list[dict]:
    """The records of a hub dataset (its `split`, e.g. "test" or "train[:1100]"), loaded with
    `datasets`. Reachable hub: as `datasets` does it (then cached by it). Offline mode or an
    unreachable hub: from the local cache only, else HubUnavailable at once; that answer is
    kept for the rest of the process."""
    key = (hub_id, split)
    if key in _unavailable:
        raise HubUnavailable(_unavailable[key])
    variable = offline_variable()
    offline = variable is not None
    reason = f"offline mode is set ({variable})" if offline else hub_unreachable_reason()
    import datasets  # deferred: slow to import, and only needed for hub data

    if reason is None:
        return [dict(row) for row in datasets.load_dataset(hub_id, split=split)]
    cause: Exception | None = None
    with _datasets_offline() as switched:
        if switched or offline:
            try:
                return [dict(row) for row in datasets.load_dataset(hub_id, split=split)]
            except Exception as error:
                cause = error
    why = f"{reason}; and no copy in the local datasets cache"
    if cause is not None and not isinstance(cause, ConnectionError):
        why += f" ({one_line(cause, 200)})"
    _unavailable[key] = why
    raise HubUnavailable(why)
