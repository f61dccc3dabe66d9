"""A small real completion service for the HTTP-comparator tests: stdlib `http.server` on
127.0.0.1, port 0, answering POSTs in any of the four request formats of the online preference
learners' comparator (CoMLRL's "generic", OpenAI chat, OpenAI responses, Anthropic messages)
with the texts of a policy, and recording every request (path, headers, body) so a test can
see what was sent. It can fail its first requests with a status of the test's choice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.loopback_server import LoopbackJSONServer, Reply


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    """Names in lower case (HTTP header names are case-insensitive)."""
    body: dict[str, Any]


def asked(body: dict[str, Any], layout: str) -> tuple[str, int]:
    """(prompt, answers asked for) of a request in `layout`."""
    if layout == "generic":
        return body["prompt"], int(body["num_return_sequences"])
    if layout == "openai_chat":
        return body["messages"][-1]["content"], int(body.get("n", 1))
    if layout == "openai_responses":
        return body["input"], 1
    return body["messages"][-1]["content"], 1


def answer_body(texts: list[str], layout: str, field: str) -> dict[str, Any]:
    """`texts` laid out as a service of `layout` answers (generic: under the dotted `field`)."""
    if layout == "openai_chat":
        return {
            "object": "chat.completion",
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": t},
                    "finish_reason": "stop",
                }
                for i, t in enumerate(texts)
            ],
        }
    if layout == "openai_responses":
        content = [{"type": "output_text", "text": t} for t in texts]
        return {"output": [{"type": "message", "role": "assistant", "content": content}]}
    if layout == "anthropic":
        return {"type": "message", "content": [{"type": "text", "text": t} for t in texts]}
    body: Any = texts
    for part in reversed(field.split(".")):
        body = {part: body}
    return body


class ComparatorServer(LoopbackJSONServer):
    def __init__(
        self,
        policy: Callable[[str, int], list[str]],
        *,
        layout: str = "generic",
        response_field: str = "completions",
        fail_first: int = 0,
        fail_status: int = 500,
    ) -> None:
        """`policy(prompt, n)` gives the texts of one request; the first `fail_first`
        requests get `fail_status` instead."""
        self.policy, self.layout, self.response_field = policy, layout, response_field
        self.fail_first, self.fail_status = fail_first, fail_status
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        super().__init__()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/generate"

    def post(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        seen = Seen(path, headers, body)
        with self._lock:
            self.seen.append(seen)
            number = len(self.seen)
        if number <= self.fail_first:
            return self.fail_status, {"error": {"message": "scripted failure"}}
        prompt, n = asked(seen.body, self.layout)
        return 200, answer_body(self.policy(prompt, n), self.layout, self.response_field)
