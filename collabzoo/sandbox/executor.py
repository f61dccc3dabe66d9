"""The sandbox executor: runs untrusted programs and decides, itself, which tests passed.

This file is standalone (standard library only): the Docker image runs it as PID 1 of each
container, and the process backend runs it as a child process. It speaks newline-delimited
JSON on its stdin/stdout: one job in, one result out.

Why the program cannot fake a pass: the program runs in a separate *runner* process that never
sees the tests. The executor evaluates each test snippet in its own interpreter; `candidate` and
the program's other functions are proxies that send the call's arguments to the runner and get
back the return value as plain data (None, bool, int, float, complex, str, bytes, list, tuple,
dict, set, frozenset: exact types only). Comparisons and asserts therefore run on real builtin
objects inside the executor: an object whose `__eq__` always says True never crosses over, and
printing "passed", exiting early, or killing the runner only makes a call fail. Runners are
forked from a *zygote* taken before any job arrived, so their memory holds no test data, and the
executor marks itself non-dumpable so a runner (same user) can neither ptrace it nor read its
memory. In a container the executor is PID 1, which its runners cannot kill.

    python3 executor.py container
    python3 executor.py process SCRATCH_FOLDER
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import socket
import stat
import struct
import sys
import tempfile
import time
import traceback

MODE = sys.argv[1] if len(sys.argv) > 1 else "container"
MAX_MESSAGE = 32 << 20
"""Bytes of one message between executor and runner (a program, a call, a returned value)."""
INT_DIGITS = 100_000
"""Python's limit on int-to-decimal conversion, raised from 4,300 for the program's and the
tests' own `str()` and `int()`, so that correct big answers pass. Ints cross between processes
in hex, which is linear and unlimited, and messages are parsed with the limit lowered again
(plain_data.loads)."""
SPAWN_SECONDS = 5.0
JANITOR_SECONDS = 3.0
SAFE_MODULES_DENY = {"antigravity", "this", "idlelib", "turtledemo", "tkinter", "turtle"}
BUILTIN_NAMES = frozenset(dir(builtins)) - {"__name__", "__builtins__"}


def _sibling(name: str):
    """A module beside this file, loaded without putting its folder on sys.path (in the
    process backend that folder is the package's, whose modules must not shadow a program's)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"collabzoo_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


confinement = _sibling("confinement")
plain_data = _sibling("plain_data")
cap, describe, encode, decode, loads = (
    plain_data.cap,
    plain_data.describe,
    plain_data.encode,
    plain_data.decode,
    plain_data.loads,
)


# ----- framed messages over a socket ---------------------------------------------------------
class MessageTooLarge(ValueError):
    pass


def _check_size(size: int) -> None:
    if size > MAX_MESSAGE:
        raise MessageTooLarge(
            f"a message of {size / 2**20:.1f} MB; the limit is {MAX_MESSAGE >> 20} MB"
        )


def send_msg(sock: socket.socket, obj) -> None:
    data = json.dumps(obj, ensure_ascii=True).encode()
    _check_size(len(data))
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytearray:
    buffer, got = bytearray(n), 0
    view = memoryview(buffer)
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise TimeoutError("timed out")
        size = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if not size:
            raise EOFError("the program's process ended")
        got += size
    return buffer  # not copied: a message may be 32 MB


def recv_msg(sock: socket.socket, deadline: float | None = None):
    (size,) = struct.unpack("!I", _recv_exact(sock, 4, deadline))
    _check_size(size)
    return loads(_recv_exact(sock, size, deadline))


# ----- the runner: executes the untrusted program --------------------------------------------
def libc():
    return ctypes.CDLL(None, use_errno=True)


def runner_main(conn: socket.socket, outputs: list[int], request: dict, cpus: set[int]) -> None:
    """Runs in a process forked from the zygote; never returns. A setup step that fails is
    reported to the executor as a sandbox error, never skipped in silence."""
    problems = []
    try:
        os.setsid()
        try:  # every job starts on the worker's full CPU set, whatever an earlier job narrowed
            os.sched_setaffinity(0, cpus)
        except OSError as error:
            problems.append(f"could not reset the CPU affinity: {describe(error)}")
        os.dup2(outputs[0], 1)
        os.dup2(outputs[1], 2)
        for fd in outputs:
            os.close(fd)
        workdir = request["workdir"]
        os.chdir(workdir)
        if MODE == "process":
            try:  # a network namespace with no interfaces, where the kernel lets us
                clone_newnet, clone_newuser = 0x40000000, 0x10000000
                flags = clone_newnet if os.geteuid() == 0 else clone_newnet | clone_newuser
                libc().unshare(flags)
            except Exception:
                pass
        else:
            try:
                confinement.become(confinement.RUNNER_UID)
            except Exception as error:
                problems.append(f"could not switch to the runner user: {describe(error)}")
        os.environ.clear()
        os.environ.update(
            {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": workdir,
                "TMPDIR": workdir,
                "LANG": "C.UTF-8",
            }
        )
        sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115 - process-long
        sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
        sys.stdin = open(os.devnull)  # noqa: SIM115
        sys.setrecursionlimit(10000)
        sys.set_int_max_str_digits(INT_DIGITS)
        serve_program(conn, problems)
    except BaseException:
        pass
    finally:
        os._exit(0)


