from __future__ import annotations

import shlex
import sys

import pytest

from harness.server.command import build_server_command, server_flags
from harness.server.redact import recorded_shell
from harness.spec import EngineSpec, ServerSpec

BASE = dict(model_path="moonshotai/Kimi-K2.5", tp_size=8, port=30000)
SPEC = dict(
    speculative_algorithm="EAGLE3",
    speculative_draft_model_path="/models/d",
    speculative_num_steps=3,
    speculative_eagle_topk=1,
    speculative_num_draft_tokens=4,
)


@pytest.mark.parametrize(
    ("fields", "version", "expected"),
    [
        (
            {},
            "0.5.23",
            [
                "--model-path",
                "moonshotai/Kimi-K2.5",
                "--tp-size",
                "8",
                "--host",
                "127.0.0.1",
                "--port",
                "30000",
                "--enable-metrics",
            ],
        ),
        ({"mem_fraction_static": 0.88}, "0.5.23", ["--mem-fraction-static", "0.88"]),
        ({"hicache_size": 48}, "0.5.23", ["--enable-hierarchical-cache", "--hicache-size", "48"]),
        ({"cuda_graph_max_bs": 16}, "0.5.23", ["--cuda-graph-max-bs-decode", "16"]),
        ({"cuda_graph_max_bs": 16}, "0.5.1", ["--cuda-graph-max-bs", "16"]),
        (
            {"disable_cuda_graph": True},
            "0.5.23",
            ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"],
        ),
        ({"disable_cuda_graph": True}, "0.5.1", ["--disable-cuda-graph"]),
        ({"disable_overlap_schedule": True}, "0.5.23", ["--disable-overlap-schedule"]),
        (
            {"reasoning_parser": "kimi_k2", "trust_remote_code": True},
            "0.5.23",
            ["--trust-remote-code", "--reasoning-parser", "kimi_k2"],
        ),
        (
            SPEC,
            "0.5.23",
            [
                "--speculative-algorithm",
                "EAGLE3",
                "--speculative-draft-model-path",
                "/models/d",
                "--speculative-num-steps",
                "3",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "4",
            ],
        ),
        ({"decode_log_interval": 10}, "0.5.23", ["--decode-log-interval", "10"]),
        ({"stream_interval": 8}, "0.5.23", ["--stream-interval", "8"]),
        ({"stream_interval": 8}, "0.5.1", ["--stream-interval", "8"]),
        (
            {"extra_args": ("--kv-cache-dtype", "fp8_e4m3")},
            "0.5.23",
            ["--kv-cache-dtype", "fp8_e4m3"],
        ),
    ],
)
def test_flags_contain_expected_sequence(fields, version, expected):
    argv = server_flags(ServerSpec(**{**BASE, **fields}), version)
    joined = " ".join(argv)
    assert " ".join(expected) in joined


def test_baseline_has_no_speculative_or_optional_flags():
    argv = server_flags(ServerSpec(**BASE))
    assert not [a for a in argv if a.startswith("--speculative")]
    assert "--mem-fraction-static" not in argv  # None: SGLang's own formula
    assert "--enable-hierarchical-cache" not in argv
    assert "--decode-log-interval" not in argv  # SGLang's default, left out
    assert "--stream-interval" not in argv  # unset: SGLang's 1
    assert "--cuda-graph-max-bs" not in argv  # removed in 0.5.23: would be ambiguous


def test_command_uses_current_interpreter_env_and_url():
    engine = EngineSpec(name="sglang", program=("python", "-m", "sglang.launch_server"))
    spec = ServerSpec(**BASE, env=(("NCCL_PROTO", "LL"),))
    cmd = build_server_command(spec, engine)
    assert cmd.argv[:3] == (sys.executable, "-m", "sglang.launch_server")
    assert cmd.env == {"NCCL_PROTO": "LL"}
    assert cmd.base_url == "http://127.0.0.1:30000"
    shell = recorded_shell(cmd)  # no secrets here: the plain command line
    assert shell.startswith("NCCL_PROTO=LL ")
    assert shlex.split(shell)[1:] == list(cmd.argv)


def test_engine_extra_args_come_last():
    engine = EngineSpec(
        name="sim", program=("python", "-m", "harness.sim"), extra_args=("--sim-clock-scale", "50")
    )
    cmd = build_server_command(ServerSpec(**BASE), engine)
    assert cmd.argv[-2:] == ("--sim-clock-scale", "50")


def test_bind_all_interfaces_still_connects_on_loopback():
    assert ServerSpec(**{**BASE, "host": "0.0.0.0"}).base_url == "http://127.0.0.1:30000"
