"""optuna-dashboard serves a study's storage with the one command docs/analysis.md gives."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import optuna

from harness.server.procs import free_port


def test_the_dashboard_serves_the_studys_sqlite_storage(tmp_path):
    url = f"sqlite:///{tmp_path}/optuna.db"
    study = optuna.create_study(study_name="kimi-k25-eagle3", storage=url)
    study.add_trial(optuna.trial.create_trial(value=1.0))
    program = shutil.which("optuna-dashboard") or str(
        Path(sys.executable).with_name("optuna-dashboard")
    )
    port = free_port()
    proc = subprocess.Popen(
        [program, url, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, answer = time.monotonic() + 60, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/studies", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.2)  # polled: the server is starting
        assert answer is not None and answer.status_code == 200
        names = [s["study_name"] for s in answer.json()["study_summaries"]]
        assert names == ["kimi-k25-eagle3"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
