"""`hydra/launcher=slurm_local worker.count=2` against a real single-node SLURM cluster.

The launcher is hydra-submitit-launcher's `submitit_slurm`: sbatch submits both workers as one
job array to the cluster of `sweep.services.slurm` (tests/slurm/conftest.py), slurmd runs each
job's `srun python -m submitit.core._submit`, and each job is `sweep.launch.workers.run_worker`: a
whole `python sweep.py -m` worker. Both share one study in PostgreSQL and one MLflow server
(`tracking_services`) and one simulated GPU, through the node's lock files (SLURM sets no
CUDA_VISIBLE_DEVICES for the generic GRES the jobs ask for). Job states come from
`scontrol show job`: the cluster has no accounting storage, so no `sacct`.

Three sweeps: one left alone (both jobs complete, one study, nothing measured twice); one whose
job is cancelled with `scancel` while a trial of its worker runs (no server is left, the other
job finishes); one whose job gets the signal SLURM sends before its time limit (submitit's
`--signal=USR2@signal_delay_s`, sent at once with `scancel --signal=USR2` as submitit's own
`job._interrupt(timeout=True)` does): the trial is recorded interrupted with its server
stopped, submitit requeues the job, and the study finishes the trial in a later worker.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from harness.server.procs import pid_alive, wait_until
from sweep.launch import slurm_jobs
from sweep.services import slurm as slurm_cluster
from tests.conftest import ROOT
from tests.scaleout.test_submitit_workers import _marked
from tests.scaleout.test_workers import SKIPPED, _environ, live_servers
from tests.services_fixture import sweep_argv

pytestmark = pytest.mark.slurm

N_TRIALS = 2  # per worker, left alone; one where a job is interrupted (its requeue runs one more)
SWEEP_TIMEOUT_S = 200  # the launcher's whole run; each sweep here takes 30-70 s on two cores
ARGS = [
    "hydra/launcher=slurm_local",
    "worker.count=2",
    "tracking=server",
    "experiment=single_gpu",
    "report=false",  # the closing report is tests/e2e/test_analysis.py's
    "hardware.gpus=1",  # one slot per worker, the same GPU: the lock files serialise them
    "search.remeasure_baseline=false",
    # TPE: the model sampler's screened opening relaunches a configuration in full by design
    "search.sampler.name=tpe",
    "search.space.speculative_eagle_topk.choices=[1,2]",
    "search.space.speculative_num_steps.high=3",
    "search.space.hicache_size.choices=[0]",
    # conf/experiment/smoke.yaml's benchmark, on the single-GPU profile
    "benchmark.runs=2",
    "benchmark.warmup=1",
    "benchmark.requests_per_run=1",
    "benchmark.max_tokens=256",
    "engine.clock_scale=200",
]


@dataclass
class Sweep:
    code: int
    out: str
    study_dir: Path
    study: optuna.Study
    mlflow: str
    mark: str
    jobs: dict[str, dict[str, str]]  # worker_<i> -> `scontrol show job` fields
    caught: dict[str, str] | None  # the running trial the test interrupted, if it did


def _sweep(
    tracking_services, tmp_path_factory, study: str, *extra: str, n_trials=N_TRIALS, during=None
) -> Sweep:
    """The launcher's whole run; `during(mark)` interrupts it while it runs."""
    results, locks = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("locks")
    mark = uuid.uuid4().hex
    env = {**os.environ, "SPECSWEEP_TEST_MARK": mark}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = sweep_argv(
        results, locks, f"search.study_name={study}", f"search.n_trials={n_trials}", *ARGS, *extra
    )
    log = results / "launcher.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        caught = during(mark) if during else None
        code = proc.wait(timeout=SWEEP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    study_dir = results / study
    return Sweep(
        code=code,
        out=log.read_text(),
        study_dir=study_dir,
        study=optuna.load_study(study_name=study, storage=tracking_services.optuna_storage),
        mlflow=tracking_services.mlflow_uri,
        mark=mark,
        jobs=_jobs(study_dir),
        caught=caught,
    )


def _jobs(study_dir: Path) -> dict[str, dict[str, str]]:
    """Each worker's job as slurmctld has it (`scontrol show job`: no accounting, no sacct)."""
    jobs = {}
    for folder in sorted(study_dir.glob(".submitit/*_*")):
        if not re.fullmatch(r"\d+_\d+", folder.name):  # <array id>_<task>; not its script
            continue
        out = subprocess.run(
            ["scontrol", "show", "job", "-o", folder.name],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        jobs[f"worker_{fields['ArrayTaskId']}"] = fields
    return jobs


def _running_trial(mark: str) -> dict[str, str] | None:
    """A trial's live simulator under a SLURM job of this test: its worker, job and trial. The
    worker is the server's parent, and holds the trial's server.log open. Found as soon as it
    was launched: its start-up is most of a trial (at clock scale 200 the warm-up and runs after
    it take about a second, less than a signal may take to stop them)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if b"harness.sim" not in Path(f"/proc/{entry}/cmdline").read_bytes():
                continue
            env = _environ(int(entry))
            if env.get("SPECSWEEP_TEST_MARK") != mark or "SLURM_ARRAY_JOB_ID" not in env:
                continue
            worker = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]
            for fd in os.listdir(f"/proc/{worker}/fd"):
                target = Path(os.readlink(f"/proc/{worker}/fd/{fd}"))
                if target.name != "server.log" or not target.parent.name.startswith("trial_"):
                    continue
                return {
                    "worker": env["SPECSWEEP_PLACED_WORKER"],
                    "job": f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}",
                    "trial": target.parent.name,
                    "server_pid": entry,
                }
        except (FileNotFoundError, ProcessLookupError, OSError, IndexError, KeyError):
            continue
    return None


def _signal_during_a_trial(*scancel: str):
    """`during`: once a trial's server runs, `scancel <scancel...> <its job>`."""

    def during(mark: str) -> dict[str, str]:
        found: list[dict[str, str]] = []

        def trial_runs() -> bool:
            running = _running_trial(mark)
            if running:
                found.append(running)
            return bool(running)

        assert wait_until(trial_runs, 120, interval_s=0.05), "no trial was caught running"
        caught = found[-1]
        subprocess.run(["scancel", *scancel, caught["job"]], check=True, timeout=30)
        return caught

    return during


def _nothing_left(mark: str) -> None:
    """No simulator and no process of the run is left (a step may still be ending: bounded)."""
    assert wait_until(lambda: not _marked(mark), 60, interval_s=0.2), _marked(mark)
    assert live_servers(mark) == {}


def _launched_keys(trials) -> list[str]:
    return [
        t.user_attrs["candidate_key"]
        for t in trials
        if "candidate_key" in t.user_attrs
        and t.state.is_finished()
        and t.user_attrs["outcome"] not in (*SKIPPED, "interrupted")
    ]


# -- the cluster itself ----------------------------------------------------------------------
def test_the_cluster_is_one_idle_node_on_loopback_with_its_gpu_slots(slurm):
    node = subprocess.run(
        ["scontrol", "show", "node", slurm.node], capture_output=True, text=True, check=True
    ).stdout
    assert "State=IDLE" in node or "State=MIXED" in node, node
    assert f"Gres={slurm.gres_count}" in node and "NodeAddr=127.0.0.1" in node
    assert f"CPUTot={slurm.cpus}" in node and f"RealMemory={slurm.memory_mb}" in node
    assert f"NodeName={slurm.node} " in slurm.conf.read_text()
    # a second start finds it running and returns it as it is
    pids = {d: slurm_cluster._daemon_pid(Path(slurm.root), d) for d in slurm_cluster.DAEMONS}
    assert slurm_cluster.start(Path(slurm.root)) == slurm
    assert {d: slurm_cluster._daemon_pid(Path(slurm.root), d) for d in pids} == pids
    # no accounting storage: sacct cannot answer (job states come from scontrol and squeue)
    sacct = subprocess.run(["sacct", "-j", "1"], capture_output=True, text=True, check=False)
    assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stdout + sacct.stderr


def test_a_gres_named_gpu_without_device_files_leaves_the_node_invalid():
    root = Path(tempfile.mkdtemp(prefix="specsweep-slurm-gpu-"))
    try:
        with pytest.raises(slurm_cluster.ClusterError) as exc:
            slurm_cluster.start(root, gpu_slots=2, gres="gpu")
        message = str(exc.value)
        assert "inval" in message and "count reported lower than configured" in message
    finally:
        slurm_cluster.stop(root)
    assert not any(slurm_cluster._daemon_pid(root, d) for d in slurm_cluster.DAEMONS)
    shutil.rmtree(root, ignore_errors=True)


def test_stop_cancels_the_jobs_and_leaves_no_process():
    root = Path(tempfile.mkdtemp(prefix="specsweep-slurm-stop-"))
    mark = uuid.uuid4().hex
    cluster = slurm_cluster.start(root, gpu_slots=1)
    try:
        daemons = [slurm_cluster._daemon_pid(root, d) for d in slurm_cluster.DAEMONS]
        subprocess.run(
            ["sbatch", "-o", "/dev/null", "--wrap", "srun sleep 600"],
            env={**os.environ, **cluster.env, "SPECSWEEP_TEST_MARK": mark},
            cwd=root,
            check=True,
            capture_output=True,
            timeout=30,
        )
        sleeping = lambda: any("sleep 600" in cmd for _, cmd in _marked(mark))  # noqa: E731
        assert wait_until(sleeping, 30, interval_s=0.1), "the job's step never ran"
    finally:
        slurm_cluster.stop(root)
    assert not slurm_cluster._stepds(root)
    assert _marked(mark) == []  # the job's batch shell, its srun and the step's sleep
    assert not any(pid_alive(pid) for pid in daemons if pid)
    shutil.rmtree(root, ignore_errors=True)


def test_submitit_sees_a_job_end_that_left_no_result_through_squeue(slurm, tmp_path):
    """Cancelled before it ran, the job writes no result file; submitit's own watcher asks
    sacct, which cannot answer here, and would keep it UNKNOWN (not done) for ever."""
    import submitit
    from submitit.slurm import slurm as submitit_slurm

    saved = submitit_slurm.SlurmJob.watcher
    try:
        assert slurm_jobs.watch_without_accounting("submitit_launcher.SlurmLauncher")
        executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
        executor.update_parameters(
            timeout_min=1,
            slurm_partition=slurm.partition,
            slurm_additional_parameters={"begin": "now+600"},  # pending until cancelled
        )
        job = executor.submit(time.sleep, 1)
        assert wait_until(lambda: job.state == "PENDING", 30, interval_s=0.5), job.state
        subprocess.run(["scancel", job.job_id], check=True, timeout=30)
        assert wait_until(job.done, 30, interval_s=0.5), job.state
        assert job.state == "CANCELLED"
        assert not job.paths.result_pickle.exists()
    finally:
        submitit_slurm.SlurmJob.watcher = saved


# -- two workers, both complete --------------------------------------------------------------
@pytest.fixture(scope="module")
def completed(slurm, tracking_services, tmp_path_factory):
    started = time.monotonic()
    sweep = _sweep(tracking_services, tmp_path_factory, "slurm-complete")
    print(f"\nslurm-complete: launcher ran {time.monotonic() - started:.1f} s")
    return sweep


def test_both_jobs_ran_in_slurm_and_completed(completed):
    assert completed.code == 0, completed.out[-3000:]
    assert "starting 2 sweep workers through SlurmLauncher" in completed.out
    # submitit polled squeue, not sacct (which only errs here)
    assert "sacct" not in completed.out, completed.out[-3000:]
    assert sorted(completed.jobs) == ["worker_0", "worker_1"]
    for name, job in completed.jobs.items():
        assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job
        assert job["Partition"] == slurm_cluster.PARTITION and "gpuslot:1" in job["TresPerNode"]
        log = (completed.study_dir / name / "worker.log").read_text()
        assert "sweep finished with status FINISHED" in log, log[-3000:]
        assert "Traceback" not in log
        assert "locked against other workers here" in log
    for path in completed.study_dir.glob(".submitit/*_*/*_result.pkl"):
        status, job_return = pickle.loads(path.read_bytes())
        assert status == "success" and job_return.return_value == 0


def test_every_trial_is_in_the_one_study_and_none_ran_twice(completed):
    trials = completed.study.get_trials()
    assert not [t.number for t in trials if not t.state.is_finished()]
    workers = {(t.user_attrs.get("worker") or {}).get("pid") for t in trials}
    assert len(workers) == 2 and None not in workers
    assert "crash" not in [t.user_attrs.get("outcome") for t in trials]
    launched = _launched_keys(trials)
    assert len(launched) >= 2 and len(launched) == len(set(launched))
    spans = []
    for path in completed.study_dir.glob("*/result.json"):
        result = json.loads(path.read_text())
        if result.get("server_window"):
            assert result["gpus"] == "0"
            spans.append((*result["server_window"], result["name"]))
    spans.sort()
    for (_, end, a), (start, _, b) in itertools.pairwise(spans):
        assert end <= start, f"{a} and {b} overlap on GPU 0"
    client = MlflowClient(tracking_uri=completed.mlflow)
    [experiment] = [e for e in client.search_experiments() if e.name == "slurm-complete"]
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("specsweep.role") == "sweep"]
    assert len({r.data.tags["specsweep.worker_pid"] for r in parents}) == 2


def test_nothing_of_the_completed_sweep_is_left(completed):
    _nothing_left(completed.mark)


# -- scancel of one job while its trial runs -------------------------------------------------
@pytest.fixture(scope="module")
def cancelled(slurm, tracking_services, tmp_path_factory):
    started = time.monotonic()
    sweep = _sweep(
        tracking_services,
        tmp_path_factory,
        "slurm-scancel",
        n_trials=1,
        during=_signal_during_a_trial(),
    )
    print(f"\nslurm-scancel: launcher ran {time.monotonic() - started:.1f} s")
    return sweep


def test_scancel_stops_the_trial_and_leaves_no_server(cancelled):
    caught = cancelled.caught
    assert cancelled.jobs[caught["worker"]]["JobState"] == "CANCELLED"
    result = json.loads((cancelled.study_dir / caught["trial"] / "result.json").read_text())
    assert result["outcome"] == "interrupted"
    trial = cancelled.study.trials[int(caught["trial"].removeprefix("trial_"))]
    assert trial.state is optuna.trial.TrialState.FAIL
    assert trial.user_attrs["outcome"] == "interrupted"
    _nothing_left(cancelled.mark)


def test_the_other_job_finishes(cancelled):
    other = ({"worker_0", "worker_1"} - {cancelled.caught["worker"]}).pop()
    assert cancelled.jobs[other]["JobState"] == "COMPLETED", cancelled.jobs
    assert f"{other}: finished" in cancelled.out
    assert f"{cancelled.caught['worker']}: exit code" in cancelled.out  # and the launcher says so
    assert cancelled.code == 1
    log = (cancelled.study_dir / other / "worker.log").read_text()
    assert "sweep finished with status FINISHED" in log, log[-3000:]
    launched = _launched_keys(cancelled.study.get_trials())
    assert len(launched) == len(set(launched))


# -- the time-limit signal: the trial is stopped, the job requeued, the trial run again --------
@pytest.fixture(scope="module")
def signalled(slurm, tracking_services, tmp_path_factory):
    started = time.monotonic()
    sweep = _sweep(
        tracking_services,
        tmp_path_factory,
        "slurm-timelimit",
        # under ten minutes submitit reads any signal as the time limit's (has_timed_out)
        "hydra.launcher.timeout_min=5",
        n_trials=1,
        during=_signal_during_a_trial("--signal=USR2"),
    )
    print(f"\nslurm-timelimit: launcher ran {time.monotonic() - started:.1f} s")
    return sweep


def test_the_signalled_trial_is_recorded_interrupted_with_its_server_stopped(signalled):
    caught = signalled.caught
    folder = signalled.study_dir / caught["trial"]
    result = json.loads((folder / "result.json").read_text())
    assert result["outcome"] == "interrupted"
    assert not pid_alive(int(caught["server_pid"]))  # the trial's server is gone
    number = int(caught["trial"].removeprefix("trial_"))
    trial = signalled.study.trials[number]
    assert trial.state is optuna.trial.TrialState.FAIL
    assert trial.user_attrs["outcome"] == "interrupted"
    log = (signalled.study_dir / caught["worker"] / "worker.log").read_text()
    assert "interrupted during the trials: the server was stopped" in log
    # the worker stopped, not died: no "crashed sweep" found its trial running afterwards
    assert "a crashed sweep left" not in log


def test_submitit_requeued_the_job_and_it_completed(signalled):
    job = signalled.jobs[signalled.caught["worker"]]
    assert job["JobState"] == "COMPLETED" and job["Restarts"] == "1", job
    assert signalled.code == 0, signalled.out[-3000:]
    name = f"{job['ArrayJobId']}_{job['ArrayTaskId']}"
    submitit_log = (signalled.study_dir / ".submitit" / name / f"{name}_0_log.out").read_text()
    assert "this job is timed-out" in submitit_log and f"Requeued job {name}" in submitit_log
    log = (signalled.study_dir / signalled.caught["worker"] / "worker.log").read_text()
    # one worker stopped by the signal, then the requeued job's, which finished
    assert log.count("sweep finished with status KILLED") == 1
    assert log.count("sweep finished with status FINISHED") == 1, log[-2000:]
    assert log.index("status KILLED") < log.index("status FINISHED")


def test_the_study_runs_the_interrupted_trial_again(signalled):
    trials = signalled.study.get_trials()
    number = int(signalled.caught["trial"].removeprefix("trial_"))
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == number]
    assert len(retries) == 1, [(t.number, t.state, t.system_attrs) for t in trials]
    assert retries[0].params == trials[number].params
    assert retries[0].state is optuna.trial.TrialState.COMPLETE
    assert retries[0].user_attrs["outcome"] in ("ok", "duplicate")
    assert not [t.number for t in trials if not t.state.is_finished()]
    launched = _launched_keys(trials)
    assert len(launched) == len(set(launched))
    _nothing_left(signalled.mark)
