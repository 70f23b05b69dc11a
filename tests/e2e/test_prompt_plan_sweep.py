"""The prompt plan through `python sweep.py -m`, read back from every trial's requests.jsonl: no
prompt measured twice within a trial, no warm-up prompt measured, run r the same prompts in every
trial (baseline and its re-check included), and the study's requests as one Parquet table."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict

import pytest

from harness.procs import free_port
from harness.results import read_requests
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e
RUNS, PER_RUN, WARMUP = 3, 2, 2


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plan")
    argv = [
        *(sys.executable, "sweep.py", "-m", f"tracking.dir={tmp}", f"server.port={free_port()}"),
        *("experiment=smoke", "search.n_trials=2", f"benchmark.runs={RUNS}"),
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
