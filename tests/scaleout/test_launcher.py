"""Workers placed by a Hydra launcher: the SLURM preset composes, the basic launcher is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.scaleout


def run(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "sweep.py", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_slurm_preset_composes_with_the_submitit_launcher():
    proc = run("hydra/launcher=slurm", "worker.count=4", "--cfg", "hydra", "-p", "hydra.launcher")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in out
    assert "nodes: 1" in out and "tasks_per_node: 1" in out and "exclusive: true" in out


def test_several_workers_need_a_launcher_that_runs_them_side_by_side(tmp_path):
    proc = run("-m", f"tracking.dir={tmp_path}", "worker.count=3")
    assert proc.returncode == 2
    assert "hydra/launcher=slurm" in proc.stdout
    assert not (tmp_path / "optuna.db").exists()
