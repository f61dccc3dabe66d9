"""What keeps one job from reaching the next: users, a seccomp filter, and vital signs.

Standalone (standard library only): the executor loads it from its own folder, in the image and
in the process backend.

- **Users.** In a container the executor starts as root with three capabilities (KILL, SETUID,
  SETGID) and splits at once: the zygote stays root to switch runners to RUNNER_UID, and the
  executor drops to EXECUTOR_UID keeping only CAP_KILL. A runner therefore cannot signal,
  `prlimit`, re-nice or re-schedule either of them, and `kill(-1)` from a runner only reaches
  other runners.
- **Seccomp.** `install_filter()` stacks a filter on top of the container runtime's own profile
  (Docker's default), so the daemon's profile stays whatever its version ships, and ours only
  adds denials. It denies:
  - socket families other than AF_UNIX, AF_INET and AF_INET6 (EAFNOSUPPORT). This covers
    AF_VSOCK (which `network_mode="none"` does not isolate: it reaches the hypervisor), netlink,
    packet, AF_ALG and every rarer family;
  - System V shared memory, semaphores and message queues, and POSIX message queues (EPERM), which
    would outlive the job in the container's IPC namespace;
  - prlimit, affinity, scheduling, nice and I/O priority changes aimed at another process
    (EPERM; a process may still change its own);
  - ptrace, cross-process memory access, io_uring, userfaultfd, perf events, bpf and the kernel
    keyring (EPERM);
  - any system call from another ABI: 32-bit `int 0x80` on x86_64, x32, AArch32 (ENOSYS).
- **Vital signs.** `vitals(pid)` reads a process's limits, CPU affinity, scheduling policy,
  priority and run state, so the executor can compare itself and its zygote after every job with
  how they started.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct

RUNNER_UID = 65534  # nobody: every model-written program
EXECUTOR_UID = 65533  # the executor, after it splits from the zygote

CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7
PR_SET_KEEPCAPS, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 8, 38, 22
SECCOMP_MODE_FILTER = 2

AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
ALLOWED_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)

# (audit arch, system call numbers) per machine; names are the kernel's.
ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "socket": 41, "socketpair": 53, "shmget": 29, "semget": 64, "msgget": 68,
            "mq_open": 240, "prlimit64": 302, "sched_setaffinity": 203,
            "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314,
            "setpriority": 141, "ioprio_set": 251, "ptrace": 101, "process_vm_readv": 310,
            "process_vm_writev": 311, "io_uring_setup": 425, "userfaultfd": 323,
            "perf_event_open": 298, "bpf": 321, "add_key": 248, "request_key": 249,
            "keyctl": 250,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198, "socketpair": 199, "shmget": 194, "semget": 190, "msgget": 186,
            "mq_open": 180, "prlimit64": 261, "sched_setaffinity": 122,
            "sched_setscheduler": 119, "sched_setparam": 118, "sched_setattr": 274,
            "setpriority": 140, "ioprio_set": 30, "ptrace": 117, "process_vm_readv": 270,
            "process_vm_writev": 271, "io_uring_setup": 425, "userfaultfd": 282,
            "perf_event_open": 241, "bpf": 280, "add_key": 217, "request_key": 218,
            "keyctl": 219,
        },
    ),
}  # fmt: skip
ARCHES["arm64"] = ARCHES["aarch64"]
X32_BIT = 0x40000000

DENIED = (
    "shmget", "semget", "msgget", "mq_open", "ptrace", "process_vm_readv", "process_vm_writev",
    "io_uring_setup", "userfaultfd", "perf_event_open", "bpf", "add_key", "request_key", "keyctl",
)  # fmt: skip
SELF_ONLY_ARG0 = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr")
SELF_ONLY_ARG1 = ("setpriority", "ioprio_set")  # (which, who, ...): who == 0 is the caller

# classic BPF
LD_ABS, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
RET_ALLOW = 0x7FFF0000


def _ret_errno(code: int) -> int:
    return 0x00050000 | code


def _arg(index: int, high: bool = False) -> int:
    """Offset of an argument's 32-bit half in struct seccomp_data (little-endian)."""
    return 16 + 8 * index + (4 if high else 0)


