"""Import-only stand-ins for the two modules real SGLang 0.5.23 imports on a CPU that the package
registries have no CPU build of (docs/real-sglang.md says why each exists and what removes it).

A stand-in module imports (so does any submodule of it), and every name read from it is a
`StandIn`: reading attributes of one is allowed (SGLang reads `InterpolationMode.BICUBIC` at
import time), calling one raises `StandInCalled` naming what was called. Each call is counted in
`CALLS` and, when `SPECSWEEP_STANDIN_CALLS` names a file, appended to it as one JSON line (the
server's processes are separate, so the tests read the file): the real-engine tests fail if a
run that must not need them called either.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import types

ENV = "SPECSWEEP_STANDIN_CALLS"
CALLS: list[str] = []


class StandInCalled(RuntimeError):
    """A stand-in was called: the code path needs the real module, which this machine lacks."""


def _record(name: str) -> None:
    CALLS.append(name)
    path = os.environ.get(ENV)
    if path:
        with open(path, "a") as fh:  # one short line per call: an append is atomic here
            fh.write(json.dumps({"name": name, "pid": os.getpid()}) + "\n")


class StandIn:
    """Any name read from a stand-in module: attributes allowed, calls refused and counted."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> StandIn:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return StandIn(f"{self._name}.{attr}")

    def __call__(self, *args: object, **kwargs: object) -> None:
        _record(self._name)
        root = self._name.partition(".")[0]
        raise StandInCalled(
            f"{self._name} was called, but {root} here is specsweep's import-only stand-in "
            f"(tests/real/standins/{root}): the package registries have no CPU build of {root}, "
            "so this code path cannot run on this machine"
        )

    def __repr__(self) -> str:
        return f"<stand-in {self._name}>"


def make_module(module: types.ModuleType) -> None:
    """Turn a stand-in package's namespace into one that serves StandIns for missing names."""

    def __getattr__(attr: str) -> StandIn:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return StandIn(f"{module.__name__}.{attr}")

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any submodule of a stand-in package (`torchvision.transforms.functional`) is one too."""

    def __init__(self, root: str):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(self.root + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []  # a package, so deeper submodules resolve through here too
        return module

    def exec_module(self, module):
        make_module(module)


def install(module: types.ModuleType) -> None:
    """Called by each stand-in package's __init__."""
    make_module(module)
    if not any(isinstance(f, _Finder) and f.root == module.__name__ for f in sys.meta_path):
        sys.meta_path.append(_Finder(module.__name__))
