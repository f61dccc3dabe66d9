"""A determined adversary on a pool of ONE container, so the next job is certain to land where
the hostile one ran. After each hostile job: no pass, within its bound, the next ordinary job
passes, and the container's state (limits, affinity, scheduling, processes, /tmp, IPC objects,
memory in use) equals a fresh container's. Runs on runc and, where the daemon has it, gVisor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from collabzoo.sandbox import get_sandbox
from collabzoo.sandbox.pool import MAX_REPLY, LineBuffer, WorkerBroken
from collabzoo.sandbox.result import OUTPUT_LIMIT
from tests.conftest import RUNTIMES, isolated_pool, require_docker, skip_or_fail

TIMEOUT = 1.0
SECRET = "collabzoo-planted-5f0e9"

# The container's state as the runner user sees it, printed as JSON (compared, never trusted: a
# hostile job cannot run this probe, it only runs after one).
STATE_PROBE = r"""
import hashlib, json, os

def _digest(text):
    return hashlib.sha256(repr(text).encode()).hexdigest()[:16]

def _limits(pid):
    try:
        with open(f"/proc/{pid}/limits") as f:
            return _digest(f.read())
    except FileNotFoundError:  # gVisor: only our own limits are readable
        import resource
        names = sorted(n for n in dir(resource) if n.startswith("RLIMIT_"))
        try:
            return _digest([resource.prlimit(pid, getattr(resource, n)) for n in names])
        except OSError:
            return "unreadable"

def _stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])

def _tmp_bytes():
    total = 0
    for root, dirs, files in os.walk("/tmp"):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total

def _memory():
    for path in ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes"):
        try:
            with open(path) as f:
                return int(f.read())
        except (OSError, ValueError):
            continue
    return None

def state():
    me = os.getpid()
    others = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me)
    zygote = [p for p in others if p != 1 and _stat(p)[1] == 1]
    found = {"processes": len(others), "zygotes": len(zygote)}
    for name, pid in (("pid1", 1), ("zygote", zygote[0] if zygote else None)):
        if pid is None:
            continue
        param = os.sched_getparam(pid)
        found[name] = {
            "stopped": _stat(pid)[0] in ("T", "t"),  # running or sleeping: both fine
            "limits": _limits(pid),
            "affinity": sorted(os.sched_getaffinity(pid)),
            "policy": os.sched_getscheduler(pid),
            "priority": param.sched_priority,
            "nice": os.getpriority(os.PRIO_PROCESS, pid),
        }
    found["tmp"] = sorted(
        "executor" if n.startswith(".executor-") else "ours" if os.path.join("/tmp", n) ==
        os.getcwd() else n for n in os.listdir("/tmp")
    )
    found["tmp_bytes"] = _tmp_bytes()
    ipc = {}
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ipc[kind] = len(f.read().splitlines()) - 1
        except OSError:
            ipc[kind] = "absent"
    ipc["mqueue"] = sorted(os.listdir("/dev/mqueue")) if os.path.isdir("/dev/mqueue") else "absent"
    found["ipc"] = ipc
    found["memory"] = _memory()
    print(json.dumps(found))
    return 1
"""

MEMORY_SLACK = 24 << 20
"""Memory in use may differ from a fresh container's by page cache and allocator noise."""


def container_state(sandbox) -> dict:
    result = sandbox.run(STATE_PROBE, ["assert candidate() == 1"], 10.0, entry_point="state")
    assert result.all_passed, f"the state probe failed: {result}"
    return json.loads(result.stdout)


def assert_like_fresh(state: dict, fresh: dict, after: str) -> None:
    memory, fresh_memory = state.pop("memory"), fresh["memory"]
    expected = {k: v for k, v in fresh.items() if k != "memory"}
    assert state == expected, f"after {after}: the container differs from a fresh one"
    if memory is not None and fresh_memory is not None:
        assert abs(memory - fresh_memory) < MEMORY_SLACK, (
            f"after {after}: {memory >> 20} MB in use, a fresh container {fresh_memory >> 20} MB"
        )


# ----- the adversary's programs -----------------------------------------------------------------
@dataclass(frozen=True)
class Attack:
    name: str
    program: str
    tests: tuple[str, ...] = ("assert candidate() == 1",)
    bound: float = TIMEOUT * 4 + 10
    """Seconds the hostile job may take, at most (its budget plus the pool's grace)."""


FIND_OTHERS = """
import os
def _others():
    me = os.getpid()
    found = []
    for p in os.listdir('/proc'):
        if p.isdigit() and int(p) != me:
            found.append(int(p))
    return found
"""

