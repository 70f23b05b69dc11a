"""Drafter checks on generated checkpoints: one correct, one per defect."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drafter.__main__ import main as drafter_cli
from drafter.checkpoint import DrafterCheckpoint, TargetConfig
from drafter.checks import check
from drafter.deep import deep_check
from tests.drafter_factory import DRAFT_VOCAB, HIDDEN, make_drafter, make_target


@pytest.fixture
def target(tmp_path):
    return make_target(tmp_path / "target")


def errors(report) -> str:
    return "\n".join(f.message for f in report.errors)


def test_correct_drafter_passes_every_check(tmp_path, target):
    report = check(make_drafter(tmp_path / "d"), target, "EAGLE3")
    assert report.ok, errors(report)
    assert {f.check for f in report.findings} >= {
        "algorithm",
        "dtypes",
        "fusion",
        "aux_layers",
        "vocab_map",
    }
    assert report.footprint.kv_bytes_per_token == 2 * 4 * 16 * 1 * 2


def test_headers_are_read_without_loading_weights(tmp_path):
    ckpt = DrafterCheckpoint.open(make_drafter(tmp_path / "d"))
    fc = ckpt.tensor("fc.weight")
    assert fc.shape == (HIDDEN, 3 * HIDDEN) and fc.dtype == "F32"
    assert ckpt.tensor("self_attn.q_proj.weight").name == "midlayer.self_attn.q_proj.weight"
    assert ckpt.read_ints(ckpt.tensor("d2t")).shape == (DRAFT_VOCAB,)


@pytest.mark.parametrize(
    ("defect", "algorithm", "expected"),
    [
        ({"arch": "LlamaForCausalLM"}, "EAGLE3", ['expected ["LlamaForCausalLMEagle3"]']),
        (
            {},
            "EAGLE",
            ["would run --speculative-algorithm EAGLE; expected EAGLE3", "accept length 1.0"],
        ),
        (
            {"fc_width": HIDDEN},
            "EAGLE3",
            [
                "fc.weight has shape [64, 64], input width 64",
                "3 auxiliary layers x target hidden size 64 = 192",
            ],
        ),
        ({"aux": [1, 3, 7]}, "EAGLE3", ["include [7]", "ids must be 0..6"]),
        ({"d2t": "missing"}, "EAGLE3", ["no d2t tensor", "draft_vocab_size 100"]),
        ({"d2t": "short"}, "EAGLE3", ["d2t has shape [90]; expected [100]"]),
        ({"d2t": "outside"}, "EAGLE3", ["expected 0..999 (vocab_size 1000)"]),
        ({"dtype": np.float64}, "EAGLE3", ["is F64", "expected one of BF16, F16, F32"]),
    ],
)
def test_each_defect_is_caught_with_file_found_and_expected(
    tmp_path, target, defect, algorithm, expected
):
    report = check(make_drafter(tmp_path / "d", **defect), target, algorithm)
    assert not report.ok
    text = errors(report)
    for fragment in expected:
        assert fragment in text
    assert str(tmp_path / "d") in text  # names the file


def test_target_hidden_size_mismatch(tmp_path):
    target = make_target(tmp_path / "t", hidden=32)
    report = check(make_drafter(tmp_path / "d"), target, "EAGLE3")
    assert "3 auxiliary layers x target hidden size 32 = 96" in errors(report)


def test_multimodal_target_config_reads_text_config(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["KimiK25ForConditionalGeneration"],
                "text_config": {"hidden_size": 7168, "num_hidden_layers": 61, "vocab_size": 163840},
            }
        )
    )
    t = TargetConfig.open(tmp_path)
    assert (t.hidden_size, t.num_hidden_layers, t.vocab_size) == (7168, 61, 163840)


def test_missing_directory_is_one_clear_error(tmp_path):
    report = check(tmp_path / "nope", None, "EAGLE3")
    assert not report.ok and "no such checkpoint directory" in errors(report)


def test_deep_check_passes_on_a_correct_checkpoint(tmp_path, target):
    findings = deep_check(make_drafter(tmp_path / "d"), TargetConfig.open(target))
    assert [f.level for f in findings] == ["ok"], findings


def test_deep_check_fails_on_nan_weights(tmp_path, target):
    findings = deep_check(make_drafter(tmp_path / "d", nan=True), TargetConfig.open(target))
    assert findings[0].level == "error" and "midlayer.mlp.up_proj.weight" in findings[0].message


def test_cli_exit_codes_and_output(tmp_path, target, capsys):
    good = make_drafter(tmp_path / "good")
    assert drafter_cli(["check", "--drafter", str(good), "--model", str(target), "--deep"]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and "footprint" in out and "deep" in out
    bad = make_drafter(tmp_path / "bad", fc_width=HIDDEN)
    assert drafter_cli(["check", "--drafter", str(bad), "--model", str(target)]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_simulator_uses_the_checkpoints_footprint(tmp_path):
    from harness.sim.model.profiles import EAGLE3_37K_TTT5
    from harness.sim.oracle import with_checkpoint_footprint

    path = make_drafter(tmp_path / "d")
    profile = with_checkpoint_footprint(EAGLE3_37K_TTT5, str(path), tp=8)
    assert profile.kv_bytes_per_token == 256 // 8
    assert profile.weights_mib_per_gpu < 1  # a tiny generated checkpoint
    assert with_checkpoint_footprint(EAGLE3_37K_TTT5, "/nonexistent", 8) is EAGLE3_37K_TTT5
