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


def test_auto_mem_fraction_and_graph_batch_clamp():
    args = resolve(parse(), KIMI, GPU).args
    assert 0.80 < args["mem_fraction_static"] < 0.90
    spec = resolve(parse("--speculative-algorithm", "EAGLE3"), KIMI, GPU).args
    assert spec["cuda_graph_max_bs_decode"] == 48  # clamped to max_running_requests


def test_deprecated_disable_cuda_graph_still_works():
    args = resolve(parse("--disable-cuda-graph"), KIMI, GPU).args
    assert args["cuda_graph_enabled"] is False
