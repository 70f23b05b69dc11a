"""Equal caps (issue 15): SGLang caps a speculative server at 48 running requests when
max_running_requests is unset; the baseline gets the same cap by default, and a summary whose
caps differ says so and by how much."""

from __future__ import annotations

import json

from omegaconf import OmegaConf

from harness.record.results import Outcome, TrialResult
from harness.server.command import build_server_command
from harness.sglang.speculative import SPEC_MAX_RUNNING_REQUESTS
from harness.sim.cli import build_parser, resolve
from harness.sim.model.profiles import HARDWARE, TARGETS
from sweep.config.setup_key import setup_key
from sweep.config.specs import build_trial_spec
from sweep.study.answer.equal_caps import caps, caps_line
from sweep.study.answer.summary import SweepOutcome, write_summary
from sweep.study.loop.baseline import baseline_overrides
from tests.integration.test_compose import cfg


def resolved_cap(spec) -> int | None:
    """max_running_requests as the server resolves it (the simulator reproduces SGLang's)."""
    argv = list(build_server_command(spec.server, spec.engine).argv[3:])
    ns = build_parser().parse_args(argv)
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    return resolve(ns, target.architecture, hw.gpu_memory_mib).args["max_running_requests"]


def test_the_baseline_gets_the_speculative_cap_by_default():
    trial = build_trial_spec(cfg())
    baseline = build_trial_spec(cfg(*baseline_overrides([], "b")))
    assert trial.server.max_running_requests is None  # SGLang's reset decides: 48
    assert baseline.server.max_running_requests == SPEC_MAX_RUNNING_REQUESTS
    assert resolved_cap(trial) == resolved_cap(baseline) == 48


def test_the_cap_can_be_left_off_or_set_and_a_set_one_is_kept():
    off = cfg(*baseline_overrides(["search.baseline_equal_caps=false"], "b"))
    assert build_trial_spec(off).server.max_running_requests is None
    assert setup_key(off) != setup_key(cfg(*baseline_overrides([], "b")))
    both = ["server.max_running_requests=64"]
    assert build_trial_spec(cfg(*both)).server.max_running_requests == 64
    assert build_trial_spec(cfg(*baseline_overrides(both, "b"))).server.max_running_requests == 64


def result(role: str, cap: int | None) -> TrialResult:
    return TrialResult(
        name=role,
        role=role,
        outcome=Outcome.OK,
        engine="sim",
        simulated=True,
        clock_scale=1.0,
        params={},
        effective={"max_running_requests": cap},
        metrics={"tok_s": 50.0},
    )


def test_the_summary_says_when_the_caps_differ_and_by_how_much(tmp_path):
    equal = caps([result("trial", 48)], result("baseline", 48))
    assert equal == {"baseline": 48, "trials": [48], "equal": True} and caps_line(equal) is None
    higher = caps_line(caps([result("trial", 64), result("trial", 48)], result("baseline", 48)))
    assert "max_running_requests differs" in higher and "64 (+16)" in higher
    uncapped = caps_line(caps([result("trial", 48)], result("baseline", None)))
    assert "baseline ran with unset" in uncapped and "48 (the baseline has no such cap)" in uncapped
    done = SweepOutcome(
        "FINISHED", [result("trial", 48)], result("baseline", None), None, 1.0, 1.0, 1
    )
    conf = OmegaConf.create(
        {"tracking": {"experiment": "e"}, "engine": {"name": "sim"}, "search": {"objective": "x"}}
    )
    write_summary(tmp_path / "s.json", conf, done, None, {})
    written = json.loads((tmp_path / "s.json").read_text())["max_running_requests"]
    assert written == {"baseline": None, "trials": [48], "equal": False}
