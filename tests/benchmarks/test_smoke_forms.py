"""Every benchmark's smoke form (`python benchmarks/NAME.py --smoke`: its whole path in seconds to
a minute or two, its own checks enforced) runs here, one test per benchmark, so a benchmark that
no longer passes its checks fails CI instead of going stale; `make test` runs this module with -v,
so CI's log names each one. The full forms stay for measuring (benchmarks/_common.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("[!_]*.py"))

# sim_calibration's gate fails today on six held-out figures of the H100 profile, the EAGLE-3
# paper's chain 3/1/4 over the baseline from batch 16 up (+11% to +25%), for reasons
# docs/simulator-model.md states ("Held out and served": the model's speedup falls smoothly with
# the batch where the paper's falls faster to 32 and then rises). Held here so that any other
# miss fails, and a fixed one asks for this list to shrink.
KNOWN_CALIBRATION_MISSES = {
    f"held-out paper table 3, bs {batch}" for batch in (16, 24, 32, 48, 56, 64)
}


def smoke(stem: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, f"benchmarks/{stem}.py", "--smoke"]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def written(proc: subprocess.CompletedProcess) -> list[str]:
    return re.findall(r"^wrote (\S+)", proc.stdout, flags=re.MULTILINE)


def test_every_benchmark_is_here():
    assert {"faults", "search_efficiency", "sim_calibration"} <= set(BENCHMARKS)


@pytest.mark.parametrize("stem", BENCHMARKS)
def test_smoke_form_passes_its_own_checks_and_leaves_the_full_forms_outputs_alone(stem):
    proc = smoke(stem)
    out = proc.stdout + proc.stderr
    files = written(proc)
    # its table for docs/results and its JSON, both written, neither over the full form's files
    assert any(f.endswith(f"/{stem}.md") for f in files), out[-3000:]
    assert files and not [f for f in files if f.startswith(str(ROOT))], files
    if stem != "sim_calibration":
        assert proc.returncode == 0, out[-6000:]
        return
    report = json.loads(Path(next(f for f in files if f.endswith(".json"))).read_text())
    misses = {failure.split(":")[0] for failure in report["failures"]}
    assert misses == KNOWN_CALIBRATION_MISSES, report["failures"]
    assert proc.returncode == 1, out[-3000:]
