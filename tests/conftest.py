from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks._common import sim_engine  # noqa: F401  (the tests' simulator engine, shared)
from harness.server.procs import free_port
from harness.spec import ServerSpec
from tests.services_fixture import tracking_services  # noqa: F401  (scaleout/ and slurm/)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def port() -> int:
    return free_port()


# Kimi's reasoning parser under each SGLang surface (0.5.1 predates "kimi_k2").
KIMI_PARSER = {"0.5.23": "kimi_k2", "0.5.1": "kimi"}


def kimi_server(port: int, **overrides) -> ServerSpec:
    values = dict(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        port=port,
        trust_remote_code=True,
        reasoning_parser="kimi_k2",
        env=(("NCCL_PROTO", "LL"),),
        # SGLang 0.5.23's own default leaves Kimi-K2.5 no KV cache on this box (harness.sglang.
        # memory); None tests that default.
        mem_fraction_static=0.85,
    )
    values.update(overrides)
    return ServerSpec(**values)


def eagle3(port: int, steps=3, topk=1, draft=4, **overrides) -> ServerSpec:
    return kimi_server(
        port,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/eagle3",
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
        **overrides,
    )
