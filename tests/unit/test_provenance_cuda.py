"""The provenance's CUDA version comes from torch's generated version file, without importing
torch (seconds of CPU per sweep for one string)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

from sweep.tracking import provenance


@pytest.fixture
def fake_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "torch"
    folder.mkdir()
    real = importlib.util.find_spec

    def find_spec(name: str, *args, **kwargs):
        if name != "torch":
            return real(name, *args, **kwargs)
        spec = importlib.machinery.ModuleSpec("torch", None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        return spec

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(provenance, "_version", lambda package: "2.13.0")
    provenance._cuda.cache_clear()
    yield folder
    provenance._cuda.cache_clear()


def test_a_cuda_build_is_read_from_its_version_file(fake_torch: Path) -> None:
    (fake_torch / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.13.0+cu128'\ncuda: Optional[str] = '12.8'\n"
    )
    assert provenance._cuda() == "12.8"


def test_a_cpu_build_has_none(fake_torch: Path) -> None:
    (fake_torch / "version.py").write_text("cuda = None\n")
    assert provenance._cuda() is None


def test_the_real_install_agrees_with_its_import() -> None:
    torch = pytest.importorskip("torch")
    provenance._cuda.cache_clear()
    assert provenance._cuda() == torch.version.cuda
