"""The sandbox image: a slim Python with our executor, built locally (no registry needed).

The tag carries a hash of the Dockerfile and the executor, so a changed executor gets a new
image. The base is the official `python:3.11-slim` where a registry answers; offline, any local
image with `python3` works, e.g. a debootstrap root filesystem imported with `docker import`
(see OFFLINE_BASE_RECIPE), which is how CI builds it.

A task whose code imports third-party modules (ClassEval's numpy, pandas, ...) asks for an
image with `packages`: pinned wheels, installed by the host's pip into the build context for the
base's own Python and platform, then copied in. The build itself never reaches a network, so it
works wherever the host's pip can reach an index or a wheel folder (`PIP_FIND_LINKS`,
`PIP_NO_INDEX`: pip's own settings, inherited).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

EXECUTOR = Path(__file__).with_name("executor.py")
FILES = (EXECUTOR, *(Path(__file__).with_name(f"{m}.py") for m in ("confinement", "plain_data")))
"""What the image holds of ours: the executor and the modules it loads beside it."""
IMAGE_REPOSITORY = "collabzoo-sandbox"
DEFAULT_BASE = "python:3.11-slim"
OFFLINE_BASE = "collabzoo-sandbox-base:bookworm"
OFFLINE_BASE_RECIPE = (
    "debootstrap --variant=minbase --include=python3 bookworm DIR && "
    f"tar -C DIR -c . | docker import - {OFFLINE_BASE}"
)
DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY executor.py confinement.py plain_data.py /opt/collabzoo/
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LANG=C.UTF-8
USER 65534:65534
WORKDIR /tmp
CMD ["python3", "-u", "/opt/collabzoo/executor.py", "container"]
"""
PACKAGES_LAYER = """\
USER 0:0
COPY site /opt/collabzoo/site
RUN python3 -m compileall -q /opt/collabzoo/site; \\
    python3 -c "import os, site; d = site.getsitepackages()[0]; os.makedirs(d, exist_ok=True); \\
open(os.path.join(d, 'collabzoo-packages.pth'), 'w').write('/opt/collabzoo/site\\n')"
USER 65534:65534
"""
"""The packages' layer, after the executor's: a path file puts the wheels' folder on sys.path
after the interpreter's own (nothing shadows the standard library), and the bytecode is compiled
at build time, as the image runs read-only."""
PROBE = (
    "import json, platform, sys; "
    "print(json.dumps([sys.version_info[:2], platform.machine(), platform.libc_ver()]))"
)


def _packages(packages: Sequence[str]) -> tuple[str, ...]:
    """Sorted, deduplicated, and each pinned: an image is named for exactly what it holds."""
    unpinned = [p for p in packages if "==" not in p]
    if unpinned:
        raise ValueError(
            f"sandbox packages must be pinned as name==version, got {unpinned} (an image's tag "
            "names its contents, so a floating version would name two different images)"
        )
    return tuple(sorted(set(packages), key=str.lower))


