"""`collabzoo sandbox`: build the code sandbox's image, or check what isolates the code."""

from __future__ import annotations

import argparse
from typing import Any

from collabzoo.cli.usage import UsageError


def cmd_sandbox(args: argparse.Namespace) -> int:
    import docker.errors

    from collabzoo.sandbox import docker_available, get_sandbox
    from collabzoo.sandbox.image import ensure_image, image_tag
    from collabzoo.sandbox.probe import isolation_proven

    available, why = docker_available()
    if args.action == "build":
        if not available:
            raise UsageError(f"no Docker daemon answers ({why}); start Docker and retry")
        import docker

        packages = _task_packages(args.task)
        try:
            tag = ensure_image(
                docker.from_env(), base=args.base, rebuild=args.rebuild, packages=packages
            )
        except (RuntimeError, ValueError, docker.errors.DockerException) as error:
            raise UsageError(str(error)) from None
        held = f" (with {len(packages)} packages for {', '.join(args.task)})" if packages else ""
        print(f"sandbox image ready: {tag}{held}")
        return 0
    if args.ray:
        return _check_ray_sandbox(args)
    print(f"docker: {'yes' if available else 'no'} ({why})")
    kinds = ["docker", "process"] if available else ["process"]
    if available:
        import docker

        try:
            docker.from_env().images.get(image_tag())
            print(f"image: {image_tag()} present")
        except docker.errors.ImageNotFound:
            print(
                f"image: {image_tag()} missing (built on first use, or `collabzoo sandbox build`)"
            )
    if args.runtime and not available:
        raise UsageError(f"--runtime {args.runtime} needs Docker, and none answers ({why})")
    healthy = True
    for kind in kinds:
        options = {"runtime": args.runtime} if kind == "docker" and args.runtime else {}
        try:
            sandbox = get_sandbox(kind, size=1, **options)
        except RuntimeError as error:
            print(f"{kind}: could not start: {error}")
            healthy = False
            continue
        with sandbox:
            result = sandbox.run(
                "def f(x):\n    return x + 1", ["assert candidate(1) == 2"], entry_point="f"
            )
            isolated, summary = isolation_proven(sandbox)
        works = result.all_passed
        healthy &= works and (isolated or kind == "process")
        print(
            f"{kind}: trivial program {'passed' if works else 'FAILED: ' + str(result.error)}; "
            f"isolation: {summary}"
        )
    return 0 if healthy else 1


def _task_packages(names: list[str] | None) -> tuple[str, ...]:
    """The pinned packages the named tasks' declarations ask their sandbox for."""
    from collabzoo.envs import declared, resolve

    packages: set[str] = set()
    for name in names or ():
        try:
            spec = declared(resolve(name).short_name)
        except (ValueError, TypeError) as error:
            raise UsageError(f"--task {name}: {error}") from None
        if spec is None or not spec.packages():
            raise UsageError(
                f"--task {name}: this task's code needs no third-party packages (the plain "
                "image runs it: `collabzoo sandbox build`)"
            )
        packages.update(spec.packages())
    return tuple(sorted(packages))


def _check_ray_sandbox(args: argparse.Namespace) -> int:
    """`sandbox check --ray`: the cluster's nodes, and on each the trivial program and the
    isolation probe of its own Docker pool."""
    from collabzoo.sandbox import get_sandbox

    options = {"runtime": args.runtime} if args.runtime else {}
    try:
        sandbox = get_sandbox("ray", address=args.ray_address, size=1, **options)
    except (ImportError, RuntimeError) as error:
        raise UsageError(f"the Ray sandbox could not start: {error}") from None
    with sandbox:
        report = sandbox.probe()
    print(f"ray: {len(report)} node(s)")
    healthy = True
    for node, found in report.items():
        healthy &= found["works"] and found["isolated"]
        works = "passed" if found["works"] else "FAILED"
        print(f"{found['host']} ({node[:12]}): trivial program {works}; {found['summary']}")
    return 0 if healthy else 1


def add_commands(commands: Any) -> None:
    """Add `sandbox` to the `collabzoo` subcommands."""
    sandbox = commands.add_parser(
        "sandbox",
        help="build or check the code sandbox",
        description="build: build the sandbox image (needs Docker; works offline with a local "
        "base image). check: does Docker answer, is the image there, does a trivial program "
        "pass, and which isolation properties a probe program sees.",
    )
    sandbox.add_argument("action", choices=("build", "check"))
    sandbox.add_argument(
        "--base",
        default=None,
        help="base image for build (default: python:3.11-slim, else the offline debootstrap base)",
    )
    sandbox.add_argument("--rebuild", action="store_true", help="build even if present")
    sandbox.add_argument(
        "--task",
        action="append",
        default=None,
        metavar="ENV",
        help="build: the image that also holds the third-party packages this task's code "
        "imports (its declaration's sandbox_packages; `collabzoo list` names the tasks); "
        "repeat for several",
    )
    sandbox.add_argument(
        "--ray",
        action="store_true",
        help="check: every node of a Ray cluster (its Docker pool, image and isolation probe)",
    )
    sandbox.add_argument(
        "--ray-address",
        default=None,
        help="check --ray: the cluster (auto, ray://host:port; default: a local one)",
    )
    sandbox.add_argument(
        "--runtime",
        choices=("runc", "runsc"),
        default=None,
        help="check: the container runtime (runsc: gVisor, if the daemon has it registered)",
    )
    sandbox.set_defaults(handler=cmd_sandbox)
