"""The simulator judged against real SGLang 0.5.23 on the same tiny configuration: both are
launched by the harness with the same SGLang flags, asked the same requests and stopped the
same way, and every part of the surface the harness reads is compared in both directions (what
real SGLang has that the simulator lacks, and the reverse). A difference is either fixed in the
simulator or listed here with its reason, and the same list is docs/simulator.md's conformance
table: a new difference on either side fails this test until it is one or the other."""

from __future__ import annotations

import pytest

from harness.errors import ServerCrashed
from harness.server.command import build_server_command
from harness.server.logs import NO_SPECULATION, crash_cause
from harness.server.process import Server
from harness.server.procs import free_port
from harness.spec import EngineSpec, ServerSpec
from harness.trial import effective_params
from tests.real.conftest import (
    CPU_ENV,
    CPU_FLAGS,
    DRAFTER,
    STANDIN_ENV,
    TARGET,
    sglang_processes,
)
from tests.real.surface_probe import HARNESS_METRICS, Surface, probe

pytestmark = pytest.mark.real

# What the simulator is told besides SGLang's flags: it models --device cpu's surface
# (harness/sim/cpu_device.py) but a GPU profile's time and memory, so the comparison is of
# shapes, not numbers.
SIM_ARGS = ("--sim-hardware", "h100_sxm", "--sim-target", "llama31_8b", "--sim-clock-scale", "50")
# /server_info fields the harness reads (harness.trial.EFFECTIVE_KEYS, surface_check's needs, the
# clock, the start-up phases, acceptance's internal_states).
INFO_READ = (
    "version",
    "speculative_algorithm",
    "mem_fraction_static",
    "max_running_requests",
    "max_total_num_tokens",
    "tp_size",
    "disable_overlap_schedule",
    "attention_backend",
    "enable_hierarchical_cache",
    "cuda_graph_config",
    "internal_states",
    "startup_time",
)
# The differences that stay, each with its reason (docs/simulator.md, "Conformance with real
# SGLang 0.5.23 on a CPU", has the same list). The simulator's labelled clock (docs/simulator.md,
# "The virtual clock") is on every chunk, never read as SGLang's.
SIM_STAMPS = {"sim_elapsed_s", "sim_wall_s"}
# meta_info keys real SGLang adds that the harness does not read (timestamps, latencies, queue
# and storage waits, weight versions, DP rank): the simulator leaves them out.
META_REAL_ONLY = {
    "api_server_dispatch_finish_ts",
    "cached_tokens_details",
    "decode_throughput",
    "dp_rank",
    "first_token_latency",
    "forward_entry_time",
    "num_retractions",
    "prefill_finished_time",
    "queue_time",
    "request_finished_ts",
    "request_received_ts",
    "response_sent_to_client_ts",
    "storage_prefetch_wait",
    "storage_staging_wait",
    "weight_version",
    "weight_versions",
}
# What the harness reads from meta_info and a chat usage chunk (harness/measure/client.py).
META_READ = {"completion_tokens", "prompt_tokens", "finish_reason", "reasoning_tokens"}


def launch(engine: EngineSpec, log) -> Server:
    spec = ServerSpec(model_path=str(TARGET), port=free_port(), extra_args=CPU_FLAGS, env=CPU_ENV)
    command = build_server_command(spec, engine)
    return Server(command, log, ready_timeout_s=300, stall_timeout_s=120, stop_grace_s=30)


def measured(server: Server) -> Surface:
    with server:
        server.wait_ready()
        surface = probe(server)
    surface.stop_returncode = server.returncode
    return surface


SIM_ENGINE = EngineSpec(name="sim", program=("python", "-m", "harness.sim"), extra_args=SIM_ARGS)


def real_engine(python) -> EngineSpec:
    return EngineSpec(
        name="sglang", program=(str(python), "-m", "sglang.launch_server"), stall_timeout_s=120
    )


@pytest.fixture(scope="module")
def both(real_env, tmp_path_factory) -> tuple[Surface, Surface]:
    tmp = tmp_path_factory.mktemp("conformance")
    with pytest.MonkeyPatch.context() as env:
        env.setenv(STANDIN_ENV, str(tmp / "standin-calls.jsonl"))
        real = measured(launch(real_engine(real_env), tmp / "real.log"))
    sim = measured(launch(SIM_ENGINE, tmp / "sim.log"))
    assert sglang_processes() == []
    assert not (tmp / "standin-calls.jsonl").exists()  # no stand-in was called
    return real, sim


def differences(real: set, sim: set) -> dict[str, list]:
    return {"real only": sorted(real - sim), "simulator only": sorted(sim - real)}


