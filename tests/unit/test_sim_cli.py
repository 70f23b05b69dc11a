from __future__ import annotations

import pytest

from harness.sim.cli import build_parser, resolve

KIMI = "KimiK25ForConditionalGeneration"
GPU = 97_887.0


def parse(*argv: str):
    return build_parser().parse_args(["--model-path", "m", "--tp-size", "8", *argv])


def test_unknown_flag_exits_2_like_argparse(capsys):
    with pytest.raises(SystemExit) as exc:
        parse("--no-such-flag")
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_removed_cuda_graph_max_bs_is_ambiguous_in_0523(capsys):
    with pytest.raises(SystemExit):
        parse("--cuda-graph-max-bs", "16")
    assert "ambiguous option: --cuda-graph-max-bs" in capsys.readouterr().err


def test_topk_one_forces_draft_tokens_with_sglangs_warning():
    resolved = resolve(
        parse(
            "--speculative-algorithm",
            "eagle3",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "8",
        ),
        KIMI,
        GPU,
    )
    assert resolved.args["speculative_algorithm"] == "EAGLE3"
    assert resolved.args["speculative_num_draft_tokens"] == 4
    assert resolved.args["max_running_requests"] == 48
    assert any("adjusted to speculative_num_steps + 1" in w for w in resolved.warnings)
    assert any("reset to 48" in w for w in resolved.warnings)


def test_no_speculative_params_means_per_architecture_defaults():
    args = resolve(parse("--speculative-algorithm", "EAGLE3"), KIMI, GPU).args
    assert (
        args["speculative_num_steps"],
        args["speculative_eagle_topk"],
        args["speculative_num_draft_tokens"],
    ) == (3, 1, 4)
    llama = resolve(parse("--speculative-algorithm", "EAGLE3"), "LlamaForCausalLM", GPU).args
    assert llama["speculative_num_steps"] == 5


