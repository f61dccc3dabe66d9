"""Proving isolation before trusting it: a probe program compared with the calling process.

The probe's facts are checked by ordinary tests (so by the harness, not by the probe's own
word): the sandboxed program must see a different PID 1 and hostname than the caller, a
read-only root filesystem, and no network interface but loopback.
"""

from __future__ import annotations

import socket
from typing import Protocol

from collabzoo.sandbox.result import ExecResult

PROBE_PROGRAM = """\
import errno, os, socket

def _root_read_only():
    # A real write attempt: the kernel reports a read-only mount before any permission check
    # (statvfs flags are not reported by every runtime, gVisor's among them).
    try:
        os.mkdir("/collabzoo-probe")
    except OSError as error:
        return error.errno == errno.EROFS
    os.rmdir("/collabzoo-probe")
    return False

def facts():
    try:
        with open("/proc/1/cmdline", "rb") as f:
            pid1 = f.read().replace(b"\\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        pid1 = "<unreadable>"
    try:  # the kernel's own list (if_nameindex needs netlink, which the sandbox denies)
        with open("/proc/net/dev") as f:
            interfaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    except OSError:
        interfaces = ["<unreadable>"]  # fails the check: nothing proven
    return {
        "pid1": pid1,
        "hostname": socket.gethostname(),
        "root_read_only": _root_read_only(),
        "interfaces": interfaces,
    }
"""


class _Runs(Protocol):
    def run(
        self, program: str, tests: list[str], timeout: float = ..., *, entry_point: str | None = ...
    ) -> ExecResult: ...


def _host_pid1() -> str:
    try:
        with open("/proc/1/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "<unreadable>"


def isolation_report(sandbox: _Runs) -> dict[str, bool]:
    """Which isolation properties the sandbox was just seen to have."""
    checks = {
        "different PID 1": f"assert candidate()['pid1'] != {_host_pid1()!r}",
        "different hostname": f"assert candidate()['hostname'] != {socket.gethostname()!r}",
        "read-only root": "assert candidate()['root_read_only'] is True",
        "no network but loopback": "assert set(candidate()['interfaces']) <= {'lo'}",
    }
    result = sandbox.run(PROBE_PROGRAM, list(checks.values()), 20.0, entry_point="facts")
    return dict(zip(checks, result.passed, strict=True))


def isolation_proven(sandbox: _Runs) -> tuple[bool, str]:
    """(all properties hold, a one-line summary)."""
    report = isolation_report(sandbox)
    summary = ", ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in report.items())
    return all(report.values()), summary
