"""`worker.count=2` through submitit's LocalExecutor: the SLURM code path, on one machine.

`hydra/launcher=submitit_local` is hydra-submitit-launcher's, the same `BaseSubmititLauncher` as
`submitit_slurm`: the jobs are pickled into `.submitit/`, each is run by submitit's controller in
its own processes (`python -m submitit.local._local` -> `submitit.core._submit`), and each job is
`sweep.launch.workers.run_worker`: a whole `python sweep.py -m` worker. Both workers share one study
in PostgreSQL and one MLflow server, on one simulated GPU, so they contend for it through the
node's lock files. Afterwards: every trial of both is in the one study and experiment, no
configuration ran twice, no two servers overlapped on the GPU, each job left its worker log
and submitit result, and no process of the run is left.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import subprocess
import uuid
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT
from tests.scaleout.test_workers import SKIPPED, live_servers
from tests.services_fixture import sweep_argv

pytestmark = pytest.mark.scaleout

STUDY = "submitit"
N_TRIALS = 3  # per worker
ARGS = [
    "hydra/launcher=submitit_local",
    "worker.count=2",
    "tracking=server",
    "experiment=single_gpu",
    "report=false",  # the closing report is tests/e2e/test_analysis.py's
    "hardware.gpus=1",  # one slot per worker, the same GPU: the lock files must serialise them
    f"search.study_name={STUDY}",
    f"search.n_trials={N_TRIALS}",
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


def _marked(mark: str) -> list[tuple[int, str]]:
    """Every live process (pid, command line) that inherited this test's mark."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            if "\nState:\tZ" in status:
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if f"SPECSWEEP_TEST_MARK={mark}".encode() in environ.split(b"\0"):
            found.append((int(entry), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


@pytest.fixture(scope="module")
def submitit_sweep(tracking_services, tmp_path_factory):
    results, locks = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("locks")
    mark = uuid.uuid4().hex
    env = {**os.environ, "SPECSWEEP_TEST_MARK": mark}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = sweep_argv(results, locks, *ARGS)
    proc = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    return {
        "proc": proc,
        "study_dir": results / STUDY,
        "study": optuna.load_study(study_name=STUDY, storage=tracking_services.optuna_storage),
        "mlflow": tracking_services.mlflow_uri,
        "mark": mark,
    }


def test_the_launcher_reports_both_workers_finished(submitit_sweep):
    proc = submitit_sweep["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "starting 2 sweep workers through LocalLauncher" in proc.stdout
    for i in range(2):
        assert f"worker_{i}: finished" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_each_job_went_through_submitit_and_left_its_log_and_result(submitit_sweep):
    study_dir = submitit_sweep["study_dir"]
    submitted = sorted(study_dir.glob(".submitit/*/*_submitted.pkl"))
    outcomes = sorted(study_dir.glob(".submitit/*/*_result.pkl"))
    assert len(submitted) == 2 and len(outcomes) == 2
    for path in outcomes:  # submitit's ("success", the Hydra JobReturn) of run_worker
        status, job_return = pickle.loads(path.read_bytes())
        assert status == "success"
        assert job_return.return_value == 0
    # the job ids are the controllers' pids: two processes, neither of them pytest's nor alike
    job_ids = {path.parent.name for path in submitted}
    assert len(job_ids) == 2 and str(os.getpid()) not in job_ids
    for i in range(2):
        log = (study_dir / f"worker_{i}" / "worker.log").read_text()
        assert "sweep finished with status FINISHED" in log, log[-3000:]
        assert "Traceback" not in log
        assert "locked against other workers here" in log


def test_both_workers_trials_landed_in_the_one_study(submitit_sweep):
    trials = submitit_sweep["study"].get_trials()
    assert not [t.number for t in trials if not t.state.is_finished()]
    by_worker = {}
    for t in trials:
        by_worker.setdefault((t.user_attrs.get("worker") or {}).get("pid"), []).append(t)
    assert len(by_worker) == 2 and None not in by_worker
    assert all(len(ts) >= N_TRIALS for ts in by_worker.values())
    # every server really ran: none crashed for want of a GPU or a port
    outcomes = [t.user_attrs.get("outcome") for t in trials]
    assert "crash" not in outcomes, outcomes
    assert outcomes.count("ok") >= 2


def test_no_configuration_ran_twice_and_no_server_shared_the_gpu(submitit_sweep):
    trials = submitit_sweep["study"].get_trials()
    launched = [
        t.user_attrs["candidate_key"]
        for t in trials
        if "candidate_key" in t.user_attrs and t.user_attrs["outcome"] not in SKIPPED
    ]
    assert launched and len(launched) == len(set(launched))
    spans = []
    for path in submitit_sweep["study_dir"].glob("*/result.json"):
        result = json.loads(path.read_text())
        if result.get("server_window"):
            assert result["gpus"] == "0"
            spans.append((*result["server_window"], result["name"]))
    assert len(spans) >= 3
    spans.sort()
    for (_, end, a), (start, _, b) in itertools.pairwise(spans):
        assert end <= start, f"{a} and {b} overlap on GPU 0"


def test_one_mlflow_experiment_holds_both_workers(submitit_sweep):
    client = MlflowClient(tracking_uri=submitit_sweep["mlflow"])
    experiments = [e for e in client.search_experiments() if e.name == STUDY]
    assert len(experiments) == 1
    runs = client.search_runs([experiments[0].experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("specsweep.role") == "sweep"]
    assert len({r.data.tags["specsweep.worker_pid"] for r in parents}) == 2


def test_no_process_of_the_run_is_left(submitit_sweep):
    assert live_servers(submitit_sweep["mark"]) == {}
    assert _marked(submitit_sweep["mark"]) == []
