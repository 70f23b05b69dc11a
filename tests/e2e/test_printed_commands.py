"""Every command a sweep prints runs as printed, in the shell `make sweep` leaves a user in: the
checkout as the working directory and the virtualenv not on PATH. The preflight details, the
Deploy line's Next, the Unresolved line's more runs, the MLflow UI and the Optuna dashboard are
each run exactly as the console wrote them (the resume line: tests/e2e/test_interrupts.py; the
export's: tests/e2e/test_export.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.server.procs import free_port, processes_mentioning
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

SHELL = {**os.environ, "PATH": "/usr/bin:/bin", "COLUMNS": "250"}
SMOKE = ("experiment=smoke", "search.n_trials=2", "search.study_name=kimi-k25-eagle3-printed")


def shell(command: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, shell=True, cwd=ROOT, env=SHELL, capture_output=True, text=True, timeout=timeout
    )


def printed(out: str, pattern: str) -> str:
    found = re.search(pattern, out, re.M)
    assert found, (pattern, out)
    return found.group(1).strip()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp, port = tmp_path_factory.mktemp("results"), free_port()
    argv = Path(sys.executable).parent / "specsweep"
    # verbose: the Optuna dashboard's line as well
    options = f"tracking.dir={tmp} server.port={port} verbose=true {' '.join(SMOKE)}"
    proc = shell(f"{argv} sweep {options}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp, port, proc.stdout


def test_the_commands_are_spelled_for_a_shell_without_the_virtualenv(sweep):
    _, _, out = sweep
    assert "python -m sweep" not in out and "python sweep.py" not in out
    for command in re.findall(r"(\S*specsweep) (?:preflight|reproduce|sweep|ui) ", out):
        assert Path(ROOT, command).resolve() == (Path(sys.executable).parent / "specsweep")


def test_preflight_details_run_as_printed(sweep):
    _, _, out = sweep
    command = printed(out, r"^preflight: .*\(details: (.*)\)$")
    proc = shell(command)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "preflight for study kimi-k25-eagle3-printed" in proc.stdout


def test_the_deploy_lines_next_runs_as_printed(sweep):
    tmp, _, out = sweep
    command = printed(out, r"^  Next: (.*?)   \(")
    proc = shell(command)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list((tmp / "reproduce").glob("*/launch_server.sh"))


def test_more_runs_run_as_printed(sweep):
    _, port, out = sweep
    command = printed(out, r"^Unresolved: .* More runs can settle it: (.*?)   \(")
    proc = shell(command)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[resolve 1/2]" in proc.stdout and "Traceback" not in proc.stderr
    assert processes_mentioning(f"--port {port} ") == []


def serves(command: str, url: str) -> None:
    """The printed server command answers at `url`; then it and its children are stopped."""
    proc = subprocess.Popen(
        command, shell=True, cwd=ROOT, env=SHELL, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"{command} exited {proc.returncode}"
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    assert response.status == 200
                    return
            except OSError:
                assert time.monotonic() < deadline, f"{url} never answered"
                time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_ui_and_the_dashboard_serve_as_printed(sweep):
    _, _, out = sweep
    ui, link = printed(out, r"^Open the UI: +(.*)$").split("   then ")
    serves(ui, link.split("#")[0])
    dashboard = printed(out, r"^Optuna views: +(.*?)   \(")
    serves(dashboard, "http://127.0.0.1:8080/")
