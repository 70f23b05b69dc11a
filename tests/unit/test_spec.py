from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.spec import BenchmarkSpec, EngineSpec, ServerSpec

BASE = dict(model_path="m", tp_size=8)
EAGLE3 = dict(speculative_algorithm="EAGLE3", speculative_draft_model_path="/d")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"mem_fraction_static": 1.2}, "mem_fraction_static=1.2 is out of range"),
        ({"port": 80}, "server.port=80"),
        ({"hicache_size": -1}, "hicache_size=-1"),
        ({"speculative_num_steps": 3}, "no drafter is selected"),
        ({**EAGLE3, "speculative_num_steps": 3}, "set all three"),
        (
            {
                **EAGLE3,
                "speculative_num_steps": 2,
                "speculative_eagle_topk": 2,
                "speculative_num_draft_tokens": 8,
            },
            "exceeds speculative_eagle_topk",
        ),
        (
            {"speculative_algorithm": "MEDUSA", "speculative_draft_model_path": "/d"},
            "not an EAGLE-family algorithm",
        ),
        ({"model_path": ""}, "model.path is empty"),
    ],
)
def test_invalid_server_specs_name_the_field(fields, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("*", r"\*")):
        ServerSpec(**{**BASE, **fields})


def test_valid_speculative_spec():
    spec = ServerSpec(
        **BASE,
        **EAGLE3,
        speculative_num_steps=3,
        speculative_eagle_topk=4,
        speculative_num_draft_tokens=13,
    )
    assert spec.speculative


def test_all_three_unset_is_allowed_sglang_picks_defaults():
    assert ServerSpec(**BASE, **EAGLE3).speculative


def test_unknown_engine_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="engine='vllm' is unknown: use one of sim, sglang"):
        EngineSpec(name="vllm", program=("x",))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"lossless_check": -1}, "benchmark.lossless_check=-1"),
        ({"lossless_max_tokens": 0}, "benchmark.lossless_max_tokens=0"),
    ],
)
def test_invalid_lossless_check_settings_name_the_key(fields, message):
    with pytest.raises(ConfigError, match=message):
        BenchmarkSpec(model="m", **fields)
    assert BenchmarkSpec(model="m", lossless_check=0).lossless_check == 0  # 0: off
