"""A page size above 1, and the MLA backends SGLang runs at page 64, are refused by the simulator
as launches it does not model (SGLang would run them), with what it does not model and what to
change; the sweep's launch check says so before any launch."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.sglang.paging import PAGE_64_MLA_BACKENDS
from harness.sim.unmodelled import not_modelled
from harness.spec import BenchmarkSpec, TrialSpec
from sweep.launch.parse_check import check_launch_flags, sim_unmodelled
from tests.conftest import eagle3, sim_engine


@pytest.mark.parametrize("page", [None, 1])
def test_page_one_is_modelled(page):
    assert not_modelled({"page_size": page, "attention_backend": None}) is None


@pytest.mark.parametrize("backend", [None, "flashinfer", "triton", "fa3", "trtllm_mha"])
def test_backends_at_page_one_are_modelled(backend):
    assert not_modelled({"page_size": 1, "attention_backend": backend}) is None


@pytest.mark.parametrize("page", [16, 32, 64])
def test_a_page_above_one_is_refused_as_not_modelled(page):
    why = not_modelled({"page_size": page})
    assert why is not None
    assert why.startswith(f"simulator: --page-size {page} is not modelled: ")
    assert "page size 1 only" in why and "SGLang itself would run this launch" in why
    assert "server.extra_args" in why and "engine=sglang" in why


@pytest.mark.parametrize("backend", PAGE_64_MLA_BACKENDS)
@pytest.mark.parametrize(
    "field", ["attention_backend", "decode_attention_backend", "prefill_attention_backend"]
)
def test_the_page_64_mla_backends_are_refused_naming_the_flag_and_why(backend, field):
    why = not_modelled({"page_size": None, field: backend})
    flag = "--" + field.replace("_", "-")
    assert why is not None and why.startswith(f"simulator: {flag} {backend} is not modelled")
    assert "at page size 64" in why and "_mla_backend_page_constraints" in why
    assert f"Drop {flag} {backend} (server.extra_args" in why


def test_the_check_reads_the_simulators_parse_of_the_flags():
    assert sim_unmodelled(["--model-path", "m", "--page-size", "64"], "0.5.23") is not None
    assert sim_unmodelled(["--model-path", "m", "--attention-backend", "flashmla"], "0.5.1")
    assert sim_unmodelled(["--model-path", "m", "--attention-backend", "triton"], "0.5.23") is None


def _spec(tmp_path, port, *extra: str) -> TrialSpec:
    return TrialSpec(
        name="t",
        role="trial",
        number=None,
        engine=sim_engine(),
        server=eagle3(port, extra_args=extra),
        benchmark=BenchmarkSpec(model="m", max_tokens=16, warmup=0, runs=1, requests_per_run=1),
        pid_file=tmp_path / "p.pid",
    )


def test_a_sweep_fails_before_any_launch_saying_the_simulator_does_not_model_it(tmp_path, port):
    with pytest.raises(ConfigError) as info:
        check_launch_flags([_spec(tmp_path, port, "--attention-backend", "trtllm_mla")])
    message = str(info.value)
    assert message.startswith("The simulator (engine=sim) does not model this launch, which SGLang")
    assert "--attention-backend trtllm_mla is not modelled" in message
    assert "SGLang would refuse" not in message
    check_launch_flags([_spec(tmp_path, port)])  # the same launch at page 1 passes


def _sim_cfg(server_extra=(), engine_extra=()):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "engine": {"name": "sim", "sglang_version": None, "extra_args": list(engine_extra)},
            "server": {"extra_args": list(server_extra)},
        }
    )


def test_preflight_fails_a_simulated_launch_it_does_not_model():
    from sweep.preflight.machine import check_engine

    check = check_engine(_sim_cfg(["--page-size", "64"]))
    assert check.status == "fail" and "--page-size 64 is not modelled" in check.message
    assert "server.extra_args" in check.fix and "engine=sglang" in check.fix
    assert check_engine(_sim_cfg(engine_extra=["--sim-clock-scale", "50"])).status == "pass"
    assert check_engine(_sim_cfg(["--no-such-flag"])).status == "pass"  # the launch check's job
