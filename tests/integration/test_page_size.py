"""The simulator, started as a process, refuses a launch it does not model (page 64) at once,
saying so, and a trial run straight through the harness (no sweep, so no launch check) reports
that reason from the server's log."""

from __future__ import annotations

import subprocess
import sys

from harness.spec import BenchmarkSpec, TrialSpec
from harness.trial import run_trial
from tests.conftest import eagle3, sim_engine


def test_the_simulator_exits_2_saying_it_does_not_model_the_page_size():
    proc = subprocess.run(
        [sys.executable, "-m", "harness.sim", "--model-path", "m", "--attention-backend",
         "trtllm_mla"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("simulator: --attention-backend trtllm_mla is not modelled")
    assert "SGLang itself would run this launch" in proc.stderr
    assert "fired up" not in proc.stdout + proc.stderr  # refused before any start-up


def test_a_trial_reports_the_refusal_from_the_log(tmp_path, port):
    spec = TrialSpec(
        name="t",
        role="trial",
        number=None,
        engine=sim_engine(200.0, "--sim-load-s", "1"),
        server=eagle3(port, extra_args=("--page-size", "64")),
        benchmark=BenchmarkSpec(
            model="m", max_tokens=16, warmup=0, runs=1, requests_per_run=1, lossless_check=0
        ),
        pid_file=tmp_path / "p.pid",
    )
    result = run_trial(spec, tmp_path / "t")
    assert str(result.outcome) == "crash"
    assert "return code 2" in (result.error or "")
    assert "simulator: --page-size 64 is not modelled" in (result.log_excerpt or "")
