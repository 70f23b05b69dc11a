"""Validate an EAGLE-3 drafter against SGLang's expectations and the target model.

What SGLang does with a drafter (reference/sglang.md §9): `LlamaForCausalLMEagle3` is the only
EAGLE-3 class; with `--speculative-algorithm EAGLE` no auxiliary hidden states are captured, the
drafter gets one hidden state instead of the concatenation its `fc` layer expects, and every
draft is rejected (the seeds' accept length of 1.0). `fc` maps
num_aux x target_hidden -> hidden; the auxiliary layers are captured at the input of layer id + 1;
`d2t[i] + i` is the target id of draft token i.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drafter.checkpoint import CheckpointError, DrafterCheckpoint, TargetConfig

EAGLE3_ARCH = "LlamaForCausalLMEagle3"
EAGLE_ARCHS = ("LlamaForCausalLMEagle", "EagleLlamaForCausalLM")
SGLANG_DTYPES = {"BF16", "F16", "F32"}  # weights; d2t is I64 and t2d is BOOL
INDEX_DTYPES = {"I64", "I32", "BOOL"}


@dataclass(frozen=True)
class Finding:
    level: str  # "error" | "warning" | "ok"
    check: str
    message: str


@dataclass(frozen=True)
class Footprint:
    weights_bytes: int  # all shards together
    kv_bytes_per_token: int  # all ranks together (K and V of every draft layer)

    def per_rank(self, tp: int) -> tuple[float, float]:
        return self.weights_bytes / tp, self.kv_bytes_per_token / tp


@dataclass
class Report:
    drafter: Path
    findings: list[Finding]
    footprint: Footprint | None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors


def footprint(ckpt: DrafterCheckpoint) -> Footprint:
    c = ckpt.config
    heads = int(c.get("num_key_value_heads") or c.get("num_attention_heads") or 0)
    head_dim = int(
        c.get("head_dim") or (c.get("hidden_size", 0) // max(c.get("num_attention_heads", 1), 1))
    )
    layers = int(c.get("num_hidden_layers") or 1)
    elem = 4 if c.get("torch_dtype") == "float32" else 2
    return Footprint(ckpt.weights_bytes, 2 * heads * head_dim * layers * elem)


def check(drafter: Path, target: Path | None, algorithm: str) -> Report:
    """All static checks; `target` None skips those that need the target's config."""
    findings: list[Finding] = []
    try:
        ckpt = DrafterCheckpoint.open(Path(drafter))
    except CheckpointError as exc:
        return Report(Path(drafter), [Finding("error", "checkpoint", str(exc))], None)
    target_cfg = None
    if target is not None:
        try:
            target_cfg = TargetConfig.open(Path(target))
        except CheckpointError as exc:
            findings.append(Finding("error", "target", str(exc)))
    config_path = ckpt.directory / "config.json"
    findings += _algorithm(ckpt, config_path, algorithm.upper())
    findings += _dtypes(ckpt)
    findings += _fusion_width(ckpt, config_path, target_cfg)
    findings += _aux_layers(ckpt, config_path, target_cfg)
    findings += _vocab_map(ckpt, config_path, target_cfg)
    if target is None:
        findings.append(
            Finding(
                "warning",
                "target",
                "no target config given: fc width, aux "
                "layers and vocabulary were checked against the drafter's "
                "own config only",
            )
        )
    return Report(ckpt.directory, findings, footprint(ckpt))


def _algorithm(ckpt: DrafterCheckpoint, where: Path, algorithm: str) -> list[Finding]:
    archs = ckpt.config.get("architectures") or []
    arch = archs[0] if archs else None
    if arch == EAGLE3_ARCH:
        if algorithm == "EAGLE3":
            return [Finding("ok", "algorithm", f"{EAGLE3_ARCH} with EAGLE3")]
        return [
            Finding(
                "error",
                "algorithm",
                f"{where}: architectures is {EAGLE3_ARCH} but the server would run "
                f"--speculative-algorithm {algorithm}; expected EAGLE3. With {algorithm} "
                "SGLang captures no auxiliary hidden states, swaps in the target's LM head "
                "and the drafter is silently bypassed: every draft is rejected (accept "
                "length 1.0, the seeds' failure). Set drafter.algorithm=EAGLE3.",
            )
        ]
    if arch in EAGLE_ARCHS:
        if algorithm in ("EAGLE", "NEXTN"):
            return [Finding("ok", "algorithm", f"{arch} with {algorithm}")]
        return [
            Finding(
                "error",
                "algorithm",
                f"{where}: architectures is {arch}, an EAGLE-1/2 drafter, but the server "
                f"would run {algorithm}; expected EAGLE.",
            )
        ]
    return [
        Finding(
            "error",
            "algorithm",
            f"{where}: architectures is {archs or 'missing'}; expected "
            f'["{EAGLE3_ARCH}"]. SGLang loads EAGLE-3 drafters only under that class '
            "and does not remap other names.",
        )
    ]