def set_limits(limits: dict) -> list[str]:
    """Set each limit (soft = hard); the ones that did not take, said."""
    problems = []
    for name, value in limits.items():
        which = getattr(resource, name)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))
        if resource.getrlimit(which) != (value, value):
            problems.append(f"{name} is {resource.getrlimit(which)}, not {value}")
    return problems


def serve_program(conn: socket.socket, problems: list[str]) -> None:
    """Wait for the job (a runner may be started before its job arrives: its limits come with
    the program), then load the program and answer calls."""
    request = recv_msg(conn)
    problems = problems + set_limits(request["limits"])
    if problems:
        send_msg(conn, {"ok": False, "sandbox_error": cap("; ".join(problems))})
        return
    namespace = {"__name__": "solution", "__builtins__": builtins}
    try:
        code = compile(request["program"], "<program>", "exec")
        exec(code, namespace)
    except BaseException as error:
        send_msg(conn, {"ok": False, "error": describe(error)})
        return
    names, modules, values = [], {}, {}
    count = [0]
    for name, value in list(namespace.items()):
        if name.startswith("__"):
            continue
        if callable(value) and not isinstance(value, type(os)):
            names.append(name)
        elif isinstance(value, type(os)):
            modules[name] = getattr(value, "__name__", "")
        else:
            with contextlib.suppress(TypeError):
                values[name] = encode(value, count=count)
    try:
        send_msg(conn, {"ok": True, "functions": names, "modules": modules, "values": values})
    except MessageTooLarge:  # the program's globals are too big to carry: offer its functions
        send_msg(conn, {"ok": True, "functions": names, "modules": modules, "values": {}})
    del request, values  # kept for the runner's life otherwise
    while True:
        reply = answer(namespace, recv_msg(conn))
        try:
            send_msg(conn, reply)
        except MessageTooLarge as error:
            send_msg(conn, {"ok": False, "error": describe(error)})
        del reply  # freed before the next call's arguments arrive


def answer(namespace: dict, call: dict) -> dict:
    """The reply to one call. A function of its own, so that the call's arguments and result
    are freed when it returns: held until the next call replaced them, a million-element
    argument left the next one half the runner's memory."""
    try:
        args = [decode(a) for a in call["args"]]
        kwargs = {k: decode(v) for k, v in call["kwargs"]}
        result = namespace[call["name"]](*args, **kwargs)
        changed = []  # in-place changes to list, dict and set arguments travel back
        for arg, sent in zip(args, call["args"], strict=True):
            now = encode(arg) if type(arg) in (list, dict, set) else None
            changed.append(None if now == sent else now)
        return {"ok": True, "value": encode(result), "args": changed}
    except BaseException as error:
        return {"ok": False, "error": describe(error)}


def _removable(root: str, uid: int) -> list[tuple[str, bool]]:
    """Entries under `root` owned by `uid`, children before their folder; (path, is folder)."""
    found, stack = [], [(root, False)]
    while stack:
        path, listed = stack.pop()
        try:
            info = os.lstat(path)
        except OSError:
            continue
        folder = stat.S_ISDIR(info.st_mode)
        owned = info.st_uid == uid and path != root
        if folder and not listed:
            if owned:
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o700)
            stack.append((path, True))
            with contextlib.suppress(OSError):
                stack.extend((os.path.join(path, n), False) for n in os.listdir(path))
        elif owned:
            found.append((path, folder))
    return found


