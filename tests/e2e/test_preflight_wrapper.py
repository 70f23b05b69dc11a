"""A sweep whose engine program is a wrapper script (how a GPU box runs SGLang in a container or
under srun): preflight warns that it could not check the SGLang inside, and the sweep runs."""

from __future__ import annotations

import sys

import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT
from tests.drafter_factory import make_drafter
from tests.e2e.test_sweep_cli import sweep

pytestmark = pytest.mark.e2e


def test_a_wrapper_script_engine_warns_and_the_sweep_runs(tmp_path):
    wrapper = tmp_path / "serve.sh"  # stands in for `docker run ... python3 -m sglang...`
    wrapper.write_text(
        "#!/bin/bash\n"
        f"export PYTHONPATH={ROOT}\n"
        f'exec {sys.executable} -m harness.sim "$@" --sim-clock-scale 200 '
        "--sim-drafter eagle3_37k_ttt5\n"
    )
    wrapper.chmod(0o755)
    drafter = make_drafter(tmp_path / "drafter")
    proc = sweep(
        tmp_path / "results",
        free_port(),
        "engine=sglang",
        f"engine.program=[{wrapper}]",
        f"drafter.path={drafter}",
        "hardware.gpus=1",
        "model.tp=1",
        "model.host_ram_gb=1",
        "search.space.hicache_size.choices=[0]",
        "search.n_trials=1",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "warn  engine" in out and "could not check the SGLang it runs" in out
    assert "engine.probe=[docker,run,--rm,IMAGE,python3]" in out
    assert "[1/1]" in out and "Traceback" not in proc.stderr
