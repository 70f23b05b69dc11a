"""The study a command line lands in (sweep.config.study_name), composed through Hydra as
`specsweep sweep` composes it: one name per setup, readable where the command line chose a box,
a drafter, an engine or an experiment, and the same name for the same command line."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from sweep.config.setup_key import setup
from sweep.config.study_name import explicit_name, pinned_values, slug
from sweep.launch.app import CONF_DIR, study_arguments
from sweep.tracking import provenance


def named(*overrides: str, multirun: bool = True) -> str:
    added = study_arguments(["-m", *overrides] if multirun else list(overrides))
    found = explicit_name(added)
    assert found is not None
    return found


def composed(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


DEFAULT = named()


@pytest.mark.parametrize(
    ("overrides", "reads"),
    [
        (("hardware=8x_h200",), "kimi-k25-eagle3-8x-h200-"),
        (("drafter=kimi_k25_eagle3_10k",), "kimi-k25-eagle3-eagle3-10k-"),
        (("experiment=quick",), "kimi-k25-eagle3-quick-"),
        (("benchmark.max_tokens=512",), "kimi-k25-eagle3-"),
        (("engine=sglang", "model.path=/models/K", "drafter.path=/models/d"), "-sglang-"),
        (("experiment=load_profile",), "kimi-k25-load-profile-"),  # said once, by its prefix
        (("search.objective=tok_s+throughput", "benchmark.concurrency=[1,64]"), "kimi-k25-"),
        (("server.mem_fraction_static=0.9",), "kimi-k25-eagle3-"),
    ],
)
def test_each_setup_has_a_name_of_its_own(overrides, reads):
    name = named(*overrides)
    assert name != DEFAULT and reads in name
    assert name == named(*overrides)  # the same command line finds its study again


def test_what_a_measurement_does_not_depend_on_keeps_the_study():
    assert DEFAULT.startswith("kimi-k25-eagle3-") and len(DEFAULT.rsplit("-", 1)[1]) == 6
    for same in (
        "search.n_trials=30",
        "search.sampler.name=tpe",
        "engine.stall_timeout_s=99",  # a timeout the console tells users to raise
        "server.port=31000",
        "tracking.dir=/tmp/elsewhere",
        "report=false",
    ):
        assert named(same) == DEFAULT, same


def test_a_single_trials_own_values_are_not_its_studys_setup():
    trial = named(
        "server.speculative_num_steps=2",
        "server.speculative_eagle_topk=1",
        "server.speculative_num_draft_tokens=3",
        multirun=False,
    )
    assert trial == DEFAULT
    args = study_arguments(["server.speculative_num_steps=2"])
    assert any(a.startswith("trial.name=single-") for a in args)  # a folder per call
    assert not any(a.startswith("trial.name=") for a in study_arguments(["-m"]))


def test_a_given_name_is_kept_and_nothing_is_derived():
    args = study_arguments(["-m", "hardware=8x_h200", "search.study_name=mine"])
    assert explicit_name(args) == "mine"
    assert sum(a.startswith("search.study_name=") for a in args) == 1


def test_a_searched_knob_on_the_command_line_leaves_the_space_and_joins_the_setup():
    args = study_arguments(["-m", "server.mem_fraction_static=0.9"])
    assert "~search.space.mem_fraction_static" in args
    again = study_arguments(args)  # the resume line carries both: nothing is added twice
    assert again.count("~search.space.mem_fraction_static") == 1
    cfg = composed(*[a for a in args if a != "-m"])
    assert "mem_fraction_static" not in cfg.search.space
    pinned = pinned_values(cfg, args)
    assert pinned == {"mem_fraction_static": 0.9}
    assert (
        setup(cfg, provenance.software(cfg), drafter=True, pinned=pinned)[
            "pinned.mem_fraction_static"
        ]
        == 0.9
    )


def test_a_secret_never_enters_the_setup():
    cfg = composed(
        "+hardware.env.HF_TOKEN=hf_PLANTED",
        "tracking.optuna_storage=postgresql://u:dbPLANTED@h/db",
        "engine.extra_args=[--api-key,skPLANTED]",
    )
    flat = setup(cfg, provenance.software(cfg))
    assert "PLANTED" not in repr(flat)
    assert flat["hardware.env.HF_TOKEN"] == "<redacted>"
    # a new token is the same setup
    other = composed("+hardware.env.HF_TOKEN=hf_OTHER", "engine.extra_args=[--api-key,skOTHER]")
    assert named("+hardware.env.HF_TOKEN=hf_A") == named("+hardware.env.HF_TOKEN=hf_B")
    assert setup(other, None)["engine.extra_args"] == flat["engine.extra_args"]


def test_names_are_folder_and_mlflow_safe():
    assert slug("8x_RTX PRO/6000") == "8x-rtx-pro-6000"
    assert slug("eagle3-llama3.1-8b") == "eagle3-llama3.1-8b"
