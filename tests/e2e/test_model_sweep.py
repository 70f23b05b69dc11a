"""`python sweep.py -m search.sampler.name=model` through the real CLI against the simulator:
the screened opening, the model's prediction beside each measurement, its answer, and a second
study that starts from the first (transfer, labelled)."""

from __future__ import annotations

import subprocess
import sys

import optuna
import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


def sweep(tmp, port: int, *overrides: str) -> subprocess.CompletedProcess:
    argv = [
        sys.executable,
        "sweep.py",
        "-m",
        f"tracking.dir={tmp}",
        f"server.port={port}",
        "experiment=smoke",
        "report=false",
        "search.sampler.name=model",
        "search.enqueue=[]",
        "verbose=true",  # the model's prediction beside every measurement, not only its misses
        *overrides,
    ]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def two_studies(tmp_path_factory):
    tmp, port = tmp_path_factory.mktemp("results"), free_port()
    first = sweep(tmp, port, "search.n_trials=5", "search.study_name=kimi-k25-eagle3")
    second = sweep(tmp, port, "search.n_trials=2", "search.study_name=kimi-k25-eagle3-b")
    return tmp, first, second


def test_the_opening_is_screened_and_every_measurement_has_the_model_beside_it(two_studies):
    tmp, first, _ = two_studies
    assert first.returncode == 0, first.stdout + first.stderr
    out = first.stdout
    assert "steps=5 topk=1 draft=6" in out.split("[2/5]")[0]  # the longest chain first
    assert out.count("screened with one run for the model, never an answer") >= 2
    assert "proposed: opening, a chain the model needs, screened with one run" in out
    assert "model predicted" in out and "from 1 trial (proposed: opening" in out
    assert "(proposed: the most expected gain per GPU-hour); measured" in out
    study = optuna.load_study(study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp}/optuna.db")
    screened = [t for t in study.trials if t.user_attrs.get("screened")]
    assert [t.number for t in screened][:2] == [0, 1]
    assert all(t.state is optuna.trial.TrialState.PRUNED for t in screened)
    assert all(len(t.user_attrs["model_obs"]["levels"]["1"]["at_least"]) for t in screened)
    # the runs behind each level, from the harness's own run records (`run_noise` counts them)
    assert all(t.user_attrs["model_obs"]["levels"]["1"]["runs"] == 1 for t in screened)
    full = [t for t in study.trials if t.state is optuna.trial.TrialState.COMPLETE]
    assert full and all(t.user_attrs["model_obs"]["levels"]["1"]["runs"] >= 2 for t in full)
    best = out.split("Best: ")[1].split(" ")[0]
    assert best not in ("trial_0000", "trial_0001")  # a screened trial is never the answer


def test_a_second_study_with_the_same_setup_starts_from_the_first(two_studies):
    _, _, second = two_studies
    assert second.returncode == 0, second.stdout + second.stderr
    out = second.stdout
    assert "model: starts from " in out and "kimi-k25-eagle3 (" in out
    # two chain depths are known from the first study: no opening, the model proposes at once
    assert "proposed: opening" not in out
    assert "proposed: the most expected gain per GPU-hour" in out.split("[2/2]")[0]
