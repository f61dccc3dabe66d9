"""Import paths users already hold, kept working after a module moved into its task family.

`import collabzoo.envs.strbuild` gives the very module object of
`collabzoo.tasks.building.envs.strbuild` (not a copy), so attributes set on either are set on
both. The old paths come from the families' declarations (`TaskFamily.module_paths`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType


class ModulePaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder that answers an old module path with the module it moved to."""

    def __init__(self) -> None:
        self.moved: dict[str, str] = {}

    def add(self, old: str, new: str) -> None:
        if self.moved.get(old, new) != new:
            raise ValueError(f"{old!r} already stands for {self.moved[old]!r}, not {new!r}")
        self.moved[old] = new

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if fullname not in self.moved:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.moved[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was imported under its own path."""


MODULE_PATHS = ModulePaths()
if not any(isinstance(finder, ModulePaths) for finder in sys.meta_path):
    sys.meta_path.append(MODULE_PATHS)
