"""The attention backend SGLang picks without --attention-backend (harness.sglang.attention), as
the simulator resolves and announces it, per version: 0.5.23 with the arguments (topk as given,
reported in /server_info), 0.5.1.post3 in its TP workers (topk resolved, only logged)."""

from __future__ import annotations

import pytest

from harness.sglang.attention import default_backend, default_line, parse_default_line
from harness.sglang.surfaces import CURRENT, LEGACY
from harness.sim.cli import build_parser, resolve
from harness.sim.model.profiles import HARDWARE

LLAMA, KIMI = "LlamaForCausalLM", "KimiK25ForConditionalGeneration"


@pytest.mark.parametrize("legacy", [False, True])
def test_hopper_runs_fa3_for_an_mha_chain_and_flashinfer_for_a_tree(legacy):
    assert default_backend("sm90", False, LLAMA, None, legacy=legacy) == "fa3"  # no speculation
    assert default_backend("sm90", False, LLAMA, 1, 1, legacy=legacy) == "fa3"
    assert default_backend("sm90", False, LLAMA, 4, 1, legacy=legacy) == "flashinfer"
    assert default_backend("sm90", False, LLAMA, 1, 16, legacy=legacy) == "flashinfer"  # paged
    assert default_backend("sm120", False, LLAMA, 1, legacy=legacy) == "flashinfer"


@pytest.mark.parametrize("legacy", [False, True])
def test_an_mla_model_runs_fa3_on_hopper_and_triton_on_the_rtx_pro_6000(legacy):
    for topk in (None, 1, 4):
        assert default_backend("sm90", True, KIMI, topk, legacy=legacy) == "fa3"
        assert default_backend("sm120", True, KIMI, topk, legacy=legacy) == "triton"


def test_0_5_1_takes_fa3_on_hopper_only_for_the_architectures_it_lists():
    assert default_backend("sm90", False, "MistralForCausalLM", 1, legacy=True) == "flashinfer"
    assert default_backend("sm90", False, "MistralForCausalLM", 1) == "fa3"  # 0.5.23: any MHA


def test_a_gpu_the_rules_do_not_cover_is_refused():
    with pytest.raises(ValueError, match="sm100"):
        default_backend("sm100", True, KIMI, 1)
    assert {hw.compute for hw in HARDWARE.values()} <= {"sm90", "sm120"}


def test_either_versions_line_is_read_back():
    for legacy in (False, True):
        text = f"[2026-12-05 10:00:00 TP0] {default_line('flashinfer', legacy)}\nnext line\n"
        assert parse_default_line(text) == "flashinfer"
    assert parse_default_line("Attention backend: fa3\n") is None


def _resolve(version: str, *flags: str, target: str = LLAMA, compute: str | None = "sm90"):
    argv = ["--model-path", "m", "--sim-sglang-version", version, *flags]
    return resolve(build_parser(version).parse_args(argv), target, 81_559, compute)


SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"]


def test_0_5_23_resolves_it_with_topk_as_given_and_reports_it():
    tree = _resolve(CURRENT, *SPEC, "--speculative-num-steps", "3", "--speculative-eagle-topk", "4")
    assert tree.args["attention_backend"] == "flashinfer"
    assert tree.infos == [default_line("flashinfer")]
    # no topk given: the backend is chosen before SGLang fills in Llama's 5/4/8, so fa3
    auto = _resolve(CURRENT, *SPEC)
    assert auto.args["speculative_eagle_topk"] == 4
    assert auto.args["attention_backend"] == "fa3"
    assert auto.worker_infos == []


def test_0_5_1_chooses_it_in_the_workers_with_topk_resolved_and_only_logs_it():
    auto = _resolve(LEGACY, *SPEC)
    assert auto.args["speculative_eagle_topk"] == 4  # 0.5.1's fallback, 5/4/8
    assert auto.args["attention_backend"] is None  # what /get_server_info reports
    assert auto.worker_infos == [default_line("flashinfer", legacy=True)]
    assert auto.infos == []


@pytest.mark.parametrize("version", [CURRENT, LEGACY])
def test_a_backend_given_or_a_gpu_not_known_is_left_alone(version):
    given = _resolve(version, "--attention-backend", "triton")
    assert given.args["attention_backend"] == "triton"
    assert given.infos == given.worker_infos == []
    unknown = _resolve(version, compute=None)  # the in-process oracle
    assert unknown.args["attention_backend"] is None
    assert unknown.infos == unknown.worker_infos == []
