"""Sandbox images holding a task's pinned packages: the tag, the build context (the layer and its
files' owners and modes), the refusals, the process backend's warning, and how a task's
declaration reaches the sandbox the bench and the CLI make for it. The image itself is built and
run, with the isolation probe, by tests/test_classeval.py (`classeval_sandbox`)."""

from __future__ import annotations

import importlib.metadata
import tarfile
import warnings
from pathlib import Path
from typing import Any

import pytest

from collabzoo.bench.runner import task_sandbox
from collabzoo.cli import main
from collabzoo.envs import task_spec
from collabzoo.sandbox import image
from collabzoo.sandbox.process import ProcessSandbox, lacking_packages
from collabzoo.tasks.classeval.rewards.harness import SANDBOX_PACKAGES
from tests.conftest import require_docker

PYTEST = f"pytest=={importlib.metadata.version('pytest')}"


def test_the_tag_names_the_pinned_packages_in_any_order() -> None:
    plain = image.image_tag()
    assert image.image_tag(()) == plain
    one = image.image_tag(["numpy==1.26.4", "pandas==2.2.3"])
    assert one != plain and one.startswith(f"{image.IMAGE_REPOSITORY}:")
    assert image.image_tag(["pandas==2.2.3", "numpy==1.26.4", "numpy==1.26.4"]) == one
    assert image.image_tag(["numpy==2.0.0", "pandas==2.2.3"]) != one


def test_an_unpinned_package_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match=r"pinned as name==version, got \['numpy'\]"):
        image.image_tag(["numpy", "pandas==2.2.3"])


def test_the_packages_layer_keeps_the_user_and_owns_its_files_as_root(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "module").mkdir(parents=True)
    private = site / "module" / "__init__.py"
    private.write_text("x = 1\n")
    private.chmod(0o600)  # a host umask of 077 must not make it unreadable for nobody
    (site / "module" / "tool").write_text("#!/bin/sh\n")
    (site / "module" / "tool").chmod(0o700)
    with image._context(site) as context, tarfile.open(fileobj=context) as tar:
        dockerfile = tar.extractfile("Dockerfile").read().decode()
        members = {m.name: m for m in tar.getmembers()}
    lines = dockerfile.splitlines()
    assert lines[-1].startswith("CMD ") and lines[-2] == "USER 65534:65534"
    assert "COPY site /opt/collabzoo/site" in lines
    assert lines.index("USER 0:0") > lines.index(
        "COPY executor.py confinement.py plain_data.py /opt/collabzoo/"
    )
    for name in ("site", "site/module", "site/module/__init__.py", "site/module/tool"):
        assert (members[name].uid, members[name].gid) == (0, 0), name
    assert members["site/module/__init__.py"].mode == 0o644
    assert members["site/module/tool"].mode == members["site/module"].mode == 0o755
    with image._context() as context, tarfile.open(fileobj=context) as tar:
        assert "site" not in tar.getnames()
        assert "USER 0:0" not in tar.extractfile("Dockerfile").read().decode()


def test_the_process_backend_names_each_pinned_package_it_lacks() -> None:
    version = PYTEST.partition("==")[2]
    assert lacking_packages([PYTEST]) == []
    assert lacking_packages(["no-such-package-anywhere==1.0", "pytest==0.0.1"]) == [
        "no-such-package-anywhere==1.0",
        f"pytest==0.0.1 (it has {version})",
    ]
    with pytest.warns(RuntimeWarning, match="lacks no-such-package-anywhere==1.0"):
        ProcessSandbox(size=1, packages=["no-such-package-anywhere==1.0"]).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ProcessSandbox(size=1, packages=[PYTEST]).close()


def test_a_task_declares_its_packages_and_the_bench_asks_for_them() -> None:
    assert task_spec("classeval").packages() == SANDBOX_PACKAGES
    assert task_spec("humaneval").packages() == ()
    assert all("==" in p for p in SANDBOX_PACKAGES)
    calls: list[tuple[Any, ...]] = []

    def factory(*packages: Any) -> str:
        calls.append(packages)
        return "sandbox"

    assert task_sandbox("classeval", factory) == "sandbox"
    assert task_sandbox("humaneval", factory) == "sandbox"
    assert calls == [(SANDBOX_PACKAGES,), ()]  # a factory without packages still works


def test_sandbox_build_for_a_task_refuses_one_without_packages(capsys) -> None:
    require_docker()
    assert main(["sandbox", "build", "--task", "humaneval"]) != 0
    assert "needs no third-party packages" in capsys.readouterr().err
    assert main(["sandbox", "build", "--task", "no-such-env"]) != 0
    assert "unknown environment 'no-such-env'" in capsys.readouterr().err
