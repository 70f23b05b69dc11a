"""`python -m sweep.adaptive` end to end on the simulator: a two-level sweep, then the measured
adaptive_config.json (checked by SGLang's loader where the compat venv exists) and the
head-to-head (best static per level / SGLang's default adaptive / the measured file), launched
through the trial path, printed and written."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from harness.record.precision import meaningful
from harness.server.procs import free_port
from sweep.adaptive.sglang_check import compat_python
from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import sweep

pytestmark = pytest.mark.e2e

CHAINS = (
    "[{speculative_num_steps:3,speculative_eagle_topk:1,speculative_num_draft_tokens:4,"
    "mem_fraction_static:0.85,hicache_size:0},"
    "{speculative_num_steps:1,speculative_eagle_topk:1,speculative_num_draft_tokens:2,"
    "mem_fraction_static:0.85,hicache_size:0}]"
)


def test_the_head_to_head_measures_three_deployments_per_level(tmp_path):
    port = free_port()
    proc = sweep(
        tmp_path, port, "search.n_trials=2", f"search.enqueue={CHAINS}",
        "benchmark.concurrency=[1,8]", "search.remeasure_baseline=false", "search.prune=false",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = tmp_path / "kimi-k25-eagle3"
    # The multi-level sweep itself ends with the measured file, attached to its MLflow run.
    flat = proc.stdout.replace("\n", "")
    assert f"adaptive config: {study / 'adaptive_config.json'}" in flat
    assert "head-to-head with static: " in flat and f"specsweep adaptive --study {study}" in flat
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    [experiment] = [e for e in client.search_experiments() if e.name == "kimi-k25-eagle3"]
    parents = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`specsweep.role` = 'sweep'"
    )
    assert "adaptive_config.json" in {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    argv = [sys.executable, "-m", "sweep.adaptive", "--study", str(study), "--runs", "2"]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    text = out.stdout
    # One launch per distinct best static configuration (1 or 2 here), then the two adaptive.
    assert "head-to-head (SIMULATED)" in text
    last = r"\[(\d)/\1\] measured adaptive from trial_000\d at concurrency \[1, 8\]"
    assert re.search(last, text)
    if compat_python() is not None:
        assert "SGLang's loader accepts it" in text
    else:
        assert "not checked with SGLang's loader" in text
    config = json.loads((study / "adaptive_config.json").read_text())
    assert {k for k in config if k.isdigit()} == {"1", "8"}
    [written] = study.glob("head_to_head-*.json")
    assert f"head-to-head: {written}" in text.replace("\n", "")
    data = json.loads(written.read_text())
    assert data["simulated"] and [r["concurrency"] for r in data["levels"]] == [1, 8]
    for row in data["levels"]:
        for kind in ("static", "default adaptive", "measured adaptive"):
            mean, ci = row[kind]
            assert mean > 0 and ci >= 0
        assert row["deploy"] in ("static", "default adaptive", "measured adaptive")
    assert written.with_suffix(".csv").read_text().count("\n") == 1 + 2 * 3
    # The measured server ran SGLang's adaptive policy with the written file.
    [log] = written.with_suffix("").glob("measured_adaptive_*/server.log")
    assert "AdaptiveSpeculativeParams initialized" in log.read_text()
    assert "'speculative_adaptive': True" in log.read_text()
    assert str(study / "adaptive_config.json") in log.read_text()
    # ... and the answer is one click from the sweep's run in MLflow: a child run with the table.
    [h2h] = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`specsweep.role` = 'head_to_head'"
    )
    assert h2h.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert f"MLflow: run {h2h.info.run_id}" in text
    for row in data["levels"]:
        c = row["concurrency"]
        assert h2h.data.params[f"deploy_c{c}"] == row["deploy"]
        for kind in ("static", "default adaptive", "measured adaptive"):
            key = f"h2h_{kind.replace(' ', '_')}_c{c}"
            # MLflow holds the digits a metric is worth (harness.record.precision)
            assert h2h.data.metrics[key] == pytest.approx(meaningful(key, row[kind][0]))
    files = {a.path for a in client.list_artifacts(h2h.info.run_id)}
    assert {written.name, written.with_suffix(".csv").name, "adaptive_config.json"} <= files
