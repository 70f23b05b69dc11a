"""The setup key includes the software the engine runs on: after an upgrade nothing measured
before is reused. The engine's Python is a real interpreter whose site holds fake SGLang and
torch metadata (what `pip install sglang==X` leaves), so the versions are read as on a GPU box."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.server import gpu
from sweep.config.setup_key import setup_key
from sweep.config.specs import build_trial_spec
from sweep.study.trial.candidates import candidate_for
from sweep.tracking import provenance
from tests.integration.test_compose import cfg


def engine_python(tmp_path: Path, sglang: str, torch: str = "2.9.1") -> Path:
    """A `python` whose environment has SGLang `sglang` and torch `torch` installed."""
    site = tmp_path / f"site-{sglang}"
    for name, version in (("sglang", sglang), ("torch", torch)):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    python = tmp_path / f"bin-{sglang}" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    return python


def sglang_cfg(python: Path):
    return cfg("engine=sglang", f"engine.program=[{python},-m,sglang.launch_server]")


def test_software_is_read_from_the_engines_python(tmp_path):
    facts = provenance.software(sglang_cfg(engine_python(tmp_path, "0.5.22")))
    assert facts["sglang"] == "0.5.22" and facts["torch"] == "2.9.1"
    assert set(facts) == {"sglang", "torch", "driver", "cuda"}  # no NVML here: None


def test_an_sglang_upgrade_changes_the_setup_and_every_candidate(tmp_path):
    old = sglang_cfg(engine_python(tmp_path, "0.5.22"))
    new = sglang_cfg(engine_python(tmp_path, "0.5.23"))
    old_key = setup_key(old, provenance.software(old))
    new_key = setup_key(new, provenance.software(new))
    # The engine group differs only in the program's path; with the same software, same setup.
    assert setup_key(old, provenance.software(old)) == old_key
    assert new_key != old_key
    spec = build_trial_spec(cfg())
    assert candidate_for(spec.server, old_key).key != candidate_for(spec.server, new_key).key


def test_a_driver_or_cuda_upgrade_changes_the_setup():
    c = cfg()
    before = {"sglang": "0.5.23", "torch": "2.9.1", "driver": "570.86", "cuda": "12.8"}
    assert setup_key(c, before) == setup_key(c, dict(before))
    assert setup_key(c, {**before, "driver": "575.51"}) != setup_key(c, before)
    assert setup_key(c, {**before, "cuda": "12.9"}) != setup_key(c, before)


def test_the_simulator_is_keyed_by_its_own_version():
    assert provenance.software(cfg()) == {"simulator": provenance._version("specsweep")}


class FakeNvml:
    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return b"575.51.03"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12090


def test_driver_and_cuda_versions_from_nvml():
    assert gpu.gpu_versions(module=FakeNvml()) == {"driver": "575.51.03", "cuda": "12.9"}


def test_what_changed_is_said_per_fact():
    before = {"sglang": "0.5.22", "torch": "2.9.1", "driver": "570.86", "cuda": "12.8"}
    now = {**before, "sglang": "0.5.23", "driver": "575.51"}
    assert (
        provenance.software_changes(before, now)
        == "driver 570.86 -> 575.51, sglang 0.5.22 -> 0.5.23"
    )
    assert provenance.software_changes(now, now) is None
    assert provenance.software_changes(None, now) == "software not recorded"
