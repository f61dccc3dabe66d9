"""The sandbox image: a slim Python with our executor, built locally (no registry needed).

The tag carries a hash of the Dockerfile and the executor, so a changed executor gets a new
image. The base is the official `python:3.11-slim` where a registry answers; offline, any local
image with `python3` works, e.g. a debootstrap root filesystem imported with `docker import`
(see OFFLINE_BASE_RECIPE), which is how CI builds it.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
from pathlib import Path
from typing import Any

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


def image_tag() -> str:
    digest = hashlib.sha256(DOCKERFILE.encode() + b"".join(f.read_bytes() for f in FILES))
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def _context() -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (
            ("Dockerfile", DOCKERFILE.encode()),
            *((f.name, f.read_bytes()) for f in FILES),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


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


def ensure_image(client: Any, *, base: str | None = None, rebuild: bool = False) -> str:
    """The sandbox image's tag, building it first if it is missing (or `rebuild`)."""
    tag = image_tag()
    if not rebuild and _has_image(client, tag):
        return tag
    base_image = resolve_base(client, base)
    print(
        f"collabzoo: building the sandbox image {tag} on {base_image} (once)...",
        file=sys.stderr,
        flush=True,
    )
    client.images.build(
        fileobj=_context(),
        custom_context=True,
        tag=tag,
        buildargs={"BASE": base_image},
        rm=True,
        forcerm=True,
        network_mode="none",
    )
    return tag