def test_partial_speculative_set_is_a_bare_assertion():
    with pytest.raises(AssertionError):
        resolve(
            parse("--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "2"), KIMI, GPU
        )


def test_unknown_algorithm_is_sglangs_value_error():
    with pytest.raises(ValueError, match="Unknown speculative algorithm name: MEDUSA"):
        resolve(parse("--speculative-algorithm", "medusa"), KIMI, GPU)


SPEC = ("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3")


@pytest.mark.parametrize("version", ["0.5.23", "0.5.1"])
def test_topk_above_one_with_trtllm_mha_is_sglangs_start_up_refusal(version):
    # 0.5.23/0.5.22 arg_groups/speculative_hook.py, 0.5.1.post3 server_args.py: the same text.
    argv = ["--model-path", "m", "--sim-sglang-version", version, *SPEC, "--attention-backend"]
    tree = ("--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6")
    refused = build_parser(version).parse_args([*argv, "trtllm_mha", *tree])
    with pytest.raises(ValueError) as exc:
        resolve(refused, KIMI, GPU)
    assert str(exc.value) == "trtllm_mha backend only supports topk = 1 for speculative decoding."
    # topk 1, or another backend, starts.
    chain = build_parser(version).parse_args([*argv, "trtllm_mha", "--speculative-eagle-topk", "1"])
    other = build_parser(version).parse_args([*argv, "fa3", *tree])
    assert resolve(chain, KIMI, GPU).args["speculative_eagle_topk"] == 1
    assert resolve(other, KIMI, GPU).args["speculative_eagle_topk"] == 2


def test_auto_mem_fraction_and_graph_batch_clamp():
    args = resolve(parse(), KIMI, GPU).args
    assert round(args["mem_fraction_static"], 3) == 0.758  # 0.833 x the VLM factor
    spec = resolve(parse("--speculative-algorithm", "EAGLE3"), KIMI, GPU).args
    assert spec["cuda_graph_max_bs_decode"] == 48  # clamped to max_running_requests


def test_deprecated_disable_cuda_graph_still_works():
    args = resolve(parse("--disable-cuda-graph"), KIMI, GPU).args
    assert args["cuda_graph_enabled"] is False


def parse_051(*argv: str):
    return build_parser("0.5.1").parse_args(
        ["--model-path", "m", "--tp-size", "8", "--sim-sglang-version", "0.5.1", *argv]
    )


def test_051_has_the_old_graph_flags_and_not_the_new_ones(capsys):
    ns = parse_051("--cuda-graph-max-bs", "16", "--disable-cuda-graph")
    assert ns.cuda_graph_max_bs_decode == 16 and ns.disable_cuda_graph
    for flag in ("--cuda-graph-max-bs-decode", "--cuda-graph-backend-decode"):
        with pytest.raises(SystemExit) as exc:
            parse_051(flag, "16")
        assert exc.value.code == 2
    assert "unrecognized arguments: --cuda-graph-backend-decode" in capsys.readouterr().err


def test_051_rejects_newer_algorithms_and_parsers(capsys):
    with pytest.raises(SystemExit):
        parse_051("--speculative-algorithm", "STANDALONE")
    with pytest.raises(SystemExit):
        parse_051("--reasoning-parser", "kimi_k2")
    assert "invalid choice: 'kimi_k2'" in capsys.readouterr().err


def test_051_forces_overlap_off_and_falls_back_to_5_4_8():
    resolved = resolve(
        parse_051("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"),
        KIMI,
        GPU,
    )
    args = resolved.args
    assert args["disable_overlap_schedule"] is True
    assert "Overlap scheduler is disabled because of using eagle speculative decoding." in (
        resolved.warnings
    )
    # 0.5.1's fallback for architectures it does not list; 0.5.23 falls back to (3, 1, 4)
    steps = (5, 4, 8)
    assert (
        args["speculative_num_steps"],
        args["speculative_eagle_topk"],
        args["speculative_num_draft_tokens"],
    ) == steps
    assert args["max_running_requests"] == 48
    assert not any("Max running requests" in w for w in resolved.warnings)  # silent in 0.5.1


def test_051_auto_mem_fraction_reserves_more_with_speculation():
    plain = resolve(parse_051(), KIMI, 143_771.0).args["mem_fraction_static"]
    spec = resolve(
        parse_051("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"),
        KIMI,
        143_771.0,
    ).args["mem_fraction_static"]
    assert spec < plain
    assert spec == pytest.approx(0.872, abs=0.002)  # (143771 - (12 + 4 + 2) GiB) / 143771


def test_reported_args_use_each_versions_names():
    from harness.sim.cli import reported_args

    args = resolve(parse_051("--cuda-graph-max-bs", "32"), KIMI, GPU).args
    old = reported_args(args, "0.5.1")
    assert old["cuda_graph_max_bs"] == 32 and "cuda_graph_max_bs_decode" not in old
    assert not any(k.startswith("sim_") for k in old)


# SGLang 0.5.23's mem_fraction_static when --mem-fraction-static is unset (docs/simulator.md,
# "mem_fraction_static when unset"; harness.sglang.memory). Unrounded after the VLM factor.
EAGLE3 = ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d")
CAP48 = ("--max-running-requests", "48")
LLAMA = "LlamaForCausalLM"


@pytest.mark.parametrize(
    "architecture, gpu, tp, argv, expected",
    [
        (KIMI, 97_887.0, 8, EAGLE3, 0.758),  # 0.833 x 0.9097
        (KIMI, 97_887.0, 8, CAP48, 0.766),  # 0.842 x 0.9097
        (KIMI, 143_771.0, 8, EAGLE3, 0.806),  # 0.886 x 0.9097
        (KIMI, 143_771.0, 8, CAP48, 0.811),  # 0.892 x 0.9097 (0.8115)
        (LLAMA, 81_559.0, 1, EAGLE3, 0.830),
        (LLAMA, 81_559.0, 1, CAP48, 0.835),
    ],
)
def test_0523_default_mem_fraction(architecture, gpu, tp, argv, expected):
    ns = build_parser().parse_args(["--model-path", "m", "--tp-size", str(tp), *argv])
    assert round(resolve(ns, architecture, gpu).args["mem_fraction_static"], 3) == expected


def test_0523_terms_of_the_default():
    from harness.sglang import memory

    kimi, llama = memory.architecture(KIMI), memory.architecture(LLAMA)
    sizes = memory.prefill_graph_batch_sizes(8192)
    assert memory.graph_reserve_mib(kimi, 512, sizes) == 1024 + 1536  # MLA: 1.5 GiB
    assert memory.graph_reserve_mib(llama, 256, sizes) == 512 + 464  # 58 sizes x 8 MiB
    assert memory.vlm_factor(kimi) == pytest.approx(0.9097, abs=1e-4)
    # Without the cap, speculation's 48 comes after the hook: max_bs stays 512.
    assert memory.decode_graph_max_bs(512, None, None) == 512
    assert memory.decode_graph_max_bs(512, None, 48) == 48
    assert memory.decode_graph_max_bs(512, 160, 48) == 160
    assert memory.multimodal_kv_reserve_mib(kimi, {}) == 100
    assert memory.multimodal_kv_reserve_mib(kimi, {"SGLANG_VLM_CACHE_SIZE_MB": "0"}) == 0
    assert memory.multimodal_kv_reserve_mib(llama, {}) == 0


def test_language_model_only_is_refused_for_kimi_k25():
    with pytest.raises(ValueError, match=r"--language-model-only does not support \['Kimi"):
        resolve(parse("--language-model-only"), KIMI, GPU)


def test_0523_weights_leave_no_kv_cache_text():
    from harness.sglang.memory import weights_leave_no_kv_cache

    text = weights_leave_no_kv_cache(0.757810361328125, 97_887 - 75_500, 97_887)
    assert text.startswith(
        "Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.757810361328125. Raise --mem-fraction-static above 0.772 "
        "(minimum viable = 1 - available/pre = 0.7713)."
    )
