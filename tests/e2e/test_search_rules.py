"""The search through the real CLI: nothing known is launched again, nor a dominated tree; a killed
sweep resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from harness.server.procs import free_port, processes_mentioning
from harness.sglang.surfaces import READY_LINE
from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import SMALL, sweep

pytestmark = pytest.mark.e2e

SPACE = (
    "search.space={speculative_num_steps:{type:categorical,choices:[3]},"
    "speculative_eagle_topk:{type:categorical,choices:[1]},"
    "speculative_num_draft_tokens:{type:int,low:2,high:16},"
    "mem_fraction_static:{type:categorical,choices:[0.85,0.93,0.94]},"
    "hicache_size:{type:categorical,choices:[0]}}"
)
# The verdicts on fixed fractions: search.memory=sample keeps an enqueued fraction a fixed
# parameter (the memory policy would move the 0.94 prior below the 0.93 OOM instead).
ORDER = (
    "search.enqueue=[{mem_fraction_static:0.93},{mem_fraction_static:0.94},"
    "{mem_fraction_static:0.85}]",
    "search.memory=sample",
)


def start_interruptible(argv: list[str]) -> subprocess.Popen:
    """The sweep as a terminal starts it, output piped. A suite started in the background by a
    shell without job control inherits SIGINT ignored (POSIX), and Python keeps an ignored SIGINT
    ignored: the sweep must get the default disposition a terminal gives it, or a Ctrl-C test
    measures how it was launched."""
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def sweep_argv(tmp_path: Path, port: int, *overrides: str) -> list[str]:
    """A 3-trial sweep's command line, for runs the test interrupts."""
    return [
        sys.executable,
        "sweep.py",
        "-m",
        f"tracking.dir={tmp_path}",
        f"server.port={port}",
        *SMALL,
        "search.n_trials=3",
        *overrides,
    ]


def launched(folder: Path) -> bool:
    return (folder / "server.log").exists()


def test_known_configurations_are_never_launched_again(tmp_path):
    port = free_port()
    proc = sweep(
        tmp_path, port, SPACE, *ORDER, "search.n_trials=5", "search.remeasure_baseline=false"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    study_dir = tmp_path / "kimi-k25-eagle3"
    outcomes = {
        t: json.loads((study_dir / t / "result.json").read_text())["outcome"]
        for t in (f"trial_{n:04d}" for n in range(5))
    }
    assert outcomes["trial_0000"] == "oom"
    assert outcomes["trial_0001"] == "predicted_oom"  # 0.94 needs more than 0.93 had
    assert outcomes["trial_0002"] == "ok"
    assert set(list(outcomes.values())[3:]) <= {"duplicate", "predicted_oom"}
    assert not launched(study_dir / "trial_0001")
    # Every launched trial ran a different effective configuration.
    study = optuna.load_study(
        study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp_path}/optuna.db"
    )
    keys = [
        t.user_attrs["candidate_key"]
        for t in study.trials
        if launched(study_dir / f"trial_{t.number:04d}")
    ]
    assert len(keys) == len(set(keys)) == 2
    dup = next(t for t in study.trials[3:] if t.user_attrs["outcome"] == "duplicate")
    source = study.trials[int(dup.user_attrs["related"].split("_")[1])]
    assert dup.values == source.values and dup.constraints == source.constraints
    # n_trials counts server starts: with two launchable configurations in the space, the sweep
    # proposed until MAX_IDLE_PROPOSALS in a row launched nothing, and says how many it saved.
    every = [t.user_attrs["outcome"] for t in study.trials]
    saved = sum(o in ("duplicate", "predicted_oom") for o in every)
    assert every.count("ok") + every.count("oom") == 2 and saved == len(every) - 2
    assert f"Server starts saved: {saved}" in proc.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs(
        [client.get_experiment_by_name("kimi-k25-eagle3").experiment_id],
        "tags.`specsweep.outcome` = 'predicted_oom'",
    )
    assert runs and runs[0].data.tags["specsweep.related"] == "trial_0000"


def is_ready(log: Path) -> bool:
    return log.exists() and READY_LINE in log.read_text(errors="replace")


