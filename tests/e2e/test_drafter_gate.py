"""A broken drafter costs seconds: refused before any server starts; a bypassed one is flagged."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from harness.server.procs import free_port
from tests.conftest import ROOT
from tests.drafter_factory import HIDDEN, make_drafter
from tests.e2e.test_sweep_cli import SMALL, single_folder, sweep

pytestmark = pytest.mark.e2e


def test_sweep_with_a_mismatched_drafter_starts_nothing(tmp_path):
    bad = make_drafter(tmp_path / "drafter", fc_width=HIDDEN)
    proc = sweep(tmp_path / "results", free_port(), f"drafter.path={bad}")
    assert proc.returncode == 2
    assert "drafter check failed" in proc.stdout and "input width 64" in proc.stdout
    assert not (tmp_path / "results" / "mlflow.db").exists()


def test_single_trial_with_eagle_flag_on_an_eagle3_drafter_is_invalid_not_launched(tmp_path):
    good = make_drafter(tmp_path / "drafter")
    proc = sweep(
        tmp_path / "results",
        free_port(),
        f"drafter.path={good}",
        "drafter.algorithm=EAGLE",
        multirun=False,
    )
    folder = single_folder(tmp_path / "results" / "kimi-k25-eagle3")
    result = json.loads((folder / "result.json").read_text())
    assert result["outcome"] == "invalid" and "expected EAGLE3" in result["error"]
    assert not (folder / "server.log").exists(), proc.stdout


def test_bypassed_drafter_is_flagged_at_run_time(tmp_path):
    # A drafter path the harness cannot inspect: only the measurement can tell.
    proc = sweep(tmp_path, free_port(), "drafter.algorithm=EAGLE", multirun=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the drafter is bypassed" in proc.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("kimi-k25-eagle3").experiment_id])
    # Other warnings may stand beside it: on a loaded host the simulator trails its clock
    # (simulator_behind), which says nothing about the drafter.
    assert "drafter_bypassed" in runs[0].data.tags["specsweep.warning"].split(",")
    assert runs[0].data.metrics["accept_len"] <= 1.05


# `python sweep.py` in a Python where torch cannot be imported, as in the runtime-only install
# (`make sweep`): sys.modules[name] = None makes every import of it fail, find_spec find nothing.
WITHOUT_TORCH = (
    "import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
    "runpy.run_path('sweep.py', run_name='__main__')"
)


def test_deep_check_without_torch_names_the_drafter_extra_in_one_line_and_starts_nothing(tmp_path):
    good = make_drafter(tmp_path / "drafter")
    results = tmp_path / "results"
    argv = [sys.executable, "-c", WITHOUT_TORCH, "sweep.py", "-m", f"tracking.dir={results}"]
    argv += [f"server.port={free_port()}", *SMALL, f"drafter.path={good}", "drafter.check=deep"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    fix = [line for line in proc.stdout.splitlines() if "pip install -e '.[drafter]'" in line]
    assert len(fix) == 1 and "deep check needs torch" in fix[0], proc.stdout
    assert "Traceback" not in proc.stderr
    assert not (results / "mlflow.db").exists()  # refused before the study was opened
    # and not kept as the drafter's verdict: once torch is installed, the same sweep checks it
    assert not list(results.glob("drafter-checks/*.json"))
