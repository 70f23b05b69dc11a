"""SGLang's per-version facts (harness.sglang): one source the harness and the simulator
read."""

from __future__ import annotations

import pytest

from harness.sglang.speculative import (
    canonical_algorithm,
    captured_graph_max_bs,
    draft_tree_capacity,
    forced_draft_tokens,
)
from harness.sglang.surfaces import CURRENT, LEGACY, SERVER_INFO_PATHS, VERSIONS, surface
from harness.sim.cli import build_parser


@pytest.mark.parametrize(
    ("steps", "topk", "forced"),
    [(3, 1, 4), (7, 1, 8), (3, 4, None), (None, 1, None), (3, None, None)],
)
def test_topk_one_forces_draft_tokens_to_steps_plus_one(steps, topk, forced):
    assert forced_draft_tokens(steps, topk) == forced


@pytest.mark.parametrize(
    ("max_bs", "max_running", "captured"),
    [(256, 48, 48), (16, 48, 16), (None, 48, None), (32, None, 32)],
)
def test_graphs_are_captured_up_to_the_request_pool(max_bs, max_running, captured):
    assert captured_graph_max_bs(max_bs, max_running) == captured


def test_the_tree_holds_topk_times_steps_plus_one():
    assert draft_tree_capacity(3, 4) == 13


@pytest.mark.parametrize(("name", "runs"), [("nextn", "EAGLE"), ("eagle3", "EAGLE3"), (None, None)])
def test_algorithm_names_are_canonicalised_as_sglang_does(name, runs):
    assert canonical_algorithm(name) == runs


def test_an_unknown_surface_names_the_known_ones():
    with pytest.raises(KeyError, match=", ".join(VERSIONS)):
        surface("0.5.10")


def test_clients_ask_the_current_info_path_first():
    current, legacy = surface(CURRENT), surface(LEGACY)
    assert current.deprecated_server_info_path == legacy.server_info_path
    assert (current.server_info_path, legacy.server_info_path) == SERVER_INFO_PATHS


@pytest.mark.parametrize("version", VERSIONS)
def test_the_simulators_parser_has_exactly_the_surfaces_flags(version):
    facts = surface(version)
    options = build_parser(version)._option_string_actions
    assert not [flag for flag in facts.absent if flag in options]
    assert all(instead in options for instead in facts.absent.values() if instead)
    assert facts.flag_for("cuda_graph_max_bs") in options
    assert facts.flag_for("tp_size") == "--tp-size"
