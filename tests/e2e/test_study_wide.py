"""A resumed sweep answers for the whole study: its table, Best line and summary read every
trial of every sweep, and search.n_trials is the study's total unless told otherwise."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from mlflow.tracking import MlflowClient

from harness.server.procs import free_port
from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import sweep

QUIET = ("search.remeasure_baseline=false",)


def trial_rows(stdout: str) -> set[str]:
    return {word for word in stdout.split() if word.startswith("trial_00")}


def last_summary(tmp_path) -> dict:
    summaries = sorted((tmp_path / "kimi-k25-eagle3").glob("summary-*.json"))
    return json.loads(summaries[-1].read_text())


def study_views(tmp_path) -> tuple[str, dict[str, dict]]:
    """The experiment's id and its saved views in MLflow's UI (sweep.tracking.view)."""
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("kimi-k25-eagle3")
    prefix = "mlflow.sharedViewState."
    found = {
        k[len(prefix) :]: json.loads(v) for k, v in experiment.tags.items() if k.startswith(prefix)
    }
    return experiment.experiment_id, found


def test_a_resume_finishes_the_studys_trials_and_answers_for_all_of_them(tmp_path):
    port = free_port()
    first = sweep(tmp_path, port, "search.n_trials=1", *QUIET)
    assert first.returncode == 0, first.stdout + first.stderr
    assert re.search(r"The study's \d+ trials?:", first.stdout)
    earlier = len(last_summary(tmp_path)["trials"])  # a duplicate proposal is a trial too
    experiment, views = study_views(tmp_path)
    assert list(views) == ["specsweep-kimi-k25-eagle3"]
    link = (
        f"http://127.0.0.1:5000/#/experiments/{experiment}/runs?"
        "viewStateShareKey=specsweep-kimi-k25-eagle3&workflowType=machine_learning"
    )
    assert link in first.stdout  # under "Open the UI:"

    second = sweep(tmp_path, port, "search.n_trials=2", *QUIET)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "1 trial to finish the study's 2 (1 done" in second.stdout
    shown = re.search(r"The study's (\d+) trials \((\d+) from earlier sweeps", second.stdout)
    assert shown and int(shown[2]) == earlier, second.stdout
    _, again = study_views(tmp_path)  # the resumed sweep rewrote the one view, kept its birth
    assert list(again) == list(views)
    (before,), (after,) = views.values(), again.values()
    assert after["createdAt"] == before["createdAt"] < after["updatedAt"]
    assert link in second.stdout
    summary = last_summary(tmp_path)
    names = [t["name"] for t in summary["trials"]]
    assert len(names) == int(shown[1]) and names[:earlier] == [
        f"trial_{n:04d}" for n in range(earlier)
    ]
    assert set(names) <= trial_rows(second.stdout)  # every one in the table
    assert summary["metrics"]["n_trials"] == len(names)
    assert summary["metrics"]["n_trials_this_sweep"] == len(names) - earlier

    third = sweep(tmp_path, port, "search.n_trials=2", *QUIET)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "no trials: the study has 2 of search.n_trials=2 already" in third.stdout
    assert f"The study's {len(names)} trials ({len(names)} from earlier sweeps" in third.stdout
    assert "0 this sweep" in third.stdout
    assert "Best: trial_000" in third.stdout  # the study's answer, though nothing ran now


def test_n_trials_per_sweep_when_asked(tmp_path):
    port = free_port()
    first = sweep(tmp_path, port, "search.n_trials=1", *QUIET)
    assert first.returncode == 0, first.stdout + first.stderr
    more = sweep(tmp_path, port, "search.n_trials=1", "search.n_trials_scope=sweep", *QUIET)
    assert more.returncode == 0, more.stdout + more.stderr
    assert "1 trial more (search.n_trials_scope=sweep)" in more.stdout
    trials = last_summary(tmp_path)["trials"]
    launched = [t for t in trials if t["outcome"] in ("ok", "pruned")]  # pruned: screened too
    assert len(launched) == 2
    bad = sweep(tmp_path, port, "search.n_trials_scope=forever", *QUIET)
    assert bad.returncode == 2 and "search.n_trials_scope='forever'" in bad.stdout


def test_the_deploy_line_agrees_on_the_console_in_the_summary_on_mlflow_and_in_the_export(
    tmp_path,
):
    proc = sweep(tmp_path, free_port(), "search.n_trials=2", *QUIET)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    console_line = next(line for line in proc.stdout.splitlines() if line.startswith("Deploy:"))
    decision = last_summary(tmp_path)["deploy"]
    assert console_line == decision["line"].splitlines()[0]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("kimi-k25-eagle3").experiment_id
    (parent,) = client.search_runs([experiment], "tags.`specsweep.role` = 'sweep'")
    assert parent.data.tags["specsweep.deploy"] == decision["deploy"]
    assert parent.data.tags["specsweep.deploy_line"].splitlines()[0] == console_line
    export = subprocess.run(
        [
            *(sys.executable, "-m", "sweep.reproduce", "--experiment", "kimi-k25-eagle3"),
            *("--results", str(tmp_path), "--dry-run"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert export.returncode == 0, export.stdout + export.stderr
    assert "the study's answer" in export.stdout
    if decision["deploy"] == "baseline":  # speculation off: the export has no drafter
        assert "--speculative-algorithm" not in export.stdout
    else:
        assert f"{decision['deploy']}" in export.stdout
        assert "--speculative-algorithm" in export.stdout
