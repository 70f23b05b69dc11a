"""A flag from the wrong SGLang era is caught before a launch (harness.flags)."""

from __future__ import annotations

import pytest

from harness.command import build_server_command
from harness.errors import ConfigError
from harness.flags import surface_of, version_problems
from sweep.launch_check import sim_parser_problems
from tests.conftest import kimi_server, sim_engine


@pytest.mark.parametrize(
    ("version", "surface"),
    [("0.5.1", "0.5.1"), ("0.5.1.post3", "0.5.1"), ("0.5.23", "0.5.23"), ("0.6.0", "0.5.23")],
)
def test_installed_versions_map_to_a_surface(version, surface):
    assert surface_of(version) == surface


def test_versions_between_the_surfaces_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="between the two flag surfaces"):
        surface_of("0.5.10")


def test_flags_of_the_other_era_are_named_with_their_replacement():
    assert version_problems(["--cuda-graph-max-bs", "16"], "0.5.23") == [
        "--cuda-graph-max-bs does not exist in SGLang 0.5.23: use --cuda-graph-max-bs-decode."
    ]
    problems = version_problems(
        ["--cuda-graph-backend-decode=disabled", "--speculative-algorithm", "NGRAM"], "0.5.1"
    )
    assert "use --disable-cuda-graph" in problems[0]
    assert "NGRAM is not accepted by SGLang 0.5.1" in problems[1]
    assert version_problems(["--cuda-graph-max-bs", "16"], "0.5.1") == []


def test_the_command_builder_refuses_before_anything_runs(port):
    spec = kimi_server(port, extra_args=("--cuda-graph-max-bs", "16"))
    with pytest.raises(ConfigError, match=r"would fail on SGLang 0\.5\.23"):
        build_server_command(spec, sim_engine())
    # kimi_k2 is a 0.5.23 parser name; 0.5.1 calls it kimi
    with pytest.raises(ConfigError, match="--reasoning-parser kimi_k2 is not accepted"):
        build_server_command(kimi_server(port), sim_engine(version="0.5.1"))


def test_both_surfaces_get_their_own_flag_names(port):
    spec = kimi_server(port, reasoning_parser="kimi", cuda_graph_max_bs=16, disable_cuda_graph=True)
    new = build_server_command(spec, sim_engine()).argv
    old = build_server_command(spec, sim_engine(version="0.5.1")).argv
    assert "--cuda-graph-max-bs-decode" in new and "--cuda-graph-backend-decode" in new
    assert "--cuda-graph-max-bs" in old and "--disable-cuda-graph" in old
    assert "--cuda-graph-max-bs-decode" not in old


def test_the_simulators_parser_is_the_last_word_for_engine_sim():
    flags = ["--model-path", "m", "--no-such-flag"]
    assert "unrecognized arguments: --no-such-flag" in sim_parser_problems(flags, "0.5.23")[0]
    assert sim_parser_problems(["--model-path", "m"], "0.5.1") == []
