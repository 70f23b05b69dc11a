"""Workloads and sampling through the real config tree: choices, validation before any launch,
and what reaches the requests."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from harness.errors import ConfigError
from harness.measure.client import request_body
from harness.spec import BenchmarkSpec
from harness.workload import Prompt
from sweep.config.setup_key import setup_key
from sweep.config.specs import build_benchmark_spec, build_trial_spec
from sweep.launch.app import CONF_DIR


def cfg(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def test_the_default_workload_is_reasoning_and_each_bundled_one_composes():
    spec = build_benchmark_spec(cfg())
    assert (spec.workload, spec.prompts) == ("reasoning", "builtin")
    assert set(spec.categories) == {"math", "code", "science", "logic"}
    for name, categories in [
        ("mixed", ("math", "code", "science", "logic", "long_context", "multi_turn", "datagen")),
        ("long_context", ("long_context",)),
        ("multi_turn", ("multi_turn",)),
        ("datagen", ("datagen",)),
        ("datagen_pipeline", ("datagen_pipeline",)),
    ]:
        spec = build_benchmark_spec(cfg(f"benchmark/workload={name}"))
        assert (spec.workload, spec.categories) == (name, categories)


def test_an_unknown_workload_lists_the_choices():
    with pytest.raises(ConfigCompositionException, match=r"(?s)benchmark/workload.*mixed"):
        cfg("benchmark/workload=poetry")


def test_an_unknown_category_names_the_key_and_the_choices():
    with pytest.raises(ConfigError, match=r"benchmark.workload.categories: 'poetry'.*'datagen'"):
        build_trial_spec(cfg("benchmark.workload.categories=[math,poetry]"))


def test_a_file_workload_needs_its_source(tmp_path):
    with pytest.raises(ConfigError, match=r"benchmark.workload.source is required"):
        build_trial_spec(cfg("benchmark/workload=file"))
    path = tmp_path / "mine.jsonl"
    path.write_text('{"id": "q1", "category": "ops", "prompt": "hello"}\n')
    spec = build_benchmark_spec(cfg("benchmark/workload=file", f"benchmark.workload.source={path}"))
    assert (spec.workload, spec.prompts) == ("file", str(path))
    # the old spelling still works: benchmark.prompts=PATH is the file workload, all categories
    spec = build_benchmark_spec(cfg(f"benchmark.prompts={path}"))
    assert (spec.workload, spec.prompts, spec.categories) == ("file", str(path), ())


def test_sampling_defaults_to_the_model_group_and_greedy_is_a_choice():
    spec = build_benchmark_spec(cfg())
    assert (spec.temperature, spec.top_p, spec.top_k) == (1.0, 0.95, None)  # Kimi-K2.5 thinking
    assert spec.sampling_source == "model.sampling (kimi-k2.5)"
    greedy = build_benchmark_spec(cfg("benchmark.sampling=greedy"))
    assert (greedy.temperature, greedy.greedy) == (0.0, True)
    assert build_benchmark_spec(cfg("model.sampling.temperature=0")).greedy
    with pytest.raises(ConfigError, match=r"benchmark.sampling='beam'.*model, greedy"):
        build_benchmark_spec(cfg("benchmark.sampling=beam"))
    with pytest.raises(ConfigError, match=r"model.sampling.top_p=1.5"):
        build_benchmark_spec(cfg("model.sampling.top_p=1.5"))
    with pytest.raises(ConfigError, match=r"model.sampling.top_k=0"):
        build_benchmark_spec(cfg("model.sampling.top_k=0"))
    # the deprecated benchmark.temperature still sets the temperature
    assert build_benchmark_spec(cfg("benchmark.temperature=0")).greedy


def test_a_local_checkpoint_samples_as_its_generation_config_says(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 20})
    )
    spec = build_benchmark_spec(cfg(f"model.path={model}"))
    assert (spec.temperature, spec.top_p, spec.top_k) == (0.6, 0.9, 20)
    assert spec.sampling_source == str(model / "generation_config.json")
    off = build_benchmark_spec(
        cfg(f"model.path={model}", "model.sampling.from_generation_config=false")
    )
    assert (off.temperature, off.top_p) == (1.0, 0.95)
    assert build_benchmark_spec(cfg(f"model.path={model}", "benchmark.sampling=greedy")).greedy
    # a hub id whose snapshot is in the local Hugging Face cache is read from there
    hub = tmp_path / "hub"
    snapshot = hub / "models--org--m" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (hub / "models--org--m" / "refs").mkdir()
    (hub / "models--org--m" / "refs" / "main").write_text("abc")
    (snapshot / "config.json").write_text("{}")
    (snapshot / "generation_config.json").write_text(json.dumps({"temperature": 0.7}))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    spec = build_benchmark_spec(cfg("model.path=org/m"))
    assert (spec.temperature, spec.top_p) == (0.7, 0.95)
    # not in the cache: the config group's values
    assert build_benchmark_spec(cfg("model.path=org/other")).temperature == 1.0


@pytest.mark.parametrize("api", ["chat", "generate"])
def test_the_sampling_reaches_both_apis(api):
    prompt = Prompt("p", ({"role": "user", "content": "hi"},))
    sampled = BenchmarkSpec(model="m", api=api, temperature=1.0, top_p=0.95, top_k=40)
    greedy = BenchmarkSpec(model="m", api=api, temperature=0.0, top_p=0.95, top_k=40)
    fields = {}
    for spec in (sampled, greedy):
        _, body = request_body(spec, prompt, speculative=False)
        params = body["sampling_params"] if api == "generate" else body
        fields[spec.greedy] = {k: params.get(k) for k in ("temperature", "top_p", "top_k")}
    assert fields[False] == {"temperature": 1.0, "top_p": 0.95, "top_k": 40}
    assert fields[True] == {"temperature": 0.0, "top_p": None, "top_k": None}


def test_a_baseline_is_not_reused_once_the_prompts_or_the_models_sampling_change(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "one"}\n')
    overrides = ("benchmark/workload=file", f"benchmark.workload.source={path}")
    before = setup_key(cfg(*overrides))
    path.write_text('{"prompt": "one, edited"}\n')
    assert setup_key(cfg(*overrides)) != before
    model = tmp_path / "model"
    model.mkdir()
    (model / "generation_config.json").write_text(json.dumps({"temperature": 0.6}))
    first = setup_key(cfg(f"model.path={model}"))
    (model / "generation_config.json").write_text(json.dumps({"temperature": 0.7}))
    assert setup_key(cfg(f"model.path={model}")) != first