def test_a_sweep_killed_with_sigkill_resumes_cleanly(tmp_path):
    port = free_port()
    argv = sweep_argv(
        tmp_path,
        port,
        "engine.clock_scale=50",
        "search.remeasure_baseline=false",
        "search.enqueue=[{speculative_num_steps:2,speculative_eagle_topk:1,"
        "mem_fraction_static:0.85,hicache_size:0}]",
    )
    first = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second_trial = tmp_path / "kimi-k25-eagle3" / "trial_0001" / "server.log"
    deadline = time.monotonic() + 120
    while not is_ready(second_trial) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert is_ready(second_trial), "the sweep's second server never became ready"
    # Killed once that server is up: SGLang (and the simulator) writes its start-up bars with
    # tqdm, which raises on the broken pipe, so a server orphaned mid start-up dies by itself;
    # once ready it logs through `logging`, which swallows the error, and lives on.
    os.kill(first.pid, signal.SIGKILL)  # no cleanup at all: the server is left behind
    first.wait()
    deadline = time.monotonic() + 10  # the log is opened just before the server is forked
    while not processes_mentioning(f"--port {port} ") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(f"--port {port} "), "the killed sweep's server should be orphaned"

    proc = sweep(
        tmp_path,
        port,
        "engine.clock_scale=50",
        "search.n_trials=2",
        "search.remeasure_baseline=false",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "left 1 trial(s) running (#1): marked failed" in proc.stdout
    assert "left behind by an earlier run" in proc.stderr  # the orphaned server was stopped
    assert "reusing the study's baseline" in proc.stdout
    study = optuna.load_study(
        study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp_path}/optuna.db"
    )
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.RUNNING not in states
    assert states[1] is optuna.trial.TrialState.FAIL
    # The measured trial 0 is not measured again: a re-proposal of it would be a duplicate.
    first_key = study.trials[0].user_attrs["candidate_key"]
    relaunched = [
        t
        for t in study.trials[2:]
        if t.user_attrs.get("candidate_key") == first_key
        and t.user_attrs.get("outcome") != "duplicate"
    ]
    assert relaunched == []
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("kimi-k25-eagle3")
    sweeps = client.search_runs([experiment.experiment_id], "tags.`specsweep.role` = 'sweep'")
    assert sorted(r.info.status for r in sweeps) == ["FINISHED", "KILLED"]
    assert processes_mentioning(f"--port {port} ") == []


def test_multi_objective_study_shows_its_pareto_front(tmp_path):
    proc = sweep(
        tmp_path,
        free_port(),
        "search.objective=tok_s+throughput",
        "search.throughput_concurrency=4",
        "benchmark.concurrency=[1,4]",
        "search.n_trials=2",
        "search.remeasure_baseline=false",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Pareto front" in proc.stdout and "throughput tok/s @ 4" in proc.stdout
    study = optuna.load_study(
        study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp_path}/optuna.db"
    )
    assert len(study.directions) == 2
    assert all(len(t.values) == 2 for t in study.trials if t.values)


def test_throughput_objective_needs_its_concurrency_level(tmp_path):
    proc = sweep(tmp_path, free_port(), "search.objective=throughput")
    assert proc.returncode != 0
    assert "does not measure" in proc.stdout and "benchmark.concurrency=[1,64]" in proc.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_trial_stops_the_server_and_records_the_trial(tmp_path, sig):
    port = free_port()
    # Slow enough that the signal lands inside the trial: at scale 20 the whole benchmark after
    # "fired up" took under a second and a fast run could finish it before the signal.
    # TPE: its first trial is the enqueued 3/1/4 measured in full, as the timing here assumes
    argv = sweep_argv(
        tmp_path, port, "engine.clock_scale=5", "search.baseline=false", "search.sampler.name=tpe"
    )
    proc = start_interruptible(argv)
    log = tmp_path / "kimi-k25-eagle3" / "trial_0000" / "server.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and "fired up" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out  # 128 + SIGINT, as a shell reports an interrupted job
    assert "interrupted" in out
    # What was kept, then one line on how to go on; no traceback.
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert "To resume: " in out and " sweep " in out and "search.n_trials=3" in out
    result = json.loads((log.parent / "result.json").read_text())
    assert result["outcome"] == "interrupted"
    assert processes_mentioning(f"--port {port} ") == []
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("kimi-k25-eagle3").experiment_id])
    statuses = {r.data.tags.get("specsweep.role"): r.info.status for r in runs}
    assert statuses == {"sweep": "KILLED", "trial": "KILLED"}  # stopped, not failed
    study = optuna.load_study(
        study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp_path}/optuna.db"
    )
    assert study.trials[0].state is optuna.trial.TrialState.FAIL


