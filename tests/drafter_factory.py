"""Small EAGLE-3 checkpoints written by the tests themselves (random weights, tiny sizes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

HIDDEN, HEADS, HEAD_DIM, FFN = 64, 4, 16, 128
TARGET_LAYERS, TARGET_VOCAB, DRAFT_VOCAB = 8, 1000, 100
AUX = [1, 3, 5]


def make_target(directory: Path, hidden: int = HIDDEN) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "hidden_size": hidden,
        "num_hidden_layers": TARGET_LAYERS,
        "vocab_size": TARGET_VOCAB,
    }
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def make_drafter(
    directory: Path,
    *,
    arch="LlamaForCausalLMEagle3",
    fc_width=None,
    aux=None,
    d2t="ok",
    dtype=np.float32,
    nan=False,
    seed=0,
) -> Path:
    """A valid drafter unless a defect is asked for: fc_width, aux ids, d2t ("missing",
    "short", "outside"), dtype, nan."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": [arch],
        "hidden_size": HIDDEN,
        "target_hidden_size": HIDDEN,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "head_dim": HEAD_DIM,
        "intermediate_size": FFN,
        "num_hidden_layers": 1,
        "vocab_size": TARGET_VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "rms_norm_eps": 1e-6,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": aux or AUX},
    }
    (directory / "config.json").write_text(json.dumps(config))

    def w(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(dtype)

    tensors = {
        "fc.weight": w(HIDDEN, fc_width or len(AUX) * HIDDEN),
        "midlayer.input_layernorm.weight": np.ones(HIDDEN, dtype),
        "midlayer.hidden_norm.weight": np.ones(HIDDEN, dtype),
        "midlayer.self_attn.q_proj.weight": w(HEADS * HEAD_DIM, 2 * HIDDEN),
        "midlayer.self_attn.k_proj.weight": w(HEADS * HEAD_DIM, 2 * HIDDEN),
        "midlayer.self_attn.v_proj.weight": w(HEADS * HEAD_DIM, 2 * HIDDEN),
        "midlayer.self_attn.o_proj.weight": w(HIDDEN, HEADS * HEAD_DIM),
        "midlayer.post_attention_layernorm.weight": np.ones(HIDDEN, dtype),
        "midlayer.mlp.gate_proj.weight": w(FFN, HIDDEN),
        "midlayer.mlp.up_proj.weight": w(FFN, HIDDEN),
        "midlayer.mlp.down_proj.weight": w(HIDDEN, FFN),
        "norm.weight": np.ones(HIDDEN, dtype),
        "lm_head.weight": w(DRAFT_VOCAB, HIDDEN),
    }
    if nan:
        tensors["midlayer.mlp.up_proj.weight"][0, 0] = np.nan
    targets = np.sort(rng.choice(TARGET_VOCAB, DRAFT_VOCAB, replace=False))
    mapping = (targets - np.arange(DRAFT_VOCAB)).astype(np.int64)  # d2t stores offsets
    if d2t == "short":
        mapping = mapping[:90]
    if d2t == "outside":
        mapping[-1] = TARGET_VOCAB + 500
    if d2t != "missing":
        tensors["d2t"] = mapping
    save_file(tensors, str(directory / "model.safetensors"))
    return directory
