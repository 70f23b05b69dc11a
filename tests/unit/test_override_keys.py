"""Unknown command-line keys: which are refused, and the names suggested for them."""

from __future__ import annotations

import pytest

from sweep.config.override_keys import (
    command_line_overrides,
    config_groups,
    free_maps,
    is_known,
    schema_keys,
    suggestions,
    unknown_key_message,
    unknown_keys,
)
from sweep.paths import CONF

GROUPS = config_groups(CONF)


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("search.n_trails", "search.n_trials"),
        ("serch.n_trials", "search.n_trials"),
        ("server.mem_fraction", "server.mem_fraction_static"),
        ("benchmark.n_trials", "search.n_trials"),  # the right name in the wrong group
        ("search.n_trials.max", "search.n_trials"),  # below a leaf
        ("engine.clock_scal", "engine.clock_scale"),
        ("model.temperature", "model.sampling.temperature"),
    ],
)
def test_a_typo_is_unknown_and_its_nearest_key_is_suggested(typo, meant):
    assert not is_known(typo)
    assert suggestions(typo)[0] == meant


@pytest.mark.parametrize(
    "key",
    [
        "search.n_trials",
        "search.sampler.name",
        "model.sampling.temperature",
        "search.space.speculative_num_steps.high",  # a map: any parameter name
        "search.reference.mem_fraction_static",
        "hardware.env.NCCL_P2P_LEVEL",
        "search.enqueue",
        "benchmark.concurrency",
    ],
)
def test_schema_keys_and_keys_inside_a_map_are_known(key):
    assert is_known(key)


def test_plus_and_double_plus_do_not_make_a_typo_valid():
    overrides = ["search.n_trails=5", "+search.n_trails=5", "++server.mem_fraction=0.9"]
    unknown = unknown_keys(overrides, GROUPS)
    assert unknown == {
        "search.n_trails": ["search.n_trials"],
        "server.mem_fraction": ["server.mem_fraction_static"],
    }


def test_a_field_below_a_maps_entry_is_checked_against_the_entrys_schema():
    assert is_known("search.space.speculative_num_steps.high")
    assert not is_known("search.space.speculative_num_steps.hgh")  # ParamConfig has no hgh
    assert not is_known("hardware.env.NCCL_DEBUG.level")  # an entry of Dict[str, str] is a leaf


# The composed config's keys where a test needs them: its maps' entries (search.space's).
COMPOSED = [
    "search",
    "search.space",
    "search.space.speculative_num_steps",
    "search.space.speculative_num_steps.high",
    "search.space.speculative_num_steps.low",
    "hardware",
    "hardware.env",
    "hardware.env.NCCL_P2P_LEVEL",
]


def test_a_plain_override_of_an_entry_the_composed_map_lacks_is_unknown():
    seen: list[list[str]] = []

    def composed(choices: list[str]) -> list[str]:
        seen.append(choices)
        return COMPOSED

    overrides = [
        "experiment=smoke",
        "search.space.speculative_num_step.high=4",  # one letter short
        "hardware.env.NEW_VAR=1",  # needs +
        "+hardware.env.OTHER_VAR=1",  # added: fine
        "search.space.speculative_num_steps.high=3",  # there: fine
    ]
    unknown = unknown_keys(overrides, GROUPS, composed)
    assert list(unknown) == ["search.space.speculative_num_step.high", "hardware.env.NEW_VAR"]
    assert unknown["search.space.speculative_num_step.high"][0] == (
        "search.space.speculative_num_steps.high"
    )
    assert seen == [["experiment=smoke"]]  # composed once, with the group choices only
    assert "needs a leading +: +hardware.env.NEW_VAR=" in unknown_key_message(
        "hardware.env.NEW_VAR", unknown["hardware.env.NEW_VAR"]
    )


def test_suggestions_for_a_refused_key_include_the_maps_entries():
    unknown = unknown_keys(
        ["search.space.speculative_num_steps.hgh=4"], GROUPS, lambda choices: COMPOSED
    )
    assert unknown["search.space.speculative_num_steps.hgh"][0] == (
        "search.space.speculative_num_steps.high"
    )


def test_without_a_composed_config_a_map_entry_is_left_to_hydra():
    assert unknown_keys(["hardware.env.NEW_VAR=1"], GROUPS, lambda choices: None) == {}
    assert unknown_keys(["hardware.env.NEW_VAR=1"], GROUPS) == {}


def test_groups_hydra_keys_maps_and_deletions_of_real_keys_pass():
    overrides = [
        "experiment=smoke",
        "+experiment=quick",
        "benchmark/workload=file",
        "hydra.verbose=true",
        "hydra/launcher=basic",
        "++hardware.env.NCCL_DEBUG=INFO",
        "+search.reference.hicache_size=0",
        "search.space={speculative_num_steps:{type:int,low:1,high:3}}",
        "search.space.speculative_num_steps.high=4",
        "~search.budget_gpu_hours",
    ]
    assert unknown_keys(overrides, GROUPS, lambda choices: COMPOSED) == {}


def test_a_deleted_key_the_config_lacks_is_unknown():
    assert list(unknown_keys(["~search.n_trails"], GROUPS)) == ["search.n_trails"]


def test_an_override_hydra_cannot_parse_is_left_to_hydra():
    assert unknown_keys(["search.n_trials=[1,"], GROUPS) == {}


def test_only_overrides_are_read_from_a_command_line_not_flags_or_their_values():
    argv = ["-m", "--cfg", "job", "-cn", "config", "search.n_trails=5", "~a.b", "-p", "search"]
    assert command_line_overrides(argv) == ["search.n_trails=5", "~a.b"]


def test_the_message_names_the_key_the_suggestion_and_how_to_look():
    message = unknown_key_message("search.n_trails")
    assert message.startswith("search.n_trails: no such key; did you mean search.n_trials?")
    assert "--cfg job --package search" in message
    assert set(free_maps()) == {"search.space", "search.reference", "hardware.env"}
    assert all(name in message for name in free_maps())


def test_a_key_near_nothing_says_so():
    message = unknown_key_message("zzzz")
    assert "no key of the config is close to it" in message and "did you mean" not in message


def test_the_map_a_key_lies_in_is_not_suggested_for_it():
    assert suggestions("hardware.env.NEW_VAR", COMPOSED) == []
    assert suggestions("search.n_trials.max") == ["search.n_trials"]  # a leaf: the value to set


def test_the_keys_suggested_from_are_the_schemas_nodes_and_leaves():
    keys = schema_keys()
    assert {"search", "search.n_trials", "search.sampler.n_startup_trials"} <= set(keys)
    assert not any(k.startswith("search.space.") for k in keys)  # a map has no fixed keys