def test_a_study_keeps_its_objective(tmp_path):
    first = sweep(tmp_path, free_port(), "search.n_trials=0", "search.remeasure_baseline=false")
    assert first.returncode == 0, first.stdout + first.stderr
    proc = sweep(tmp_path, free_port(), "search.objective=speedup", "search.n_trials=1")
    assert proc.returncode == 2
    assert "optimises tok_s" in proc.stdout and "new search.study_name" in proc.stdout


def test_a_gpu_hour_budget_is_the_studys_and_a_resumed_sweep_finishes_it(tmp_path):
    port = free_port()
    budget = ("search.budget_gpu_hours=3", "search.remeasure_baseline=false")
    first = sweep(tmp_path, port, *budget)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "GPU-hour budget: 0.00 of 3 spent" in first.stdout
    study = optuna.load_study(
        study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp_path}/optuna.db"
    )
    costs = [t.user_attrs["gpu_hours"] for t in study.trials]
    # trials ran until the budget was spent, and not one launch beyond it
    assert sum(costs) >= 3 and sum(costs[:-1]) < 3
    assert all(
        c == 0
        for t, c in zip(study.trials, costs, strict=True)
        if t.user_attrs["outcome"] in ("duplicate", "predicted_oom")
    )
    again = sweep(tmp_path, port, *budget)  # the same study, the same budget: nothing left
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0.00 left" in again.stdout
    assert len(
        optuna.load_study(
            study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp_path}/optuna.db"
        ).trials
    ) == len(study.trials)


def test_a_dominated_tree_is_recorded_with_its_reason_and_never_launched(tmp_path):
    """2/4/3 verifies the tree 2/2/3 does in every round (SGLang 0.5.23 keeps the
    num_draft_tokens - 1 best-scored drafts: eagle_utils.py organize_draft_results), at more
    draft work: the sweep records it as dominated, starts no server for it, and launches 2/2/3."""
    port = free_port()
    tree = "speculative_num_steps:2,speculative_num_draft_tokens:3,mem_fraction_static:0.85"
    proc = sweep(
        tmp_path,
        port,
        "search.space={speculative_num_steps:{type:categorical,choices:[2]},"
        "speculative_eagle_topk:{type:categorical,choices:[2,4]},"
        "speculative_num_draft_tokens:{type:int,low:3,high:3},"
        "mem_fraction_static:{type:categorical,choices:[0.85]},"
        "hicache_size:{type:categorical,choices:[0]}}",
        f"search.enqueue=[{{speculative_eagle_topk:4,{tree}}},{{speculative_eagle_topk:2,{tree}}}]",
        "search.memory=sample",
        "search.n_trials=2",
        "search.remeasure_baseline=false",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    study_dir = tmp_path / "kimi-k25-eagle3"
    dominated = json.loads((study_dir / "trial_0000" / "result.json").read_text())
    assert dominated["outcome"] == "dominated"
    assert dominated["params"]["speculative_eagle_topk"] == 4
    assert "dominated by 2/2/3" in dominated["error"]
    assert "organize_draft_results" in dominated["error"]
    assert not launched(study_dir / "trial_0000")
    ran = json.loads((study_dir / "trial_0001" / "result.json").read_text())
    assert ran["outcome"] == "ok" and ran["params"]["speculative_eagle_topk"] == 2
    assert launched(study_dir / "trial_0001")
    assert "Server starts saved:" in proc.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs(
        [client.get_experiment_by_name("kimi-k25-eagle3").experiment_id],
        "tags.`specsweep.outcome` = 'dominated'",
    )
    assert runs and all(r.data.params["speculative_eagle_topk"] == "4" for r in runs)