def janitor_main(conn: socket.socket, request: dict) -> None:
    """As the runner user, remove whatever runners left in the scratch space; never returns."""
    try:
        confinement.become(confinement.RUNNER_UID)
        removed = 0
        for path, folder in _removable(request["root"], os.getuid()):
            with contextlib.suppress(OSError):
                (os.rmdir if folder else os.unlink)(path)
                removed += 1
        send_msg(conn, {"removed": removed})
    except BaseException:
        pass
    finally:
        os._exit(0)


# ----- the zygote: a clean process that forks runners ----------------------------------------
def zygote_main(control: socket.socket) -> None:
    """Forks a runner (or janitor) per request. The CPU set is read once, before any job ran:
    the worker's full set, which each runner sets for itself."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # runners are reaped automatically
    cpus = os.sched_getaffinity(0)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 16, 2)
            request = json.loads(data)
        except Exception:
            os._exit(0)
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            control.close()
            ours.close()
            if request.get("kind") == "janitor":
                janitor_main(theirs, request)
            runner_main(theirs, fds, request, cpus)
        for fd in fds:
            os.close(fd)
        theirs.close()
        socket.send_fds(control, [struct.pack("!i", pid)], [ours.fileno()])
        ours.close()


class SandboxFailure(Exception):
    """The sandbox itself failed (not the program): the job's result says so, and the worker is
    replaced."""


class Zygote:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                # Keep only the control socket: no runner may reach the host's protocol stream.
                keep = theirs.fileno()
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.closerange(3, keep)
                os.closerange(keep + 1, 1 << 16)
                zygote_main(theirs)
            finally:
                os._exit(0)
        theirs.close()
        self.control = ours
        self.control.settimeout(SPAWN_SECONDS)

    def spawn(self, request: dict, fds: tuple[int, ...] = ()) -> tuple[int, socket.socket]:
        """Fork a runner (or janitor). Bounded by SPAWN_SECONDS; the test timer is held off
        meanwhile, so that it cannot cut the exchange in half and desynchronise the zygote."""
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        try:
            socket.send_fds(self.control, [json.dumps(request).encode()], list(fds))
            data, got, _, _ = socket.recv_fds(self.control, 4, 1)
        except OSError as error:  # TimeoutError included
            raise SandboxFailure(f"the zygote did not fork: {describe(error)}") from None
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
        if len(data) != 4 or len(got) != 1:
            raise SandboxFailure("the zygote stopped answering")
        return struct.unpack("!i", data)[0], socket.socket(fileno=got[0])


# ----- the executor: runs jobs, evaluates the tests itself -----------------------------------
class ProgramFailed(Exception):
    pass


def _kill(pid: int, group: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def stop(pid: int, conn: socket.socket) -> None:
    """Kill a runner (its whole session) or a janitor, close our end, and wait until it is
    gone."""
    _kill(pid, group=True)
    _kill(pid)
    conn.close()
    _wait_gone(pid, 1.0)


def _wait_gone(pid: int, seconds: float) -> None:
    """SIGKILL is asynchronous: wait (briefly) until `pid` is reaped, so that the stray-process
    scan after the job does not mistake it for a leftover."""
    try:  # a pidfd turns readable when the process exits: no polling
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # gone already, or a kernel (gVisor) without pidfds
        fd = None
    if fd is not None:
        try:
            select.select([fd], [], [], seconds)
        finally:
            os.close(fd)
    give_up = time.monotonic() + seconds
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < give_up:
        with contextlib.suppress(ChildProcessError):  # orphaned: now our zombie to reap
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.0005)


class Started:
    """A runner process forked before its job arrived, with its folder and output files."""

    def __init__(self, zygote: Zygote, scratch: str, private: str) -> None:
        self.workdir = tempfile.mkdtemp(prefix="job-", dir=scratch)
        os.chmod(self.workdir, 0o1777 if MODE == "container" else 0o700)  # runners: another user
        self.paths = [os.path.join(private, name) for name in ("stdout", "stderr")]
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        self.outputs = tuple(os.open(path, flags, 0o600) for path in self.paths)
        self.zygote = zygote
        self.process: tuple[int, socket.socket] | None = self.fork()

    def fork(self) -> tuple[int, socket.socket]:
        return self.zygote.spawn({"kind": "runner", "workdir": self.workdir}, self.outputs)

    def take(self) -> tuple[int, socket.socket]:
        """The waiting runner the first time, a newly forked one after that (a test that timed
        out killed the last)."""
        process, self.process = self.process, None
        return process or self.fork()

    def close(self) -> None:
        if self.process is not None:
            stop(*self.process)
            self.process = None
        for fd in self.outputs:
            os.close(fd)


class Runner:
    """One loaded program in one runner process."""

    def __init__(self, started: Started, job: dict, deadline: float) -> None:
        self.pid, self.conn = started.take()
        left = max(deadline - time.monotonic(), 0.001)
        self.conn.settimeout(left)  # the program is sent in time, or not at all
        try:
            send_msg(self.conn, {"program": job["program"], "limits": job["limits"]})
        except OSError:
            self.kill()
            raise TimeoutError("the runner did not take the program in time") from None
        self.conn.settimeout(None)
        self.info = recv_msg(self.conn, deadline)
        if self.info.get("sandbox_error"):
            self.kill()
            raise SandboxFailure(f"the runner could not start: {self.info['sandbox_error']}")

    def call(self, name: str, args: tuple, kwargs: dict, deadline: float):
        send_msg(
            self.conn,
            {
                "name": name,
                "args": [encode(a) for a in args],
                "kwargs": [[k, encode(v)] for k, v in kwargs.items()],
            },
        )
        reply = recv_msg(self.conn, deadline)
        if not reply.get("ok"):
            raise ProgramFailed(cap(str(reply.get("error"))))
        for original, changed in zip(args, reply.get("args", []), strict=False):
            if changed is None:
                continue
            changed = decode(changed)
            if type(original) is list and type(changed) is list:
                original[:] = changed
            elif type(original) in (dict, set) and type(changed) is type(original):
                original.clear()
                original.update(changed)
        return decode(reply["value"])

    def kill(self) -> None:
        stop(self.pid, self.conn)


class Proxy:
    """Stands for a program function inside a test: calls cross to the runner as plain data."""

    def __init__(self, job_state: JobState, name: str) -> None:
        self._state, self._name = job_state, name

    def __call__(self, *args, **kwargs):
        return self._state.call(self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<program function {self._name}>"


class TestTimeout(BaseException):
    """Raised in the executor when a test's time is up (BaseException: tests cannot catch it
    with `except Exception`)."""


class JobState:
    def __init__(self, started: Started, job: dict) -> None:
        self.started, self.job = started, job
        self.runner: Runner | None = None
        self.deadline = 0.0

    def load(self) -> Runner:
        if self.runner is None:
            runner = Runner(self.started, self.job, self.deadline)
            self.runner = runner
            if not runner.info.get("ok"):
                raise ProgramFailed(cap(str(runner.info.get("error"))))
        return self.runner

    def drop_runner(self) -> None:
        if self.runner is not None:
            self.runner.kill()
            self.runner = None

    def call(self, name: str, args: tuple, kwargs: dict):
        runner = self.load()
        try:
            return runner.call(name, args, kwargs, self.deadline)
        except TimeoutError:
            self.drop_runner()
            raise TestTimeout() from None
        except ProgramFailed:  # the program raised: its runner serves on
            raise
        except Exception as error:  # a dead, lying or oversized runner: never trusted again
            self.drop_runner()
            raise ProgramFailed(describe(error)) from None


def _alarm(signum, frame):
    raise TestTimeout()


def test_namespace(state: JobState, info: dict) -> dict:
    namespace = {"__name__": "__test__", "__builtins__": builtins}
    for alias, module in info.get("modules", {}).items():
        root = str(module).split(".")[0]
        if root in sys.stdlib_module_names and root not in SAFE_MODULES_DENY:
            with contextlib.suppress(Exception):
                namespace[alias] = __import__(module, fromlist=["_"])
    for name, value in info.get("values", {}).items():
        with contextlib.suppress(ValueError, TypeError, RecursionError):
            namespace[name] = decode(value)
    for name in info.get("functions", []):
        namespace[name] = Proxy(state, name)
    for name in list(namespace):
        if name in BUILTIN_NAMES:  # the program may not shadow what the tests rely on
            del namespace[name]
    entry = state.job.get("entry_point")
    if entry:
        namespace["candidate"] = Proxy(state, entry)
    return namespace


def read_output(path: str, limit: int) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not os.path.isfile(f"/proc/self/fd/{fd}"):
            return ""
        return os.read(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _timed(seconds: float) -> None:
    """Arm the test timer a little after the socket deadline it backs up."""
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001) + 0.25)


def run_job(started: Started, job: dict) -> dict:
    """Load the program once, then run each test under its own timer, inside the job's budget.
    Everything the executor does for a test (building its namespace, decoding values) runs
    under that test's timer."""
    began = time.monotonic()
    tests = job["tests"]
    timeout = float(job["timeout"])
    budget = float(job["job_timeout"])  # the host's Job.budget, default included
    end = began + budget
    passed = [False] * len(tests)
    result = {"error": None, "failed_test": None, "load_error": None, "timed_out": False}
    state = JobState(started, job)
    timeouts = 0
    signal.signal(signal.SIGALRM, _alarm)
    try:
        left = min(timeout, end - time.monotonic())
        state.deadline = time.monotonic() + left
        try:
            _timed(left)
            info = state.load().info
        except (TestTimeout, TimeoutError):
            state.drop_runner()
            result.update(
                timed_out=True,
                load_error=f"TimeoutError: the program did not finish loading within {left:g} s",
            )
            info = None
        except (ProgramFailed, EOFError, OSError, ValueError) as error:
            state.drop_runner()
            result["load_error"] = (
                str(error) if isinstance(error, ProgramFailed) else describe(error)
            )
            info = None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for index, test in enumerate(tests if info is not None else ()):
            if timeouts >= job["max_timeouts"]:
                break
            left = min(timeout, end - time.monotonic())
            if left <= 0:
                result["timed_out"] = True
                failure = f"TimeoutError: the job's {budget:g} s ran out before test {index}"
                if result["error"] is None:
                    result.update(error=failure, failed_test=index)
                break
            state.deadline = time.monotonic() + left
            try:
                _timed(left)
                namespace = test_namespace(state, info)
                exec(compile(test, f"<test {index}>", "exec"), namespace)
                passed[index] = True
                continue
            except TestTimeout:
                state.drop_runner()
                timeouts += 1
                result["timed_out"] = True
                if left < timeout:
                    failure = f"TimeoutError: the job's {budget:g} s ran out during test {index}"
                else:
                    failure = f"TimeoutError: test {index} took longer than {timeout:g} s"
            except ProgramFailed as error:
                failure = str(error)
            except BaseException as error:
                failure = describe(error)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if result["error"] is None:
                result.update(error=failure, failed_test=index)
        if result["error"] is None and result["load_error"]:
            result["error"] = result["load_error"]
        limit = int(job.get("output_limit", 4096))
        result["stdout"] = read_output(started.paths[0], limit)
        result["stderr"] = read_output(started.paths[1], limit)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        state.drop_runner()
        started.close()
    result["passed"] = passed
    result["duration"] = time.monotonic() - began
    return result


