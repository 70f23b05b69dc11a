"""The simulator's /server_info and decode lines have 0.5.23's shape, and the harness reads them.

Shapes from SGLang 0.5.23 `entrypoints/http_server.py::server_info` (`utils/common.py::
build_server_info`, `ServerArgs.resolved_dict()`) and `managers/scheduler_components/
metrics_reporter.py::report_decode_stats`; 0.5.1.post3 `entrypoints/http_server.py::
get_server_info`.
"""

from __future__ import annotations

import pytest

from harness.measure.bench import Benchmark
from harness.measure.clock import ServerClock
from harness.server.command import build_server_command
from harness.server.logs import parse_decode_line
from harness.server.process import Server
from harness.server.procs import free_port
from harness.spec import BenchmarkSpec
from harness.trial import effective_params
from tests.conftest import KIMI_PARSER, eagle3, sim_engine


def _serve(tmp_path, version: str, **overrides):
    port = free_port()
    engine = sim_engine(200.0, "--sim-drafter", "eagle3_37k_ttt5", version=version)
    spec = eagle3(port, reasoning_parser=KIMI_PARSER[version], **overrides)
    return Server(build_server_command(spec, engine), tmp_path / "server.log", ready_timeout_s=60)


@pytest.mark.parametrize("version", ["0.5.23", "0.5.1"])
def test_server_info_has_no_gpu_field_and_the_graph_batch_where_sglang_puts_it(tmp_path, version):
    env = (("NCCL_PROTO", "LL"), ("CUDA_VISIBLE_DEVICES", "4,5,6,7,0,1,2,3"))
    with _serve(tmp_path, version, env=env) as server:
        server.wait_ready()
        info = server.server_info()
    assert "cuda_visible_devices" not in info
    assert "cuda_visible_devices" not in info["internal_states"][0]
    if version == "0.5.1":
        assert info["cuda_graph_max_bs"] == 48 and "cuda_graph_config" not in info
    else:
        assert info["cuda_graph_max_bs_decode"] is None  # the flag as given: none
        assert info["cuda_graph_config"]["decode"]["max_bs"] == 48
        assert info["internal_states"][0]["decode_cuda_graph_bs"][-1] == 48
        assert info["max_req_input_len"] and "kv_events" in info
    effective = effective_params(info, gpus="4,5,6,7,0,1,2,3")
    assert (
        effective["cuda_graph_max_bs_decode" if version != "0.5.1" else "cuda_graph_max_bs"] == 48
    )
    assert effective["cuda_visible_devices"] == "4,5,6,7,0,1,2,3"


def test_decode_lines_carry_the_forward_iteration_when_asked(tmp_path):
    env = (("NCCL_PROTO", "LL"), ("SGLANG_LOG_FORWARD_ITERS", "1"))
    with _serve(tmp_path, "0.5.23", env=env) as server:
        server.wait_ready()
        Benchmark(
            server.command.base_url,
            BenchmarkSpec(model="m", max_tokens=256, warmup=0, runs=1, requests_per_run=1),
            ServerClock.from_server_info(server.server_info()),
            speculative=True,
        ).run()
        decode = [ln for ln in server.log_text().splitlines() if "Decode batch" in ln]
    assert decode and all("Decode batch [" in ln for ln in decode)
    stats = [parse_decode_line(ln) for ln in decode]
    assert all(s is not None and s.forward_iter is not None for s in stats)
    iters = [s.forward_iter for s in stats]
    assert iters == sorted(iters) and stats[-1].accept_len is not None


def test_decode_lines_say_a_batch_above_the_largest_graph_ran_eager(tmp_path):
    """0.5.23 `report_decode_stats(can_run_cuda_graph)`: with graphs captured up to 2 requests,
    a step of 4 runs eager and its line says so; /get_server_info lists the sizes captured."""
    with _serve(tmp_path, "0.5.23", cuda_graph_max_bs=2, env=(("NCCL_PROTO", "LL"),)) as server:
        server.wait_ready()
        info = server.server_info()
        Benchmark(
            server.command.base_url,
            BenchmarkSpec(
                model="m", max_tokens=256, warmup=0, runs=1, concurrency=(4,), window_completions=4
            ),
            ServerClock.from_server_info(info),
            speculative=True,
        ).run()
        lines = [parse_decode_line(ln) for ln in server.log_text().splitlines()]
    assert effective_params(info)["decode_cuda_graph_bs"] == [1, 2]
    seen = {(s.running_req > 2, s.cuda_graph) for s in lines if s is not None}
    assert (True, False) in seen and (True, True) not in seen
