"""The real CLI under faults outside the server: a tracking server that dies mid-sweep (then
`python -m sweep.sync`), one that is down at the start, and bad input refused before launch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from harness.server.procs import free_port, processes_mentioning
from sweep.services.stores import launch_mlflow
from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import SMALL, sweep

pytestmark = pytest.mark.e2e
STUDY = "kimi-k25-eagle3"


def mlflow_server(db, port: int) -> subprocess.Popen:
    return launch_mlflow(db.parent, f"sqlite:///{db}", port)


def sync(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sweep.sync", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def runs_by_folder(uri: str) -> dict[str, object]:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(STUDY)
    runs = client.search_runs([experiment.experiment_id])
    return {r.data.tags["specsweep.folder"]: r for r in runs if "specsweep.folder" in r.data.tags}


def test_tracking_server_killed_mid_sweep_loses_nothing_and_sync_uploads_it(tmp_path):
    db, mlflow_port, port = tmp_path / "server.db", free_port(), free_port()
    server = mlflow_server(db, mlflow_port)
    argv = [sys.executable, "sweep.py", "-m", f"tracking.dir={tmp_path / 'results'}"]
    argv += [f"server.port={port}", *SMALL, "search.n_trials=2", "search.remeasure_baseline=false"]
    argv += [f"tracking.mlflow_uri=http://127.0.0.1:{mlflow_port}"]
    sweep_proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    first_trial = tmp_path / "results" / STUDY / "trial_0000" / "server.log"
    try:
        deadline = time.monotonic() + 180
        while not first_trial.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert first_trial.exists(), "the sweep never reached its first trial"
    finally:
        os.killpg(server.pid, signal.SIGKILL)  # the baseline is logged; the trials will not be
        server.wait()
    out, _ = sweep_proc.communicate(timeout=240)
    out = out.decode()
    assert sweep_proc.returncode == 0, out
    assert "stopped answering" in out and "python -m sweep.sync" in out
    folders = sorted((tmp_path / "results" / STUDY).glob("*/result.json"))
    launched = [r for r in folders if (r.parent / "command.sh").exists()]
    assert len(launched) == 3  # the baseline and two trials (n_trials=2 starts), all on disk
    for result in folders:  # a proposal that launched nothing (a duplicate) is on disk too
        names = {p.name for p in result.parent.iterdir()}
        assert {"config.yaml", "tracking.json"} <= names
        assert result not in launched or {"command.sh", "server.log"} <= names
    assert processes_mentioning(f"--port {port} ") == []

    # MLflow is back (the same store on another port): the server stores the artifacts.
    back_port = free_port()
    server = mlflow_server(db, back_port)
    try:
        _sync_uploads_what_is_missing(tmp_path, back_port)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _sync_uploads_what_is_missing(tmp_path, mlflow_port: int) -> None:
    folders = sorted((tmp_path / "results" / STUDY).glob("*/result.json"))
    uri = f"http://127.0.0.1:{mlflow_port}"
    before = runs_by_folder(uri)
    assert len(before) == 1  # only the baseline made it
    first = sync("--tracking-dir", str(tmp_path / "results"), "--mlflow-uri", uri)
    assert first.returncode == 0, first.stdout + first.stderr
    trials = len(folders) - 1  # every folder but the baseline's (a duplicate's too)
    assert f"{trials} trial(s) uploaded, 1 already in MLflow, 1 sweep run(s) closed" in first.stdout
    after = runs_by_folder(uri)
    assert set(after) == {str(p.parent) for p in folders}
    parent = after[next(iter(before))].data.tags["mlflow.parentRunId"]
    assert all(r.data.tags.get("mlflow.parentRunId") == parent for r in after.values())
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(parent).info.status == "FINISHED"
    again = sync("--tracking-dir", str(tmp_path / "results"), "--mlflow-uri", uri)
    assert f"0 trial(s) uploaded, {len(folders)} already in MLflow, 0 sweep run(s) closed" in (
        again.stdout
    )

    # Uploaded later is the same as logged live: sync everything into a fresh store and compare
    # the baseline, which was logged live above.
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert sync("--tracking-dir", str(tmp_path / "results"), "--mlflow-uri", fresh).returncode == 0
    live, later = before[next(iter(before))], runs_by_folder(fresh)[next(iter(before))]
    assert live.data.params == later.data.params
    assert live.data.metrics == later.data.metrics
    ignored = {"mlflow.parentRunId", "mlflow.user"}
    assert {k: v for k, v in live.data.tags.items() if k not in ignored} == {
        k: v for k, v in later.data.tags.items() if k not in ignored
    }
    live_files = {a.path for a in client.list_artifacts(live.info.run_id)}
    later_files = {a.path for a in MlflowClient(fresh).list_artifacts(later.info.run_id)}
    assert live_files == later_files


def test_unreachable_tracking_server_is_refused_before_anything_starts(tmp_path):
    dead = f"tracking.mlflow_uri=http://127.0.0.1:{free_port()}"
    for extra in ([], ["preflight=false"]):
        proc = sweep(tmp_path, free_port(), dead, *extra)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "does not answer" in proc.stdout
        assert not (tmp_path / STUDY).exists()  # no trial folder: nothing was launched


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["search.space.speculative_num_steps.low=0"],
            "search.space.speculative_num_steps.low=0: must be >= 1",
        ),
        (["server.warp_factor=9"], "server.warp_factor: no such key"),
        (
            [
                "server.speculative_num_steps=2",
                "server.speculative_eagle_topk=2",
                "server.speculative_num_draft_tokens=9",
            ],
            "speculative_num_draft_tokens=9 exceeds",
        ),
        (["engine.name=vllm"], "engine='vllm' is unknown: use one of sim, sglang"),
        (["engine=vllm"], "Could not find 'engine/vllm'"),
        (
            ["engine=sglang", "preflight=false", "model.path=/nonexistent/model"],
            "model.path='/nonexistent/model' does not exist on this machine",
        ),
        (["server.api_key_env=SPECSWEEP_UNSET_VAR"], "SPECSWEEP_UNSET_VAR is not set"),
        (["benchmark.prompts={prompts}"], "prompts.jsonl:2: not valid JSON"),
    ],
)
def test_bad_input_is_refused_with_what_to_change(tmp_path, overrides, message):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "fine"}\n{"prompt": "broken"\n')
    port = free_port()
    proc = sweep(tmp_path, port, *(o.format(prompts=prompts) for o in overrides))
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / STUDY).exists()
    assert processes_mentioning(f"--port {port} ") == []


def test_an_invalid_trial_leaves_a_folder_that_sync_restores(tmp_path):
    # A searched key the space cannot bound (target=...): its only value fails validation when
    # the trial is composed, after the sweep started.
    bad = (
        "search.space.hicache_size.target=benchmark.max_tokens",
        "search.space.hicache_size.choices=[0]",
    )
    results = tmp_path / "results"
    proc = sweep(
        results, free_port(), *bad, "search.n_trials=1", "search.baseline=false", "preflight=false"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = results / STUDY / "trial_0000"
    result = json.loads((folder / "result.json").read_text())
    assert result["outcome"] == "invalid" and "benchmark.max_tokens=0" in result["error"]
    assert "max_tokens: 0" in (folder / "config.yaml").read_text()
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    restored = sync("--tracking-dir", str(results), "--mlflow-uri", fresh)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert runs_by_folder(fresh)[str(folder)].data.tags["specsweep.outcome"] == "invalid"


def test_a_grace_period_within_one_heartbeat_is_refused_naming_both_keys(tmp_path):
    port = free_port()
    proc = sweep(tmp_path, port, "tracking.heartbeat_interval=10", "tracking.grace_period=5")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "tracking.grace_period=5 must exceed tracking.heartbeat_interval=10" in proc.stdout
    assert "tracking.grace_period=20" in proc.stdout  # the fix
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / STUDY).exists()