def test_server_info_fields_the_harness_reads(both):
    real, sim = both
    assert [k for k in INFO_READ if k not in real.info] == []
    assert [k for k in INFO_READ if k not in sim.info] == []
    # the simulator's own block is its only field SGLang lacks
    assert set(sim.info) - set(real.info) == {"simulator"}
    assert real.startup_phases == sim.startup_phases  # nothing captured on a CPU


def test_the_effective_values_the_harness_records(both):
    real, sim = both
    ours, theirs = effective_params(real.info), effective_params(sim.info)
    assert ours.keys() == theirs.keys()
    # SGLang sizes the fraction from the machine's RAM on a CPU; the simulator's is a GPU's
    differ = {k for k in ours if ours[k] != theirs[k]}
    assert differ == {"mem_fraction_static"}, {k: (ours[k], theirs[k]) for k in differ}
    assert ours["attention_backend"] == "torch_native" and ours["max_total_num_tokens"] == 8192
    # SGLang sized the request cap itself: null at the top of /server_info, the scheduler's here
    assert real.info["max_running_requests"] is None and ours["max_running_requests"] == 2048


def test_metrics_the_harness_reads(both):
    real, sim = both
    for name in HARNESS_METRICS:  # present in both, or absent from both (retractions: no sample
        assert (name in real.metrics) == (name in sim.metrics), name  # before the first one)
    names = differences(real.metrics, sim.metrics)
    assert names["simulator only"] == []
    # real SGLang exports ~80 more series; none of them is read by the harness
    assert set(names["real only"]) & set(HARNESS_METRICS) == set()


def test_streamed_generate_shapes(both):
    real, sim = both
    assert real.generate_done and sim.generate_done
    chunk = differences(real.generate_chunk, sim.generate_chunk)
    assert chunk == {"real only": [], "simulator only": sorted(SIM_STAMPS)}
    meta = differences(real.meta_info, sim.meta_info)
    assert meta == {"real only": sorted(META_REAL_ONLY), "simulator only": []}
    assert real.meta_info >= META_READ and sim.meta_info >= META_READ


def test_streamed_chat_shapes(both):
    real, sim = both
    assert real.chat_done and sim.chat_done
    chunk = differences(real.chat_chunk, sim.chat_chunk)
    assert chunk == {"real only": [], "simulator only": sorted(SIM_STAMPS)}
    assert differences(real.chat_delta, sim.chat_delta) == {"real only": [], "simulator only": []}
    assert differences(real.chat_usage, sim.chat_usage) == {"real only": [], "simulator only": []}


def test_log_lines_the_harness_parses(both):
    real, sim = both
    assert real.log_lines == sim.log_lines
    assert all(real.log_lines.values()), real.log_lines
    assert real.graph_label == sim.graph_label == "cpu graph"


def test_a_stop_ends_both_the_same_way(both):
    real, sim = both
    assert (real.stop_returncode, sim.stop_returncode) == (0, 0)


def test_a_speculative_launch_fails_alike_on_both(real_env, standin_calls, tmp_path):
    """Real SGLang dies at its KV pools (the sweep's trials, tests/real/test_real_sweep.py, with the
    stand-in's error from SGLang's call site); the simulator with SGLang's own refusal past it.
    Both end as the launcher kills its tree (-9), and the harness names the same cause."""
    results = {}
    for name, engine in (("real", real_engine(real_env)), ("sim", SIM_ENGINE)):
        spec = ServerSpec(
            model_path=str(TARGET),
            port=free_port(),
            extra_args=CPU_FLAGS,
            env=CPU_ENV,
            speculative_algorithm="EAGLE3",
            speculative_draft_model_path=str(DRAFTER),
            speculative_num_steps=2,
            speculative_eagle_topk=1,
            speculative_num_draft_tokens=3,
        )
        server = Server(
            build_server_command(spec, engine), tmp_path / f"{name}.log", ready_timeout_s=300
        )
        with pytest.raises(ServerCrashed), server:
            server.wait_ready()
        results[name] = (server.returncode, crash_cause(server.log_text(), speculative=True))
    assert results["real"][0] == results["sim"][0] == -9
    assert results["real"][1][0] == results["sim"][1][0] == NO_SPECULATION
    assert "copy_all_layer_kv_cache_cpu" in results["real"][1][1]  # the kernel it lacks
    assert results["sim"][1][1] == "EAGLE is not supported in decode attention backend torch_native"
    assert sglang_processes() == []
    assert standin_calls() == ["sgl_kernel.copy_all_layer_kv_cache_cpu"]  # the real one's only