# Writes a crafted reply straight onto the runner's socket: the executor must bound its work.
RAW_REPLY = """
import json, os, socket, stat, struct, time
def _send_raw(payload):
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                s = socket.socket(fileno=fd)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                s.sendall(struct.pack('!I', len(data)) + data)
                time.sleep(30)
        except OSError:
            pass
"""


def py(source: str) -> str:
    return textwrap.dedent(source).lstrip("\n")


ATTACKS = [
    Attack(
        "prlimit on PID 1 and the zygote",
        FIND_OTHERS
        + py("""
        import resource
        def f():
            for pid in _others():
                for r, v in ((resource.RLIMIT_AS, 1 << 20), (resource.RLIMIT_NOFILE, 3),
                             (resource.RLIMIT_CPU, 1), (resource.RLIMIT_NPROC, 1)):
                    try:
                        resource.prlimit(pid, r, (v, v))
                    except (OSError, ValueError):
                        pass
            return 0
        """),
    ),
    Attack(
        "affinity, nice and scheduling of PID 1 and the zygote",
        FIND_OTHERS
        + py("""
        def f():
            for pid in _others():
                for act in (lambda: os.sched_setaffinity(pid, {0}),
                            lambda: os.setpriority(os.PRIO_PROCESS, pid, 19),
                            lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0)),
                            lambda: os.setpriority(os.PRIO_USER, 0, 19)):
                    try:
                        act()
                    except OSError:
                        pass
            return 0
        """),
    ),
    Attack(
        "SIGSTOP, SIGTERM and SIGKILL to every process",
        FIND_OTHERS
        + py("""
        import signal
        def f():
            for sig in (signal.SIGSTOP, signal.SIGTERM):
                for pid in _others():
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
            os.kill(-1, signal.SIGKILL)
            return 0
        """),
    ),
    Attack(
        "ptrace and cross-process memory of PID 1",
        py("""
        import ctypes
        def f():
            libc = ctypes.CDLL(None, use_errno=True)
            got = [libc.ptrace(16, 1, 0, 0)]  # PTRACE_ATTACH
            try:
                open('/proc/1/mem', 'rb').read(1)
            except OSError:
                got.append(-1)
            return 0 if got == [-1, -1] else 1
        """),
    ),
    Attack(
        "System V shared memory, semaphores, message queues and POSIX queues",
        py("""
        import ctypes, os
        def f():
            libc = ctypes.CDLL(None, use_errno=True)
            made = [libc.shmget(0x5EC, 400 << 20, 0o1666), libc.semget(0x5EC, 4, 0o1666),
                    libc.msgget(0x5EC, 0o1666)]
            rt = ctypes.CDLL('librt.so.1', use_errno=True)
            made.append(rt.mq_open(b'/collabzoo', os.O_CREAT | os.O_RDWR, 0o666, None))
            if made[0] >= 0:  # would stay charged to the container after the job
                libc.shmat.restype = ctypes.c_void_p
                ctypes.memset(libc.shmat(made[0], None, 0), 120, 400 << 20)
            return 0 if all(m < 0 for m in made) else 1
        """),
    ),
    Attack(
        "sockets outside the network namespace: vsock to the host, netlink, packet, AF_ALG",
        py("""
        import socket
        def f():
            made = []
            for family, kind in ((40, 1), (40, 2), (16, 3), (17, 3), (38, 5), (42, 2)):
                try:
                    s = socket.socket(family, kind)
                    made.append(family)
                    if family == 40:  # AF_VSOCK: CID 2 is the hypervisor host
                        s.settimeout(1)
                        s.connect((2, 22))
                except OSError:
                    pass
            return 0 if not made else 1
        """),
    ),
    Attack(
        "files planted everywhere writable",
        py(f"""
        import os
        def f():
            for path in ('/tmp/.hidden', 'here.txt', os.path.expanduser('~/.profile')):
                with open(path, 'w') as out:
                    out.write({SECRET!r})
            os.makedirs('/tmp/a/b/c', exist_ok=True)
            open('/tmp/a/b/c/deep', 'w').write({SECRET!r})
            os.chmod('/tmp/a/b', 0)
            os.chmod('/tmp/a', 0o500)
            os.mkfifo('/tmp/fifo')
            os.symlink('/proc/1/environ', '/tmp/link')
            with open('/tmp/big', 'wb') as out:
                out.write(b'x' * (40 << 20))
            return 0
        """),
    ),
    Attack(
        "a daemon process that outlives the job",
        py(f"""
        import os, socket, time
        def f():
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    s = socket.socket(socket.AF_UNIX)
                    s.bind('\\0collabzoo-secret')
                    s.listen()
                    while True:
                        try:
                            c, _ = s.accept()
                            c.sendall({SECRET!r}.encode())
                            c.close()
                        except OSError:
                            time.sleep(0.01)
                os._exit(0)
            time.sleep(0.2)
            return 0
        """),
    ),
    Attack(
        "a set whose elements all share a hash, sent raw to the executor",
        RAW_REPLY
        + py("""
        def f():
            big = (1 << 61) - 1  # every multiple hashes to 0
            values = [{'i': hex(k * big)} for k in range(60000)]
            _send_raw({'ok': True, 'value': {'s': values}, 'args': []})
            return 0
        """),
        tests=("assert candidate() == {1}",),
        bound=TIMEOUT + 10,
    ),
    Attack(
        "a million-digit decimal, 100k-deep nesting and 40 MB sent raw",
        RAW_REPLY
        + py("""
        def f(kind):
            if kind == 0:
                _send_raw(b'{"ok": true, "value": 1' + b'0' * 1000000 + b', "args": []}')
            if kind == 1:
                _send_raw(b'[' * 100000 + b']' * 100000)
            _send_raw(b'"' + b'x' * (40 << 20) + b'"')
        """),
        tests=("assert candidate(0) == 1", "assert candidate(1) == 1", "assert candidate(2) == 1"),
        bound=3 * TIMEOUT + 10,
    ),
    Attack(
        "300 decimal ints of 99,999 digits sent raw, each quadratic to parse",
        RAW_REPLY
        + py("""
        def f():
            digits = b'9' * 99999
            _send_raw(b'{"ok": true, "value": [' + b','.join([digits] * 300) + b'], "args": []}')
        """),
        bound=TIMEOUT + 5,
    ),
    Attack(
        "tests that each take just under the timeout",
        py("""
        import time
        def f():
            time.sleep(0.9)
            return 0
        """),
        tests=("assert candidate() == 1",) * 12,
        bound=4 * TIMEOUT + 8,
    ),
    Attack(
        "an error message of 50 MB, and one whose str() never returns",
        py("""
        class Slow(Exception):
            def __str__(self):
                while True:
                    pass
        def f(kind):
            if kind:
                raise Slow()
            raise ValueError('x' * (50 << 20))
        """),
        tests=("assert candidate(0) == 1", "assert candidate(1) == 1"),
    ),
    Attack(
        "io_uring, userfaultfd, perf events, bpf and the keyring",
        py("""
        import ctypes, platform
        def f():
            libc = ctypes.CDLL(None, use_errno=True)
            calls = (425, 323, 298, 321, 250) if platform.machine() == 'x86_64' else ()
            errors = []
            for n in calls:
                libc.syscall(n, 0, 0, 0, 0, 0)
                errors.append(ctypes.get_errno())
            return 0 if all(e == 1 for e in errors) else 1  # EPERM: the filter said no
        """),
    ),
]
ATTACK_NAMES = [a.name for a in ATTACKS]

