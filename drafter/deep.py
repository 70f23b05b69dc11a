"""One forward pass of the EAGLE-3 draft layer on CPU (needs the `drafter` extra: torch).

Builds the layer SGLang runs (fc over the auxiliary hidden states, one decoder layer whose
attention sees [norm(embeddings), norm(hidden)], final norm, reduced-vocabulary LM head) from the
checkpoint's own tensors, feeds random inputs of the right shapes, and requires finite logits and
draft tokens that map inside the target vocabulary. It catches what headers cannot: NaN/inf
weights, and shapes that disagree with each other.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from drafter.checkpoint import DrafterCheckpoint, TargetConfig
from drafter.checks import Finding, _num_aux

TOKENS = 8
# The runtime install (`make sweep`, `pip install -e .`) leaves torch out: it is ~1 GB and only
# this check needs it. The packages it needs, and the one line that says how to add them.
NEEDS = ("torch", "safetensors")
INSTALL = "pip install -e '.[drafter]'"


def missing_packages() -> list[str]:
    """The packages of the `drafter` extra this check needs and cannot import (find_spec, so
    torch's 2 s import is paid only by the check itself)."""
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def unavailable() -> str | None:
    """One line naming what is missing and the fix, or None when the deep check can run."""
    missing = missing_packages()
    if not missing:
        return None
    return (
        f"the drafter's deep check needs {' and '.join(missing)}, not installed here: "
        f"{INSTALL} (the drafter extra), or drafter.check=static"
    )


def _load(ckpt: DrafterCheckpoint):
    from safetensors.torch import load_file

    weights, original = {}, {}
    for path in sorted(ckpt.directory.glob("*.safetensors")):
        for name, tensor in load_file(str(path)).items():
            # SGLang's own renames: legacy "midlayer." and an optional "model." prefix.
            short = name.removeprefix("model.").replace("midlayer.", "layers.0.")
            weights[short], original[short] = tensor, f"{path.name}:{name}"
    return weights, original


def deep_check(drafter: Path, target: TargetConfig | None, seed: int = 0) -> list[Finding]:
    if message := unavailable():
        return [Finding("error", "deep", message)]
    import torch

    ckpt = DrafterCheckpoint.open(Path(drafter))
    weights, original = _load(ckpt)
    nonfinite = [
        original[name]
        for name, t in weights.items()
        if t.is_floating_point() and not torch.isfinite(t).all()
    ]
    if nonfinite:
        return [
            Finding(
                "error",
                "deep",
                f"{ckpt.directory}: non-finite values (NaN/inf) in "
                f"{', '.join(sorted(nonfinite)[:5])}",
            )
        ]
    c = ckpt.config
    hidden = int(c["hidden_size"])
    heads = int(c["num_attention_heads"])
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or hidden // heads)
    target_hidden = target.hidden_size if target else int(c.get("target_hidden_size") or hidden)
    vocab = target.vocab_size if target else int(c["vocab_size"])
    generator = torch.Generator().manual_seed(seed)

    def w(name: str):
        return weights[name].float()

    eps = float(c.get("rms_norm_eps", 1e-6))

    def norm(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    try:
        with torch.no_grad():
            if "embed_tokens.weight" in weights:
                ids = torch.randint(
                    0, w("embed_tokens.weight").shape[0], (TOKENS,), generator=generator
                )
                embeds = w("embed_tokens.weight")[ids]
            else:  # EAGLE-3 drafters may share the target's embeddings
                embeds = torch.randn(TOKENS, hidden, generator=generator)
            aux = torch.randn(TOKENS, _num_aux(c) * target_hidden, generator=generator)
            h = aux @ w("fc.weight").T
            x = torch.cat(
                [
                    norm(embeds, w("layers.0.input_layernorm.weight")),
                    norm(h, w("layers.0.hidden_norm.weight")),
                ],
                dim=-1,
            )
            q = (x @ w("layers.0.self_attn.q_proj.weight").T).view(TOKENS, heads, head_dim)
            k = (x @ w("layers.0.self_attn.k_proj.weight").T).view(TOKENS, kv_heads, head_dim)
            v = (x @ w("layers.0.self_attn.v_proj.weight").T).view(TOKENS, kv_heads, head_dim)
            k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
            scores = torch.einsum("qhd,khd->hqk", q, k) / head_dim**0.5
            causal = torch.ones(TOKENS, TOKENS, dtype=torch.bool).tril()
            attn = scores.masked_fill(~causal, float("-inf")).softmax(-1)
            o = torch.einsum("hqk,khd->qhd", attn, v).reshape(TOKENS, heads * head_dim)
            h = h + o @ w("layers.0.self_attn.o_proj.weight").T
            m = norm(h, w("layers.0.post_attention_layernorm.weight"))
            gate = torch.nn.functional.silu(m @ w("layers.0.mlp.gate_proj.weight").T)
            h = (
                h
                + (gate * (m @ w("layers.0.mlp.up_proj.weight").T))
                @ w("layers.0.mlp.down_proj.weight").T
            )
            logits = norm(h, w("norm.weight")) @ w("lm_head.weight").T
    except (KeyError, RuntimeError) as exc:
        return [
            Finding(
                "error",
                "deep",
                f"{ckpt.directory}: forward pass failed: {type(exc).__name__}: {exc}",
            )
        ]
    if not torch.isfinite(logits).all():
        return [
            Finding(
                "error", "deep", f"{ckpt.directory}: the forward pass produced non-finite logits"
            )
        ]
    draft_ids = logits.argmax(-1)
    target_ids = draft_ids + weights["d2t"][draft_ids] if "d2t" in weights else draft_ids
    if int(target_ids.min()) < 0 or int(target_ids.max()) >= vocab:
        return [
            Finding(
                "error",
                "deep",
                f"{ckpt.directory}: mapped token ids "
                f"{int(target_ids.min())}..{int(target_ids.max())} fall outside 0..{vocab - 1}",
            )
        ]
    return [
        Finding(
            "ok",
            "deep",
            f"CPU forward pass: finite logits {tuple(logits.shape)}, "
            f"token ids inside the target vocabulary",
        )
    ]
