"""The fault scenarios that run the real `python sweep.py -m` (benchmarks/faults.py runs them):
a port taken, a signal mid-trial, SIGKILL then resume, the tracking server down then sync.
Each returns what faults.py reports: survived, trials started and recorded, and a note."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import optuna

from benchmarks._common import ROOT, STUDY, Scratch
from harness.record.layout import ResultsLayout
from harness.record.results import Outcome, TrialResult
from harness.server.procs import free_port
from harness.sglang.surfaces import READY_LINE
from sweep.services.stores import launch_mlflow


def accounted(ctx: Scratch, mlflow_uri: str | None = None) -> tuple[int, int]:
    """(trials started, trials whose result survives in their folder, MLflow or Optuna)."""
    study_dir = ctx.results / STUDY
    started = [p.parent for p in study_dir.glob("*/server.log")]
    folders = {str(p.parent) for p in study_dir.glob("*/result.json")}
    optuna_failed = set()
    layout = ResultsLayout.at(ctx.results)
    with contextlib.suppress(KeyError):  # no study: nothing started
        study = optuna.load_study(study_name=STUDY, storage=layout.optuna_uri)
        optuna_failed = {f"trial_{t.number:04d}" for t in study.trials if t.state.is_finished()}
    if mlflow_uri:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(mlflow_uri)
        experiment = client.get_experiment_by_name(STUDY)
        runs = client.search_runs([experiment.experiment_id])
        logged = {r.data.tags.get("specsweep.folder") for r in runs}
        folders &= logged  # must be in MLflow too
    recorded = [p for p in started if str(p) in folders or p.name in optuna_failed]
    return len(started), len(recorded)


def port_taken(ctx: Scratch) -> dict:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ctx.port))
        sock.listen()
        proc = ctx.sweep("search.n_trials=1")
    clear = f"127.0.0.1:{ctx.port} is in use by another process" in proc.stdout
    started, recorded = accounted(ctx)
    return {
        "survived": proc.returncode != 0 and clear and started == 0,
        "started": started,
        "recorded": recorded,
        "seconds_to_detect": None,
        "note": "refused before launch: server.port=<port>",
    }


def interrupt(sig: signal.Signals) -> Callable[[Scratch], dict]:
    def run(ctx: Scratch) -> dict:
        proc = subprocess.Popen(
            ctx.sweep_argv("engine.clock_scale=20", "search.baseline=false"),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log = ctx.results / STUDY / "trial_0000" / "server.log"
        ctx.wait_for(log, "fired up")
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
        result = TrialResult.read(log.parent)
        started, recorded = accounted(ctx, ResultsLayout.at(ctx.results).mlflow_uri)
        return {
            "survived": proc.returncode != 0
            and result.outcome is Outcome.INTERRUPTED
            and "interrupted" in out,
            "started": started,
            "recorded": recorded,
            "seconds_to_detect": None,
            "note": "trial interrupted, MLflow run closed",
        }

    return run


def is_ready(log: Path) -> bool:
    return READY_LINE in log.read_text(errors="replace")


def sigkill_resume(ctx: Scratch) -> dict:
    first = subprocess.Popen(
        ctx.sweep_argv("engine.clock_scale=50", "search.remeasure_baseline=false"),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # The second launched trial's server: trial_0001 may be a duplicate that launches nothing
    # (search.n_trials counts server starts), so the folder to wait for is not known by name.
    # Killed once it is ready: a server orphaned mid start-up dies by itself on its next tqdm
    # redraw into the broken pipe (tqdm re-raises EPIPE), as SGLang's does; a ready one lives on.
    deadline = time.monotonic() + 180
    while sum(is_ready(log) for log in (ctx.results / STUDY).glob("trial_*/server.log")) < 2:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{ctx.results / STUDY}: no second trial's server became ready")
        time.sleep(0.1)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    proc = ctx.sweep(
        "engine.clock_scale=50", "search.n_trials=2", "search.remeasure_baseline=false"
    )
    started, recorded = accounted(ctx)
    return {
        "survived": proc.returncode == 0
        and "marked failed" in proc.stdout
        and "left behind by an earlier run" in proc.stderr,
        "started": started,
        "recorded": recorded,
        "seconds_to_detect": None,
        "note": "leftover server stopped, RUNNING trial failed, resumed",
    }


def mlflow_down(ctx: Scratch) -> dict:
    db, mlflow_port = ctx.dir / "server.db", free_port()
    server = launch_mlflow(db.parent, f"sqlite:///{db}", mlflow_port)
    try:
        proc = subprocess.Popen(
            ctx.sweep_argv(
                "search.n_trials=2",
                "search.remeasure_baseline=false",
                f"tracking.mlflow_uri=http://127.0.0.1:{mlflow_port}",
            ),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ctx.wait_for(ctx.results / STUDY / "trial_0000" / "server.log")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    out, _ = proc.communicate(timeout=300)
    # MLflow is back (the same store on another port); the server owns the artifacts.
    back_port = free_port()
    server = launch_mlflow(db.parent, f"sqlite:///{db}", back_port)
    try:
        sync = subprocess.run(
            [
                *(sys.executable, "-m", "sweep.sync", "--tracking-dir", str(ctx.results)),
                *("--mlflow-uri", f"http://127.0.0.1:{back_port}"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    started, recorded = accounted(ctx, f"sqlite:///{db}")
    return {
        "survived": proc.returncode == 0 and "stopped answering" in out and sync.returncode == 0,
        "started": started,
        "recorded": recorded,
        "seconds_to_detect": None,
        "note": sync.stdout.strip().splitlines()[-1][:70] if sync.stdout else sync.stderr[-70:],
    }


def repeated_crash(ctx: Scratch) -> dict:
    """SGLang refuses topk > 1 with trtllm_mha at start-up: crashed twice, never launched again,
    whatever the sampler proposes afterwards (topk 1 beside it keeps the sweep productive)."""
    space = (
        "search.space={speculative_num_steps:{type:categorical,choices:[2]},"
        "speculative_eagle_topk:{type:categorical,choices:[1,2]},"
        "speculative_num_draft_tokens:{type:int,low:4,high:4},"
        "mem_fraction_static:{type:categorical,choices:[0.85]},"
        "hicache_size:{type:categorical,choices:[0]}}"
    )
    refused = (  # three proposals of one candidate (different key sets: no enqueue is skipped)
        "search.enqueue=[{speculative_eagle_topk:2},"
        "{speculative_eagle_topk:2,speculative_num_steps:2},"
        "{speculative_eagle_topk:2,speculative_num_steps:2,mem_fraction_static:0.85}]"
    )
    proc = ctx.sweep(
        space,
        refused,
        "search.n_trials=8",
        "search.remeasure_baseline=false",
        # the model's settled stop would end this two-candidate sweep before the third proposal
        "search.sampler.stop=false",
        f"server.extra_args=['--served-model-name','{ctx.marker}',"
        "'--attention-backend','trtllm_mha']",
    )
    study = optuna.load_study(study_name=STUDY, storage=ResultsLayout.at(ctx.results).optuna_uri)
    study_dir = ctx.results / STUDY
    refused_key = study.trials[0].user_attrs.get("candidate_key")
    proposals = [t for t in study.trials if t.user_attrs.get("candidate_key") == refused_key]
    launches = [t for t in proposals if (study_dir / f"trial_{t.number:04d}/server.log").exists()]
    started, recorded = accounted(ctx)
    return {
        "survived": proc.returncode == 0
        and [t.user_attrs["outcome"] for t in launches] == ["crash", "crash"]
        and len(proposals) > len(launches)  # proposed again after the two crashes
        and all(t.user_attrs["outcome"] == "known_crash" for t in proposals[2:]),
        "started": started,
        "recorded": recorded,
        "seconds_to_detect": None,
        "note": f"proposed {len(proposals)}x, launched {len(launches)}x, then known_crash",
    }
