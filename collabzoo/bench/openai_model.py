"""Any OpenAI-compatible chat endpoint as a team member (vLLM, llama.cpp's server, SGLang,
hosted APIs), through the official `openai` client: its retries with backoff and its
timeouts, plus a bound on the requests in flight.

Each prompt is one user message; Cost is the `usage.completion_tokens` the server reports
(counted like a scripted answer, and marked so, when a server reports no usage). top_k is sent
in the request body only when set, since hosted APIs reject it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from collabzoo.bench.daemon_pool import DaemonPool
from collabzoo.bench.models import Generation, ModelOptions, Sampling, TeamError, count_pieces

EXPECTED = "openai:http://HOST:PORT/v1/MODEL (or openai:BASE_URL#MODEL)"
NO_KEY = "EMPTY"
"""Sent when no API key is set: local servers accept any key, the client insists on one."""
PREFLIGHT_TIMEOUT = 10.0
_VERSION_SEGMENT = re.compile(r"^v\d+$")


class EndpointError(RuntimeError):
    """A request that still failed after the client's retries."""


def parse_endpoint(target: str) -> tuple[str, str]:
    """(base URL, model) of `http://HOST:PORT/v1/MODEL` (the base ends at the first path
    segment like v1, so model ids may hold slashes) or of `BASE_URL#MODEL`."""
    if "#" in target:
        base, _, model = target.partition("#")
    else:
        parts = urlsplit(target)
        segments = parts.path.split("/")
        cut = next((i for i, s in enumerate(segments) if _VERSION_SEGMENT.match(s)), None)
        if cut is None:
            raise ValueError(
                f"cannot tell the base URL from the model in {target!r}: expected {EXPECTED}"
            )
        base = parts._replace(path="/".join(segments[: cut + 1]), query="", fragment="").geturl()
        model = "/".join(segments[cut + 1 :])
    base, model = base.rstrip("/"), model.strip("/")
    scheme = urlsplit(base)
    if scheme.scheme not in ("http", "https") or not scheme.hostname:
        raise ValueError(f"{target!r} has no http(s) base URL: expected {EXPECTED}")
    if not model:
        raise ValueError(f"{target!r} names no model after the base URL: expected {EXPECTED}")
    return base, model


class OpenAIModel:
    """One model at one endpoint. Requests from every episode and agent share a pool of
    `concurrency` threads, so at most that many are in flight."""

    kind = "openai"
    concurrent = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        concurrency: int = 8,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise TeamError(
                "openai: teams need the openai client: pip install 'collabzoo[bench]'"
            ) from None
        if concurrency < 1 or retries < 0 or not timeout > 0:
            raise TeamError(
                "openai teams need --concurrency >= 1, --retries >= 0 and --timeout > 0; got "
                f"{concurrency}, {retries}, {timeout}"
            )
        self.base_url, self.model = base_url, model
        self.timeout, self.retries, self.concurrency = timeout, retries, concurrency
        self._errors = openai
        self.client = openai.OpenAI(
            base_url=base_url, api_key=api_key or NO_KEY, timeout=timeout, max_retries=retries
        )
        self._pool = DaemonPool(concurrency, "openai")

    @classmethod
    def from_target(cls, target: str, options: ModelOptions) -> OpenAIModel:
        base, model = parse_endpoint(target)
        made = cls(
            base,
            model,
            api_key=os.environ.get(options.api_key_env),
            timeout=options.timeout,
            retries=options.retries,
            concurrency=options.concurrency,
        )
        made.check()
        return made

    def check(self) -> None:
        """Fail now, with the URL in the message, when the endpoint is down or refuses the key
        or does not serve the model; servers without a model list pass."""
        errors = self._errors
        quick = self.client.with_options(
            max_retries=0, timeout=min(self.timeout, PREFLIGHT_TIMEOUT)
        )
        try:
            served = [m.id for m in quick.models.list()]
        except errors.APIConnectionError as error:
            raise TeamError(
                f"cannot reach the OpenAI-compatible endpoint {self.base_url} ({error}); is "
                f"the server running? expected {EXPECTED}"
            ) from None
        except (errors.AuthenticationError, errors.PermissionDeniedError) as error:
            raise TeamError(
                f"{self.base_url} refused the API key ({error}); set it in the environment "
                "variable named by --api-key-env (default OPENAI_API_KEY)"
            ) from None
        except errors.APIStatusError:
            return  # no /models here: the first request will tell
        if served and self.model not in served:
            raise TeamError(
                f"{self.base_url} does not serve model {self.model!r}; it serves: "
                f"{', '.join(served[:20])}"
            )

    def _request(self, prompt: str, sampling: Sampling, seed: int) -> Generation:
        options: dict[str, Any] = {"max_tokens": sampling.max_new_tokens, "seed": seed}
        if sampling.greedy:
            options["temperature"] = 0.0
        else:
            options.update(temperature=sampling.temperature, top_p=sampling.top_p)
            if sampling.top_k:
                options["extra_body"] = {"top_k": sampling.top_k}
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": prompt}], **options
            )
        except self._errors.APIError as error:
            raise EndpointError(
                f"{self.base_url} (model {self.model}) failed after {self.retries} retries: "
                f"{type(error).__name__}: {error}"
            ) from None
        if not response.choices:
            raise EndpointError(f"{self.base_url} answered with no choices")
        choice = response.choices[0]
        text = choice.message.content or ""
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "completion_tokens", None)
        finish = choice.finish_reason
        if not isinstance(tokens, int):
            tokens, finish = count_pieces(text), f"{finish} (no usage reported: pieces counted)"
        return Generation(text, tokens, finish)

    def generate(
        self, prompts: Sequence[str], sampling: Sampling, seeds: Sequence[int]
    ) -> list[Generation]:
        futures = [
            self._pool.submit(self._request, prompt, sampling, seed)
            for prompt, seed in zip(prompts, seeds, strict=True)
        ]
        return [future.result() for future in futures]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "base_url": self.base_url,
            "model": self.model,
            "timeout_s": self.timeout,
            "retries": self.retries,
            "concurrency": self.concurrency,
            "tokens": "usage.completion_tokens reported by the server",
        }
