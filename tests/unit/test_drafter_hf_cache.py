"""A drafter named by its Hugging Face id (the shipped 8B one is) is checked from the local
Hugging Face cache when its files are there; otherwise preflight says the check could not run."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from harness.drafter_gate import cached_snapshot, drafter_problems, hf_cache_root
from sweep.launch.app import CONF_DIR
from sweep.preflight.checkpoints import check_paths
from sweep.study.search.space import SearchSpace
from tests.drafter_factory import HIDDEN, make_drafter, make_target

REV = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    home = tmp_path / "hf"
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    return home


def cache(hf_home, repo_id: str, make, **defect):
    """Lay out `repo_id` as the hub client does: refs/main names the snapshot's revision."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(REV)
    return make(repo / "snapshots" / REV, **defect)


def preflight_paths(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"tracking.dir={tmp_path}", *overrides])
    return check_paths(cfg, SearchSpace.from_config(cfg.search.space))


def test_the_cache_is_found_where_the_hub_client_puts_it(hf_home, monkeypatch, tmp_path):
    assert hf_cache_root() == hf_home / "hub"
    snapshot = cache(hf_home, "org/eagle3", make_drafter)
    assert cached_snapshot("org/eagle3") == snapshot
    assert cached_snapshot("org/other") is None
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    assert cached_snapshot("org/eagle3") is None


def test_a_cached_hub_drafter_is_checked_and_a_broken_one_refused(hf_home):
    cache(hf_home, "org/target", make_target)
    cache(hf_home, "org/good", make_drafter)
    cache(hf_home, "org/broken", make_drafter, fc_width=HIDDEN)
    assert drafter_problems("org/good", "org/target", "EAGLE3", "static", None) is None
    problems = drafter_problems("org/broken", "org/target", "EAGLE3", "static", None)
    assert problems is not None and "drafter check failed" in problems
    assert "fc.weight" in problems


def test_preflight_refuses_a_broken_cached_drafter(hf_home, tmp_path):
    cache(hf_home, "org/broken", make_drafter, fc_width=HIDDEN)
    checks = preflight_paths(tmp_path, "engine=sglang", "drafter.path=org/broken")
    drafter = next(c for c in checks if c.name == "drafter")
    assert drafter.status == "pass" and "in the local Hugging Face cache" in drafter.message
    verdict = next(c for c in checks if c.name == "drafter check")
    assert verdict.status == "fail" and "fc.weight" in verdict.message


def test_a_hub_drafter_not_in_the_cache_is_named_not_skipped(hf_home, tmp_path):
    checks = preflight_paths(tmp_path, "engine=sglang", "drafter=llama31_8b_eagle3")
    verdict = next(c for c in checks if c.name == "drafter check")
    assert verdict.status == "warn"
    assert (
        "could not check lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B: not in the local Hugging Face "
        f"cache ({hf_home / 'hub'})"
    ) in verdict.message
    assert "huggingface-cli download lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B" in verdict.fix
    off = preflight_paths(tmp_path, "drafter=llama31_8b_eagle3", "drafter.check=off")
    assert not [c for c in off if c.name == "drafter check"]