# ----- after each job: clean what is cheap to clean, and check everything else ----------------
def strays(zygote: Zygote) -> list[int]:
    """Processes left by jobs. The executor is a child subreaper (and PID 1 in a container), so
    every orphaned descendant becomes its child: kill those. In a container, anything at all
    besides the executor and its zygote is a stray too."""
    own = {os.getpid(), zygote.pid}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in own:
            continue
        pid = int(entry)
        if MODE == "container" or _parent_of(pid) == os.getpid():
            found.append(pid)
    return found


def _parent_of(pid: int) -> int | None:
    fields = confinement.stat_fields(pid)
    return int(fields[1]) if len(fields) > 1 else None


def kill_strays(zygote: Zygote) -> bool:
    """Kill every stray process; False if some would not die."""
    for _ in range(200):
        found = strays(zygote)
        if not found:
            return True
        for pid in found:
            _kill(pid)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.005)
    return False


def _wipe(root: str, keep: set[str]) -> list[str]:
    """Remove what we can under `root` (but not `keep`); the names still there."""
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if path in keep:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return [n for n in os.listdir(root) if os.path.join(root, n) not in keep]


def clean_files(zygote: Zygote, scratch: str, keep: set[str]) -> list[str]:
    """Empty the scratch space; files a runner left where the executor may not delete them (its
    own folders, in a container) go to a janitor running as the runner user. Returns what is
    still there."""
    left = _wipe(scratch, keep)
    if left and MODE == "container":
        pid, conn = zygote.spawn({"kind": "janitor", "root": scratch})
        try:
            recv_msg(conn, time.monotonic() + JANITOR_SECONDS)
        except (TimeoutError, EOFError, OSError, ValueError):
            pass
        finally:
            stop(pid, conn)
        left = _wipe(scratch, keep)
    return left


