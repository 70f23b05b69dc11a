"""The simulator judged against real SGLang 0.5.23 on the same tiny configuration: both are
launched by the harness with the same SGLang flags, asked the same requests and stopped the
same way, and every part of the surface the harness reads is compared in both directions (what
real SGLang has that the simulator lacks, and the reverse). A difference is either fixed in the
simulator or listed here with its reason, and the same list is docs/simulator.md's conformance
table: a new difference on either side fails this test until it is one or the other."""

from __future__ import annotations

import pytest

from harness.server.command import build_server_command
from harness.server.process import Server
from harness.server.procs import free_port
from harness.spec import EngineSpec, ServerSpec
from tests.real.conftest import CPU_ENV, CPU_FLAGS, TARGET, sglang_processes
from tests.real.surface_probe import HARNESS_METRICS, Surface, probe

# What the simulator is told besides SGLang's flags: it has no CPU profile, so it runs the
# single-GPU profile's model of time and memory; the comparison is of shapes, not numbers.
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
# Known differences, each with its reason (docs/simulator.md, "Conformance with real SGLang").
KNOWN = {
    "graph label": ("cpu graph", "cuda graph"),  # the simulator models a GPU: no --device cpu
}


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


@pytest.fixture(scope="module")
def both(real_env, tmp_path_factory) -> tuple[Surface, Surface]:
    tmp = tmp_path_factory.mktemp("conformance")
    real_engine = EngineSpec(
        name="sglang", program=(str(real_env), "-m", "sglang.launch_server"), stall_timeout_s=120
    )
    sim_engine = EngineSpec(
        name="sim", program=("python", "-m", "harness.sim"), extra_args=SIM_ARGS
    )
    real = measured(launch(real_engine, tmp / "real.log"))
    sim = measured(launch(sim_engine, tmp / "sim.log"))
    assert sglang_processes() == []
    return real, sim


def differences(real: set, sim: set) -> dict[str, list]:
    return {"real only": sorted(real - sim), "simulator only": sorted(sim - real)}


def test_server_info_fields_the_harness_reads(both):
    real, sim = both
    assert {k for k in INFO_READ if k not in real.info} == set()
    assert {k for k in INFO_READ if k not in sim.info} == set()
    assert real.startup_phases == sim.startup_phases - set(), differences(
        real.startup_phases, sim.startup_phases
    )


def test_metrics_the_harness_reads(both):
    real, sim = both
    print(differences(real.metrics, sim.metrics))
    for name in HARNESS_METRICS:
        assert (name in real.metrics) == (name in sim.metrics), name


def test_streamed_generate_shapes(both):
    real, sim = both
    assert real.generate_done and sim.generate_done
    assert differences(real.generate_chunk, sim.generate_chunk) == {
        "real only": [],
        "simulator only": [],
    }
    assert differences(real.meta_info, sim.meta_info) == {"real only": [], "simulator only": []}


def test_streamed_chat_shapes(both):
    real, sim = both
    assert real.chat_done and sim.chat_done
    assert differences(real.chat_chunk, sim.chat_chunk) == {"real only": [], "simulator only": []}
    assert differences(real.chat_delta, sim.chat_delta) == {"real only": [], "simulator only": []}
    assert differences(real.chat_usage, sim.chat_usage) == {"real only": [], "simulator only": []}


def test_log_lines_the_harness_parses(both):
    real, sim = both
    assert real.log_lines == sim.log_lines
    assert (real.graph_label, sim.graph_label) == KNOWN["graph label"]


def test_a_stop_ends_both_the_same_way(both):
    real, sim = both
    assert (real.stop_returncode, sim.stop_returncode) == (0, 0)
