"""The acceptance_decays warning wired end to end: a whole trial on the simulator whose
acceptance falls with output position (--sim-accept-decay, through the engine's extra args)
warns; the same trial without the decay does not."""

from __future__ import annotations

import pytest

from harness.spec import BenchmarkSpec, TrialSpec
from harness.trial import run_trial
from tests.conftest import eagle3, sim_engine


@pytest.mark.parametrize(("decay", "warned"), [("0.6", True), ("0", False)])
def test_a_trial_warns_when_acceptance_decays(tmp_path, port, decay, warned):
    spec = TrialSpec(
        name="t",
        role="trial",
        number=None,
        engine=sim_engine(200.0, "--sim-load-s", "1", "--sim-accept-decay", decay),
        server=eagle3(port),
        benchmark=BenchmarkSpec(
            model="m",
            max_tokens=1024,  # four 256-token windows
            ignore_eos=True,
            warmup=0,
            runs=1,
            requests_per_run=2,
            lossless_check=0,
        ),
        pid_file=tmp_path / "servers" / f"port-{port}.pid",
    )
    result = run_trial(spec, tmp_path / "t")
    assert len(result.accept_by_window) == 4
    assert ("acceptance_decays" in result.warnings) is warned
    if warned:  # the last window more than 25% below the first
        assert result.accept_by_window[-1] < 0.75 * result.accept_by_window[0]
