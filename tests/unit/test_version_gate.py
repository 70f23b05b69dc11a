"""The version gate: a release specsweep has read is verified; any other gets the surface its
parser speaks, but preflight warns and names what is assumed, provenance records verified: false,
and the `sglang` extra cannot install one."""

from __future__ import annotations

import tomllib

import pytest
from omegaconf import OmegaConf
from packaging.specifiers import SpecifierSet

from harness.server.flags import surface_of
from harness.sglang.surfaces import (
    ASSUMED_FOR_UNREAD,
    CURRENT,
    LEGACY,
    RELEASES_READ,
    release_read,
)
from sweep.paths import ROOT
from sweep.preflight.machine import check_engine
from sweep.tracking.provenance import sglang_release, tags
from tests.unit.test_flags import _CURRENT_FLAGS, _fake_engine


@pytest.mark.parametrize(
    ("version", "read"),
    [("0.5.23", True), ("0.5.22", True), ("0.5.1.post3", True), ("0.5.24", False),
     ("0.5.23.post1", False), ("0.5.1", False), ("0.6.0", False), (None, False)],
)  # fmt: skip
def test_only_the_exact_releases_read_are_read(version, read):
    assert release_read(version) is read


def test_an_unread_version_still_speaks_the_surface_its_version_implies():
    assert surface_of("0.5.24") == CURRENT and not release_read("0.5.24")


def _sglang(python: str):
    engine = {"name": "sglang", "program": [python, "-m", "sglang.launch_server"], "probe": []}
    return OmegaConf.create({"engine": {**engine, "sglang_version": None}})


def test_preflight_warns_for_a_release_not_read_and_names_every_assumption(tmp_path):
    check = check_engine(_sglang(_fake_engine(tmp_path, "0.5.24", _CURRENT_FLAGS)))
    assert check.status == "warn", check
    assert "SGLang 0.5.24, 0.5.23 flag set (read from its parser)" in check.message
    assert "0.5.24 is not a release specsweep has read (0.5.1.post3, 0.5.22, 0.5.23)" in (
        check.message
    )
    for assumption in ("memory formula", "log lines", "/metrics names", "adaptive", "flush"):
        assert assumption in check.message
    assert all(a in check.message for a in ASSUMED_FOR_UNREAD)
    assert "surface_mismatches" in check.message and "verified: false" in check.message
    assert f"sglang {CURRENT}" in check.fix and "pip install -e '.[sglang]'" in check.fix


@pytest.mark.parametrize(
    ("version", "flags"),
    [("0.5.22", _CURRENT_FLAGS), ("0.5.1.post3", ["--model-path", "--cuda-graph-max-bs"])],
)
def test_preflight_passes_a_release_read_of_either_surface(tmp_path, version, flags):
    check = check_engine(_sglang(_fake_engine(tmp_path, version, flags)))
    assert check.status == "pass", check
    assert f"SGLang {version}" in check.message


def _cfg(engine: str, version: str | None = None):
    return OmegaConf.create({"engine": {"name": engine, "sglang_version": version}})


def test_provenance_records_verified_false_with_what_was_assumed():
    record = sglang_release(_cfg("sglang"), "0.5.24")
    assert record["version"] == "0.5.24" and record["verified"] is False
    assert record["assumed"] == list(ASSUMED_FOR_UNREAD)
    assert record["releases_read"] == list(RELEASES_READ)
    unknown = sglang_release(_cfg("sglang"), None)  # unreadable (a wrapper): not verified
    assert unknown["verified"] is False


def test_provenance_records_verified_true_for_a_release_read_and_the_simulator():
    assert sglang_release(_cfg("sglang"), "0.5.23") == {
        "version": "0.5.23", "verified": True, "releases_read": list(RELEASES_READ), "assumed": [],
    }  # fmt: skip
    assert sglang_release(_cfg("sim", LEGACY), None)["version"] == "0.5.1.post3"
    assert sglang_release(_cfg("sim", None), None)["verified"] is True


def test_the_verdict_is_an_mlflow_tag():
    provenance = {
        "gpus": None, "specsweep": {"version": "0", "commit": None, "dirty": None},
        "packages": {"sglang": "0.5.24", "torch": None}, "cuda": None, "host": "h",
        "config_hash": "c", "prompts_hash": "p", "simulator": None, "software": {},
        "sglang_release": {"verified": False},
    }  # fmt: skip
    assert tags(provenance)["specsweep.sglang_verified"] == "False"


def test_the_sglang_extra_installs_only_the_current_releases_read():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    (requirement,) = extras["sglang"]
    name, _, spec = requirement.partition(">")
    assert name == "sglang"
    allowed = SpecifierSet(">" + spec)
    current = [r for r, s in RELEASES_READ.items() if s == CURRENT]
    assert all(r in allowed for r in current)
    for newer in ("0.5.24", "0.6.0", "0.5.21"):
        assert newer not in allowed, f"the extra would install SGLang {newer}, not read"
