"""A load-profile sweep through the real CLI against the simulator ends when every level is
settled (sweep.study.model.stopping, per level), before search.n_trials, on a line that says which
rule settled each level; the smallest load profile there is (1 and 8 in flight on the smoke
experiment) over the chains, so the sweep reaches the end of its space within a minute."""

from __future__ import annotations

import re
import subprocess
import sys

import optuna
import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e
N_TRIALS = 8


def test_a_load_profile_sweep_stops_once_every_level_is_settled(tmp_path):
    argv = [
        *(sys.executable, "sweep.py", "-m", f"tracking.dir={tmp_path}"),
        *(f"server.port={free_port()}", "experiment=smoke", "report=false"),
        *("search.objective=weighted_throughput", "benchmark.concurrency=[1,8]"),
        *(f"search.n_trials={N_TRIALS}", "benchmark.runs=3", "search.remeasure_baseline=false"),
        "search.space.speculative_eagle_topk.choices=[1]",
        "search.space.hicache_size.choices=[0]",
        "search.study_name=load-profile-stop",
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    lines = [line for line in out.splitlines() if line.startswith("model: every level is settled")]
    assert len(lines) == 1, out
    line = lines[0]
    # each level named with the rule that settled it, in the levels' order
    rules = re.findall(r"at (\d+) (speculation off|nothing left beats trial_\d{4})", line)
    assert [int(level) for level, _ in rules] == [1, 8], line
    assert "configurations ruled out; the sweep stops here" in line
    study = optuna.load_study(
        study_name="load-profile-stop", storage=f"sqlite:///{tmp_path}/optuna.db"
    )
    launched = [t for t in study.trials if t.user_attrs.get("candidate")]
    assert len(launched) < N_TRIALS
    unspent = re.search(r"(\d+) of search\.n_trials' starts unspent", line)
    assert unspent is not None and int(unspent.group(1)) == N_TRIALS - len(launched)