def ipc_objects() -> list[str]:
    """System V IPC objects and POSIX message queues in this IPC namespace (the seccomp filter
    stops their creation; this is the second check)."""
    found = []
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as f:
            found += [f"{kind} {line.split()[1]}" for line in f.readlines()[1:] if line.strip()]
    with contextlib.suppress(OSError):
        found += [f"mqueue {name}" for name in os.listdir("/dev/mqueue")]
    return found


def after_job(zygote: Zygote, scratch: str, keep: set[str], start: dict) -> list[str]:
    """Why the worker must be replaced after this job (empty: it is as it started)."""
    reasons = []
    if not kill_strays(zygote):
        reasons.append("processes that would not die")
    left = clean_files(zygote, scratch, keep)
    if left:
        reasons.append(f"files that could not be removed: {cap(', '.join(left), 200)}")
    if MODE == "container":
        reasons += [f"IPC object {name}" for name in ipc_objects()[:5]]
    for who, pid in (("executor", os.getpid()), ("zygote", zygote.pid)):
        reasons += [f"the {who}'s {what} changed" for what in confinement.changed_vitals(
            start[who], pid)]  # fmt: skip
    return reasons


def trim_memory() -> None:
    """Hand the heap that a job's messages freed back to the system: glibc keeps freed memory
    up to twice its largest recent allocation (60 MB after a 30 MB message), which the next job
    would find already in use. Where there is no glibc, nothing to do."""
    with contextlib.suppress(Exception):
        libc().malloc_trim(0)


