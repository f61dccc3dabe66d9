"""A small real chat-completions server for the tests: stdlib `http.server` on 127.0.0.1, port
0, answering each request's last user message with a text policy. It speaks enough of the
OpenAI protocol for the official client (GET /v1/models, POST /v1/chat/completions with
usage), and it can fail, stall or hold requests so the tests can see retries, timeouts,
concurrency and interrupts.

Its `completion_tokens` is the answer's length in UTF-8 bytes, a count no scripted team uses,
so a test can tell that Cost came from the server's usage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tests.loopback_server import LoopbackJSONServer, Reply


class ChatServer(LoopbackJSONServer):
    def __init__(
        self,
        policy: Callable[[str], str],
        *,
        model: str = "scripted-team",
        fail_first: int = 0,
        stall_first: int = 0,
        stall_seconds: float = 0.0,
        answer_limit: int | None = None,
        barrier: int = 0,
    ) -> None:
        """`fail_first` requests get HTTP 500; the next `stall_first` wait `stall_seconds`
        before answering; after `answer_limit` answered requests the rest wait until
        `release()`; the first `barrier` requests wait for each other (proof of concurrency)."""
        self.policy = policy
        self.model = model
        self.fail_first, self.stall_first = fail_first, stall_first
        self.stall_seconds = stall_seconds
        self.answer_limit = answer_limit
        self.requests: list[dict[str, Any]] = []
        self.api_keys: set[str] = set()
        self.answered = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._barrier = threading.Barrier(barrier, timeout=20) if barrier > 1 else None
        self._barrier_left = barrier
        super().__init__()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def team(self) -> str:
        return f"openai:{self.base_url}/{self.model}"

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        super().__exit__(*exc)

    def release(self) -> None:
        self._released.set()

    def get(self, path: str) -> Reply:
        if path.rstrip("/") != "/v1/models":
            return super().get(path)
        model = {"id": self.model, "object": "model", "created": 0, "owned_by": "t"}
        return 200, {"object": "list", "data": [model]}

    def post(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        self.api_keys.add(headers.get("authorization", "").removeprefix("Bearer "))
        if path.rstrip("/") != "/v1/chat/completions":
            return super().post(path, headers, body)
        return self._answer(body)

    def _answer(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            waits_for_others = self._barrier is not None and self._barrier_left > 0
            self._barrier_left -= 1
        try:
            if waits_for_others:
                self._barrier.wait()
            if body.get("model") != self.model:
                error = {"message": f"model {body.get('model')!r} not served", "type": "invalid"}
                return 404, {"error": error}
            if number <= self.fail_first:
                return 500, {"error": {"message": "scripted failure", "type": "server_error"}}
            if number <= self.fail_first + self.stall_first:
                time.sleep(self.stall_seconds)
            with self._lock:
                over = self.answer_limit is not None and self.answered >= self.answer_limit
            if over:
                self._released.wait()
            prompt = body["messages"][-1]["content"]
            try:
                answer = self.policy(prompt)
            except ValueError as error:  # the policy cannot read this prompt
                return 500, {"error": {"message": f"policy failed: {error}", "type": "policy"}}
            with self._lock:
                self.answered += 1
            tokens = len(answer.encode())
            return 200, {
                "id": f"chatcmpl-{number}",
                "object": "chat.completion",
                "created": 0,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": len(prompt.encode()),
                    "completion_tokens": tokens,
                    "total_tokens": len(prompt.encode()) + tokens,
                },
            }
        finally:
            with self._lock:
                self.in_flight -= 1
