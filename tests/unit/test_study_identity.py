"""A study is one setup (sweep.tracking.identity): it records the setup of its first sweep, takes
a later sweep of the same setup, and refuses another with each key that differs, stored -> now;
with no answer to give, the console says so (sweep.readout.verdict.no_recommendation)."""

from __future__ import annotations

import json

import optuna
import pytest
from omegaconf import OmegaConf

from sweep.config.setup_key import differences, flatten
from sweep.readout.verdict import no_recommendation
from sweep.tracking import identity

SETUP = {"hardware.name": "8x-rtx-pro-6000", "benchmark.runs": 5, "engine.name": "sim"}


def study(name: str = "s") -> optuna.Study:
    return optuna.create_study(study_name=name, storage=optuna.storages.InMemoryStorage())


def test_a_new_study_takes_the_setup_and_keeps_it(tmp_path):
    s = study()
    assert identity.check(s, SETUP, "derived") is None
    identity.record(s, tmp_path / "s", SETUP)
    assert s.user_attrs[identity.SETUP_ATTR] == SETUP
    assert json.loads((tmp_path / "s" / identity.SETUP_FILE).read_text()) == SETUP
    assert identity.check(s, dict(SETUP), "derived") is None  # the same setup continues


@pytest.mark.parametrize(
    ("now", "named"),
    [
        ({**SETUP, "hardware.name": "8x-h200"}, "hardware.name: 8x-rtx-pro-6000 → 8x-h200"),
        ({**SETUP, "benchmark.runs": 3}, "benchmark.runs: 5 → 3"),
        ({**SETUP, "engine.name": "sglang"}, "engine.name: sim → sglang"),  # never real and sim
        ({**SETUP, "pinned.mem_fraction_static": 0.9}, "pinned.mem_fraction_static: (unset)"),
    ],
)
def test_another_setup_is_refused_naming_each_key_and_the_way_out(tmp_path, now, named):
    s = study("kimi")
    identity.record(s, tmp_path, SETUP)
    refusal = identity.check(s, now, "kimi-other-1a2b3c")
    assert refusal is not None and named in refusal
    assert "study 'kimi' measured another setup" in refusal
    assert "kimi-other-1a2b3c" in refusal  # the setup's own study
    assert s.user_attrs[identity.SETUP_ATTR] == SETUP  # the record is never overwritten


def test_a_study_with_trials_and_no_recorded_setup_is_refused():
    s = study("old")
    s.enqueue_trial({"x": 1})
    refusal = identity.check(s, SETUP, "new-1a2b3c")
    assert refusal is not None and "no recorded setup" in refusal and "new-1a2b3c" in refusal


def test_many_differences_are_counted_beyond_the_first_few():
    stored = {f"k{i}": i for i in range(12)}
    now = {f"k{i}": i + 1 for i in range(12)}
    text = identity.refusal("s", stored, now, "d")
    assert f"and {12 - identity.SHOWN} more" in text and "12 keys differ" in text


def test_differences_read_stored_to_now():
    assert differences({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 3], "c": None}) == [
        "b: [1, 2] → [1, 3]",
        "c: (unset) → null",
    ]


def test_flatten_names_every_leaf_by_its_dotted_key():
    assert flatten({"hardware": {"env": {"NCCL_PROTO": "LL"}, "gpus": 8, "none": {}}}) == {
        "hardware.env.NCCL_PROTO": "LL",
        "hardware.gpus": 8,
    }


@pytest.mark.parametrize(
    ("moment", "spent", "search", "line"),
    [
        (
            "during the baseline",
            0,
            {"n_trials": 12},
            "No recommendation: interrupted during the baseline, after 0 of 12 trials.",
        ),
        ("while closing", 12, {"n_trials": 12}, "interrupted while closing, after 12 of 12"),
        ("before the study opened", None, {"n_trials": 12}, "interrupted before the study opened."),
        ("", 0, {"n_trials": 0}, "No recommendation: no trial was measured (0 of 0 trials)."),
        ("during the trials", 3, {"n_trials": 12, "budget_gpu_hours": 40}, "3 trials (budget 40"),
        ("during the trials", 1, {"n_trials": 6, "n_trials_scope": "sweep"}, "1 trial in the"),
    ],
)
def test_no_recommendation_says_when_and_how_far(moment, spent, search, line):
    assert line in no_recommendation(moment, spent, OmegaConf.create(search))
