"""The lossless check through `python sweep.py -m`: the sweep hands each trial the baseline's
greedy outputs, and a configuration that parts from them early is flagged on the console."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e
GOOD = (
    "{speculative_num_steps:2,speculative_eagle_topk:2,speculative_num_draft_tokens:4,"
    "mem_fraction_static:0.86,hicache_size:0}"
)


def sweep(tmp, *overrides: str) -> subprocess.CompletedProcess:
    argv = [
        *(sys.executable, "sweep.py", "-m", f"tracking.dir={tmp}", f"server.port={free_port()}"),
        *("experiment=smoke", "report=false", "search.n_trials=1", f"search.enqueue=[{GOOD}]"),
        "search.study_name=kimi-k25-eagle3",
        "search.remeasure_baseline=false",
        *overrides,
    ]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)


def trial_result(tmp) -> dict:
    return json.loads((tmp / "kimi-k25-eagle3" / "trial_0000" / "result.json").read_text())


def test_a_lossless_configuration_agrees_with_the_baseline(tmp_path):
    proc = sweep(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = trial_result(tmp_path)
    assert len(result["lossless"]) == 4  # benchmark.lossless_check's default
    assert all(a["first_divergent_token"] is None for a in result["lossless"])
    assert "outputs_diverge" not in result["warnings"]
    assert "diverge" not in proc.stdout


def test_a_lossy_configuration_is_flagged_on_the_console(tmp_path):
    proc = sweep(tmp_path, "engine.extra_args=['--sim-fault','lossy-after-tokens=5']")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = trial_result(tmp_path)
    assert "outputs_diverge" in result["warnings"]
    assert {a["first_divergent_token"] for a in result["lossless"]} == {5}
    out = " ".join(proc.stdout.split())
    assert "greedy outputs diverge from the baseline's after 5 tokens (4 of 4 prompts)" in out
