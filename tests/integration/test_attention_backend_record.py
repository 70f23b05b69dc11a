"""A trial records the attention backend its server ran on (`effective.attention_backend`), end
to end on the simulator under either surface: 0.5.23 reports the backend it chose in /server_info,
0.5.1.post3 only logs it (its /get_server_info keeps the flag as given, None), so the harness
reads the log line there. On an H100 a Llama chain and a Llama tree run different kernels."""

from __future__ import annotations

import json

import pytest

from harness.sglang.surfaces import CURRENT, LEGACY
from harness.spec import BenchmarkSpec, ServerSpec, TrialSpec
from harness.trial import run_trial
from tests.conftest import KIMI_PARSER, eagle3, sim_engine

BENCH = BenchmarkSpec(
    model="m",
    max_tokens=32,
    ignore_eos=True,
    warmup=0,
    runs=1,
    requests_per_run=1,
    lossless_check=0,
)
H100_LLAMA = ("--sim-hardware", "h100_sxm", "--sim-target", "llama31_8b")


def _llama(port: int, topk: int, **overrides) -> ServerSpec:
    steps = 3
    return ServerSpec(
        model_path="meta-llama/Llama-3.1-8B-Instruct",
        tp_size=1,
        port=port,
        mem_fraction_static=0.8,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/llama-eagle3",
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=steps + 1 if topk == 1 else 8,
        **overrides,
    )


def _run(tmp_path, port, version, server, *extra):
    spec = TrialSpec(
        name="t",
        role="trial",
        number=None,
        engine=sim_engine(200.0, "--sim-load-s", "1", *extra, version=version),
        server=server,
        benchmark=BENCH,
        pid_file=tmp_path / "servers" / f"port-{port}.pid",
    )
    result = run_trial(spec, tmp_path / "t")
    assert str(result.outcome) == "ok", result.error
    recorded = json.loads((tmp_path / "t" / "result.json").read_text())["effective"]
    assert recorded["attention_backend"] == result.effective["attention_backend"]
    return result.effective["attention_backend"], (tmp_path / "t" / "server.log").read_text()


@pytest.mark.parametrize("version", [CURRENT, LEGACY])
def test_kimi_on_the_rtx_pro_6000_runs_triton_by_default(tmp_path, port, version):
    server = eagle3(port, reasoning_parser=KIMI_PARSER[version])
    backend, log = _run(tmp_path, port, version, server)
    assert backend == "triton"
    assert "backend not" in log and "Use triton backend by default." in log


@pytest.mark.parametrize(
    ("version", "topk", "expected"),
    [
        (CURRENT, 1, "fa3"),
        (CURRENT, 4, "flashinfer"),
        (LEGACY, 1, "fa3"),
        (LEGACY, 4, "flashinfer"),
    ],
)
def test_a_llama_chain_and_tree_on_an_h100_run_different_kernels(
    tmp_path, port, version, topk, expected
):
    backend, _ = _run(tmp_path, port, version, _llama(port, topk), *H100_LLAMA)
    assert backend == expected


def test_a_backend_asked_for_is_recorded_as_asked(tmp_path, port):
    server = _llama(port, 4, extra_args=("--attention-backend", "triton"))
    backend, log = _run(tmp_path, port, CURRENT, server, *H100_LLAMA)
    assert backend == "triton"
    assert "by default" not in log
