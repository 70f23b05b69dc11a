"""`python sweep.py -m experiment=real_cpu` against real SGLang 0.5.23 on this CPU, through the
real CLI: the baseline measured end to end (start-up phases from the real log, readiness,
effective values from the real /server_info, streaming through the real chat API, counters from
the real /metrics, stop), each speculative trial restarted on the same port and classified as
what it is (this engine build cannot run speculation here), the closing answer saying so, the
stand-ins called only where speculation needs the CPU kernel, and nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.record.results import Outcome, TrialResult, read_requests
from harness.server.logs import NO_SPECULATION
from harness.server.procs import free_port
from tests.real.conftest import ROOT, sglang_processes

pytestmark = pytest.mark.real

STUDY = "tiny-llama-cpu-ci"


@pytest.fixture(scope="module")
def real_sweep(real_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-sweep")
    calls = tmp / "standin-calls.jsonl"
    argv = [
        sys.executable,
        "sweep.py",
        "-m",
        "experiment=real_cpu",
        f"tracking.dir={tmp / 'results'}",
        f"search.study_name={STUDY}",
        f"server.port={free_port()}",
        # the experiment's own paths, relative to the checkout's root, as a user runs it
        f"engine.program=[{real_env},-m,sglang.launch_server]",
        "report=false",
    ]
    env = {**os.environ, "SPECSWEEP_STANDIN_CALLS": str(calls)}
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    names = (
        [json.loads(x)["name"] for x in calls.read_text().splitlines()] if calls.exists() else []
    )
    return tmp / "results" / STUDY, proc, names


def test_the_sweep_finishes_and_leaves_no_process(real_sweep):
    _, proc, _ = real_sweep
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    # preflight took the experiment's relative model path for what SGLang loads, not a hub id
    assert "a hub id" not in proc.stdout
    assert sglang_processes() == []


def test_the_baseline_is_measured_end_to_end_on_real_sglang(real_sweep):
    folder, _, _ = real_sweep
    base = TrialResult.read(next(folder.glob("baseline*")))
    assert base.outcome is Outcome.OK, base.error
    assert not base.simulated and base.engine == "sglang"
    assert base.metrics["tok_s"] > 0 and len(base.runs) == 2
    # effective values from its /server_info: what SGLang chose on a CPU by itself
    assert base.effective["attention_backend"] == "torch_native"
    assert base.effective["max_total_num_tokens"] == 8192
    assert base.effective["speculative_algorithm"] is None
    # its own start-up durations, and the phases the harness saw in its log
    assert base.startup_phases["startup_load_weight_s"] >= 0
    assert "startup_kv_cache_allocation_s" in base.startup_phases
    assert {m["phase"] for m in base.startup_marks} >= {"loading weights", "warm-up"}
    # everything the harness parses was there (/server_info, /metrics, the log)
    assert base.surface_mismatches == []
    # streamed through the chat API: every measured request has its tokens and first token
    records = [
        r for r in read_requests(folder / base.name / "requests.jsonl") if r.phase == "measure"
    ]
    assert len(records) == 4 and all(r.error is None and r.first_token_s for r in records)
    assert all(r.completion_tokens == 64 and r.prompt_tokens for r in records)


def test_each_speculative_trial_fails_as_an_engine_that_cannot_speculate(real_sweep):
    folder, proc, _ = real_sweep
    trials = [TrialResult.read(p) for p in sorted(folder.glob("trial_*"))]
    assert len(trials) == 2
    for trial in trials:
        assert trial.outcome is Outcome.CRASH and trial.oom_kind is None
        assert trial.crash_cause == NO_SPECULATION, trial.error
        assert "cannot run speculation on this machine" in trial.error
        assert "copy_all_layer_kv_cache_cpu" in trial.error  # SGLang's call site, in its log
        log = (folder / trial.name / "server.log").read_text()
        assert "kv_cache_configurator.py" in log  # raised from SGLang's own KV-pool set-up
    assert "Deploy: speculation off: this engine build cannot run speculation" in proc.stdout


def test_the_stand_ins_were_called_only_where_speculation_needs_the_kernel(real_sweep):
    _, _, names = real_sweep
    # one call per speculative launch (its scheduler), none by the baseline, none of torchvision
    assert names == ["sgl_kernel.copy_all_layer_kv_cache_cpu"] * 2
