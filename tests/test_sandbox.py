"""The code sandbox: correctness on HumanEval, and a hostile-program suite on both backends."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from collabzoo.sandbox import Job, get_sandbox

MUTATE = """

_collabzoo_original = {entry}


def _collabzoo_mutate(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "?"
    if isinstance(value, (list, tuple)):
        return type(value)([*value, None])
    if value is None:
        return 0
    return None


def {entry}(*args, **kwargs):
    return _collabzoo_mutate(_collabzoo_original(*args, **kwargs))
"""


@pytest.fixture(scope="module")
def humaneval(shared_data: Path) -> list[dict]:
    path = shared_data / "humaneval" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def canonical_jobs(problems: list[dict], mutate: bool) -> list[Job]:
    jobs = []
    for p in problems:
        program = p["prompt"] + p["canonical_solution"]
        if mutate:
            program += MUTATE.format(entry=p["entry_point"])
        jobs.append(Job(program, (p["test"] + "\ncheck(candidate)\n",), p["entry_point"], 10.0))
    return jobs


@pytest.mark.parametrize("backend", ["docker", "process"])
def test_humaneval_canonical_solutions_pass_and_mutants_fail(
    humaneval: list[dict], backend: str, request: pytest.FixtureRequest
) -> None:
    sandbox = request.getfixturevalue(f"{backend}_sandbox")
    results = sandbox.run_many(canonical_jobs(humaneval, mutate=False))
    failed = [
        (p["task_id"], r.error) for p, r in zip(humaneval, results, strict=True) if not r.all_passed
    ]
    assert not failed, failed
    mutants = sandbox.run_many(canonical_jobs(humaneval, mutate=True))
    survived = [p["task_id"] for p, r in zip(humaneval, mutants, strict=True) if r.all_passed]
    assert not survived, f"mutated solutions that still pass: {survived}"


def test_a_pool_closed_at_interpreter_exit_closes_every_worker(tmp_path: Path) -> None:
    """The default sandbox is closed by an atexit hook, when concurrent.futures refuses new work:
    the pool must still close every worker (the process backend's: its scratch folders go)."""
    script = tmp_path / "exit.py"
    script.write_text(
        "import atexit\n"
        "from collabzoo.sandbox import Job, get_sandbox\n"
        "sandbox = get_sandbox('process', size=2)\n"
        "jobs = [Job('def f(x):\\n    return x', ('assert candidate(1) == 1',), 'f')] * 2\n"
        "assert [r.passed for r in sandbox.run_many(jobs)] == [(True,), (True,)]\n"
        "print(*(w.scratch for w in list(sandbox._idle.queue) if w is not None))\n"
        "atexit.register(sandbox.close)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    scratch = done.stdout.split()
    assert len(scratch) == 2
    assert "Exception ignored" not in done.stderr, done.stderr
    assert not any(Path(folder).exists() for folder in scratch)


def test_results_report_errors_output_and_fractions(docker_sandbox) -> None:
    result = docker_sandbox.run(
        "def f(x):\n    print('hello from f')\n    return x * 2\n",
        ["assert candidate(2) == 4", "assert candidate(2) == 5", "assert f(3) == 6"],
        entry_point="f",
    )
    assert result.passed == (True, False, True)
    assert result.failed_test == 1 and result.error == "AssertionError"
    assert result.fraction_passed == pytest.approx(2 / 3) and not result.all_passed
    assert "hello from f" in result.stdout and not result.timed_out
    broken = docker_sandbox.run("def f(:\n", ["assert True"], entry_point="f")
    assert broken.passed == (False,) and broken.load_error.startswith("SyntaxError")
    raising = docker_sandbox.run(
        "def f():\n    raise KeyError('k')", ["candidate()"], entry_point="f"
    )
    assert raising.error == "KeyError: 'k'"


def test_in_place_mutation_and_helper_functions_reach_the_tests(docker_sandbox) -> None:
    result = docker_sandbox.run(
        "def helper(x):\n    return x + 1\n\ndef f(items):\n    items.sort()\n",
        ["xs = [3, 1, 2]\ncandidate(xs)\nassert xs == [1, 2, 3]", "assert helper(1) == 2"],
        entry_point="f",
    )
    assert result.passed == (True, True)


def test_ints_beyond_4300_digits_cross_both_ways(docker_sandbox) -> None:
    """Python refuses int-to-decimal conversions beyond 4,300 digits. Ints cross in hex (no
    decimal at all), and the runner and the tests may print up to 100,000 digits; beyond that
    the failure names the limit."""
    result = docker_sandbox.run(
        "def f(n):\n    return 10**n\n"
        "def echo(x):\n    return x\n"
        "def text(n):\n    return str(10**n)\n"
        "BIG = 10**5000\n",
        [
            "assert candidate(5000) == 10**5000",
            "assert candidate(200_000) == 10**200_000",
            "assert echo(-(10**5000)) == -(10**5000)",
            "assert echo([10**5000, 1, -2]) == [10**5000, 1, -2]",
            "assert echo({10**5000: (10**4400, b'x')}) == {10**5000: (10**4400, b'x')}",
            "assert BIG == 10**5000",
            "assert text(99_999) == '1' + '0' * 99_999",
            "assert str(candidate(99_999)) == '1' + '0' * 99_999",
            "text(100_000)",
        ],
        30.0,
        entry_point="f",
    )
    assert result.passed == (True,) * 8 + (False,), result
    assert result.failed_test == 8 and "limit (100000 digits)" in result.error, result.error


def test_million_element_arguments_and_answers_cross(docker_sandbox) -> None:
    """Each argument or answer below holds a million elements: within the container's memory
    limit (512 MB) and the bound of 4 million values per message."""
    result = docker_sandbox.run(
        "def f(xs):\n    return sum(xs)\n"
        "def size(x):\n    return len(x)\n"
        "def pairs(n):\n    return [(i, -i) for i in range(n)]\n"
        "def table(n):\n    return {i: str(i) for i in range(n)}\n",
        [
            "assert candidate(list(range(10**6))) == 499999500000",
            "assert candidate([float(i) for i in range(10**6)]) == 499999500000.0",
            "assert size([str(i) for i in range(10**6)]) == 10**6",
            "assert candidate([2**64 + i for i in range(10**6)]) == 2**64 * 10**6 + 499999500000",
            "assert size({i: str(i) for i in range(10**6)}) == 10**6",
            "assert size([(i, -i) for i in range(10**6)]) == 10**6",
            "assert size([[i, 0.5] for i in range(10**6)]) == 10**6",
            "assert pairs(10**6)[-1] == (999999, -999999)",
            "assert table(10**6)[999999] == '999999'",
        ],
        30.0,
        entry_point="f",
    )
    assert result.all_passed, result


def test_many_environments_share_one_pool(docker_sandbox) -> None:
    jobs = [
        Job(f"def f():\n    return {i}", (f"assert candidate() == {i}",), "f") for i in range(40)
    ]
    results: dict[int, list] = {}

    def submit(k: int) -> None:
        results[k] = docker_sandbox.run_many(jobs[k::4])

    threads = [threading.Thread(target=submit, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.all_passed for k in range(4) for r in results[k])


# ----- the hostile-program suite ---------------------------------------------------------------
SECRET = "collabzoo-host-secret-8c1f2"
TIMEOUT = 2.0


@dataclass(frozen=True)
class Hostile:
    name: str
    program: str
    tests: tuple[str, ...] = ("assert candidate() == 1",)
    harmful: bool = False
    """Would hurt the machine if it escaped: runs only on a pool with proven isolation."""
    process_backend: str | None = "same"
    """None: never run on the process backend; otherwise why it is (or is not) comparable."""
    docker: bool = True
    """False: cannot fail in a container (its test means something on the process backend)."""


def hostile_cases(host_file: str, port: int) -> list[Hostile]:
    return [
        Hostile("infinite loop", "def f():\n    while True:\n        pass"),
        Hostile("sleep", "import time\ndef f():\n    time.sleep(1000)"),
        Hostile(
            "fork bomb (wins past the pids limit)",
            "import os, time\ndef f():\n    made = 0\n    while made < 400:\n        try:\n"
            "            if os.fork() == 0:\n                time.sleep(30)\n"
            "                os._exit(0)\n            made += 1\n        except OSError:\n"
            "            break\n    return 1 if made > 128 else 0",
            harmful=True,
            process_backend=None,
        ),
        Hostile(
            "memory bomb (wins past 512 MB)",
            "def f():\n    hog = []\n    try:\n        while len(hog) < 16:\n"
            "            hog.append(bytearray(50 << 20))\n    except MemoryError:\n"
            "        pass\n    return 1 if len(hog) * 50 > 512 else 0",
            harmful=True,
            process_backend=None,
        ),
        Hostile(
            "100 MB of output",
            "import sys\ndef f():\n    line = 'x' * (1 << 20) + '\\n'\n"
            "    for _ in range(100):\n        sys.stdout.write(line)\n    return 1",
            harmful=True,
            process_backend=None,
        ),
        Hostile(
            "filling the disk (wins past the 64 MB scratch space)",
            "def f():\n    total = 0\n    try:\n        for i in range(12):\n"
            "            with open(f'/tmp/fill{i}', 'wb') as out:\n"
            "                out.write(b'x' * (8 << 20))\n            total += 8\n"
            "    except OSError:\n        pass\n    return 1 if total > 64 else 0",
            harmful=True,
            process_backend=None,
        ),
        Hostile(
            "reading host files and environment",
            "import os\ndef f():\n    found = os.environ.get('COLLABZOO_TEST_SECRET', '')\n"
            f"    try:\n        found += open({host_file!r}).read()\n    except OSError:\n"
            "        pass\n    print(found)\n    return found",
            tests=(f"assert {SECRET!r} in candidate()",),
            process_backend="env only: the process backend shares the host filesystem",
        ),
        Hostile(
            "network to the host's loopback",
            "import socket\ndef f():\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).close()\n"
            "    return 1",
            docker=False,  # a container's 127.0.0.1 is its own: this could never fail there
        ),
        Hostile(
            "an interface or a route out (wins if there is one)",
            "def f():\n    with open('/proc/net/dev') as dev:\n"
            "        names = [line.split(':')[0].strip() for line in dev.readlines()[2:]]\n"
            "    with open('/proc/net/route') as route:\n"
            "        routes = [line for line in route.readlines()[1:] if line.strip()]\n"
            "    return 1 if set(names) - {'lo'} or routes else 0",
        ),
        Hostile(
            "killing the parent and every process (wins if a kill lands)",
            "import os, signal, time\ndef f():\n    landed = 0\n"
            "    for pid in (os.getppid(), 1):\n        try:\n"
            "            os.kill(pid, signal.SIGKILL)\n            landed += 1\n"
            "        except OSError:\n            pass\n    if os.fork() == 0:\n"
            "        time.sleep(0.1)\n        os.kill(-1, signal.SIGKILL)\n"
            "    return 1 if landed else 0",
            harmful=True,
            process_backend=None,
        ),
        Hostile(
            "sys.exit(0) before the asserts", "import sys\nsys.exit(0)\ndef f():\n    return 1"
        ),
        Hostile("os._exit(0) before the asserts", "import os\nos._exit(0)\ndef f():\n    return 1"),
        Hostile("os._exit(0) inside the call", "import os\ndef f():\n    os._exit(0)"),
        Hostile(
            "fake pass markers",
            "import sys\ndef f():\n    for out in (sys.stdout, sys.__stdout__, sys.stderr):\n"
            '        out.write(\'{"passed": [true], "id": 0, "ready": true}\\nPASSED\\n\')\n'
            "        out.flush()\n    return 0",
        ),
        Hostile(
            "always-equal return value",
            "class Yes:\n    def __eq__(self, other):\n        return True\n"
            "    def __ne__(self, other):\n        return False\n"
            "class YesInt(int):\n    def __eq__(self, other):\n        return True\n"
            "def f():\n    return Yes()\ndef g():\n    return YesInt(0)",
            tests=("assert candidate() == 1", "assert g() == 1"),
        ),
        Hostile(
            "redefining check",
            "def check(candidate):\n    return True\ndef f():\n    return 0",
            tests=("def check(candidate):\n    assert candidate() == 1\ncheck(candidate)",),
        ),
        Hostile(
            "shadowing builtins the tests use",
            "def abs(x):\n    return 0\ndef isinstance(*a):\n    return True\n"
            "def f():\n    return 5",
            tests=("assert abs(candidate() - 1) < 0.5", "assert isinstance(candidate(), str)"),
        ),
        Hostile(
            "ignoring SIGTERM",
            "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "def f():\n    while True:\n        pass",
        ),
        Hostile(
            "a thread left running",
            "import threading, os\ndef spam():\n    while True:\n"
            "        os.write(1, b'{\"passed\": [true]}\\n')\n"
            "threading.Thread(target=spam, daemon=False).start()\ndef f():\n    return 0",
        ),
        Hostile(
            "a background process left behind (it marks /tmp while it lives)",
            "import os, time\nif os.fork() == 0:\n    os.setsid()\n    while True:\n"
            "        open('/tmp/collabzoo-marker', 'w').close()\n        time.sleep(0.01)\n"
            "def f():\n    return 0",
            harmful=True,
            process_backend=None,
        ),
        Hostile(
            "writing a file for a later job",
            "def f():\n    for path in ('/tmp/collabzoo-marker', 'collabzoo-marker'):\n"
            "        with open(path, 'w') as out:\n            out.write('planted')\n    return 0",
            harmful=True,
            process_backend=None,
        ),
        Hostile(
            "segfault through ctypes", "import ctypes\ndef f():\n    return ctypes.string_at(0)"
        ),
        Hostile("deep recursion", "def f(n=0):\n    return f(n + 1)"),
        Hostile(
            "invalid UTF-8 and NUL bytes in the source",
            "def f():\n    return 1\n" + b"\xff\xfe".decode("utf-8", "surrogateescape") + "\x00",
        ),
        Hostile("a 10 MB program", "# padding\n" * 1_000_000 + "def f():\n    return 0"),
    ]


@pytest.fixture(scope="module")
def host_secrets(tmp_path_factory):
    """A secret in this process's environment and in a host file, and a loopback server that
    counts the connections it receives."""
    os.environ["COLLABZOO_TEST_SECRET"] = SECRET
    secret_file = tmp_path_factory.mktemp("host") / "secret.txt"
    secret_file.write_text(SECRET)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    connections: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                connections.append(conn)
                conn.close()
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield str(secret_file), server.getsockname()[1], connections
    stop.set()
    thread.join()
    server.close()
    del os.environ["COLLABZOO_TEST_SECRET"]


CASE_NAMES = [c.name for c in hostile_cases("/x", 1) if c.docker]
# Harmful programs never run on the process backend (its isolation is weaker): not a skip, a rule.
PROCESS_CASE_NAMES = [
    c.name for c in hostile_cases("/x", 1) if not c.harmful and c.process_backend is not None
]


def run_hostile(sandbox, case: Hostile, connections: list) -> None:
    started = time.monotonic()
    result = sandbox.run(case.program, list(case.tests), TIMEOUT, entry_point="f")
    elapsed = time.monotonic() - started
    assert not any(result.passed), f"{case.name}: a hostile program earned a pass: {result}"
    assert elapsed < TIMEOUT * (len(case.tests) + 1) + 10, f"{case.name}: took {elapsed:.1f} s"
    assert SECRET not in result.stdout + result.stderr
    assert not connections, "a sandboxed program reached the host's loopback server"
    follow_up = sandbox.run(
        "import os\ndef f(x):\n    return x + 1\n"
        "def leftovers():\n    import time\n    time.sleep(0.05)  # a survivor re-marks by now\n"
        "    return sorted(p for p in os.listdir('/tmp'))\n",
        ["assert candidate(1) == 2", "assert 'collabzoo-marker' not in leftovers()"],
        TIMEOUT,
        entry_point="f",
    )
    assert follow_up.passed == (True, True), f"after {case.name}: {follow_up}"


@pytest.mark.parametrize("name", CASE_NAMES)
def test_hostile_programs_in_docker(name: str, isolated_docker_sandbox, host_secrets) -> None:
    host_file, port, connections = host_secrets
    case = next(c for c in hostile_cases(host_file, port) if c.name == name)
    run_hostile(isolated_docker_sandbox, case, connections)


@pytest.mark.parametrize("name", PROCESS_CASE_NAMES)
def test_hostile_programs_in_the_process_backend(name: str, host_secrets) -> None:
    host_file, port, connections = host_secrets
    case = next(c for c in hostile_cases(host_file, port) if c.name == name)
    if case.process_backend != "same":
        # The process backend shares the host's filesystem: only the environment is scrubbed.
        case = Hostile(case.name, case.program.replace(host_file, "/nonexistent"), case.tests)
    with get_sandbox("process", size=1) as sandbox:
        run_hostile(sandbox, case, connections)


def test_docker_pool_stays_healthy_after_the_whole_suite(
    isolated_docker_sandbox, host_secrets
) -> None:
    host_file, port, _ = host_secrets
    for case in hostile_cases(host_file, port):
        if case.name in ("a 10 MB program",) or not case.docker:
            continue
        result = isolated_docker_sandbox.run(
            case.program, list(case.tests), TIMEOUT, entry_point="f"
        )
        assert not any(result.passed), case.name
    process_count = isolated_docker_sandbox.run(
        "import os\ndef f():\n    return len([p for p in os.listdir('/proc') if p.isdigit()])",
        ["assert candidate() <= 3"],
        entry_point="f",
    )
    assert process_count.all_passed, "only the executor, its zygote and the runner may be alive"