def filter_program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; jumps are resolved from labels."""
    arch, numbers = ARCHES[machine or platform.machine()]
    code: list = []  # items: (op, target_if_true, target_if_false, k) or a label string

    def jump_if(value: int, label: str) -> None:
        code.append((JEQ, label, None, value))

    code += [(LD_ABS, None, None, 4), (JEQ, None, "enosys", arch), (LD_ABS, None, None, 0)]
    if arch == ARCHES["x86_64"][0]:
        code.append((JGE, "enosys", None, X32_BIT))
    for name in DENIED:
        jump_if(numbers[name], "eperm")
    jump_if(numbers["socket"], "family")
    jump_if(numbers["socketpair"], "family")
    jump_if(numbers["prlimit64"], "prlimit")
    for name in SELF_ONLY_ARG0:
        jump_if(numbers[name], "arg0_self")
    for name in SELF_ONLY_ARG1:
        jump_if(numbers[name], "arg1_self")
    code.append((RET, None, None, RET_ALLOW))
    code += ["family", (LD_ABS, None, None, _arg(0))]
    for family in ALLOWED_FAMILIES:
        jump_if(family, "allow")
    code.append((RET, None, None, _ret_errno(errno.EAFNOSUPPORT)))
    # prlimit64(pid, resource, new, old): reading any process is fine; setting only our own.
    code += ["prlimit", (LD_ABS, None, None, _arg(0)), (JEQ, "allow", None, 0)]
    code += [(LD_ABS, None, None, _arg(2)), (JEQ, None, "eperm", 0)]
    code += [(LD_ABS, None, None, _arg(2, high=True)), (JEQ, "allow", "eperm", 0)]
    code += ["arg0_self", (LD_ABS, None, None, _arg(0)), (JEQ, "allow", "eperm", 0)]
    code += ["arg1_self", (LD_ABS, None, None, _arg(1)), (JEQ, "allow", "eperm", 0)]
    code += ["allow", (RET, None, None, RET_ALLOW)]
    code += ["eperm", (RET, None, None, _ret_errno(errno.EPERM))]
    code += ["enosys", (RET, None, None, _ret_errno(errno.ENOSYS))]

    labels, position = {}, 0
    for item in code:
        if isinstance(item, str):
            labels[item] = position
        else:
            position += 1
    program, position = [], 0
    for item in code:
        if isinstance(item, str):
            continue
        op, if_true, if_false, k = item
        offsets = [0 if t is None else labels[t] - position - 1 for t in (if_true, if_false)]
        if any(not 0 <= o < 256 for o in offsets):
            raise ValueError("seccomp jump out of range")
        program.append((op, offsets[0], offsets[1], k))
        position += 1
    return program


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def install_filter() -> str:
    """Install the filter on this process (inherited by every later child); returns "active" or
    why it is not."""
    if platform.machine() not in ARCHES:
        return f"not installed: no syscall table for {platform.machine()}"
    packed = b"".join(struct.pack("HBBI", *i) for i in filter_program())
    buffer = ctypes.create_string_buffer(packed, len(packed))
    prog = _SockFprog(len(packed) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    lib = _libc()
    if lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"not installed: no_new_privs refused ({os.strerror(ctypes.get_errno())})"
    if lib.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"not installed: {os.strerror(ctypes.get_errno())}"
    return "active"


# ----- users and capabilities ------------------------------------------------------------------
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _capset(mask: int) -> None:
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)((mask, mask, 0), (0, 0, 0))
    if _libc().capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def become(uid: int, keep: tuple[int, ...] = ()) -> None:
    """Switch this process (all three uids and gids, no groups) to `uid`, keeping only the
    capabilities in `keep`; raises unless the switch verifiably happened."""
    lib = _libc()
    lib.prctl(PR_SET_KEEPCAPS, 1 if keep else 0, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _capset(sum(1 << c for c in keep))
    lib.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0)
    status = process_status("self")
    want = sum(1 << c for c in keep)
    if status.get("Uid") != [uid] * 4 or status.get("Gid") != [uid] * 4:
        raise OSError(f"user switch did not hold: Uid {status.get('Uid')}")
    if status.get("CapEff") != want or status.get("CapPrm") != want or status.get("CapInh"):
        raise OSError(f"capabilities did not drop: {status}")


def process_status(pid: int | str) -> dict:
    """The ids and capability sets of /proc/PID/status."""
    found: dict = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Uid", "Gid"):
                found[key] = [int(v) for v in value.split()]
            elif key in ("CapEff", "CapPrm", "CapInh"):
                found[key] = int(value, 16)
    return found


# ----- vital signs -------------------------------------------------------------------------
def vitals(pid: int) -> dict:
    """What a job must not be able to change about the executor or its zygote. The run state
    is separate: it is compared with "stopped", not with the start."""
    param = os.sched_getparam(pid)
    return {
        "limits": _limits(pid),
        "affinity": sorted(os.sched_getaffinity(pid)),
        "policy": os.sched_getscheduler(pid),
        "priority": param.sched_priority,
        "nice": os.getpriority(os.PRIO_PROCESS, pid),
    }


def _limits(pid: int) -> str | list:
    """/proc/PID/limits; where the kernel has none (gVisor), `prlimit` where permitted (our own
    process), else a note that they cannot be read (compared equal, so not a false alarm)."""
    try:
        with open(f"/proc/{pid}/limits") as f:
            return f.read()
    except FileNotFoundError:
        pass
    names = sorted(n for n in dir(resource) if n.startswith("RLIMIT_"))
    try:
        return [(n, resource.prlimit(pid, getattr(resource, n))) for n in names]
    except OSError:
        return "unreadable here"


def stat_fields(pid: int) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name (which may hold spaces and
    parentheses): state, parent, ...; empty if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 :].split()
    except (OSError, ValueError):
        return []


def run_state(pid: int) -> str:
    """The one-letter state of /proc/PID/stat ("?" if gone)."""
    fields = stat_fields(pid)
    return fields[0].decode() if fields else "?"


def changed_vitals(before: dict, pid: int) -> list[str]:
    """Which vital signs of `pid` differ from `before` (or "gone", "stopped")."""
    state = run_state(pid)
    if state in ("?", "Z", "X"):
        return ["gone"]
    changes = ["stopped"] if state in ("T", "t") else []
    try:
        now = vitals(pid)
    except (OSError, ProcessLookupError):
        return [*changes, "unreadable"]
    return changes + [key for key in before if before[key] != now[key]]