def _dtypes(ckpt: DrafterCheckpoint) -> list[Finding]:
    bad = [
        t
        for t in ckpt.tensors.values()
        if t.dtype not in SGLANG_DTYPES
        and not (t.name.endswith(("d2t", "t2d")) and t.dtype in INDEX_DTYPES)
    ]
    if not bad:
        kinds = sorted({t.dtype for t in ckpt.tensors.values()})
        return [Finding("ok", "dtypes", f"{len(ckpt.tensors)} tensors in {', '.join(kinds)}")]
    first = bad[0]
    return [
        Finding(
            "error",
            "dtypes",
            f"{first.file}: {first.name} is {first.dtype} ({len(bad)} tensors like it); "
            f"expected one of {', '.join(sorted(SGLANG_DTYPES))} for weights.",
        )
    ]


def _num_aux(config: dict) -> int:
    if config.get("num_aux_hidden_states"):
        return int(config["num_aux_hidden_states"])
    ids = (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    return len(ids) if ids else 3


def _fusion_width(
    ckpt: DrafterCheckpoint, where: Path, target: TargetConfig | None
) -> list[Finding]:
    fc = ckpt.tensor("fc.weight")
    if fc is None:
        return [
            Finding(
                "error",
                "fusion",
                f"{ckpt.directory}: no fc.weight tensor; an EAGLE-3 "
                "drafter fuses the auxiliary hidden states through fc",
            )
        ]
    target_hidden = (
        target.hidden_size
        if target
        else ckpt.config.get("target_hidden_size") or ckpt.config.get("hidden_size")
    )
    n_aux = _num_aux(ckpt.config)
    expected = n_aux * int(target_hidden)
    source = f"{n_aux} auxiliary layers x target hidden size {target_hidden}"
    if len(fc.shape) != 2 or fc.shape[1] != expected:
        return [
            Finding(
                "error",
                "fusion",
                f"{fc.file}: {fc.name} has shape {list(fc.shape)}, input width "
                f"{fc.shape[-1]}; SGLang feeds it {source} = {expected}.",
            )
        ]
    findings = [Finding("ok", "fusion", f"{fc.name} input width {expected} = {source}")]
    declared = ckpt.config.get("target_hidden_size")
    if target and declared and int(declared) != target.hidden_size:
        findings.append(
            Finding(
                "error",
                "fusion",
                f"{where}: target_hidden_size is {declared}; the target "
                f"({target.path}) has hidden_size {target.hidden_size}.",
            )
        )
    return findings


def _aux_layers(ckpt: DrafterCheckpoint, where: Path, target: TargetConfig | None) -> list[Finding]:
    ids = (ckpt.config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    if not ids:
        return [
            Finding(
                "ok",
                "aux_layers",
                "no eagle_aux_hidden_state_layer_ids: SGLang uses "
                "layers 2, N//2 and N-3 of the target",
            )
        ]
    if target is None:
        return []
    # SGLang captures the input of layer id + 1, which must exist.
    bad = [i for i in ids if not 0 <= int(i) <= target.num_hidden_layers - 2]
    if bad:
        return [
            Finding(
                "error",
                "aux_layers",
                f"{where}: eagle_aux_hidden_state_layer_ids {ids} include {bad}; the target "
                f"has {target.num_hidden_layers} layers, so ids must be 0.."
                f"{target.num_hidden_layers - 2} (SGLang captures the input of layer "
                "id + 1).",
            )
        ]
    return [
        Finding(
            "ok", "aux_layers", f"layers {ids} exist in the {target.num_hidden_layers}-layer target"
        )
    ]


def _vocab_map(ckpt: DrafterCheckpoint, where: Path, target: TargetConfig | None) -> list[Finding]:
    draft_vocab = ckpt.config.get("draft_vocab_size")
    target_vocab = target.vocab_size if target else ckpt.config.get("vocab_size")
    d2t = ckpt.tensor("d2t")
    if draft_vocab is None or (
        target_vocab and int(draft_vocab) == int(target_vocab) and d2t is None
    ):
        return [Finding("ok", "vocab_map", "full vocabulary: no draft->target map needed")]
    if d2t is None:
        return [
            Finding(
                "error",
                "vocab_map",
                f"{ckpt.directory}: no d2t tensor, but {where.name} declares "
                f"draft_vocab_size {draft_vocab}; SGLang needs d2t to map draft tokens "
                "to target ids.",
            )
        ]
    if d2t.shape != (int(draft_vocab),):
        return [
            Finding(
                "error",
                "vocab_map",
                f"{d2t.file}: d2t has shape {list(d2t.shape)}; expected "
                f"[{draft_vocab}] (draft_vocab_size in {where.name}).",
            )
        ]
    mapped = ckpt.read_ints(d2t).astype("int64") + np.arange(int(draft_vocab))
    low, high = int(mapped.min()), int(mapped.max())
    if target_vocab and (low < 0 or high >= int(target_vocab)):
        return [
            Finding(
                "error",
                "vocab_map",
                f"{d2t.file}: d2t maps draft tokens to target ids {low}..{high}; "
                f"expected 0..{int(target_vocab) - 1} (vocab_size {target_vocab}).",
            )
        ]
    return [Finding("ok", "vocab_map", f"d2t maps {draft_vocab} draft tokens into 0..{high}")]
