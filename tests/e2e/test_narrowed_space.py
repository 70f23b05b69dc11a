"""A space narrowed on the command line, as a user narrows one: `{type: categorical, choices:
[2]}` over the default's `{type: int, low: 1, high: 5}` merges into a categorical that still
carries low/high. The model sampler proposes from the choices, so what it proposes is what
launches: the one chain is screened once, then measured in full (its screen pooled), and the
sweep ends as the model's stop rule says, not by relaunching the chain until n_trials."""

from __future__ import annotations

import subprocess
import sys

import optuna
import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

NARROWED = (
    "search.space={speculative_num_steps:{type:categorical,choices:[2]},"
    "speculative_eagle_topk:{type:categorical,choices:[1]}}"
)


def test_a_narrowed_space_launches_each_configuration_at_most_screen_plus_full(tmp_path):
    argv = [
        sys.executable, "sweep.py", "-m", f"tracking.dir={tmp_path}", f"server.port={free_port()}",
        "experiment=smoke", "search.study_name=narrowed", "report=false", "search.n_trials=6",
        NARROWED,
    ]  # fmt: skip
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = optuna.load_study(study_name="narrowed", storage=f"sqlite:///{tmp_path}/optuna.db")
    launched = [
        t for t in study.trials if (tmp_path / "narrowed" / f"trial_{t.number:04d}").is_dir()
    ]
    shapes = [
        (t.user_attrs["candidate"]["steps"], t.user_attrs["candidate"]["topk"]) for t in launched
    ]
    assert set(shapes) == {(2, 1)}, proc.stdout
    outcomes = [t.user_attrs["outcome"] for t in launched]
    assert outcomes == ["pruned", "ok"], proc.stdout  # the screen, then the full launch
    said = proc.stdout
    assert "search.enqueue: a prior left out, speculative_num_steps=3 is not among" in said
    assert "model: every configuration of search.space is measured; trial_0001 is the best" in said
    assert "nan" not in said
