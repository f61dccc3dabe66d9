"""A Unix-socket proxy in front of the real Docker daemon that can stall or refuse its API, so
tests can make the daemon slow or unreachable for real (no mocks) while containers keep running.

    with DockerProxy(tmp_path / "docker.sock") as proxy:
        client = docker.DockerClient(base_url=f"unix://{proxy.path}", timeout=2)
        proxy.mode = "stall"  # or "refuse", then "pass" again

Attach streams (a container's stdin/stdout, hijacked from an HTTP request) are always forwarded:
a live container keeps talking while the daemon's API is busy. The modes act on API connections
already open too, since docker-py (requests) keeps them alive and reuses them.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Callable
from pathlib import Path

DAEMON_SOCKET = "/var/run/docker.sock"
MODES = ("pass", "stall", "refuse")
POLL_SECONDS = 0.05
"""How often a waiting thread looks at the mode and at `close()`."""
ATTACH = re.compile(rb"(?m)^[A-Z]+ [^ \r\n]*/attach[/? ]")
"""A request line that hijacks its connection. A kept-alive connection may carry other requests
first, so every request line is looked at, not only the first."""


class DockerProxy:
    """Forwards each client connection to a new connection to the daemon, a thread per
    direction. "pass": forward; "stall": hold the client's bytes (its read then times out), and
    drop them if it gives up; "refuse": close new connections at once and open ones when they
    next send. Daemon-to-client bytes always flow (the client may be reading a reply)."""

    def __init__(self, path: Path, daemon: str = DAEMON_SOCKET) -> None:
        self.path = Path(path)
        self.daemon = daemon
        self._mode = "pass"
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.accepted = 0
        """Connections accepted so far: a test can tell a kept-alive connection was reused."""

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self._mode = mode

    def __enter__(self) -> DockerProxy:
        self._listener.bind(str(self.path))
        self._listener.listen(64)
        self._listener.settimeout(POLL_SECONDS)  # so the accept loop sees close()
        self._spawn(self._accept_loop)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, cut every connection (attach streams too), join the threads and
        remove the socket file."""
        self._closed.set()
        self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            _shut(sock)
        for thread in threads:
            thread.join(timeout=5)
        self.path.unlink(missing_ok=True)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:  # the listener was closed
                return
            if self._mode == "refuse":
                client.close()
                continue
            daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                daemon.connect(self.daemon)
            except OSError:
                client.close()
                daemon.close()
                continue
            with self._lock:
                self._sockets.update((client, daemon))
            self._spawn(self._upstream, client, daemon)
            self._spawn(self._downstream, client, daemon)

    def _upstream(self, client: socket.socket, daemon: socket.socket) -> None:
        """Client to daemon, subject to the mode unless the connection became an attach
        stream. Reads on even while stalling, to see the client give up and drop its request
        (forwarding it later would, say, create a container nobody waits for)."""
        client.settimeout(POLL_SECONDS)
        stream = False
        held = bytearray()
        try:
            while not self._closed.is_set():
                try:
                    data = client.recv(1 << 16)
                except TimeoutError:
                    data = None
                if data == b"":
                    return
                if data:
                    stream = stream or ATTACH.search(data) is not None
                    held += data
                if not held:
                    continue
                if stream or self._mode == "pass":
                    daemon.sendall(held)
                    held.clear()
                elif self._mode == "refuse":
                    return
        except OSError:
            return
        finally:
            self._drop(client, daemon)

    def _downstream(self, client: socket.socket, daemon: socket.socket) -> None:
        """Daemon to client, always."""
        try:
            while data := daemon.recv(1 << 16):
                client.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(client, daemon)

    def _drop(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            _shut(sock)
        with self._lock:
            self._sockets.difference_update(sockets)


def _shut(sock: socket.socket) -> None:
    """Shut down, then close: a shutdown wakes a thread blocked reading it."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
