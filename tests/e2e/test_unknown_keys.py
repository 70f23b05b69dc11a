"""A typo on the real command line is refused before anything starts, `+key` included."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import SMALL

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("override", ["search.n_trails=5", "+search.n_trails=5"])
def test_an_unknown_key_exits_2_with_the_nearest_name_and_launches_nothing(tmp_path, override):
    results = tmp_path / "results"
    argv = [sys.executable, "sweep.py", "-m", f"tracking.dir={results}", *SMALL, override]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "search.n_trails: no such key; did you mean search.n_trials?" in out
    assert "Traceback" not in out and "To append to your config" not in out
    assert not results.exists()  # no study, no store, no trial folder


def test_a_map_entry_the_composed_config_lacks_is_refused_with_the_entry_meant(tmp_path):
    results = tmp_path / "results"
    argv = [sys.executable, "sweep.py", "-m", f"tracking.dir={results}", *SMALL]
    argv.append("search.space.speculative_num_step.high=4")
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "did you mean search.space.speculative_num_steps.high" in proc.stdout
    assert not results.exists()


def test_the_specsweep_command_refuses_it_too(tmp_path):
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "specsweep", "sweep", f"tracking.dir={results}"]
    argv.append("+search.n_trails=5")
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "did you mean search.n_trials?" in proc.stdout
    assert not results.exists()
