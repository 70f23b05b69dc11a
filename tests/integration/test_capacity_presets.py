"""The capacity presets compose into what issue 17 asks of them (conf/experiment/datagen.yaml,
multi_turn_chat.yaml): the load where capacity decides, the objective at that load, and for
datagen only the memory knobs searched, coarse stream chunks and SGLang's --stream-interval."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from harness.measure.prompt_plan import check_fits
from harness.server.command import server_flags
from harness.workload import load_prompts
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR


def cfg(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def test_datagen_is_the_seeds_pipeline_at_150_in_flight():
    c = cfg("experiment=datagen")
    spec = build_trial_spec(c)
    assert spec.benchmark.concurrency == (150,)
    assert (c.search.objective, c.search.throughput_concurrency) == ("throughput", 150)
    assert set(c.search.space) == {"mem_fraction_static", "hicache_size"}
    assert c.search.baseline is False and not spec.server.speculative
    assert [dict(e) for e in c.search.enqueue] == [
        {"mem_fraction_static": 0.85, "hicache_size": 0},
        {"mem_fraction_static": 0.88, "hicache_size": 48},
        {"mem_fraction_static": 0.88, "hicache_size": 0},
    ]
    assert spec.benchmark.max_tokens >= 4096 and spec.benchmark.ignore_eos
    flags = server_flags(spec.server)
    assert flags[flags.index("--stream-interval") + 1] == "64"
    prompts = load_prompts(spec.benchmark.prompts, 0, spec.benchmark.categories)
    assert len({p.messages[0]["content"] for p in prompts}) == 1  # one shared system prefix
    check_fits(prompts, spec.benchmark)  # each run its own prompts at 150 in flight


def test_multi_turn_chat_is_returning_users_whose_histories_outgrow_the_pool():
    c = cfg("experiment=multi_turn_chat")
    spec = build_trial_spec(c)
    b = spec.benchmark
    assert b.concurrency == (32,) and b.rounds >= 4 and b.users > b.concurrency[0]
    assert (c.search.objective, c.search.throughput_concurrency) == ("throughput", 32)
    assert set(c.search.space) == {"mem_fraction_static", "hicache_size"}
    assert c.search.baseline is False and not spec.server.speculative
    assert b.max_tokens == 1024 and not b.ignore_eos and not b.thinking  # answers end at EOS
    prompts = load_prompts(b.prompts, 0, b.categories)
    check_fits(prompts, b)  # each run its own prompts
    # a run's window reaches every user's last round: completions >= users x rounds
    assert b.concurrency[0] + b.window_at(32) >= b.users * b.rounds
