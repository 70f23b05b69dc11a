"""The tiny models `make tiny-models` builds pass the drafter checks drafter/ owns: the static
checks against the target (architecture, dtypes, fc width, aux layers, vocabulary map) and the
CPU forward pass, as `specsweep drafter check --deep` and the drafter gate run them."""

from __future__ import annotations

import json

from drafter.checkpoint import TargetConfig
from drafter.checks import check
from drafter.deep import deep_check
from tests.real.conftest import DRAFTER, TARGET, TINY


def test_the_drafter_passes_the_checks_against_its_target(real_env):
    report = check(DRAFTER, TARGET, "EAGLE3")
    assert report.ok, report.errors
    assert {f.check for f in report.findings if f.level == "ok"} >= {
        "algorithm", "dtypes", "fusion", "aux_layers", "vocab_map",
    }  # fmt: skip
    deep = deep_check(DRAFTER, TargetConfig.open(TARGET))
    assert [f.level for f in deep] == ["ok"], deep


def test_the_drafter_was_trained_against_the_target(real_env):
    built = json.loads((TINY / "build.json").read_text())
    assert built["held_out_top1_after"] > built["held_out_top1_before"] + 0.05
    config = json.loads((DRAFTER / "config.json").read_text())
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