# Job B hunts for anything job A planted, by every channel A could have used.
HUNT = f"""
import os, socket
def hunt():
    secret = {SECRET!r}.encode()
    found = []
    for root, dirs, files in os.walk('/tmp'):
        for name in files:
            try:
                with open(os.path.join(root, name), 'rb') as f:
                    if secret in f.read(64 << 20):
                        found.append(name)
            except OSError:
                pass
    for pid in os.listdir('/proc'):
        for part in ('environ', 'cmdline'):
            try:
                with open(f'/proc/{{pid}}/{{part}}', 'rb') as f:
                    if secret in f.read():
                        found.append(pid + part)
            except OSError:
                pass
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(1)
        s.connect('\\0collabzoo-secret')
        found.append('abstract socket: ' + s.recv(100).decode())
    except OSError:
        pass
    if os.path.isdir('/dev/mqueue'):
        found += os.listdir('/dev/mqueue')
    return found
"""


@pytest.fixture(scope="module", params=RUNTIMES)
def lone_container(request):
    """A pool of one container whose isolation a probe has just proven, and its fresh state."""
    with isolated_pool(request.param) as sandbox:
        yield sandbox, container_state(sandbox)


def follow_up(sandbox) -> None:
    ordinary = sandbox.run(
        "def f(x):\n    return x + 1", ["assert candidate(1) == 2"], TIMEOUT, entry_point="f"
    )
    assert ordinary.passed == (True,), f"the next ordinary job failed: {ordinary}"


