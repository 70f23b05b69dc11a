"""A sweep run with planted secrets: none of them may appear in any file it leaves or anything it
prints (trial folders, logs, MLflow's database and artifacts, Optuna, summary, exported scripts)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import sweep

pytestmark = pytest.mark.e2e

SECRETS = {
    "HF_TOKEN": "hf_PLANTEDtokenAAAA1111",
    "MY_SERVICE_KEY": "svcPLANTEDkeyBBBB2222",
    "DB_PASSWORD": "dbPLANTEDpassCCCC3333",
    "API_KEY": "skPLANTEDapiDDDD4444",
}
DB_URL = f"postgresql://sweeper:{SECRETS['DB_PASSWORD']}@db.internal:5432/specsweep"


def test_no_planted_secret_is_written_or_printed(tmp_path, monkeypatch):
    results = tmp_path / "results"
    env = {
        "SPECSWEEP_TEST_API_KEY": SECRETS["API_KEY"],
        "HF_TOKEN": SECRETS["HF_TOKEN"],  # also in the sweep's own environment, as on a real box
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    proc = sweep(
        results,
        free_port(),
        "search.n_trials=1",
        "search.remeasure_baseline=false",
        "server.api_key_env=SPECSWEEP_TEST_API_KEY",
        f"+hardware.env.HF_TOKEN={SECRETS['HF_TOKEN']}",
        f"+hardware.env.MY_SERVICE_KEY={SECRETS['MY_SERVICE_KEY']}",
        f"+hardware.env.DATABASE_URL='{DB_URL}'",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the benchmark authenticated against the key-enforcing server
    assert re.search(r"^\[baseline\]  speculation off  ok  ", proc.stdout, re.M)
    # Exported scripts: the configuration recomposed from its config.yaml, secrets from the
    # environment (as the operator's box provides them).
    monkeypatch.setenv("MY_SERVICE_KEY", SECRETS["MY_SERVICE_KEY"])
    monkeypatch.setenv("DATABASE_URL", DB_URL)
    reproduce = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep.reproduce",
            "--experiment",
            "kimi-k25-eagle3",
            "--results",
            str(results),
            "--runs",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env=os.environ.copy(),
    )
    assert reproduce.returncode == 0, reproduce.stdout + reproduce.stderr
    scripts = list(results.glob("reproduce/*/launch_server.sh"))
    assert scripts and '"${SGLANG_API_KEY:?' in scripts[0].read_text()

    printed = proc.stdout + proc.stderr + reproduce.stdout + reproduce.stderr
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in files) and any(p.name == "server.log" for p in files)
    assert any("mlartifacts" in p.parts for p in files)
    for name, secret in SECRETS.items():
        assert secret not in printed, f"{name} printed"
        leaked = [str(p) for p in files if secret.encode() in p.read_bytes()]
        assert leaked == [], f"{name} written to {leaked}"