def harden_executor() -> None:
    """PR_SET_DUMPABLE 0: same-user processes may no longer ptrace us or read our memory.
    PR_SET_CHILD_SUBREAPER: orphans of runners become our children, so we can find them."""
    try:
        lib = libc()
        lib.prctl(4, 0, 0, 0, 0)
        lib.prctl(36, 1, 0, 0, 0)
    except Exception:
        pass


def confine() -> tuple[Zygote, dict]:
    """Install the seccomp filter, fork the zygote, and (in a container) split users: the zygote
    stays root to make runners, the executor keeps only CAP_KILL."""
    harden_executor()  # inherited by the zygote
    isolation = {"seccomp": confinement.install_filter()}
    if MODE == "container" and os.getuid() != 0:
        isolation["users"] = "shared: the executor must start as root to separate users"
    zygote = Zygote()
    if MODE == "container" and os.getuid() == 0:
        try:
            confinement.become(confinement.EXECUTOR_UID, keep=(confinement.CAP_KILL,))
            isolation["users"] = "separate"
            isolation["runner_uid"] = confinement.RUNNER_UID
        except Exception as error:
            isolation["users"] = f"shared: {describe(error)}"
    harden_executor()  # after the user switch, which resets the dumpable flag
    return zygote, isolation


def main() -> None:
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.set_int_max_str_digits(INT_DIGITS)
    zygote, isolation = confine()
    # the process backend's scratch folder belongs to the worker, which removes it on close
    scratch = sys.argv[2] if MODE == "process" else "/tmp"
    private = tempfile.mkdtemp(prefix=".executor-", dir=scratch)  # 0700: ours alone
    start = {"executor": confinement.vitals(os.getpid()), "zygote": confinement.vitals(zygote.pid)}

    def reply(obj) -> None:
        data = (json.dumps(obj, ensure_ascii=True) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(proto_out, view) :]

    reply(
        {
            "ready": True,
            "mode": MODE,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "isolation": isolation,
        }
    )
    spare: Started | None = None
    for line in proto_in:
        try:
            job = json.loads(line)
        except ValueError as error:
            reply({"fatal": f"bad job line: {cap(str(error), 200)}"})
            continue
        try:
            started, spare = spare or Started(zygote, scratch, private), None
            result = run_job(started, job)
            reasons = []
        except SandboxFailure as error:
            result = {
                "passed": [False] * len(job.get("tests", [])),
                "error": f"SandboxError: {error}",
            }
            reasons = [str(error)]
        except BaseException:
            result = {
                "passed": [False] * len(job.get("tests", [])),
                "error": "SandboxError: " + traceback.format_exc(limit=3)[-500:],
            }
            reasons = ["the executor failed"]
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        try:
            reasons += after_job(zygote, scratch, {private}, start)
        except BaseException as error:
            reasons.append(f"the clean-up failed: {describe(error)}")
        result["error"] = cap(result["error"]) if result.get("error") else result.get("error")
        result["dirty"] = reasons
        result["id"] = job.get("id")
        reply(result)
        if reasons:
            break  # a worker that is not as it started serves no further job
        trim_memory()
        try:  # the next job's runner forks and sets itself up while the host reads this reply
            spare = Started(zygote, scratch, private)
        except Exception:
            spare = None  # the next job tries again, and reports what fails


if __name__ == "__main__":
    main()
