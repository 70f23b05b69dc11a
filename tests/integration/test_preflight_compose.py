"""Preflight judges the sweep that will run: the real config tree composed through Hydra's compose
API, the memory policy's decision taken from it (sweep.preflight.launched), and host memory and
the weights judged at the values that decision launches."""

from __future__ import annotations

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from safetensors.numpy import save_file

from sweep import preflight
from sweep.launch.app import CONF_DIR
from sweep.preflight.host_ram import check_host_ram
from sweep.preflight.launched import launched
from sweep.preflight.weights import check_weights
from sweep.study.search.space import SearchSpace

BOX = (256.0, "a 256 GB box")


def cfg(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def knobs(c):
    return launched(c, SearchSpace.from_config(c.search.space))


@pytest.fixture(autouse=True)
def _empty_hf_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


def test_the_default_sweep_on_gpus_judges_hicache_held_at_0_and_fits_256_gb():
    c = cfg("engine=sglang")
    k = knobs(c)
    assert k.hicache.sampled == (0.0,) and k.hicache.launched == (0.0,)
    assert k.fraction is not None and k.fraction.sampled == (0.85,)  # the first prior's
    check = check_host_ram(c, k.hicache, have=BOX)
    assert check.status == "pass", check.message
    assert check.message.startswith(
        "HiCache off (held at 0 GB: search.memory=auto pins it, the objective reads concurrency "
        "1 only) + the server's processes 64 GB (assumed: model.host_ram_gb) = 64 GB of a 256 GB "
        "box"
    )


def test_sample_judges_the_largest_hicache_it_searches():
    c = cfg("engine=sglang", "search.memory=sample")
    k = knobs(c)
    assert max(k.hicache.launched) == 48.0 and min(k.hicache.sampled) == 0.0
    assert k.fraction is not None and k.fraction.sampled[0] == 0.82
    assert k.fraction.sampled[-1] == 0.94
    check = check_host_ram(c, k.hicache, have=BOX)
    assert check.status == "warn", check.message  # HiCache 0 fits: only some launches cannot
    assert (
        "HiCache 48 GB x TP 8 (pinned, per rank; searched up to 48 GB: search.memory=sample)"
        in (check.message)
    )
    assert "459 GB needed, more than a 256 GB box" in check.message
    assert (
        check.fix
        == "keep search.space.hicache_size (and search.enqueue) at or below 22 GB per rank"
    )
    # Nothing fits when even HiCache off does not: the sweep that will run cannot.
    assert check_host_ram(c, k.hicache, have=(50.0, "a 50 GB box")).status == "fail"


def test_a_load_profile_holds_hicache_until_the_kv_pool_binds():
    k = knobs(cfg("experiment=load_profile"))
    assert k.hicache.sampled == (0.0, 48.0)
    assert k.hicache.why.startswith("held at 0 GB while the KV pool holds what concurrency")
    assert "searched up to 48 GB once it does not: search.memory=auto" in k.hicache.why


def test_the_capacity_search_launches_its_enqueued_hicache():
    k = knobs(cfg("experiment=datagen"))
    assert 48.0 in k.hicache.priors and max(k.hicache.launched) == 48.0


def test_the_weights_source_a_real_checkpoint_against_the_placeholder(tmp_path):
    folder = tmp_path / "kimi"
    folder.mkdir()
    for i in range(3):
        save_file({"w": np.zeros(1024, np.float32)}, str(folder / f"model-{i}.safetensors"))
    real = cfg("engine=sglang", f"model.path={folder}")
    check = check_weights(real, knobs(real).fraction)
    assert f"/ TP 8; 3 safetensors files under {folder})" in check.message
    placeholder = cfg()
    check = check_weights(placeholder, knobs(placeholder).fraction)
    assert check.status == "pass"
    assert (
        "assumed: the simulator's kimi_k25 profile, model.sim_profile, as moonshotai/Kimi-K2.5 is "
        "a hub id not in the local Hugging Face cache" in check.message
    )
    assert "the fraction held at 0.85: search.memory=auto pins it" in check.message


def test_run_judges_the_default_simulated_box_at_256_gb(tmp_path):
    checks = preflight.run(cfg(f"tracking.dir={tmp_path}", "hardware.host_ram_gb=256"))
    host = next(c for c in checks if c.name == "host ram")
    assert host.status == "pass" and "HiCache off" in host.message
    assert "of the simulated box's 256 GB (hardware.host_ram_gb)" in host.message
    assert "model 64.0 GB" not in " ".join(c.message for c in checks)
