"""Three `python sweep.py -m` workers share one study in PostgreSQL and one MLflow server.

Each worker has two GPU slots on a simulated two-GPU node they all share, so slots contend
across workers. One worker is SIGKILLed while a trial of its runs; the others must fail that
trial through Optuna's heartbeat and run it again. Afterwards: one study and one experiment
hold everything, no configuration was launched twice, no two live servers ever shared a GPU,
and no simulator process is left.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from sweep.study.trial.screened import SCREENED
from sweep.study.trial.unlaunched import NOT_LAUNCHED
from tests.conftest import ROOT
from tests.services_fixture import sweep_argv

pytestmark = pytest.mark.scaleout

STUDY = "scaleout"
# recorded without a server start (a dominated tree, a duplicate, ...): not a launch
SKIPPED = tuple(str(o) for o in NOT_LAUNCHED)
WORKER_ARGS = [
    "tracking=server",
    "experiment=single_gpu",
    "report=false",  # the closing report is tests/e2e/test_analysis.py's
    "hardware.gpus=2",  # model.tp=1: two slots per worker, one GPU each
    f"search.study_name={STUDY}",
    "search.n_trials=6",
    "search.remeasure_baseline=false",
    # A small space and the same seed in every worker: they propose the same configurations
    # at the same time, which is what the cross-worker duplicate rule must absorb. TPE: the
    # model sampler's screened opening relaunches a configuration in full by design.
    "search.sampler.name=tpe",
    "search.space.speculative_eagle_topk.choices=[1,2]",
    "search.space.speculative_num_steps.high=3",
    "search.space.hicache_size.choices=[0]",
    "tracking.heartbeat_interval=1",
    "tracking.grace_period=2",
    "benchmark.runs=2",
    "benchmark.warmup=1",
    "benchmark.requests_per_run=1",
    "benchmark.max_tokens=256",
    "engine.clock_scale=200",
]


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(p.split("=", 1) for p in raw.decode(errors="replace").split("\0") if "=" in p)


def live_servers(mark: str) -> dict[int, str | None]:
    """Process group -> CUDA_VISIBLE_DEVICES of every live simulator this test's workers started.
    By group: a server is its launcher and the scheduler it forks (as SGLang's is), one server."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text():
                continue
            if b"harness.sim" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            env = _environ(pid)
            group = os.getpgid(pid)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if env.get("SPECSWEEP_TEST_MARK") == mark:
            found[group] = env.get("CUDA_VISIBLE_DEVICES")
    return found


class GpuMonitor(threading.Thread):
    """Samples the live servers: any GPU listed by two at once is a violation."""

    def __init__(self, mark: str):
        super().__init__(daemon=True)
        self.mark, self.stop, self.samples, self.shared = mark, threading.Event(), 0, []

    def run(self) -> None:
        while not self.stop.wait(0.05):
            owners = defaultdict(list)
            for group, gpus in live_servers(self.mark).items():
                for gpu in (gpus or "unset").split(","):
                    owners[gpu].append(group)
            self.samples += 1
            self.shared += [(g, p) for g, p in owners.items() if len(p) > 1]


@pytest.fixture(scope="module")
def shared_sweep(tracking_services, tmp_path_factory):
    results, locks = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("locks")
    mark = uuid.uuid4().hex
    env = {**os.environ, "SPECSWEEP_TEST_MARK": mark}
    monitor = GpuMonitor(mark)
    monitor.start()
    argv = sweep_argv(results, locks, *WORKER_ARGS)
    logs = [results / f"worker{i}.log" for i in range(3)]

    def start(log: Path) -> subprocess.Popen:
        return subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
        )

    # The victim starts first, so it is killed in one of its first trials and the others still
    # have most of theirs ahead: they must outlive the grace period to recover its trial.
    victim = start(logs[2])
    # A head start, not a wait for a condition: the two others must still pass their preflight
    # before the victim's first server takes server.port, so no later event of the victim's
    # (study opened, server launched) can be waited for.
    time.sleep(1)
    workers = [start(logs[0]), start(logs[1]), victim]
    killed_trial = _kill_during_a_trial(victim)
    try:
        codes = [w.wait(timeout=240) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        monitor.stop.set()
        monitor.join()
    study = optuna.load_study(study_name=STUDY, storage=tracking_services.optuna_storage)
    outputs = [log.read_text() for log in logs]
    return {
        "study": study,
        "codes": codes,
        "outputs": outputs,
        "killed_trial": killed_trial,
        "monitor": monitor,
        "results": results,
        "mark": mark,
        "mlflow": tracking_services.mlflow_uri,
        "storage": tracking_services.optuna_storage,
    }


def _kill_during_a_trial(victim: subprocess.Popen) -> int:
    """SIGKILL the worker while a server of one of its trials runs; return that trial."""
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        assert victim.poll() is None, "the victim worker ended before it ran a trial"
        folder = _trial_of_a_running_server(victim.pid)
        if folder is not None and folder.startswith("trial_"):
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            return int(folder.removeprefix("trial_"))
        time.sleep(0.05)
    raise AssertionError("no trial of the victim worker was caught running")


def _trial_of_a_running_server(worker_pid: int) -> str | None:
    """The trial folder of a simulator the worker started: the worker holds its server.log open
    (the harness pumps the server's output into it)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != worker_pid:
                continue
            if b"harness.sim" not in Path(f"/proc/{entry}/cmdline").read_bytes():
                continue
            for fd in os.listdir(f"/proc/{worker_pid}/fd"):
                target = Path(os.readlink(f"/proc/{worker_pid}/fd/{fd}"))
                if target.name == "server.log" and target.parent.name.startswith("trial_"):
                    return target.parent.name
        except (FileNotFoundError, ProcessLookupError, OSError, IndexError):
            continue
    return None


def test_survivors_finish_and_the_victim_was_killed(shared_sweep):
    codes, outputs = shared_sweep["codes"], shared_sweep["outputs"]
    assert codes[:2] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert codes[2] == -signal.SIGKILL
    for out in outputs[:2]:
        assert "Traceback" not in out, out[-3000:]
        assert "sweep finished with status FINISHED" in out
        assert "2 GPU slots side by side" in out


def test_every_trial_is_in_one_study_and_none_is_left_running(shared_sweep):
    trials = shared_sweep["study"].get_trials()
    # two survivors x 6 trials, the victim's started ones, and the retry of the killed one
    assert len(trials) >= 13
    assert not [t.number for t in trials if not t.state.is_finished()]
    workers = {(t.user_attrs.get("worker") or {}).get("pid") for t in trials}
    assert len(workers) == 3


def test_the_killed_workers_trial_is_failed_and_run_again_by_another(shared_sweep):
    study, killed = shared_sweep["study"], shared_sweep["killed_trial"]
    trials = {t.number: t for t in study.get_trials()}
    assert trials[killed].state is optuna.trial.TrialState.FAIL
    retries = [t for t in trials.values() if t.system_attrs.get("failed_trial") == killed]
    assert len(retries) >= 1
    retry = retries[0]
    assert retry.params == trials[killed].params
    assert retry.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert retry.user_attrs["worker"]["pid"] != trials[killed].user_attrs["worker"]["pid"]


def test_no_configuration_is_evaluated_twice(shared_sweep):
    trials = shared_sweep["study"].get_trials()
    # A one-run screen and the full launch that pools it are one measurement in two parts;
    # neither may happen twice for one configuration.
    for screened in (False, True):
        launched = [
            t.user_attrs["candidate_key"]
            for t in trials
            if "candidate_key" in t.user_attrs
            and t.user_attrs["outcome"] not in SKIPPED
            and bool(t.user_attrs.get(SCREENED)) is screened
        ]
        assert len(launched) == len(set(launched)), "screens" if screened else "full launches"
    duplicates = [t for t in trials if t.user_attrs.get("outcome") == "duplicate"]
    assert duplicates, "same seeds in three workers must have proposed a configuration twice"
    # ...and the waiting worker said so rather than launching it
    assert any("waiting for its result" in out for out in shared_sweep["outputs"])


def test_one_mlflow_experiment_holds_every_trial(shared_sweep):
    client = MlflowClient(tracking_uri=shared_sweep["mlflow"])
    experiments = [e for e in client.search_experiments() if e.name == STUDY]
    assert len(experiments) == 1
    runs = client.search_runs([experiments[0].experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("specsweep.role") == "sweep"]
    assert len({r.data.tags["specsweep.worker_pid"] for r in parents}) == 3
    logged = {
        int(r.data.tags["specsweep.trial_number"])
        for r in runs
        if "specsweep.trial_number" in r.data.tags
    }
    finished = {
        t.number
        for t in shared_sweep["study"].get_trials()
        if t.state is not optuna.trial.TrialState.FAIL
    }
    assert finished <= logged
    baselines = [r for r in runs if r.data.tags.get("specsweep.role") == "baseline"]
    assert len(baselines) == 1  # measured by one worker, reused by the others
    for parent in parents:  # the storage URL, as tagged, carries no password
        assert parent.data.tags["specsweep.optuna_storage"] == shared_sweep["storage"]


def test_no_two_live_servers_ever_shared_a_gpu(shared_sweep):
    monitor = shared_sweep["monitor"]
    assert monitor.samples > 100
    assert monitor.shared == []
    # The same from the records: each trial's server window on its GPU, across all workers.
    windows = defaultdict(list)
    for path in shared_sweep["results"].glob(f"{STUDY}/*/result.json"):
        result = json.loads(path.read_text())
        if result.get("server_window"):
            assert result["gpus"] in ("0", "1")
            windows[result["gpus"]].append((*result["server_window"], result["name"]))
            if result["outcome"] == "ok":  # the simulator runs where it was told to
                assert result["effective"]["cuda_visible_devices"] == result["gpus"]
    assert sum(len(w) for w in windows.values()) >= 8
    for gpu, spans in windows.items():
        spans.sort()
        for (_, end, a), (start, _, b) in itertools.pairwise(spans):
            assert end <= start, f"GPU {gpu}: {a} and {b} overlap"


def test_no_simulator_process_is_left(shared_sweep):
    assert live_servers(shared_sweep["mark"]) == {}
