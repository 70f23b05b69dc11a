"""The surface check after the first ready server, end to end on the simulator: a release
specsweep has read (either surface) meets every need, so the trial records no mismatch; the
simulator pretending a release not read (`report-version=0.5.24`) that dropped a /server_info
field (`drop-server-info-field=max_total_num_tokens`) gets that field named, with its reader and
the version, and the trial still runs."""

from __future__ import annotations

import pytest

from harness.sglang.surfaces import CURRENT, LEGACY
from harness.spec import BenchmarkSpec, TrialSpec
from harness.trial import run_trial
from tests.conftest import KIMI_PARSER, eagle3, kimi_server, sim_engine


def _spec(tmp_path, port, version=CURRENT, *faults: str, server=None) -> TrialSpec:
    extra = ["--sim-load-s", "1"]
    for fault in faults:
        extra += ["--sim-fault", fault]
    return TrialSpec(
        name="t",
        role="trial",
        number=None,
        engine=sim_engine(200.0, *extra, version=version),
        server=server or eagle3(port, reasoning_parser=KIMI_PARSER[version]),
        benchmark=BenchmarkSpec(
            model="m",
            max_tokens=64,
            ignore_eos=True,
            warmup=0,
            runs=1,
            requests_per_run=1,
            lossless_check=0,
        ),
        pid_file=tmp_path / "servers" / f"port-{port}.pid",
    )


@pytest.mark.parametrize("version", [CURRENT, LEGACY])
@pytest.mark.parametrize("launch", ["eagle3", "eagle3+hicache", "baseline"])
def test_a_release_read_meets_every_need(tmp_path, port, version, launch):
    parser = KIMI_PARSER[version]
    server = {
        "eagle3": eagle3(port, reasoning_parser=parser),
        "eagle3+hicache": eagle3(port, reasoning_parser=parser, hicache_size=16),
        "baseline": kimi_server(port, reasoning_parser=parser),
    }[launch]
    result = run_trial(_spec(tmp_path, port, version, server=server), tmp_path / "t")
    assert str(result.outcome) == "ok", result.error
    assert result.surface_mismatches == []
    assert "sglang_surface_mismatch" not in result.warnings


def test_a_release_not_read_that_dropped_a_field_gets_it_named(tmp_path, port, caplog):
    faults = ("report-version=0.5.24", "drop-server-info-field=max_total_num_tokens")
    with caplog.at_level("WARNING", logger="harness.measure.surface_check"):
        result = run_trial(_spec(tmp_path, port, CURRENT, *faults), tmp_path / "t")
    assert str(result.outcome) == "ok", result.error  # named, not fatal: the log still has it
    assert result.surface_mismatches == [
        "/server_info of SGLang 0.5.24 has no 'max_total_num_tokens' field (read by "
        "harness/trial.py effective_params (effective.*) and the KV pool (measure/memory.py))"
    ]
    assert "sglang_surface_mismatch" in result.warnings
    assert "SGLang 0.5.24 is not a release specsweep has read" in caplog.text
