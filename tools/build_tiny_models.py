"""Build the tiny target model and its EAGLE-3 drafter that real SGLang serves on a CPU in CI.

    .venv-real/bin/python tools/build_tiny_models.py --out .tiny-models   (make tiny-models)

Nothing is downloaded: the tokenizer is a byte-level BPE trained here on the bundled prompts
(harness/data/prompts.jsonl), the target a 4-layer Llama with random bf16 weights, and the drafter
SGLang's EAGLE-3 layout (`sglang/srt/models/llama_eagle3.py`: `LlamaForCausalLMEagle3`, `fc` over
three captured target layers, one decoder layer whose attention reads [norm(embeddings),
norm(hidden)], a reduced-vocabulary head with `d2t`/`t2d`), trained for a few seconds on the
target's own greedy continuations so its drafts agree with the target more often than chance.
Deterministic (fixed seeds); it takes seconds. Runs in the real-engine environment
(`make real-sglang-env`: torch, transformers, tokenizers, safetensors).

The target: 4 layers, hidden 256, 4 heads / 2 KV heads, vocabulary 512, context 4096, a chat
template whose assistant turn opens a `<think>` block (SGLang's `deepseek-r1` reasoning parser
splits reasoning from the answer at `</think>`). With 4 target layers SGLang's default capture
layers `[2, L//2, L-3]` are `[2, 2, 1]`, two distinct layers for a three-wide `fc`, so the
drafter names its own: `[0, 1, 2]` (SGLang captures the input of layer id + 1).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "harness" / "data" / "prompts.jsonl"
VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 512, 256, 4, 4, 2, 512, 4096
DRAFT_VOCAB = 256
AUX_LAYERS = [0, 1, 2]
SPECIALS = ["<|begin|>", "<|end|>", "<|pad|>", "<|user|>", "<|assistant|>", "<|system|>"]
THINK = ["<think>", "</think>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n<think>\n{% endif %}"
)
ROLLOUTS, PROMPT_TOKENS, NEW_TOKENS, TRAIN_STEPS = 64, 32, 48, 40


def corpus() -> list[str]:
    return [json.loads(line)["prompt"] for line in CORPUS.read_text().splitlines() if line]


def build_tokenizer(texts: list[str], out: Path) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS + THINK,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin|>",
        eos_token="<|end|>",
        pad_token="<|pad|>",
        model_max_length=CONTEXT,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def build_target(tokenizer: PreTrainedTokenizerFast, out: Path) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=CONTEXT,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.save_pretrained(out, safe_serialization=True)
    return model


@torch.no_grad()
def rollouts(model: LlamaForCausalLM, tokenizer, texts: list[str]) -> torch.Tensor:
    """The target's greedy continuations of the corpus' prompts: [ROLLOUTS, prompt + new]."""
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"][:PROMPT_TOKENS] for t in texts]
    ids = [i for i in ids if len(i) == PROMPT_TOKENS][:ROLLOUTS]
    batch = torch.tensor(ids)
    out = model.generate(
        batch,
        attention_mask=torch.ones_like(batch),
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id,
    )
    return out


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Llama's rotary embedding (rotate-half), x: [batch, heads, seq, head_dim]."""
    seq, dim = x.shape[-2], x.shape[-1]
    freqs = 1.0 / theta ** (torch.arange(0, dim, 2).float() / dim)
    angles = torch.outer(torch.arange(seq).float(), freqs)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    half = torch.cat([-x[..., dim // 2 :], x[..., : dim // 2]], -1)
    return x * cos + half * sin


class Eagle3Draft(torch.nn.Module):
    """SGLang's LlamaForCausalLMEagle3 forward (llama_eagle3.py), at training time."""

    def __init__(self):
        super().__init__()
        head = HIDDEN // HEADS
        lin = torch.nn.Linear
        self.fc = lin(len(AUX_LAYERS) * HIDDEN, HIDDEN, bias=False)
        self.q, self.k = (
            lin(2 * HIDDEN, HEADS * head, bias=False),
            lin(2 * HIDDEN, KV_HEADS * head, bias=False),
        )
        self.v, self.o = (
            lin(2 * HIDDEN, KV_HEADS * head, bias=False),
            lin(HEADS * head, HIDDEN, bias=False),
        )
        self.gate, self.up = lin(HIDDEN, FFN, bias=False), lin(HIDDEN, FFN, bias=False)
        self.down, self.lm_head = lin(FFN, HIDDEN, bias=False), lin(HIDDEN, DRAFT_VOCAB, bias=False)
        ones = lambda: torch.nn.Parameter(torch.ones(HIDDEN))  # noqa: E731
        self.hidden_norm, self.input_norm, self.post_norm, self.norm = (
            ones(),
            ones(),
            ones(),
            ones(),
        )

    def forward(self, embeds: torch.Tensor, aux: torch.Tensor, theta: float) -> torch.Tensor:
        batch, seq, _ = embeds.shape
        head = HIDDEN // HEADS
        residual = self.fc(aux)
        x = torch.cat([rms(embeds, self.input_norm), rms(residual, self.hidden_norm)], -1)

        def heads(t: torch.Tensor, n: int) -> torch.Tensor:
            return t.view(batch, seq, n, head).transpose(1, 2)

        q, k = rope(heads(self.q(x), HEADS), theta), rope(heads(self.k(x), KV_HEADS), theta)
        v = heads(self.v(x), KV_HEADS)
        k, v = (t.repeat_interleave(HEADS // KV_HEADS, dim=1) for t in (k, v))
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        residual = residual + self.o(attn.transpose(1, 2).reshape(batch, seq, HIDDEN))
        m = rms(residual, self.post_norm)
        residual = residual + self.down(torch.nn.functional.silu(self.gate(m)) * self.up(m))
        return self.lm_head(rms(residual, self.norm))

    def state(self, d2t: torch.Tensor, t2d: torch.Tensor) -> dict[str, torch.Tensor]:
        """The tensors under SGLang's checkpoint names (the legacy `midlayer.` prefix)."""
        bf = lambda t: t.detach().to(torch.bfloat16).contiguous()  # noqa: E731
        layer = {
            "hidden_norm.weight": self.hidden_norm,
            "input_layernorm.weight": self.input_norm,
            "post_attention_layernorm.weight": self.post_norm,
            "self_attn.q_proj.weight": self.q.weight,
            "self_attn.k_proj.weight": self.k.weight,
            "self_attn.v_proj.weight": self.v.weight,
            "self_attn.o_proj.weight": self.o.weight,
            "mlp.gate_proj.weight": self.gate.weight,
            "mlp.up_proj.weight": self.up.weight,
            "mlp.down_proj.weight": self.down.weight,
        }
        tensors = {f"midlayer.{k}": bf(v) for k, v in layer.items()}
        tensors |= {"fc.weight": bf(self.fc.weight), "norm.weight": bf(self.norm)}
        tensors |= {"lm_head.weight": bf(self.lm_head.weight), "d2t": d2t, "t2d": t2d}
        return tensors


@torch.no_grad()
def features(model: LlamaForCausalLM, seqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What SGLang feeds the drafter at each position i: the target's captured hidden states
    (the input of layer id + 1 for each aux id) and the embedding of token i + 1."""
    out = model(seqs, output_hidden_states=True)
    aux = torch.cat([out.hidden_states[i + 1] for i in AUX_LAYERS], -1).float()
    embeds = model.model.embed_tokens(seqs).float()
    return aux[:, :-2], embeds[:, 1:-1]


def draft_vocab(seqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The DRAFT_VOCAB most frequent target tokens of the rollouts: (draft->target ids, d2t
    offsets, t2d mask), as SGLang reads them (`hot_token_id = d2t + arange`)."""
    counts = torch.bincount(seqs.flatten(), minlength=VOCAB)
    hot = torch.sort(torch.argsort(counts, descending=True, stable=True)[:DRAFT_VOCAB]).values
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[hot] = True
    return hot, (hot - torch.arange(DRAFT_VOCAB)).to(torch.int64), t2d


def train(model: LlamaForCausalLM, seqs: torch.Tensor) -> tuple[Eagle3Draft, dict[str, float]]:
    hot, d2t, t2d = draft_vocab(seqs)
    to_draft = torch.full((VOCAB,), -100, dtype=torch.long)
    to_draft[hot] = torch.arange(DRAFT_VOCAB)
    aux, embeds = features(model, seqs)
    labels = to_draft[seqs[:, 2:]]  # position i predicts token i + 2
    labels[:, : PROMPT_TOKENS - 2] = -100  # drafts follow the target's text, not the prompt's
    split = seqs.shape[0] * 3 // 4
    theta = float(getattr(model.config, "rope_theta", None) or 10000.0)
    torch.manual_seed(0)
    draft = Eagle3Draft()
    opt = torch.optim.AdamW(draft.parameters(), lr=1e-2)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100)

    def accuracy(rows: slice) -> float:
        with torch.no_grad():
            logits = draft(embeds[rows], aux[rows], theta)
        mask = labels[rows] != -100
        return float((logits.argmax(-1) == labels[rows])[mask].float().mean())

    before = accuracy(slice(split, None))
    for _ in range(TRAIN_STEPS):
        opt.zero_grad()
        logits = draft(embeds[:split], aux[:split], theta)
        loss = loss_fn(logits.reshape(-1, DRAFT_VOCAB), labels[:split].reshape(-1))
        loss.backward()
        opt.step()
    stats = {"held_out_top1_before": before, "held_out_top1_after": accuracy(slice(split, None))}
    draft.d2t, draft.t2d = d2t, t2d
    return draft, stats | {"final_loss": loss.item(), "steps": TRAIN_STEPS}


def write_drafter(draft: Eagle3Draft, target: LlamaForCausalLM, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    save_file(draft.state(draft.d2t, draft.t2d), str(out / "model.safetensors"))
    t = target.config
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "target_hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HIDDEN // HEADS,
        "hidden_act": "silu",
        "rms_norm_eps": t.rms_norm_eps,
        "rope_theta": float(getattr(t, "rope_theta", None) or 10000.0),
        "max_position_embeddings": CONTEXT,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": t.bos_token_id,
        "eos_token_id": t.eos_token_id,
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": AUX_LAYERS,
            "use_aux_hidden_state": True,
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for target/ and drafter/")
    args = parser.parse_args(argv)
    started = time.monotonic()
    torch.set_num_threads(2)
    tmp = args.out.with_name(args.out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    texts = corpus()
    tokenizer = build_tokenizer(texts, tmp / "target")
    target = build_target(tokenizer, tmp / "target")
    seqs = rollouts(target, tokenizer, texts)
    draft, stats = train(target, seqs)
    write_drafter(draft, target, tmp / "drafter")
    stats |= {"rollouts": list(seqs.shape), "build_s": round(time.monotonic() - started, 1)}
    stats = {
        k: round(v, 4) if isinstance(v, float) and not math.isnan(v) else v
        for k, v in stats.items()
    }
    (tmp / "build.json").write_text(json.dumps(stats, indent=2) + "\n")
    shutil.rmtree(args.out, ignore_errors=True)
    tmp.rename(args.out)  # all or nothing: a half-built folder is never taken for a built one
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
