"""`specsweep COMMAND`: the installed console script, run as a user runs it, from another folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.server.procs import free_port
from specsweep.cli import COMMANDS

pytestmark = pytest.mark.e2e

SCRIPT = Path(sys.executable).parent / "specsweep"


def specsweep(*argv: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_the_script_is_installed_and_lists_every_command(tmp_path):
    assert SCRIPT.exists(), "pip install -e . installs the specsweep script (pyproject.toml)"
    proc = specsweep("--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name, command in COMMANDS.items():
        assert f"  {name}" in proc.stdout and command.same_as in proc.stdout


@pytest.mark.parametrize("name", ["reproduce", "services", "sync", "compat", "report", "drafter"])
def test_each_command_is_its_python_m_form(name, tmp_path):
    """The subcommand hands its arguments to the same main: the same help text, byte for byte."""
    module = COMMANDS[name].same_as.removeprefix("python -m ").split()[0]
    mine = specsweep(name, "--help", cwd=tmp_path)
    theirs = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert mine.returncode == theirs.returncode == 0, mine.stderr + theirs.stderr
    assert mine.stdout == theirs.stdout


def test_an_unknown_command_names_the_nearest(tmp_path):
    proc = specsweep("reprodce", cwd=tmp_path)
    assert proc.returncode == 2
    assert "did you mean `specsweep reproduce`" in proc.stderr


def test_specsweep_sweep_runs_the_sweep_from_any_folder(tmp_path):
    results = tmp_path / "results"
    proc = specsweep(
        "sweep",
        "experiment=smoke",
        "report=false",
        "search.n_trials=2",
        f"tracking.dir={results}",
        f"server.port={free_port()}",
        cwd=tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "sweep finished with status FINISHED" in proc.stdout
    (summary,) = results.glob("kimi-k25-eagle3-smoke-*/summary-*.json")  # named from its setup
    assert json.loads(summary.read_text())["trials"]
