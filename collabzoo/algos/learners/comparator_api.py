"""The online preference learners' comparator over HTTP (comparator_policy="api"): a completion
service answers each episode's prompts and its texts meet the current team's candidates.

Four request formats, CoMLRL's (so a service written for CoMLRL's comparator answers unchanged):
"generic" (CoMLRL's own JSON: the prompt, `num_return_sequences` and the sampling settings in,
a list of texts under `comparator_api_response_field` out), "openai_chat" (any OpenAI-compatible
`/v1/chat/completions`: vLLM, SGLang, llama.cpp's server, hosted APIs; `n` per request, split by
`comparator_api_max_n_per_request`), "openai_responses" and "anthropic" (one answer a request).
Plain stdlib `urllib`, no client library: the request bodies are byte-for-byte what the reference
sends. A failed request is tried again `comparator_api_retries` times (connection errors, HTTP 429
and 5xx), then raises `ComparatorAPIError` naming the URL and the status.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any
from urllib import error as urlerror
from urllib import request as urlrequest

API_FORMATS = ("generic", "openai_chat", "openai_responses", "anthropic")
"""The request formats offered (CoMLRL's four)."""
FORMAT_ALIASES = {
    "generic": "generic",
    "openai": "openai_chat",
    "openai_chat": "openai_chat",
    "chat": "openai_chat",
    "openai_responses": "openai_responses",
    "responses": "openai_responses",
    "codex": "openai_responses",
    "anthropic": "anthropic",
    "anthropic_messages": "anthropic",
    "messages": "anthropic",
}
"""CoMLRL's spellings of the formats (case-insensitive), so its configs carry over."""
ONE_PER_REQUEST = ("openai_responses", "anthropic")
"""Formats without `n`: one answer a request."""
ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header sent unless the headers give one (the reference's)."""
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
"""HTTP statuses worth another try (overload, rate limits, a restarting server)."""
RETRY_BASE_SECONDS = 1.0
"""The wait before retry r is this times 2^r, at most 30 s."""


class ComparatorAPIError(RuntimeError):
    """The comparator service failed or answered something unreadable (URL and status named)."""


def api_format(name: object) -> str:
    """The format `name` stands for; ValueError listing the formats otherwise."""
    canonical = FORMAT_ALIASES.get(str(name).strip().lower()) if name is not None else None
    if canonical is None:
        raise ValueError(
            f"comparator_api_format must be one of {API_FORMATS} (or CoMLRL's spellings "
            f"{sorted(set(FORMAT_ALIASES) - set(API_FORMATS))}), got {name!r}"
        )
    return canonical


def plain_json(value: Any) -> Any:
    """`value` as JSON can hold it: keys as text, array scalars by `.item()`, anything else
    by `str` (what the reference's generic request does to its dataset row)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    if hasattr(value, "item"):
        try:
            return value.item()
        except Exception:  # not an array scalar after all: fall back to text
            pass
    return str(value)


def _dotted(data: Any, path: str | None) -> Any:
    """`data["a"]["b"]` for path "a.b"; None where a step is missing."""
    if not path:
        return None
    for part in path.split("."):
        if not (isinstance(data, dict) and part in data):
            return None
        data = data[part]
    return data


def _texts(value: Any) -> list[str]:
    """The texts of a generic answer: a text, or a list of texts or of objects holding one
    under "text", "content", "completion", "response" or "message"."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        return [str(value)]
    found = []
    for item in value:
        if isinstance(item, dict):
            text = item.get("text") or item.get("content") or item.get("completion")
            text = text or item.get("response")
            if text is None and isinstance(item.get("message"), dict):
                text = item["message"].get("content")
            if text is not None:
                found.append(str(text))
        elif item is not None:
            found.append(str(item))
    return found


def parse_completions(response: Any, fmt: str, response_field: str | None) -> list[str]:
    """The answer texts of one response of format `fmt` (the reference's readings)."""
    body = response if isinstance(response, dict) else {}
    if fmt == "openai_chat":
        choices = body.get("choices")
        out = []
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            message = choice.get("message")
            if isinstance(message, dict) and message.get("content") is not None:
                out.append(str(message["content"]))
            elif choice.get("text") is not None:
                out.append(str(choice["text"]))
        return out
    if fmt == "anthropic":
        blocks = body.get("content")
        blocks = blocks if isinstance(blocks, list) else []
        return [
            str(b["text"])
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and b.get("text") is not None
        ]
    if fmt == "openai_responses":
        items = body.get("output")
        out = []
        for item in items if isinstance(items, list) else []:
            content = item.get("content") if isinstance(item, dict) else None
            for block in content if isinstance(content, list) else []:
                if (
                    isinstance(block, dict)
                    and block.get("type") in ("output_text", "text")
                    and block.get("text") is not None
                ):
                    out.append(str(block["text"]))
        return out
    value = _dotted(response, response_field)
    if value is None and isinstance(response, dict):  # the usual names, first non-empty
        value = (
            response.get("completions")
            or response.get("responses")
            or response.get("outputs")
            or response.get("choices")
        )
    return _texts(value)


class ComparatorAPI:
    """One comparator service: its requests built from a config's `comparator_api_*` fields
    and the team's sampling settings, sent, and their answers read."""

    def __init__(self, args: Any, sampling: Any) -> None:
        self.url = str(args.comparator_api_url)
        self.format = api_format(args.comparator_api_format)
        self.model: str | None = args.comparator_api_model
        self.max_n: int | None = args.comparator_api_max_n_per_request
        self.timeout = float(args.comparator_api_timeout)
        self.retries = int(args.comparator_api_retries)
        self.response_field: str | None = args.comparator_api_response_field
        self.extra_body: dict[str, Any] = dict(args.comparator_api_extra_body or {})
        self.sampling = sampling
        self.headers = self._headers(args)

    def _headers(self, args: Any) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **(args.comparator_api_headers or {})}
        anthropic = self.format == "anthropic"
        if anthropic:
            headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
        name = args.comparator_api_key_env
        if name:
            key = os.environ.get(name)
            if not key:
                raise ValueError(
                    f"comparator_api_key_env={name!r} names an environment variable that is "
                    f"not set (or empty): export {name}=<the service's key>, or leave "
                    "comparator_api_key_env unset for a service without a key"
                )
            header = str(args.comparator_api_key_header or "Authorization")
            prefix = str(args.comparator_api_key_prefix or "").strip()
            if anthropic:  # Anthropic reads a bare key from x-api-key
                header = "x-api-key" if header.lower() == "authorization" else header
                prefix = "" if prefix.lower() == "bearer" else prefix
            headers[header] = f"{prefix} {key}" if prefix else key
        return headers

    # ----- requests -------------------------------------------------------------------------------
    def payload(
        self, prompt: str, n: int, agent_index: int = 0, batch_item: Any = None
    ) -> dict[str, Any]:
        """The JSON body of one request for `n` answers to `prompt`."""
        s = self.sampling
        if self.format == "generic":
            body: dict[str, Any] = {
                "prompt": prompt,
                "agent_idx": agent_index,
                "num_return_sequences": n,
                "max_new_tokens": s.max_new_tokens,
                "temperature": s.temperature,
                "top_p": s.top_p,
                "top_k": s.top_k,
                "batch_item": plain_json(batch_item),
            }
            if self.model:
                body["model"] = self.model
            return {**body, **self.extra_body}
        message = [{"role": "user", "content": prompt}]
        if self.format == "openai_chat":
            body = {
                "model": self.model,
                "messages": message,
                "n": n,
                "max_tokens": s.max_new_tokens,
                "temperature": s.temperature,
                "top_p": s.top_p,
            }
        elif self.format == "anthropic":
            body = {
                "model": self.model,
                "max_tokens": s.max_new_tokens,
                "messages": message,
                "temperature": s.temperature,
            }
        else:
            body = {"model": self.model, "input": prompt, "max_output_tokens": s.max_new_tokens}
        return {k: v for k, v in {**body, **self.extra_body}.items() if v is not None}

    def per_request(self, n: int) -> int:
        """Answers asked for in one request: all n (generic), 1 (formats without `n`), else
        `comparator_api_max_n_per_request`, or 1 for DeepSeek (no `n` there), or all n."""
        if self.format == "generic":
            return n
        if self.format in ONE_PER_REQUEST:
            return 1
        if self.max_n is not None:
            return max(1, min(self.max_n, n))
        if "api.deepseek.com" in self.url.lower() or (self.model or "").lower().startswith(
            "deepseek-"
        ):
            return 1
        return n

    def send(self, body: dict[str, Any]) -> Any:
        """POST `body`; the decoded JSON answer. Tries again on connection errors, timeouts,
        HTTP 429 and 5xx (`retries` times, waiting 1, 2, 4, ... s); then ComparatorAPIError."""
        data = json.dumps(body).encode("utf-8")
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            request = urlrequest.Request(self.url, data=data, headers=self.headers, method="POST")
            try:
                with urlrequest.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read().decode("utf-8", errors="replace")
            except urlerror.HTTPError as error:
                detail = error.read().decode("utf-8", errors="replace")[:500]
                if last or error.code not in RETRY_STATUSES:
                    tries = f" (after {attempt + 1} tries)" if attempt else ""
                    raise ComparatorAPIError(
                        f"comparator API {self.url} answered HTTP {error.code}{tries}: {detail}"
                    ) from error
            except (urlerror.URLError, TimeoutError, ConnectionError) as error:
                if last:
                    reason = getattr(error, "reason", error)
                    tries = "1 try" if attempt == 0 else f"{attempt + 1} tries"
                    raise ComparatorAPIError(
                        f"comparator API {self.url} failed after {tries}: {reason} "
                        f"(timeout {self.timeout:g} s; is the service up at that URL?)"
                    ) from error
            else:
                try:
                    return json.loads(raw)
                except json.JSONDecodeError as error:
                    raise ComparatorAPIError(
                        f"comparator API {self.url} answered text that is not JSON: {raw[:300]!r}"
                    ) from error
            time.sleep(min(30.0, RETRY_BASE_SECONDS * 2**attempt))
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def complete(
        self, prompt: str, n: int, agent_index: int = 0, batch_item: Any = None
    ) -> list[str]:
        """n answers to `prompt` (fewer only if a generic service returns fewer), asked for in
        requests of `per_request(n)`; ComparatorAPIError when a request yields none."""
        out: list[str] = []
        while len(out) < n:
            ask = min(self.per_request(n), n - len(out))
            response = self.send(self.payload(prompt, ask, agent_index, batch_item))
            got = parse_completions(response, self.format, self.response_field)
            if not got:
                where = (
                    f"a list of texts under {self.response_field!r} (comparator_api_response_field)"
                    if self.format == "generic"
                    else f"the {self.format} response layout"
                )
                shown = list(response) if isinstance(response, dict) else type(response).__name__
                raise ComparatorAPIError(
                    f"comparator API {self.url} returned no completion for a request of "
                    f"{ask}: expected {where}, got {shown}"
                )
            out += got[:1] if self.format in ONE_PER_REQUEST else got
            if self.format == "generic":
                break  # one request, as the reference: what it returned is what there is
        return out[:n]


__all__ = [
    "API_FORMATS",
    "ComparatorAPI",
    "ComparatorAPIError",
    "api_format",
    "parse_completions",
    "plain_json",
]
