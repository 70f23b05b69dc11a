"""A flag from the wrong SGLang era is caught before a launch (harness.server.flags)."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.server.command import build_server_command
from harness.server.flags import surface_of, version_problems
from sweep.launch.parse_check import sim_parser_problems
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


def _fake_engine(tmp_path, version: str, flags: list[str]) -> str:
    """An engine Python whose SGLang is `version` with exactly `flags` in its parser."""
    import sys

    site = tmp_path / "site"
    pkg = site / "sglang" / "srt"
    pkg.mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "server_args.py").write_text(
        "class ServerArgs:\n"
        "    @staticmethod\n"
        "    def add_cli_args(parser):\n"
        f"        for flag in {flags!r}:\n"
        "            parser.add_argument(flag)\n"
    )
    meta = site / f"sglang-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return str(python)


# 0.5.22's parser (read: ServerArgs.add_cli_args on the unpacked wheel) has the current surface's
# flags but not 0.5.23's --enable-hicache alias; a 0.5.10 may have either marker.
_CURRENT_FLAGS = ["--model-path", "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]
_CURRENT_FLAGS += ["--enable-hierarchical-cache", "--hicache-size"]


@pytest.mark.parametrize(
    ("version", "flags", "surface"),
    [
        ("0.5.22", _CURRENT_FLAGS, "0.5.23"),
        ("0.5.10", _CURRENT_FLAGS, "0.5.23"),
        ("0.5.10", ["--model-path", "--cuda-graph-max-bs"], "0.5.1"),
    ],
)
def test_the_surface_is_read_from_the_installed_parser_not_a_version_list(
    tmp_path, version, flags, surface
):
    from harness.server.flags import detected_surface, probe_sglang

    python = _fake_engine(tmp_path, version, flags)
    assert probe_sglang(python).version == version
    assert detected_surface((python, "-m", "sglang.launch_server")) == surface


def test_0522_is_known_to_speak_the_current_surface_by_version_alone():
    assert surface_of("0.5.22") == "0.5.23"


def test_only_what_the_installed_parser_lacks_is_refused_with_the_flag_to_use(tmp_path):
    from harness.server.flags import parser_problems, probe_sglang

    installed = probe_sglang(_fake_engine(tmp_path, "0.5.22", _CURRENT_FLAGS))
    ok = ["--model-path", "m", "--cuda-graph-max-bs-decode", "8", "--enable-hierarchical-cache"]
    assert parser_problems(ok, installed) == []
    assert parser_problems(["--enable-hicache"], installed) == [
        "--enable-hicache does not exist in SGLang 0.5.22: use --enable-hierarchical-cache."
    ]
    assert parser_problems(["--cuda-graph-max-bs", "8"], installed) == [
        "--cuda-graph-max-bs is ambiguous in SGLang 0.5.22 (could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill): use --cuda-graph-max-bs-decode."
    ]
    assert parser_problems(["--no-such-flag"], installed) == [
        "--no-such-flag does not exist in SGLang 0.5.22: drop it."
    ]


def test_preflight_passes_a_mid_release_whose_parser_has_the_current_flags(tmp_path):
    from omegaconf import OmegaConf

    from sweep.preflight.machine import check_engine

    python = _fake_engine(tmp_path, "0.5.22", _CURRENT_FLAGS)
    engine = {"name": "sglang", "program": [python, "-m", "sglang.launch_server"]}
    check = check_engine(OmegaConf.create({"engine": {**engine, "sglang_version": None}}))
    assert check.status == "pass", check
    assert "SGLang 0.5.22, 0.5.23 flag set (read from its parser)" in check.message
    legacy = OmegaConf.create({"engine": {**engine, "sglang_version": "0.5.1"}})
    assert "set engine.sglang_version=0.5.23" in check_engine(legacy).fix
