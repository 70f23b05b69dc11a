"""A Ctrl-C at any moment of a sweep, as a terminal sends it (SIGINT to the sweep's process group):
before the study opens (preflight), during the baseline's start-up and its runs, a trial's
start-up and its runs, while closing and while the report is written. Each ends with exit 130,
no traceback, no server left, `No recommendation` where the Deploy line stands and the resume
command straight under it; that command, run as printed from a shell without the virtualenv on
PATH, finishes the study with an answer."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from harness.server.procs import free_port, processes_mentioning
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

STUDY = "kimi-k25-eagle3-ctrl-c"
SMOKE = ("experiment=smoke", "search.n_trials=2", f"search.study_name={STUDY}")
# Start-ups of about 4 s (800 simulated s at scale 200): a Ctrl-C lands inside one.
SLOW_START = ("engine.extra_args=[--sim-load-s,800]",)
# Runs of about 2 s, quick start-ups: a Ctrl-C after "fired up" lands inside the runs.
SLOW_RUNS = ("engine.clock_scale=5", "engine.extra_args=[--sim-load-s,10]")
SHELL = {**os.environ, "PATH": "/usr/bin:/bin", "COLUMNS": "250"}
DEADLINE_S = 120


def start(tmp: Path, port: int, *overrides: str) -> subprocess.Popen:
    """The sweep in its own process group, as a terminal's foreground job, with SIGINT's default
    disposition (a suite started without job control inherits it ignored)."""
    argv = [str(Path(sys.executable).parent / "specsweep"), "sweep"]
    argv += [f"tracking.dir={tmp}", f"server.port={port}", *SMOKE, *overrides]
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=SHELL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.05)


class Output:
    """The sweep's output as it arrives (read on a thread so the pipe never fills)."""

    def __init__(self, proc: subprocess.Popen):
        import threading

        self.text = ""
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.text += line

    def done(self) -> str:
        self._thread.join(timeout=DEADLINE_S)
        return self.text


def log_says(folder: Path, text: str) -> Callable[[], bool]:
    log = folder / "server.log"
    return lambda: log.exists() and text in log.read_text(errors="replace")


def ctrl_c(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGINT)  # the whole foreground group, as a terminal does


def interrupted(tmp: Path, port: int, out: Output, proc: subprocess.Popen, moment: str) -> str:
    proc.wait(timeout=DEADLINE_S)
    text = out.done()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    lines = text.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("No recommendation:")]
    assert moment in lines[at], lines[at]
    assert lines[at + 1].startswith("To resume: "), lines[at : at + 2]
    assert "Deploy:" not in text
    assert processes_mentioning(f"--port {port} ") == []  # no server left
    assert processes_mentioning(f"tracking.dir={tmp} ") == []
    return lines[at + 1].removeprefix("To resume: ").split("   (")[0]


def resume_finishes(tmp: Path, command: str) -> None:
    """The printed command, run as printed, finishes the study with an answer."""
    proc = subprocess.run(
        command, shell=True, cwd=ROOT, env=SHELL, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^Deploy: ", proc.stdout, re.M), proc.stdout
    assert f"specsweep · study {STUDY}" in proc.stdout
    assert (tmp / "reports" / STUDY / "index.html").is_file()


def test_ctrl_c_before_the_study_opens(tmp_path):
    """Preflight opens the Optuna store; another process holding it locked keeps the sweep
    there, in its checks, until the Ctrl-C."""
    port = free_port()
    store = sqlite3.connect(tmp_path / "optuna.db", isolation_level=None)
    store.execute("BEGIN EXCLUSIVE")
    proc = start(tmp_path, port)
    out = Output(proc)
    sweep = psutil.Process(proc.pid)

    def opening_the_store() -> bool:
        return any(f.path.endswith("optuna.db") for f in sweep.open_files())

    wait_for(opening_the_store, "preflight opening optuna.db")
    ctrl_c(proc)
    command = interrupted(tmp_path, port, out, proc, "before the study opened")
    store.execute("ROLLBACK")
    store.close()
    assert not (tmp_path / STUDY / "snapshot").exists()  # nothing of a study that never opened
    resume_finishes(tmp_path, command)


@pytest.mark.parametrize(
    ("moment", "folder", "ready", "slow"),
    [
        ("during the baseline", "baseline_", False, SLOW_START),
        ("during the baseline", "baseline_", True, SLOW_RUNS),
        ("during the trials", "trial_0000", False, SLOW_START),
        ("during the trials", "trial_0000", True, SLOW_RUNS),
    ],
    ids=["baseline-start-up", "baseline-runs", "trial-start-up", "trial-runs"],
)
def test_ctrl_c_while_a_server_runs(tmp_path, moment, folder, ready, slow):
    port = free_port()
    proc = start(tmp_path, port, *slow)
    out = Output(proc)

    def server_at_the_moment() -> bool:
        found = sorted((tmp_path / STUDY).glob(f"{folder}*"))
        if not found:
            return False
        said = log_says(found[0], "fired up")()
        return said if ready else log_says(found[0], "Load weight")() and not said

    wait_for(server_at_the_moment, f"{folder} {'ready' if ready else 'starting'}")
    ctrl_c(proc)
    command = interrupted(tmp_path, port, out, proc, moment)
    resume_finishes(tmp_path, command)


def test_ctrl_c_while_closing(tmp_path):
    port = free_port()
    proc = start(tmp_path, port)
    out = Output(proc)
    wait_for(lambda: "The study's" in out.text, "the closing table")
    ctrl_c(proc)
    command = interrupted(tmp_path, port, out, proc, "while closing")
    # No export either: the study's last word is that it has no answer yet.
    export = subprocess.run(
        [str(Path(sys.executable).parent / "specsweep"), "export", "--experiment", STUDY,
         "--results", str(tmp_path)],
        cwd=ROOT, env=SHELL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert export.returncode != 0 and "No recommendation: interrupted while closing" in (
        export.stdout + export.stderr
    )
    resume_finishes(tmp_path, command)


def test_ctrl_c_while_the_report_is_written(tmp_path):
    port = free_port()
    proc = start(tmp_path, port)
    out = Output(proc)
    sweep = psutil.Process(proc.pid)

    def writing_the_report() -> bool:
        try:
            children = sweep.children(recursive=True)
            return any("analysis.report" in " ".join(c.cmdline()) for c in children)
        except psutil.Error:
            return False

    wait_for(writing_the_report, "the report's process")
    ctrl_c(proc)
    command = interrupted(tmp_path, port, out, proc, "while closing")
    assert "the report was not finished" in out.text
    resume_finishes(tmp_path, command)