@pytest.mark.parametrize("name", ATTACK_NAMES)
def test_a_hostile_job_leaves_nothing_for_the_next(name: str, lone_container) -> None:
    sandbox, fresh = lone_container
    attack = next(a for a in ATTACKS if a.name == name)
    started = time.monotonic()
    result = sandbox.run(attack.program, list(attack.tests), TIMEOUT, entry_point="f")
    elapsed = time.monotonic() - started
    assert not any(result.passed), f"{name}: a hostile program earned a pass: {result}"
    assert elapsed < attack.bound, f"{name}: took {elapsed:.1f} s, bound {attack.bound} s"
    # Contained at the root, not mopped up: nothing changed that needed a new container.
    assert result.details["replaced"] == [], f"{name}: {result.details['replaced']}"
    for text in (result.error or "", result.stdout, result.stderr):
        assert len(text) <= 4 * OUTPUT_LIMIT + 20, f"{name}: {len(text)} characters came back"
    follow_up(sandbox)
    hunted = sandbox.run(HUNT, ["assert candidate() == []"], 10.0, entry_point="hunt")
    assert hunted.all_passed, f"after {name}, a later job found what it planted: {hunted.error}"
    assert_like_fresh(container_state(sandbox), fresh, name)


def test_the_job_budget_holds_and_counts_the_rest_failed(lone_container) -> None:
    sandbox, _ = lone_container
    started = time.monotonic()
    result = sandbox.run(
        "import time\ndef f():\n    time.sleep(0.6)\n    return 1",
        ["assert candidate() == 1"] * 10,
        TIMEOUT,
        entry_point="f",
        job_timeout=2.0,
    )
    assert time.monotonic() - started < 2.0 + 3
    assert result.passed[:3] == (True, True, True) and not any(result.passed[4:])
    assert result.timed_out and "job's 2 s" in result.error


def test_correct_programs_with_big_answers_and_inputs_pass(lone_container) -> None:
    sandbox, _ = lone_container
    big = sandbox.run(
        "def f(n):\n    return 7 ** n\ndef g(n):\n    return str(7 ** n)",
        ["assert candidate(20000) == 7 ** 20000", "assert len(g(20000)) == 16902"],
        10.0,
        entry_point="f",
    )
    assert big.all_passed, f"a 16,902-digit answer failed: {big}"
    many = sandbox.run(
        "def f(xs):\n    return sorted(xs)[-3:]\ndef g(n):\n    return list(range(n))",
        ["assert candidate(list(range(10 ** 6))) == [999997, 999998, 999999]",
         "assert g(10 ** 6)[-1] == 999999"],
        10.0,
        entry_point="f",
    )  # fmt: skip
    assert many.all_passed, f"a million-element input failed: {many}"


def test_a_job_that_narrows_its_affinity_leaves_the_next_the_full_cpu_set(lone_container) -> None:
    """A program may pin itself to one CPU; the next job in the same container runs on the
    container's full set again, the set of the executor (PID 1, where the tests run)."""
    sandbox, fresh = lone_container
    if len(os.sched_getaffinity(0)) < 2:
        skip_or_fail("one CPU here: there is nothing to narrow; run this on two or more cores")
    narrowed = sandbox.run(
        "import os\ndef f():\n    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})\n"
        "    return len(os.sched_getaffinity(0))",
        ["assert candidate() == 1"],
        10.0,
        entry_point="f",
    )
    assert narrowed.all_passed and narrowed.details["replaced"] == [], narrowed
    full = sandbox.run(
        "import os\ndef f():\n    return len(os.sched_getaffinity(0))",
        ["import os\nassert candidate() == len(os.sched_getaffinity(0))"],  # the executor's
        10.0,
        entry_point="f",
    )
    assert full.all_passed, f"the next job ran on fewer CPUs than the container has: {full}"
    assert_like_fresh(container_state(sandbox), fresh, "a job that narrowed its affinity")


def test_a_file_left_in_tmp_is_cleaned_without_replacing_the_container(lone_container) -> None:
    sandbox, fresh = lone_container
    result = sandbox.run(
        "import os, tempfile\ndef f():\n    open('/tmp/left.txt', 'w').write('x')\n"
        "    os.chmod(tempfile.mkdtemp(), 0)\n    return 1",
        ["assert candidate() == 1"],
        TIMEOUT,
        entry_point="f",
    )
    assert result.all_passed and result.details["replaced"] == [], result
    assert_like_fresh(container_state(sandbox), fresh, "a legitimate leftover file")


