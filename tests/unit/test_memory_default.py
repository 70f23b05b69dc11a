"""A launch that leaves --mem-fraction-static to SGLang is told what SGLang 0.5.23 would pick and
the KV tokens that leaves (sweep.launch.memory_default), before anything starts."""

from __future__ import annotations

import json
from dataclasses import replace

from benchmarks._common import sim_engine
from harness.spec import BenchmarkSpec, EngineSpec, TrialSpec
from sweep.launch.memory_default import left_to_sglang
from tests.conftest import eagle3, kimi_server


def _trial(server, engine=None) -> TrialSpec:
    return TrialSpec("t", "trial", None, engine or sim_engine(), server, BenchmarkSpec(model="m"))


def test_kimi_without_a_fraction_on_the_seeds_box_is_told_it_has_no_kv_cache():
    told = left_to_sglang(_trial(eagle3(30000, mem_fraction_static=None)))
    assert told is not None
    assert round(told.fraction, 3) == 0.758  # docs/simulator.md's table, EAGLE-3 on 96 GB
    assert told.kv_tokens == 0 and not told.simulated_kv
    text = told.warning()
    assert text.startswith("--mem-fraction-static is unset: SGLang 0.5.23 would pick 0.758")
    assert "KimiK25ForConditionalGeneration" in text and "no KV cache at all" in text


def test_a_named_fraction_in_the_spec_or_the_extra_args_is_not_warned_about():
    assert left_to_sglang(_trial(eagle3(30000))) is None  # 0.85
    extra = ("--mem-fraction-static", "0.88")
    assert left_to_sglang(_trial(eagle3(30000, mem_fraction_static=None, extra_args=extra))) is None


def test_a_dense_text_model_keeps_sglangs_default_without_a_warning():
    engine = replace(
        sim_engine(), extra_args=("--sim-target", "llama31_8b", "--sim-hardware", "h100_sxm")
    )
    server = kimi_server(
        30000, model_path="meta-llama/Llama-3.1-8B-Instruct", tp_size=1, mem_fraction_static=None
    )
    assert left_to_sglang(_trial(server, engine)) is None


def test_a_real_launch_reads_the_checkpoints_architecture_and_labels_the_kv_simulated(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["KimiK25ForConditionalGeneration"]})
    )
    server = kimi_server(30000, model_path=str(tmp_path), mem_fraction_static=None)
    engine = EngineSpec(name="sglang", program=("python", "-m", "sglang.launch_server"))
    told = left_to_sglang(_trial(server, engine), "rtx_pro_6000_pcie", "kimi_k25")
    assert told is not None and told.simulated_kv
    assert "SIMULATED" in told.warning()


def _composed(tmp_path, *overrides: str):
    from hydra import compose, initialize_config_dir

    from sweep.launch.app import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=[f"tracking.dir={tmp_path}", *overrides])


def test_preflight_passes_a_searched_fraction_and_warns_a_search_without_one(tmp_path):
    from sweep.preflight.fraction import check_fraction
    from sweep.study.search.space import SearchSpace

    cfg = _composed(tmp_path)
    assert check_fraction(cfg, SearchSpace.from_config(cfg.search.space)).status == "pass"
    cfg = _composed(tmp_path, "~search.space.mem_fraction_static")
    check = check_fraction(cfg, SearchSpace.from_config(cfg.search.space))
    assert check.status == "warn" and "would pick 0.758" in check.message
    assert "no KV cache at all" in check.message and "server.mem_fraction_static" in check.fix
    cfg = _composed(
        tmp_path, "~search.space.mem_fraction_static", "server.mem_fraction_static=0.86"
    )
    assert check_fraction(cfg, SearchSpace.from_config(cfg.search.space)).status == "pass"
