"""`python sweep.py -m` through the real CLI against the simulator; then what landed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from harness.server.procs import free_port, processes_mentioning
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

OOM = (
    "{speculative_num_steps:3,speculative_eagle_topk:1,speculative_num_draft_tokens:4,"
    "mem_fraction_static:0.93,hicache_size:0}"
)
GOOD = (
    "{speculative_num_steps:2,speculative_eagle_topk:2,speculative_num_draft_tokens:4,"
    "mem_fraction_static:0.86,hicache_size:48}"
)
# conf/experiment/smoke.yaml: the benchmarks run it too. Without the closing report: its figures
# cost ~5 s per sweep, and tests/e2e/test_analysis.py (report=true) is the one that reads it.
# The study named, so a test finds its folder (a name is otherwise derived from the setup:
# tests/e2e/test_one_study_per_setup.py).
SMALL = ["experiment=smoke", "report=false", "search.study_name=kimi-k25-eagle3"]


def single_folder(study: Path) -> Path:
    """The one `specsweep trial` folder of a study (each call has its own, single-<time>)."""
    (folder,) = study.glob("single-*")
    return folder


def sweep(
    tmp: Path, port: int, *overrides: str, multirun: bool = True
) -> subprocess.CompletedProcess:
    argv = [
        sys.executable,
        "sweep.py",
        *(["-m"] if multirun else []),
        f"tracking.dir={tmp}",
        f"server.port={port}",
        *SMALL,
        *overrides,
    ]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def first_sweep(tmp_path_factory):
    tmp, port = tmp_path_factory.mktemp("results"), free_port()
    proc = sweep(tmp, port, "search.n_trials=3", f"search.enqueue=[{OOM},{GOOD}]")
    return tmp, port, proc


def test_sweep_succeeds_and_tells_the_user_where_results_are(first_sweep):
    tmp, _, proc = first_sweep
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "SIMULATED" in out
    assert "[3/3]" in out and "Best:" in out and "× the baseline" in out
    assert f"specsweep ui --results {tmp}   then http://127.0.0.1:5000/" in out
    assert "Traceback" not in proc.stderr
    assert "preflight: " in out and "Wall time" in out and "server start-ups" in out


def test_optuna_study_holds_every_trial_with_its_outcome(first_sweep):
    tmp, _, _ = first_sweep
    study = optuna.load_study(study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp}/optuna.db")
    trials = study.get_trials()
    assert len(trials) == 3
    # An OOM is a constraint violation the sampler learns from, never a ranked value.
    assert trials[0].state is optuna.trial.TrialState.COMPLETE
    assert trials[0].constraints == {"oom": 1.0}
    assert trials[0].user_attrs["outcome"] == "oom" and trials[0].user_attrs["oom_kind"] == "gpu"
    assert study.best_trial.number != 0
    assert trials[1].state is optuna.trial.TrialState.COMPLETE
    assert trials[1].params["speculative_num_draft_tokens"] == 4
    assert any(key.startswith("baseline.") for key in study.user_attrs)


def test_mlflow_has_parent_and_child_runs_with_the_contract_keys(first_sweep):
    tmp, _, _ = first_sweep
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp}/mlflow.db")
    experiment = client.get_experiment_by_name("kimi-k25-eagle3")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("specsweep.role") == "sweep"]
    assert len(parents) == 1
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    roles = sorted(r.data.tags["specsweep.role"] for r in children)
    assert roles == ["baseline", "baseline", "trial", "trial", "trial"]  # the baseline, re-checked
    assert any("recheck" in r.info.run_name for r in children)
    for run in children:
        tags, params = run.data.tags, run.data.params
        assert tags["specsweep.engine"] == "sim" and tags["specsweep.simulated"] == "true"
        assert float(tags["specsweep.clock_scale"]) == 200.0 or tags["specsweep.outcome"] != "ok"
        for key in (
            "speculative_num_steps",
            "speculative_num_draft_tokens",
            "speculative_eagle_topk",
            "mem_fraction_static",
            "hicache_size",
        ):
            assert key in params
        names = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"config.yaml", "command.sh", "server.log", "result.json"} <= names
    outcomes = {r.data.tags["specsweep.outcome"] for r in children}
    assert "oom" in outcomes and "ok" in outcomes
    good = next(r for r in children if r.data.params.get("effective.speculative_eagle_topk") == "2")
    for metric in ("tok_s", "tok_s_ci95", "accept_len", "speedup_vs_baseline"):
        assert metric in good.data.metrics
    assert good.data.params["effective.hicache_size"] == "48"
    assert "requests.jsonl" in {a.path for a in client.list_artifacts(good.info.run_id)}
    assert parents[0].data.metrics["n_oom"] == 1.0


def test_trial_folders_describe_themselves(first_sweep):
    tmp, _, _ = first_sweep
    folder = tmp / "kimi-k25-eagle3" / "trial_0000"
    result = json.loads((folder / "result.json").read_text())
    assert result["outcome"] == "oom" and "mem_fraction_static=0.93" in result["error"]
    assert "Capture cuda graph failed" in result["log_excerpt"]
    assert "--mem-fraction-static 0.93" in (folder / "command.sh").read_text()
    ok = json.loads((tmp / "kimi-k25-eagle3" / "trial_0001" / "result.json").read_text())
    assert ok["outcome"] == "ok" and len(ok["runs"]) == 2
    lines = (tmp / "kimi-k25-eagle3" / "trial_0001" / "requests.jsonl").read_text().splitlines()
    assert [json.loads(x)["phase"] for x in lines].count("measure") == 2


def test_the_baseline_sets_its_memory(first_sweep):
    # SGLang 0.5.23's own default on Kimi-K2.5 (multimodal, MLA) leaves no KV cache on this box
    # (harness.sglang.memory): the baseline runs at the lower quarter of the searched range.
    tmp, _, _ = first_sweep
    folders = sorted((tmp / "kimi-k25-eagle3").glob("baseline_*"))
    assert folders, sorted(p.name for p in (tmp / "kimi-k25-eagle3").iterdir())
    for folder in folders:
        assert "--mem-fraction-static 0.85" in (folder / "command.sh").read_text()


def test_no_process_is_left_running(first_sweep):
    _, port, _ = first_sweep
    assert processes_mentioning(f"--port {port} ") == []


def test_resuming_reuses_the_baseline_and_extends_the_study(tmp_path):
    # A study of its own: resuming the module's sweep would change what the tests above read.
    tmp, port = tmp_path, free_port()
    first = sweep(tmp, port, "search.n_trials=1", "search.remeasure_baseline=false")
    assert first.returncode == 0, first.stdout + first.stderr
    proc = sweep(tmp, port, "search.n_trials=2")  # the study's total: one more
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reusing the study's baseline" in proc.stdout
    study = optuna.load_study(study_name="kimi-k25-eagle3", storage=f"sqlite:///{tmp}/optuna.db")
    # One more server start (a screened opening launch too: search.sampler=model); a proposal
    # that repeated a measured configuration is not one.
    launched = [t for t in study.get_trials() if t.user_attrs.get("outcome") in ("ok", "pruned")]
    assert len(launched) == 2 and len({t.user_attrs["candidate_key"] for t in launched}) == 2
    assert processes_mentioning(f"--port {port} ") == []


def test_bad_input_fails_fast_without_starting_anything(tmp_path):
    port = free_port()
    proc = sweep(tmp_path, port, "server.mem_fraction_static=1.5")
    assert proc.returncode != 0
    assert "mem_fraction_static=1.5 is out of range" in proc.stdout + proc.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "optuna.db").exists()
    assert not (tmp_path / "kimi-k25-eagle3").exists()  # no snapshot of a refused study either


def test_comma_sweeps_are_refused_with_a_pointer_to_search_space(tmp_path):
    proc = sweep(tmp_path, free_port(), "server.speculative_num_steps=1,2")
    assert proc.returncode != 0
    assert "search.space" in proc.stdout + proc.stderr


def test_single_run_without_multirun_measures_one_trial(tmp_path):
    port = free_port()
    proc = sweep(
        tmp_path,
        port,
        "server.speculative_num_steps=2",
        "server.speculative_eagle_topk=1",
        "server.speculative_num_draft_tokens=3",
        multirun=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Never SGLang's own default (0.758 leaves Kimi-K2.5 no KV cache here): the run names one.
    assert "server.mem_fraction_static unset: this run uses 0.85" in proc.stdout
    folder = single_folder(tmp_path / "kimi-k25-eagle3")
    command = (folder / "command.sh").read_text()
    assert "--mem-fraction-static 0.85" in command
    result = json.loads((folder / "result.json").read_text())
    assert result["outcome"] == "ok" and result["effective"]["speculative_num_draft_tokens"] == 3
    assert processes_mentioning(f"--port {port} ") == []


def test_outputs_cut_while_thinking_show_a_truncation_rate_and_a_warning(tmp_path):
    proc = sweep(tmp_path, free_port(), "benchmark.max_tokens=128", multirun=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = single_folder(tmp_path / "kimi-k25-eagle3")
    result = json.loads((folder / "result.json").read_text())
    assert result["metrics"]["truncation_rate"] == 1.0
    assert "cut at max_tokens before the reasoning ended" in proc.stdout
