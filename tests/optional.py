"""Optional packages in the tests: skip outside CI, fail under CI=true (never a silent skip).

The same rule as `require` in tests/conftest.py, for a package of one of pyproject.toml's
extras instead of the reference data: the module if it imports; otherwise, outside CI, a skip
whose reason says which extra installs it, and under CI=true a failure with that reason (CI
installs every extra, so a missing package there is a broken environment, not a test to skip).

Called inside a test (or a fixture), the test fails under CI=true. Called at module level, the
module is skipped outside CI; under CI=true its collection errors, which fails the run too.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require_module(name: str, extra: str) -> ModuleType:
    """The module `name`; otherwise skip (fail under CI=true) saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        reason = f'{name} is not installed ({error}): pip install -e ".[{extra}]" to run this'
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason, allow_module_level=True)
