"""The prompt plan through `python sweep.py -m`, read back from every trial's requests.jsonl: no
prompt measured twice within a trial, no warm-up prompt measured, run r the same prompts in every
trial (baseline and its re-check included), and the study's requests as one Parquet table."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import pandas as pd
import pytest

from analysis.folders import load_folders
from analysis.load import load_runs
from analysis.report import main as report_main
from analysis.requests import main as requests_main
from analysis.requests import prompt_changes
from harness.record.precision import meaningful
from harness.record.results import read_requests
from harness.server.procs import free_port
from sweep.readout.verdict import ratio_interval
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e
RUNS, PER_RUN, WARMUP = 3, 2, 2


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plan")
    argv = [
        *(sys.executable, "sweep.py", "-m", f"tracking.dir={tmp}", f"server.port={free_port()}"),
        *("experiment=smoke", "report=false", "search.n_trials=2", f"benchmark.runs={RUNS}"),
        "search.study_name=kimi-k25-eagle3",
        # every trial measured in full: the model sampler's opening is screened with one run
        "search.sampler.name=tpe",
        *(f"benchmark.requests_per_run={PER_RUN}", f"benchmark.warmup={WARMUP}"),
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp / "kimi-k25-eagle3", proc.stdout


def test_every_trial_measures_distinct_prompts_paired_run_by_run(study):
    folder, _ = study
    trials = sorted(p.parent for p in folder.glob("*/requests.jsonl"))
    assert len(trials) == 4  # baseline, two trials, the baseline's re-check
    by_run: dict[int, set[tuple[str, ...]]] = defaultdict(set)
    for trial in trials:
        records = read_requests(trial / "requests.jsonl")
        assert all(r.prompt_id for r in records)
        measured = [r.prompt_id for r in records if r.phase == "measure"]
        warmup = {r.prompt_id for r in records if r.phase == "warmup"}
        assert len(measured) == RUNS * PER_RUN
        assert len(set(measured)) == len(measured), trial.name  # none measured twice
        assert len(warmup) == WARMUP and not warmup & set(measured), trial.name
        for run in range(1, RUNS + 1):
            by_run[run].add(
                tuple(sorted(r.prompt_id for r in records if r.phase == "measure" and r.run == run))
            )
    assert all(len(sets) == 1 for sets in by_run.values()), by_run  # the same set in every trial


def test_every_speedup_has_its_paired_interval(study):
    folder, stdout = study
    summary = json.loads(next(folder.glob("summary-*.json")).read_text())
    m = summary["metrics"]
    low, high = m["best_speedup_vs_baseline_ci95_low"], m["best_speedup_vs_baseline_ci95_high"]
    assert low < m["best_speedup_vs_baseline"] < high
    assert f"95% interval {ratio_interval(low, high)}" in " ".join(stdout.split())
    launched = sorted(p.parent.name for p in folder.glob("trial_*/command.sh"))
    assert len(launched) == 2 and sorted(summary["speedups"]) == launched  # n_trials=2 starts
    uri = f"sqlite:///{folder.parent}/mlflow.db"
    for frame in (load_runs(folder.name, uri), load_folders(folder.parent, folder.name)):
        trials = frame[frame["role"] == "trial"].set_index("name")
        for name, values in summary["speedups"].items():
            row = trials.loc[name]
            for key in ("speedup_vs_baseline", "speedup_vs_baseline_ci95_low"):
                # MLflow holds the digits a ratio is worth (harness.record.precision); the
                # folders every digit: either reads the summary's value at MLflow's digits
                assert meaningful(key, row[key]) == pytest.approx(meaningful(key, values[key]))
            assert row["speedup_vs_baseline_ci95_low"] < row["speedup_vs_baseline"]
            assert row["speedup_vs_baseline"] < row["speedup_vs_baseline_ci95_high"]


def test_the_studys_requests_load_as_one_parquet_table(study, tmp_path):
    folder, _ = study
    out = tmp_path / "requests.parquet"
    requests_main(["--results", str(folder.parent), "--out", str(out)])
    frame = pd.read_parquet(out)
    assert len(frame) == 4 * (WARMUP + RUNS * PER_RUN)
    assert frame["trial"].nunique() == 4 and set(frame["phase"]) == {"warmup", "measure"}
    for column in ("study", "config", "mem_fraction_static", "run", "concurrency", "prompt_id"):
        assert frame[column].notna().all(), column
    assert frame[frame["role"] == "trial"]["speculative_num_steps"].notna().all()
    for column in ("category", "completion_tokens", "ttft_s", "decode_tok_s", "accept_len"):
        assert column in frame
    # Each request says its prompt's category (the builtin prompts': math, code, ...).
    assert (frame["category"] != "").all() and frame["category"].notna().all()
    pairs = zip(frame["prompt_id"], frame["category"], strict=True)
    assert all(pid.startswith(cat) for pid, cat in pairs)
    changes_csv = prompt_changes(frame)
    assert (changes_csv["category"] != "").all()
    spec = frame[(frame["role"] == "trial") & (frame["phase"] == "measure")]
    assert (spec["accept_len"] > 1).all()  # the simulator reports its verify steps
    changes = prompt_changes(frame)
    assert len(changes) == 2 * RUNS * PER_RUN  # every measured prompt of both trials, paired
    assert changes["change"].abs().is_monotonic_decreasing


def test_the_report_shows_the_prompts_a_configuration_helps_or_hurts(study):
    folder, _ = study
    report_main(["--results", str(folder.parent)])
    out = folder.parent / "reports" / folder.name
    assert len(pd.read_parquet(out / "requests.parquet")) == 4 * (WARMUP + RUNS * PER_RUN)
    page = (out / "index.html").read_text()
    assert "helps or hurts most" in page
    assert (out / "prompts.csv").is_file()
