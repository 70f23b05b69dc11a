"""The real config tree composed through Hydra's compose API: contracts and early errors."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from harness.errors import ConfigError
from sweep.config.setup_key import setup_key
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR
from sweep.study.loop.baseline import baseline_overrides
from sweep.study.search.space import SearchSpace


def cfg(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def test_default_is_the_reference_deployment_on_the_simulator():
    c = cfg()
    assert c.engine.name == "sim"
    assert (c.model.name, c.model.tp, c.model.reasoning_parser) == ("kimi-k2.5", 8, "kimi_k2")
    assert (c.hardware.gpus, c.hardware.gpu) == (8, "NVIDIA RTX PRO 6000 Blackwell")
    assert dict(c.hardware.env) == {
        "NCCL_PROTO": "LL",
        "NCCL_ALGO": "Ring",
        "NCCL_P2P_LEVEL": "SYS",
    }
    assert c.benchmark.max_tokens == 2048 and c.benchmark.runs >= 3 and c.benchmark.warmup >= 1
    assert c.tracking.dir == "results"
    assert c.tracking.mlflow_uri == "sqlite:///results/mlflow.db"
    assert c.tracking.optuna_storage == "sqlite:///results/optuna.db"
    assert c.search.n_trials >= 11 and c.search.study_name
    assert set(c.search.space) == {
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "mem_fraction_static",
        "hicache_size",
    }
    assert c.hydra.sweeper._target_.endswith("SpecsweepSweeper")


def test_default_composes_into_valid_specs_with_sim_flags():
    spec = build_trial_spec(cfg())
    assert spec.server.speculative_algorithm == "EAGLE3"
    assert spec.server.env == (
        ("NCCL_ALGO", "Ring"),
        ("NCCL_P2P_LEVEL", "SYS"),
        ("NCCL_PROTO", "LL"),
    )
    assert (
        "--sim-drafter" in spec.engine.extra_args and "--sim-clock-scale" in spec.engine.extra_args
    )
    SearchSpace.from_config(cfg().search.space)


def test_sglang_engine_has_no_simulator_flags(tmp_path):
    spec = build_trial_spec(cfg("engine=sglang", f"drafter.path={tmp_path}"))
    assert spec.engine.extra_args == () and spec.engine.program[-1] == "sglang.launch_server"


def test_typo_fails_at_composition():
    with pytest.raises(ConfigCompositionException):
        cfg("server.mem_fraction=0.9")


def test_wrong_type_fails_at_composition():
    with pytest.raises((ValidationError, ConfigCompositionException)):
        cfg("benchmark.max_tokens=lots")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["server.mem_fraction_static=1.5"], "mem_fraction_static=1.5 is out of range"),
        (["engine.name=vllm"], "engine='vllm' is unknown"),
        (["engine=sglang", "drafter.path=/no/such/drafter"], "does not exist on this machine"),
        (["drafter=none", "server.speculative_num_steps=3"], "no drafter is selected"),
        (["model.tp=16"], "needs more GPUs"),
    ],
)
def test_bad_values_are_refused_before_launch(overrides, message):
    with pytest.raises(ConfigError, match=message):
        build_trial_spec(cfg(*overrides))


def test_baseline_overrides_drop_drafter_and_speculative_keys():
    args = ["drafter.path=/x", "server.speculative_num_steps=3", "benchmark.runs=2"]
    overrides = baseline_overrides(args, "baseline_x")
    assert overrides[:1] == ["benchmark.runs=2"] and "drafter=none" in overrides
    spec = build_trial_spec(cfg(*overrides))
    assert not spec.server.speculative and spec.role == "baseline"


def test_setup_key_ignores_searched_values_but_not_the_benchmark():
    base = setup_key(cfg())
    assert setup_key(cfg("server.mem_fraction_static=0.9")) == base
    assert setup_key(cfg("benchmark.max_tokens=512")) != base


def test_quick_experiment_preset_overlays_the_defaults():
    c = cfg("experiment=quick")
    assert c.search.n_trials < cfg().search.n_trials and c.benchmark.max_tokens == 2048
    assert OmegaConf.select(c, "benchmark.runs") == 3


def test_smoke_preset_is_small_and_a_command_line_value_still_wins():
    c = cfg("experiment=smoke")
    assert (c.benchmark.runs, c.benchmark.warmup, c.benchmark.requests_per_run) == (2, 1, 1)
    assert c.benchmark.max_tokens == 256 and c.engine.clock_scale == 200
    assert cfg("experiment=smoke", "benchmark.max_tokens=128").benchmark.max_tokens == 128


def test_extended_space_adds_drafter_graphs_and_overlap_and_composes_valid_trials():
    import optuna

    base = cfg("search=eagle3_extended")
    space = SearchSpace.from_config(base.search.space)
    assert {"drafter", "cuda_graph", "cuda_graph_max_bs", "disable_overlap_schedule"} <= set(
        space.params
    )
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen_drafters = set()
    for _ in range(12):
        values = space.suggest(study.ask())
        spec = build_trial_spec(cfg("search=eagle3_extended", *space.overrides(values)))
        seen_drafters.add(spec.server.speculative_draft_model_path)
        assert spec.server.disable_cuda_graph is (not values["cuda_graph"])
        assert spec.server.cuda_graph_max_bs == values["cuda_graph_max_bs"]
        flags = spec.engine.extra_args
        assert flags[flags.index("--sim-drafter") + 1] in (
            "eagle3_37k_ttt5",
            "eagle3_10k",
            "aq_medai_k2",
        )
    assert len(seen_drafters) > 1
