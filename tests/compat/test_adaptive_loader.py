"""The adaptive_config.json specsweep writes, read by SGLang 0.5.23's own loader
(speculative/adaptive_spec_params.py) in the compat environment (`make compat` builds
.venv-compat): accepted, and read as specsweep and the simulator's policy read it."""

from __future__ import annotations

import json

import pytest

from harness.sglang.adaptive import ADAPTIVE_DEFAULT_CONFIG
from sweep.adaptive.config_file import Study, measured_config
from sweep.adaptive.sglang_check import compat_python, disagreements, validate_with_sglang
from tests.adaptive_study import make_study

PYTHON = compat_python()
pytestmark = pytest.mark.skipif(
    PYTHON is None, reason="no SGLang environment (.venv-compat): `make compat-env` builds it"
)


def test_sglangs_loader_accepts_the_measured_file_and_reads_it_as_we_do(tmp_path):
    config = measured_config(Study.read(make_study(tmp_path / "study")), [1, 8, 32, 64])
    path = tmp_path / "adaptive_config.json"
    path.write_text(json.dumps(config))
    view = validate_with_sglang(PYTHON, path)
    assert view["candidate_steps"] == [0, 1, 3, 5]
    assert disagreements(config, view) == []
    assert view["slots"]["1"]["down_hysteresis"] == -0.85


def test_our_copy_of_sglangs_default_is_sglangs():
    view = validate_with_sglang(PYTHON, None)
    default = {k: dict(v) for k, v in ADAPTIVE_DEFAULT_CONFIG.items()}
    assert view["default"] == default and disagreements(default, view) == []


def test_a_file_sglang_refuses_is_reported_with_its_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"1": {"candidate_steps": []}}))
    with pytest.raises(RuntimeError, match="candidate_steps must be a list of non-negative ints"):
        validate_with_sglang(PYTHON, path)