# ----- the second line, seen where the first is weaker: the process backend shares one user -----
def test_a_stopped_zygote_is_seen_and_the_worker_replaced() -> None:
    """In the process backend a runner may signal its zygote (same user): the vital-sign check
    after the job must see it stopped, replace the worker, and the next job must pass."""
    with get_sandbox("process", size=1) as sandbox:
        stopped = sandbox.run(
            "import os, signal\ndef f():\n    os.kill(os.getppid(), signal.SIGSTOP)\n    return 1",
            ["assert candidate() == 1"],
            TIMEOUT,
            entry_point="f",
        )
        assert stopped.passed == (True,)
        assert any("zygote" in r and "stopped" in r for r in stopped.details["replaced"]), stopped
        follow_up(sandbox)


def test_a_limit_the_runner_cannot_set_is_a_sandbox_error() -> None:
    """A hard limit inherited lower than asked cannot be raised: the job fails as a sandbox
    error that names the limit, instead of running with the wrong one."""
    script = textwrap.dedent("""
        import resource
        from collabzoo.sandbox import get_sandbox
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        with get_sandbox("process", size=1, max_file_mb=16) as sandbox:
            result = sandbox.run("def f():\\n    return 1", ["assert candidate() == 1"],
                                 entry_point="f")
        print(result.error)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("SandboxError") and "RLIMIT_FSIZE" in out.stdout, out


def test_the_process_backend_leaves_no_scratch_folders(tmp_path, monkeypatch) -> None:
    # a temporary folder of its own: another test worker's sandboxes come and go in the shared one
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = set(Path(tempfile.gettempdir()).glob("collabzoo-sandbox-*"))
    with get_sandbox("process", size=2) as sandbox:
        result = sandbox.run(
            "def f():\n    open('left.txt', 'w').write('x')\n    return 1",
            ["assert candidate() == 1"],
            entry_point="f",
        )
        assert result.all_passed, result
        during = set(Path(tempfile.gettempdir()).glob("collabzoo-sandbox-*")) - before
        assert len(during) == 2, "one scratch folder per worker"
    assert set(Path(tempfile.gettempdir()).glob("collabzoo-sandbox-*")) == before


# ----- bounds that say what was wrong -------------------------------------------------------------
@pytest.mark.parametrize(
    ("returns", "says"),
    [
        ("[0] * 4_000_000", "more than 4,000,000 elements"),  # with the list: one too many
        ("_nest(300)", "nested more than 200 deep"),
        ("'x' * (40 << 20)", "the limit is 32 MB"),
        ("{frozenset(): 1} and object()", "only plain data"),
    ],
)
def test_values_beyond_the_bounds_fail_with_a_clear_error(docker_sandbox, returns, says) -> None:
    program = (
        "def _nest(n):\n    v = []\n    for _ in range(n):\n        v = [v]\n    return v\n"
        f"def f():\n    return {returns}\n"
    )
    result = docker_sandbox.run(program, ["assert candidate() is not None"], 10.0, entry_point="f")
    assert result.passed == (False,) and says in (result.error or ""), result.error


def test_line_buffer_splits_lines_and_refuses_an_endless_reply() -> None:
    lines = LineBuffer()
    lines.feed(b'{"a": 1}\n{"b"')
    assert lines.line() == b'{"a": 1}' and lines.line() is None
    lines.feed(b": 2}\n")
    assert lines.line() == b'{"b": 2}' and lines.line() is None
    endless = LineBuffer()
    with pytest.raises(WorkerBroken, match="reply passed"):
        for _ in range(MAX_REPLY // 65536 + 2):
            endless.feed(b"x" * 65536)
            assert endless.line() is None


def test_closing_a_pool_does_not_wait_on_the_docker_client() -> None:
    """The attach socket is closed before the container is removed; a removal racing a still
    attached stream used to wait out the client's whole timeout."""
    require_docker()
    sandbox = get_sandbox("docker", size=2)
    result = sandbox.run("def f():\n    return 1", ["assert candidate() == 1"], entry_point="f")
    assert result.all_passed, result
    started = time.monotonic()
    sandbox.close()
    # the bug waited out the client's whole API timeout (30 s); 20 s leaves room for load
    assert time.monotonic() - started < 20, "closing two workers took longer than 20 s"
