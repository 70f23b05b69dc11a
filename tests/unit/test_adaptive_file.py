"""adaptive_config.json from a study's per-level measurements: thresholds = the levels, the
candidates = the chain steps tied with the best (0 where the baseline ties, only 0 where no
chain beats the baseline's lower bound), hysteresis moved only where the measured accept length
would make SGLang's policy leave the measured best."""

from __future__ import annotations

import math

import pytest

from harness.sglang.adaptive import adaptive_slots
from sweep.adaptive.config_file import Study, measured_config
from tests.adaptive_study import ROWS, make_study


def test_the_config_follows_the_hand_computed_candidates(tmp_path):
    config = measured_config(Study.read(make_study(tmp_path)), [1, 8, 32, 64])
    assert {k: v["candidate_steps"] for k, v in config.items() if k.isdigit()} == {
        "1": [3, 5],  # 5 best (142 ± 3), 3 tied (140 ± 3), 1 not; topk 4 is no chain
        "8": [1, 3],  # 3 best (450 ± 10), 1 tied (445 ± 12)
        "32": [0],  # the best chain (980) is below the baseline's lower bound (990)
        "64": [0, 1],  # 1 best (1480 ± 40) beats 1470, the baseline ties with it
    }
    # At 1: 1.9 accepted drafts at 5 steps; SGLang drops to 3 at EMA <= 2.5 - 0.25: held at
    # 1.9 - 0.25 (margin) = 2.5 + down -> down = -0.85. At 8 the default holds (1.05 > 0.5).
    assert config["1"]["down_hysteresis"] == -0.85 and config["1"]["up_hysteresis"] == 0.0
    assert config["8"]["down_hysteresis"] == 0.0
    # At 64: 0.6 drafts at 1 step; SGLang drops to 0 at EMA <= 0.5: 0.6 - 0.25 - 0.5 = -0.15.
    assert config["64"]["down_hysteresis"] == -0.15
    assert config["1"]["ema_alpha"] == 0.2 and config["1"]["warmup_batches"] == 10
    assert config["specsweep"]["levels"]["32"]["why"].endswith("speculation off")
    adaptive_slots(config)  # SGLang's loader rules


def test_a_study_without_chains_is_refused_with_the_fix(tmp_path):
    rows = {k: v for k, v in ROWS.items() if k in ("baseline_x", "trial_0003")}
    with pytest.raises(SystemExit, match="no topk=1 trial was measured at concurrency 1"):
        measured_config(Study.read(make_study(tmp_path, rows)), [1])


def test_best_static_is_any_topk(tmp_path):
    study = Study.read(make_study(tmp_path))
    assert study.best_static(1).name == "trial_0003" and study.best_static(64).name == "trial_0002"
    assert study.levels() == [1, 8, 32, 64]


def test_adaptive_is_deployed_only_beyond_the_interval_of_the_difference():
    from sweep.adaptive.head_to_head import verdict

    static = (100.0, 3.0)
    # 106 - 100 = 6 > sqrt(3^2 + 4^2) = 5: adaptive; 104: within it, static.
    kind, gain = verdict(static, {"measured adaptive": (106.0, 4.0)})
    assert kind == "measured adaptive" and gain == pytest.approx(0.06)
    kind, gain = verdict(static, {"measured adaptive": (104.0, 4.0), "default adaptive": (90, 1)})
    assert kind == "static" and gain == pytest.approx(0.04)
    assert verdict(None, {})[0].startswith("unknown")
    assert verdict(static, {"default adaptive": (200.0, math.inf)})[0] == "static"  # one run
