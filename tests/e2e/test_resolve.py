"""The resolve phase through `python sweep.py -m` (sweep.study.loop.resolve_rounds): a study whose
verdict is unresolved spends its extra runs on the contenders and the baseline, pools them into
their records, and the Deploy line agrees on the console, in the summary JSON and on MLflow's
parent run; a resume does not redo it; Ctrl-C in it keeps what was measured.

The smoke sweep measures 2 runs a trial: with one degree of freedom (t = 12.7) its best is
within the baseline's noise and tied with the runner-up, so the verdict starts unresolved."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from harness.record.results import Outcome, TrialResult
from harness.server.procs import free_port, processes_mentioning
from tests.e2e.test_search_rules import start_interruptible, sweep_argv
from tests.e2e.test_sweep_cli import sweep

pytestmark = pytest.mark.e2e
STUDY = "kimi-k25-eagle3"
RESOLVE = ("search.n_trials=2", "search.remeasure_baseline=false", "search.resolve.runs=2")


def summary(tmp: Path) -> dict:
    return json.loads(sorted((tmp / STUDY).glob("summary-*.json"))[-1].read_text())


def rounds(tmp: Path) -> list[dict]:
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{tmp}/optuna.db")
    (attr,) = [k for k in study.user_attrs if k.startswith("resolve.")]
    return study.user_attrs[attr]


def runs_of(folder: Path) -> list[int]:
    return sorted(r.run for r in TrialResult.read(folder).runs)


def test_an_unresolved_study_spends_its_extra_runs_and_every_output_says_the_same(tmp_path):
    port = free_port()
    proc = sweep(tmp_path, port, *RESOLVE, "search.resolve.max_rounds=1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    said = re.search(
        r"resolving: (.+) vs baseline, 2 more runs each \(round 1 of 1; runs 3-4\)", out
    )
    assert said, out
    contenders = said[1].split(", ")
    (round_,) = rounds(tmp_path)
    assert round_["status"] == "done" and round_["contenders"] == contenders
    assert round_["first_run"] == 3 and all(x["pooled"] for x in round_["launches"])

    # Each side's extra runs are in its own folder and pooled into its record, run r the same
    # prompts on every side; the first launch's record is kept beside the pooled one.
    base = Path(summary(tmp_path)["baseline"]["folder"])
    for folder in [base, *(tmp_path / STUDY / name for name in contenders)]:
        assert runs_of(folder / "resolve-1") == [3, 4]
        assert runs_of(folder) == [1, 2, 3, 4]
        assert sorted(r["run"] for r in json.loads((folder / "result-launch.json").read_text())[
            "runs"
        ]) == [1, 2]  # fmt: skip
        prompts = {
            (json.loads(line)["run"], json.loads(line)["prompt_id"])
            for line in (folder / "resolve-1" / "requests.jsonl").read_text().splitlines()
            if json.loads(line)["phase"] == "measure"
        }
        assert {run for run, _ in prompts} == {3, 4}
        if folder == base:
            base_prompts = prompts
        else:
            assert prompts == base_prompts  # paired: the same prompts as the baseline's runs
    first = {
        json.loads(line)["prompt_id"]
        for line in (base / "requests.jsonl").read_text().splitlines()
        if json.loads(line)["phase"] == "measure"
    }
    assert first and not first & {p for _, p in base_prompts}  # fresh prompts, not runs 1-2's

    # What was spent and the outcome are said; the Deploy line agrees everywhere.
    assert f"round 1 done: {len(contenders) + 1} relaunch(es)" in out
    outcome = [line for line in out.splitlines() if re.match(r"(still un)?resolved after", line)]
    assert len(outcome) == 1, out
    data = summary(tmp_path)
    assert data["resolve"]["spent"]["extra_runs"] == 2 * (len(contenders) + 1)
    console = next(line for line in out.splitlines() if line.startswith("Deploy:"))
    assert console == data["deploy"]["line"].splitlines()[0]
    best = next(t for t in data["trials"] if t["name"] == contenders[0])
    assert len(best["runs"]) == 4 and best["resolve"][0]["runs"] == [3, 4]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name(STUDY).experiment_id
    (parent,) = client.search_runs([experiment], "tags.`specsweep.role` = 'sweep'")
    assert parent.data.tags["specsweep.deploy"] == data["deploy"]["deploy"]
    assert parent.data.tags["specsweep.deploy_line"].splitlines()[0] == console
    unresolved = data["resolve"]["unresolved"]
    assert parent.data.tags["specsweep.resolve"] == (
        f"unresolved: {unresolved}" if unresolved else "resolved"
    )
    assert ("Unresolved:" in out) == bool(unresolved)
    assert outcome[0].startswith("still unresolved") == bool(unresolved)
    assert parent.data.metrics["resolve_extra_runs"] == data["resolve"]["spent"]["extra_runs"]
    (child,) = client.search_runs([experiment], f"tags.`mlflow.runName` = '{contenders[0]}'")
    # MLflow keeps tok/s to 0.1 (harness.record.precision); the folder every digit
    assert child.data.metrics["tok_s"] == pytest.approx(best["metrics"]["tok_s"], abs=0.05)
    assert child.data.metrics["tok_s_runs"] == 4
    speedup = data["speedups"][contenders[0]]
    assert child.data.metrics["speedup_vs_baseline"] == pytest.approx(  # ratios to 0.001
        speedup["speedup_vs_baseline"], abs=0.0005
    )
    history = client.get_metric_history(child.info.run_id, "run.decode_tok_s_c1")
    assert sorted(m.step for m in history) == [1, 2, 3, 4]
    assert "resolve-1" in {a.path for a in client.list_artifacts(child.info.run_id)}

    # A resume reads the study's account: the budget is spent, nothing is relaunched.
    again = sweep(tmp_path, port, *RESOLVE, "search.resolve.max_rounds=1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resolving:" not in again.stdout
    assert not any((tmp_path / STUDY).glob("*/resolve-2"))
    assert len(rounds(tmp_path)) == 1
    if unresolved:  # and says so, with what was spent
        assert f"after {2 * (len(contenders) + 1)} extra runs in 1 resolve round(s)" in again.stdout


def test_off_by_default_it_names_the_override_where_the_verdict_is_unresolved(tmp_path):
    proc = sweep(tmp_path, free_port(), *RESOLVE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "resolving:" not in proc.stdout
    assert not any((tmp_path / STUDY).glob("*/resolve-*"))
    data = summary(tmp_path)
    assert data["resolve"]["stop"] == "off" and data["resolve"]["unresolved"]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("Unresolved:"))
    assert "search.resolve.max_rounds=2" in line and "no trial runs again" in line


def test_ctrl_c_in_the_resolve_phase_keeps_what_was_measured_and_a_resume_goes_on(tmp_path):
    port = free_port()
    argv = sweep_argv(tmp_path, port, *RESOLVE, "search.resolve.max_rounds=1")
    proc = start_interruptible(argv)
    study = tmp_path / STUDY
    deadline = time.monotonic() + 180
    # The baseline is relaunched first; once a trial's relaunched server starts, stop the sweep.
    while not any(study.glob("trial_*/resolve-1/server.log")) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    (round_,) = rounds(tmp_path)
    assert round_["status"] == "interrupted"
    base = Path(summary(tmp_path)["baseline"]["folder"])
    assert runs_of(base) == [1, 2, 3, 4]  # the finished relaunch: pooled, kept
    interrupted = next(study.glob("trial_*/resolve-1"))
    assert runs_of(interrupted.parent) == [1, 2]  # the interrupted one: not pooled...
    kept = TrialResult.read(interrupted)  # ...but its record is kept, and its server stopped
    assert kept.outcome is Outcome.INTERRUPTED
    assert processes_mentioning(f"--port {port} ") == []

    again = sweep(tmp_path, port, *RESOLVE, "search.resolve.max_rounds=1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "(round 1 of 1; runs 5-6)" in again.stdout  # the round again, after every run
    assert [r["status"] for r in rounds(tmp_path)] == ["interrupted", "done"]
    assert runs_of(base) == [1, 2, 3, 4, 5, 6]
    assert runs_of(interrupted.parent) == [1, 2, 5, 6]
    assert (interrupted.parent / "resolve-2").is_dir()