def image_tag(packages: Sequence[str] = ()) -> str:
    """The image's name: a hash of the Dockerfile, our files and the pinned packages."""
    pinned = _packages(packages)
    digest = hashlib.sha256(DOCKERFILE.encode() + b"".join(f.read_bytes() for f in FILES))
    if pinned:
        digest.update(PACKAGES_LAYER.encode() + "\n".join(pinned).encode())
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A packages file as the image holds it: root's, readable by all, writable by none but
    root (whatever the host's umask and user were)."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    executable = info.isdir() or info.mode & 0o111
    info.mode = 0o755 if executable else 0o644
    return info


def _context(site: Path | None = None) -> IO[bytes]:
    """The build context, spooled to disk (the packages run to hundreds of MB)."""
    buffer = tempfile.TemporaryFile()  # noqa: SIM115 - the caller closes it
    dockerfile = DOCKERFILE
    if site is not None:
        dockerfile = DOCKERFILE.replace("\nCMD ", "\n" + PACKAGES_LAYER + "CMD ", 1)
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _add(tar, "Dockerfile", dockerfile.encode())
        for f in FILES:
            _add(tar, f.name, f.read_bytes())
        if site is not None:
            tar.add(site, arcname="site", filter=_owned_by_root)
    buffer.seek(0)
    return buffer


def _base_platform(client: Any, base_image: str) -> tuple[str, list[str]]:
    """The base image's Python version ("3.11") and the wheel platform tags it can load."""
    raw = client.containers.run(
        base_image, ["python3", "-c", PROBE], network_mode="none", remove=True
    )
    (major, minor), machine, (libc, libc_version) = json.loads(raw.decode().strip())
    if libc != "glibc":
        raise RuntimeError(
            f"the base image {base_image} has {libc or 'no glibc'}; sandbox packages are "
            "installed from manylinux wheels, which need a glibc base (e.g. python:3.11-slim)"
        )
    glibc_minor = int(libc_version.split(".")[1])
    tags = [f"manylinux_2_{m}_{machine}" for m in range(glibc_minor, 4, -1)]
    tags += [f"manylinux{y}_{machine}" for y in ("2014", "2010", "1")]
    return f"{major}.{minor}", tags


def _install_site(packages: Sequence[str], python: str, platforms: list[str], into: Path) -> None:
    """The host's pip installs the wheels, and only wheels, for the base's Python and platform
    (no dependency resolution: `packages` is the complete, pinned list)."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--target", str(into), "--no-deps", "--no-compile", "--only-binary=:all:"]
    command += ["--python-version", python, "--implementation", "cp"]
    for tag in platforms:
        command += ["--platform", tag]
    done = subprocess.run([*command, *packages], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"pip could not fetch the sandbox packages {list(packages)} for Python {python} "
            f"({platforms[0]}): {done.stderr.strip()[-2000:]} (pip needs an index or a wheel "
            "folder: PIP_FIND_LINKS=DIR PIP_NO_INDEX=1)"
        )


def _has_image(client: Any, name: str) -> bool:
    import docker.errors

    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def resolve_base(client: Any, base: str | None = None) -> str:
    """The base image to build on: `base`, $COLLABZOO_SANDBOX_BASE, the official slim image
    (pulled if needed), or the offline debootstrap base, in that order."""
    import docker.errors

    wanted = base or os.environ.get("COLLABZOO_SANDBOX_BASE")
    if wanted:
        if not _has_image(client, wanted):
            client.images.pull(wanted)
        return wanted
    if _has_image(client, DEFAULT_BASE):
        return DEFAULT_BASE
    try:
        client.images.pull(DEFAULT_BASE)
        return DEFAULT_BASE
    except docker.errors.APIError as error:
        if _has_image(client, OFFLINE_BASE):
            return OFFLINE_BASE
        raise RuntimeError(
            f"cannot pull {DEFAULT_BASE} ({error.explanation or error}); with no registry, "
            f"build an offline base first: {OFFLINE_BASE_RECIPE}"
        ) from error


def ensure_image(
    client: Any,
    *,
    base: str | None = None,
    rebuild: bool = False,
    packages: Sequence[str] = (),
) -> str:
    """The sandbox image's tag, building it first if it is missing (or `rebuild`); with
    `packages` (pinned "name==version"), the image that also holds them."""
    pinned = _packages(packages)
    tag = image_tag(pinned)
    if not rebuild and _has_image(client, tag):
        return tag
    base_image = resolve_base(client, base)
    held = f" with {len(pinned)} packages" if pinned else ""
    print(
        f"collabzoo: building the sandbox image {tag} on {base_image}{held} (once)...",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="collabzoo-site-") as scratch:
        site = None
        if pinned:
            site = Path(scratch) / "site"
            _install_site(pinned, *_base_platform(client, base_image), site)
        with _context(site) as context:
            client.images.build(
                fileobj=context,
                custom_context=True,
                tag=tag,
                buildargs={"BASE": base_image},
                rm=True,
                forcerm=True,
                network_mode="none",
            )
    return tag
