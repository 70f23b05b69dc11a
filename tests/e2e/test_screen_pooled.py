"""A screened configuration launched in full, through the real CLI on the seeds' box: the full
launch measures only the runs its screen did not, its record pools the screen's run (run 1, the
prompts run 1 of every trial sent), and the table says so. The space is narrowed to one chain,
2/1/3, so the model's opening screens it and its next launch is that chain in full."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("results")
    argv = [
        sys.executable, "sweep.py", "-m", f"tracking.dir={tmp}", f"server.port={free_port()}",
        "report=false", "search.n_trials=2",
        "search.space={speculative_num_steps:{type:categorical,choices:[2]},"
        "speculative_eagle_topk:{type:categorical,choices:[1]}}",
    ]  # fmt: skip
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp, proc.stdout


def test_the_screened_run_is_pooled_into_the_full_launch(swept):
    tmp, printed = swept
    records = {
        p.parent.name: json.loads(p.read_text()) for p in Path(tmp).glob("*/trial_*/result.json")
    }
    pooled = [r for r in records.values() if r.get("screens")]
    assert len(pooled) == 1, printed
    full = pooled[0]
    (entry,) = full["screens"]
    screen = records[entry["trial"]]
    assert "screened" in screen["warnings"] and [r["run"] for r in screen["runs"]] == [1]
    # The full launch ran runs 2-5 (benchmark.runs=5 in all), the screen's run 1 pooled in.
    assert [r["run"] for r in full["runs"]] == [1, 2, 3, 4, 5]
    assert full["runs"][0] == screen["runs"][0]
    launch = json.loads((Path(full["folder"]) / "result-launch.json").read_text())
    assert [r["run"] for r in launch["runs"]] == [2, 3, 4, 5]
    assert full["metrics"]["tok_s_runs"] == 5.0  # the interval is over all five
    mean = sum(r["decode_tok_s"] for r in full["runs"]) / 5
    assert full["metrics"]["tok_s"] == pytest.approx(mean)
    assert "5 runs, 2 launches" in printed
    assert f"pooled into {full['name']}" in printed
