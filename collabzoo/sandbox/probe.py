"""Proving isolation before trusting it: a probe program compared with the calling process.

The probe's facts are checked by ordinary tests (so by the harness, not by the probe's own
word): the sandboxed program must see a different PID 1 and hostname than the caller, a
read-only root filesystem, no network interface but loopback and no route, no capabilities
(and a bounding set of at most the three the executor keeps), a seccomp filter, no new
privileges, and cgroup limits on memory, processes and CPU. Under gVisor the cgroup limits and
the no-new-privileges flag are applied outside its kernel and not visible inside: those checks
read "n/a" there, and the Docker settings (see `container_settings` in the tests) cover them.
"""

from __future__ import annotations

import socket
from typing import Protocol

from collabzoo.sandbox.result import ExecResult

EXECUTOR_CAPABILITIES = (1 << 5) | (1 << 6) | (1 << 7)  # KILL, SETGID, SETUID

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

def _status():
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            value = value.strip()
            if key in ("CapEff", "CapBnd"):
                found[key] = int(value, 16)
            elif key in ("NoNewPrivs", "Seccomp", "Seccomp_filters"):
                found[key] = int(value)
    return found

def _first(*paths):
    for path in paths:
        try:
            with open(path) as f:
                return f.read().split()
        except OSError:
            continue
    return None

def _number(words):
    if not words or words[0] == "max":
        return None
    value = int(words[0])
    return value if 0 < value < (1 << 62) else None

def _cpus():
    words = _first("/sys/fs/cgroup/cpu.max")
    if words is None:
        quota = _first("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
        period = _first("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
        words = quota + period if quota and period else None
    if not words or words[0] in ("max", "-1"):
        return None
    return int(words[0]) / int(words[1])

def _routes():
    try:
        with open("/proc/net/route") as f:
            return len([line for line in f.readlines()[1:] if line.strip()])
    except OSError:
        return None

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
    with open("/proc/meminfo") as f:
        host_memory = int(f.readline().split()[1]) * 1024
    status = _status()
    return {
        "pid1": pid1,
        "hostname": socket.gethostname(),
        "uid": os.getuid(),
        "root_read_only": _root_read_only(),
        "interfaces": interfaces,
        "routes": _routes(),
        "capabilities": status.get("CapEff"),
        "bounding_set": status.get("CapBnd"),
        "no_new_privs": status.get("NoNewPrivs"),
        "seccomp": status.get("Seccomp"),
        "seccomp_filters": status.get("Seccomp_filters"),
        "memory_limit": _number(_first("/sys/fs/cgroup/memory.max",
                                       "/sys/fs/cgroup/memory/memory.limit_in_bytes")),
        "host_memory": host_memory,
        "pids_limit": _number(_first("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max")),
        "cpus": _cpus(),
    }
"""

OUTSIDE_GVISOR = ("no new privileges", "Docker's profile and ours", "memory limited",
                  "pids limited", "CPU limited")  # fmt: skip
"""Checks that gVisor's kernel cannot show from inside (it is limited from outside)."""


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


def isolation_checks(runtime: str | None = None) -> dict[str, str]:
    """The checks (test snippets on the probe's facts) that apply under `runtime`."""
    checks = {
        "different PID 1": f"assert candidate()['pid1'] != {_host_pid1()!r}",
        "different hostname": f"assert candidate()['hostname'] != {socket.gethostname()!r}",
        "read-only root": "assert candidate()['root_read_only'] is True",
        "no network but loopback": "assert set(candidate()['interfaces']) <= {'lo'}",
        "no route": "assert candidate()['routes'] == 0",
        "no capabilities": "assert candidate()['capabilities'] == 0",
        "bounded capabilities": (
            f"assert candidate()['bounding_set'] & ~{EXECUTOR_CAPABILITIES} == 0"
        ),
        "seccomp filter": "assert candidate()['seccomp'] == 2",
        "no new privileges": "assert candidate()['no_new_privs'] == 1",
        "Docker's profile and ours": "assert candidate()['seccomp_filters'] >= 2",
        "memory limited": "f = candidate()\nassert 0 < f['memory_limit'] < f['host_memory']",
        "pids limited": "assert candidate()['pids_limit'] > 0",
        "CPU limited": "assert candidate()['cpus'] > 0",
    }
    if runtime == "runsc":
        checks = {name: test for name, test in checks.items() if name not in OUTSIDE_GVISOR}
    return checks


def isolation_report(sandbox: _Runs) -> dict[str, bool | None]:
    """Which isolation properties the sandbox was just seen to have (None: not visible under
    its runtime)."""
    runtime = getattr(sandbox, "runtime", None)
    checks = isolation_checks(runtime)
    result = sandbox.run(PROBE_PROGRAM, list(checks.values()), 20.0, entry_point="facts")
    seen = dict(zip(checks, result.passed, strict=True))
    return {name: seen.get(name) for name in isolation_checks()}


def isolation_proven(sandbox: _Runs) -> tuple[bool, str]:
    """(every property that can be seen holds, a one-line summary)."""
    report = isolation_report(sandbox)
    words = {True: "yes", False: "NO", None: "n/a"}
    summary = ", ".join(f"{name}: {words[ok]}" for name, ok in report.items())
    return all(ok is not False for ok in report.values()), summary
