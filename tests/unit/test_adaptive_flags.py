"""server.speculative_adaptive / server.speculative_adaptive_config: the flags SGLang 0.5.23
takes, refused where SGLang would serve something else (topk > 1: it silently falls back to
static) or fail at start-up (a steps value outside the candidates, a malformed file), and on the
0.5.1 surface, which has neither flag."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir

from harness.errors import ConfigError
from harness.server.command import build_server_command, server_flags
from harness.sglang.adaptive import ADAPTIVE_DEFAULT_CONFIG, adaptive_candidate_steps
from harness.sglang.surfaces import LEGACY
from harness.spec import EngineSpec, ServerSpec
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR

DRAFTER = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "/d"}


def spec(**kw) -> ServerSpec:
    return ServerSpec(model_path="/m", **{**DRAFTER, **kw})


def trial(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"tracking.dir={tmp_path}", *overrides])
    return build_trial_spec(cfg)


def test_the_flags_are_derived_from_the_fields():
    flags = server_flags(spec(speculative_adaptive=True, speculative_adaptive_config="/c.json"))
    i = flags.index("--speculative-adaptive")
    assert flags[i : i + 3] == [
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        "/c.json",
    ]
    assert "--speculative-adaptive" not in server_flags(spec())


def test_the_0_5_1_surface_refuses_the_flags_before_a_launch():
    engine = EngineSpec(name="sglang", program=("python",), sglang_version=LEGACY)
    needle = r"--speculative-adaptive does not exist in SGLang 0\.5\.1"
    with pytest.raises(ConfigError, match=needle):
        build_server_command(spec(speculative_adaptive=True), engine)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        (
            dict(speculative_eagle_topk=4, speculative_num_steps=3, speculative_num_draft_tokens=8),
            "only topk=1 is supported",
        ),
        (dict(speculative_algorithm="STANDALONE"), "only EAGLE/EAGLE3 are supported"),
    ],
)
def test_adaptive_where_sglang_would_fall_back_to_static_is_refused(kw, needle):
    with pytest.raises(ConfigError, match=needle) as err:
        spec(speculative_adaptive=True, **kw)
    assert "server.speculative_adaptive" in str(err.value)


def test_a_config_without_adaptive_and_adaptive_without_a_drafter_are_refused():
    with pytest.raises(ConfigError, match=r"server\.speculative_adaptive=true, or drop"):
        spec(speculative_adaptive_config="/c.json")
    with pytest.raises(ConfigError, match="needs a drafter"):
        ServerSpec(model_path="/m", speculative_adaptive=True)


def test_the_default_candidates_are_sglangs():
    assert adaptive_candidate_steps(ADAPTIVE_DEFAULT_CONFIG) == [0, 1, 3, 5, 7]


def test_the_composed_config_checks_the_file_and_the_starting_steps(tmp_path):
    ok = trial(
        tmp_path,
        "server.speculative_adaptive=true",
        "server.speculative_num_steps=null",
        "server.speculative_eagle_topk=null",
        "server.speculative_num_draft_tokens=null",
    )
    assert ok.server.speculative_adaptive and ok.server.speculative_adaptive_config is None
    assert ok.params["speculative_adaptive"] is True
    with pytest.raises(ConfigError, match=r"num-steps=2 is not in the adaptive config"):
        trial(
            tmp_path,
            "server.speculative_adaptive=true",
            "server.speculative_num_steps=2",
            "server.speculative_eagle_topk=1",
            "server.speculative_num_draft_tokens=3",
        )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"1": {"candidate_steps": [1, -1]}}))
    with pytest.raises(ConfigError, match="candidate_steps must be a list of non-negative ints"):
        trial(
            tmp_path,
            "server.speculative_adaptive=true",
            f"server.speculative_adaptive_config={bad}",
        )
    with pytest.raises(ConfigError, match="does not exist on this machine"):
        trial(
            tmp_path,
            "server.speculative_adaptive=true",
            f"server.speculative_adaptive_config={tmp_path}/missing.json",
        )
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}, "8": {"candidate_steps": [0]}}))
    t = trial(
        tmp_path,
        "server.speculative_adaptive=true",
        f"server.speculative_adaptive_config={good}",
        "server.speculative_num_steps=null",
        "server.speculative_eagle_topk=null",
        "server.speculative_num_draft_tokens=null",
    )
    assert t.server.speculative_adaptive_config == str(good.resolve())


def test_a_searched_adaptive_holds_topk_at_1():
    import optuna
    from omegaconf import OmegaConf

    from sweep.study.search.space import SearchSpace

    space = SearchSpace.from_config(
        OmegaConf.create(
            {
                "speculative_adaptive": {"type": "categorical", "choices": [False, True]},
                "speculative_num_steps": {"type": "int", "low": 1, "high": 5},
                "speculative_eagle_topk": {"type": "categorical", "choices": [1, 4]},
                "speculative_num_draft_tokens": {"type": "int", "low": 2, "high": 16},
            }
        )
    )
    fixed = {"speculative_adaptive": True, "speculative_num_steps": 3,
             "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}  # fmt: skip
    values = space.suggest(optuna.trial.FixedTrial(fixed))
    assert values == {**fixed, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    static = space.suggest(optuna.trial.FixedTrial({**fixed, "speculative_adaptive": False}))
    assert static["speculative_eagle_topk"] == 4 and static["speculative_num_draft_tokens"] == 8
    assert "server.speculative_adaptive=True" in space.overrides(values)
