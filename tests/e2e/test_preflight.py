"""Preflight's fail paths on the simulator, and provenance that only differs in time."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pandas as pd
import pytest

from analysis.load import load_runs
from harness.server.procs import free_port
from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import single_folder, sweep

pytestmark = pytest.mark.e2e


def preflight(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sweep.preflight", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_default_configuration_passes(tmp_path):
    proc = preflight(f"tracking.dir={tmp_path}", f"server.port={free_port()}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout and "ready" in proc.stdout
    for name in (
        "engine",
        "gpus",
        "weights",
        "host ram",
        "disk",
        "open files",
        "model",
        "drafter",
        "port",
        "results dir",
        "mlflow",
        "study",
    ):
        assert f" {name} " in proc.stdout


def test_port_taken_by_a_foreign_process(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = preflight(f"tracking.dir={tmp_path}", f"server.port={port}")
    assert proc.returncode == 1
    assert f"127.0.0.1:{port} is in use by another process" in proc.stdout
    assert "server.port=<port>" in proc.stdout


def test_host_ram_is_judged_at_the_hicache_the_sweep_launches(tmp_path):
    held = preflight(f"tracking.dir={tmp_path}", "hardware.host_ram_gb=256")
    assert held.returncode == 0, held.stdout  # search.memory=auto holds HiCache at 0
    line = " ".join(held.stdout.split())
    assert "pass host ram HiCache off (held at 0 GB: search.memory=auto pins it" in line
    searched = preflight(
        f"tracking.dir={tmp_path}", "hardware.host_ram_gb=256", "search.memory=sample"
    )
    line = " ".join(searched.stdout.split())
    assert searched.returncode == 0 and "warn host ram HiCache 48 GB x TP 8" in line
    assert "459 GB needed, more than the simulated box's 256 GB" in line


def test_missing_drafter_path_on_a_gpu_box(tmp_path):
    proc = preflight(
        f"tracking.dir={tmp_path}", "engine=sglang", "drafter.path=/nonexistent/eagle3"
    )
    assert proc.returncode == 1
    assert (
        "/nonexistent/eagle3: not on this machine" in proc.stdout
        and "fix drafter.path" in proc.stdout
    )


def test_missing_drafter_path_on_the_simulator_passes_and_says_a_gpu_box_would_refuse_it(tmp_path):
    proc = preflight(f"tracking.dir={tmp_path}", "drafter.path=/nonexistent/eagle3")
    assert proc.returncode == 0, proc.stdout
    line = next(x for x in proc.stdout.splitlines() if "/nonexistent/eagle3" in x)
    assert "pass" in line and "engine=sglang would refuse it" in " ".join(proc.stdout.split())


def test_unwritable_results_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    proc = preflight(f"tracking.dir={blocker}/results")
    assert proc.returncode == 1
    assert "results dir" in proc.stdout and "set tracking.dir to a writable folder" in proc.stdout
    # The sqlite stores inside it fail for the same reason, not with a database server's hint.
    stores = [
        x
        for x in proc.stdout.splitlines()
        if x.split()[:2] in (["FAIL", "mlflow"], ["FAIL", "study"])
    ]
    assert len(stores) == 2 and all("is not a folder" in x for x in stores)
    assert "sweep.services start" not in proc.stdout


def test_changed_search_space_warns(tmp_path):
    first = sweep(tmp_path, free_port(), "search.n_trials=1", "search.remeasure_baseline=false")
    assert first.returncode == 0, first.stdout + first.stderr
    proc = preflight(
        f"tracking.dir={tmp_path}",
        "search.study_name=kimi-k25-eagle3",  # the study sweep() ran (tests/e2e/test_sweep_cli)
        "search.space.speculative_num_steps.high=3",
    )
    assert (
        "trials from another search space" in proc.stdout and "new search.study_name" in proc.stdout
    )


def test_a_failing_preflight_stops_the_sweep_before_anything_starts(tmp_path):
    proc = sweep(tmp_path, free_port(), "hardware.host_ram_gb=10")  # under model.host_ram_gb
    assert proc.returncode == 2 and "preflight failed" in proc.stdout
    assert not (tmp_path / "mlflow.db").exists()
    skipped = sweep(
        tmp_path,
        free_port(),
        "hardware.host_ram_gb=10",
        "preflight=false",
        "search.n_trials=0",
        "search.baseline=false",
    )
    assert skipped.returncode == 0 and "preflight:" not in skipped.stdout


def test_provenance_of_two_identical_runs_differs_only_in_time(tmp_path):
    port = free_port()
    records, frames = [], []
    for name in ("a", "b"):
        proc = sweep(tmp_path / name, port, multirun=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        folder = single_folder(tmp_path / name / "kimi-k25-eagle3")
        records.append(json.loads((folder / "provenance.json").read_text()))
        frames.append(load_runs("kimi-k25-eagle3", f"sqlite:///{tmp_path / name}/mlflow.db"))
    a, b = records
    assert a.pop("collected_at") != "" and b.pop("collected_at") != ""
    for record in (a, b):  # when each start-up phase began: wall time, the order is the same
        record["startup"]["marks"] = [mark["phase"] for mark in record["startup"]["marks"]]
    assert a == b
    assert a["simulator"]["clock_scale"] == 200.0 and a["environment"]["NCCL_PROTO"] == "LL"
    assert a["config"]["hardware"]["gpus"] == 8 and len(a["config_hash"]) == 16
    runs = pd.concat(frames)
    groups = runs.groupby(["config_hash", "prompts_hash", "git_commit"]).size()
    assert len(groups) == 1 and groups.iloc[0] == 2
    assert runs["teardown_s"].notna().all()
