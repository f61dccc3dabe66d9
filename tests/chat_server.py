"""A small real chat-completions server for the tests: stdlib `http.server` on 127.0.0.1, port
0, answering each request's last user message with a text policy. It speaks enough of the
OpenAI protocol for the official client (GET /v1/models, POST /v1/chat/completions with
usage), and it can fail, stall or hold requests so the tests can see retries, timeouts,
concurrency and interrupts.

Its `completion_tokens` is the answer's length in UTF-8 bytes, a count no scripted team uses,
so a test can tell that Cost came from the server's usage.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer:
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
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def team(self) -> str:
        return f"openai:{self.base_url}/{self.model}"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def release(self) -> None:
        self._released.set()

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
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

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    model = {"id": server.model, "object": "model", "created": 0, "owned_by": "t"}
                    self._send(200, {"object": "list", "data": [model]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                auth = self.headers.get("Authorization", "")
                server.api_keys.add(auth.removeprefix("Bearer "))
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    status, payload = server._answer(body)
                    self._send(status, payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler
