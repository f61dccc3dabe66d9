"""The plumbing the tests' HTTP services share: a stdlib `ThreadingHTTPServer` on 127.0.0.1,
port 0 (the system picks a free one), serving in a daemon thread while the `with` block runs,
every request answered with a JSON body. A service says only what it answers, in `get` and
`post`; the scripted chat server (`chat_server`) and the comparator service
(`comparator_server`) are two such services.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Reply = tuple[int, dict[str, Any]]
"""An HTTP status and the JSON body sent with it."""


class LoopbackJSONServer:
    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def get(self, path: str) -> Reply:
        return 404, {"error": {"message": f"no route {path}"}}

    def post(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        """`headers`' names in lower case (HTTP header names are case-insensitive)."""
        return 404, {"error": {"message": f"no route {path}"}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, reply: Reply) -> None:
                status, payload = reply
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout under test): nothing to tell it

            def do_GET(self) -> None:
                self._send(server.get(self.path))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._send(server.post(self.path, headers, body))

        return Handler
