"""Constants the performance model is built from, each with where it comes from.

References are to shared/reference/: seed-figures.md (the users' hand measurements on
8x RTX PRO 6000, the calibration target), speculative-performance.md (published numbers) and
sglang.md (SGLang's memory formulas). Each constant says which it is:

- "fitted: <figure>": solved so the model meets that figure, by benchmarks/_calibration.py
  (`python benchmarks/sim_calibration.py --fit` refits from the estimates; a unit test holds the
  shipped values to it). A fitted figure says nothing about the model's accuracy; the held-out
  figures there do (docs/simulator-model.md, "Calibration: fit and held-out");
- "estimate": arithmetic from public specs or a stated judgement, with a plausible range;
- "rule": derived from other constants, the rule named;
- "assumption": a deployment choice (host RAM, ...), not a property of the hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

MIB = 1024 * 1024


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    # The GPU's architecture as SGLang tells GPUs apart (harness.sglang.attention: the attention
    # backend it picks by default): "sm90" Hopper, "sm120" the RTX PRO 6000 Blackwell.
    compute: str
    gpu_memory_mib: float  # per GPU, as the driver reports it
    hbm_gb_s: float  # memory bandwidth per GPU
    allreduce_latency_us: float  # small-message allreduce across the TP group, tuned NCCL
    untuned_nccl_factor: float  # latency multiplier without the seeds' NCCL settings
    bus_gb_s: float  # effective allreduce bus bandwidth for large messages
    tflops: float  # effective dense throughput per GPU for the MoE/attention GEMMs
    kernel_us_per_layer: float  # launch-bound kernel time per target layer (CUDA graphs on)
    eager_us_per_layer: float  # extra per-layer launch cost without CUDA graphs
    host_step_ms: float  # scheduler + sampling host time per decode step, overlap on
    host_step_no_overlap_ms: float  # same with --disable-overlap-schedule
    host_ram_gb: float  # host memory available for the HiCache pool
    draft_host_ms: float  # per draft step: top-k, tree bookkeeping, syncs of the EAGLE worker
    spec_host_ms: float  # per verify iteration, overlap scheduler on (current default)
    spec_host_no_overlap_ms: float  # per verify iteration, --disable-overlap-schedule
    activation_mib: float  # non-static memory besides CUDA graphs (activations, NCCL, torch)
    verify_token_us: float  # per verified draft token: tree mask, 160K-vocab logits, sampling
    # HiCache's host<->device copies per GPU (pinned memory, one direction): PCIe Gen5 x16 is
    # 64 GB/s raw per direction; pinned cudaMemcpy reaches ~50 GB/s of it in practice.
    host_link_gb_s: float
    # Share of HBM bandwidth the decode/verify attention reaches reading the KV cache (every
    # profile states its own).
    attention_efficiency: float
    # Latency-bound kernel time per target forward that kernel_us_per_layer (fitted on a dense
    # Llama layer) does not carry: at batch 1 an MoE layer's fused expert kernels (alignment, two
    # grouped GEMMs, activation, sum) and MLA's projection kernels take tens of us each where
    # their bytes take a few (ARCH_WORK below: a property of the target on an architecture).
    forward_latency_ms: float = 0.0
    # Cost shapes for the search family's "shapes" part (harness.sim.model.shapes): not calibrated,
    # off by default (every named profile leaves them so). Each threshold in verify_bucket_tokens
    # the draft tokens exceed adds verify_bucket_ms per iteration; verify_token_exponent > 1 makes
    # the per-token verify cost grow with the draft tokens; draft_candidate_us is paid per
    # candidate node the draft tree scores (1 + topk + (steps-1) * topk**2 per iteration).
    verify_bucket_ms: float = 0.0
    verify_bucket_tokens: tuple[int, ...] = (8, 16)
    verify_token_exponent: float = 1.0
    draft_candidate_us: float = 0.0


# 8x RTX PRO 6000 Blackwell (96 GB GDDR7, PCIe Gen5, no NVLink): the seeds' box.
RTX_PRO_6000_PCIE = HardwareProfile(
    name="rtx_pro_6000_pcie",
    compute="sm120",
    gpu_memory_mib=97_887,  # 96 GB card (estimate from the product's 96 GB capacity)
    hbm_gb_s=1_792,  # product spec, GDDR7 512-bit
    # fitted: seed row 2 (90.0 tok/s with NCCL_PROTO=LL, NCCL_ALGO=Ring, NCCL_P2P_LEVEL=SYS): with
    # 61 layers x 2 allreduces it carries ~5.7 ms of the 11.1 ms step. Plausible 30-60 us: an
    # 8-rank ring of a 14 KB message over PCIe switches, a few us per hop.
    allreduce_latency_us=47.0,
    # estimate: NCCL's default protocol on PCIe without P2P hints; makes the untuned baseline
    # ~72 tok/s, below vLLM's 82.5 (seed row 1) as the seeds' tuning story implies.
    untuned_nccl_factor=1.45,
    bus_gb_s=20.0,  # estimate: PCIe Gen5 x16 ring allreduce bus bandwidth
    tflops=180.0,  # estimate: INT4-weight / BF16-activation grouped GEMMs, well below peak
    kernel_us_per_layer=30.0,  # estimate: ~15 launch-bound kernels per layer at ~2 us each
    eager_us_per_layer=247.0,  # fitted: seed row 4 (no CUDA graphs, 53.2 tok/s)
    host_step_ms=1.05,  # estimate: scheduler + sampling per step (plausible 0.5-2 ms)
    host_step_no_overlap_ms=1.9,  # estimate: SGLang reports 5-10% from overlap (PR #9588)
    host_ram_gb=1_024.0,  # assumption: the seeds ran --hicache-size 48 x TP 8 = 384 GB fine
    draft_host_ms=0.8,  # estimate: top-k, tree bookkeeping and syncs per draft step (0.3-1.5)
    # fitted with verify_token_us: seed rows 8 (2/2/5, 81.7 tok/s) and 6 (4/4/16, 74.9); the
    # seeds' SGLang ran EAGLE without the overlap scheduler.
    spec_host_no_overlap_ms=7.98,
    # rule (benchmarks/_calibration.py): the no-overlap time less what overlap hides of a plain
    # decode step (1.9 - 1.05 ms); overlap hides host work, it cannot add any.
    spec_host_ms=7.13,
    # estimate, inside what the seeds' memory table allows: 0.88 starts and 0.93 OOMs.
    activation_mib=6_300.0,
    verify_token_us=450.0,  # fitted with spec_host_no_overlap_ms: seed rows 8 and 6
    host_link_gb_s=50.0,  # estimate: PCIe Gen5 x16, ~50 GB/s effective of 64 GB/s
    # fitted: the seeds' data-generation row (0.88 + HiCache 48: ~600 tok/s server-reported at
    # 35 running, token usage 0.94; benchmarks/_datagen.py). Plausible 0.2-0.9: a Triton MLA
    # decode on sm120 is 2.2-3.7x slower than FlashInfer's native kernel (SGLang PR #27455);
    # FlashInfer's FA2-style MLA decode reaches 50-94% (flashinfer PR #551). The fit sits at the
    # low end; the seeds do not say which backend ran.
    attention_efficiency=0.314,
)

# 8x H200 (141 GB HBM3e, NVLink/NVSwitch): SGLang's reference box for Kimi-K2.5. One figure is
# measured here (the cookbook's TPOT, 9.22 ms at concurrency 1, 1K in / 1K out), so every
# constant but forward_latency_ms is an estimate or a rule. Its ARCH_WORK fields are Kimi-K2.5's
# on Hopper: the H100 takes them when it runs Kimi-K2.5.
H200_NVLINK = HardwareProfile(
    name="h200_nvlink",
    compute="sm90",
    gpu_memory_mib=143_771,  # reference/sglang.md section 2 (the value SGLang's formulas use)
    hbm_gb_s=4_800,  # product spec
    allreduce_latency_us=20.0,  # estimate: NVSwitch one-shot custom allreduce, small messages
    untuned_nccl_factor=1.0,  # NVLink: the PCIe NCCL settings do not matter
    bus_gb_s=300.0,  # estimate: NVLink ring allreduce bus bandwidth
    tflops=600.0,  # estimate: well below the 989 TFLOPS BF16 peak
    kernel_us_per_layer=23.1,  # rule: the H100's fitted value (same Hopper generation)
    # fitted: the cookbook's 9.22 ms TPOT; the other terms explain 5.8 ms of it. Kimi-K2.5's
    # MoE + MLA layers on Hopper (ARCH_WORK): 3.44 ms is 56 us per layer, where a fused MoE at
    # batch 1 alone takes ~30 us on an H200 (sgl-project/sglang#11730: Qwen3-235B FP8, TP 8,
    # 31.7 us) and on an H100 (vllm-project/vllm#44830: Qwen3-Next-80B FP8, TP 4, 29.5 us) while
    # its bytes take ~5 us: latency, not bandwidth. Charged once per target forward (decode or
    # verify), which is what speculation amortises, so H200 verdicts lean on it
    # (docs/simulator-model.md, "What the H200 verdicts lean on").
    forward_latency_ms=3.44,
    eager_us_per_layer=160.0,  # estimate
    host_step_ms=1.05,  # estimate, as the PCIe box
    host_step_no_overlap_ms=1.9,  # estimate, as the PCIe box
    host_ram_gb=2_048.0,  # assumption: a typical 8x H200 node
    draft_host_ms=0.5,  # estimate: the same worker, faster host-device syncs over NVLink
    spec_host_ms=3.0,  # estimate: speculative-performance.md section 5 (K2.5 ~1.9-2.5x at C=1)
    spec_host_no_overlap_ms=5.0,  # estimate
    activation_mib=7_500.0,  # estimate: larger activations/graphs budget on a 141 GB GPU
    verify_token_us=200.0,  # estimate
    host_link_gb_s=50.0,  # estimate: the H200's host link is PCIe Gen5 x16 too
    # estimate: the middle of what FA2-style MLA decode reaches (50-94%, flashinfer PR #551);
    # FlashMLA's ~3,000 GB/s on an H800 would be ~0.9.
    attention_efficiency=0.7,
)

# 1x H100 SXM (80 GB HBM3): the EAGLE-3 paper's SGLang box (speculative-performance.md section 3,
# Table 4: Llama-3.1-8B, MT-bench, batch 1: 158.34 tok/s baseline, 373.25 tok/s with EAGLE-3).
# TP 1, so allreduce and NCCL settings do not enter. Its ARCH_WORK fields are Llama-3.1-8B's on
# Hopper: the H200 takes them when it runs Llama-3.1-8B.
H100_SXM = HardwareProfile(
    name="h100_sxm",
    compute="sm90",
    gpu_memory_mib=81_559,  # 80 GB card as the driver reports it
    hbm_gb_s=3_350,  # product spec
    # rule: the H200's estimate. HGX H100 and HGX H200 boards share one fabric (NVLink 4 through
    # third-generation NVSwitch, 900 GB/s per GPU), so a small allreduce costs the same on both.
    allreduce_latency_us=20.0,
    untuned_nccl_factor=1.0,
    bus_gb_s=300.0,
    tflops=600.0,  # estimate: well below the 989 TFLOPS BF16 peak
    # fitted: 158.34 tok/s (6.32 ms per step): what the weights (15.0 GB at 3.35 TB/s), host
    # time and attention leave over 32 layers. Plausible 10-30 us: launch-bound small kernels.
    kernel_us_per_layer=23.1,
    # estimate: SGLang PR #1401 measured Llama-3-8B at 9.28 -> 7.06 ms/token with CUDA graphs.
    eager_us_per_layer=69.0,
    host_step_ms=1.05,  # estimate
    host_step_no_overlap_ms=1.5,  # estimate
    host_ram_gb=1_024.0,  # assumption: a typical H100 server
    draft_host_ms=0.3,  # estimate
    spec_host_ms=1.05,  # rule: spec_host_no_overlap_ms less (1.5 - 1.05), as on the PCIe box
    spec_host_no_overlap_ms=1.5,  # estimate: SGLang v0.4.4 (the paper's) ran EAGLE without overlap
    activation_mib=4_000.0,  # estimate: 8B activations, torch and NCCL buffers
    verify_token_us=30.0,  # estimate: 128K-vocab logits and tree mask on one H100
    host_link_gb_s=50.0,  # estimate: PCIe Gen5 x16
    attention_efficiency=0.7,  # estimate, as the H200 (FlashInfer's GQA decode)
)

HARDWARE = {p.name: p for p in (RTX_PRO_6000_PCIE, H200_NVLINK, H100_SXM)}

# What SGLang's work on a target costs on a GPU architecture, beyond what a box's GPUs and links
# set (bytes at its bandwidth, FLOPs, collectives): host time per step and per speculative
# iteration, the verify cost per draft token, eager launches and the latency-bound kernels of the
# target's layers. Each (target, architecture) has them estimated or fitted on one box, named
# here; another box of that architecture running that target takes that box's values (the same
# SMs, clocks, kernels and host path), so two Hopper boxes differ only where their GPUs differ.
ARCH_WORK_FIELDS = (
    "forward_latency_ms",
    "eager_us_per_layer",
    "host_step_ms",
    "host_step_no_overlap_ms",
    "draft_host_ms",
    "spec_host_ms",
    "spec_host_no_overlap_ms",
    "verify_token_us",
)
ARCH_WORK = {("kimi_k25", "sm90"): "h200_nvlink", ("llama31_8b", "sm90"): "h100_sxm"}


def for_target(
    hw: HardwareProfile, target_name: str, boxes: dict[str, HardwareProfile] = HARDWARE
) -> HardwareProfile:
    """`hw` as it runs `target_name`: the ARCH_WORK fields from the box they were estimated on
    for that target on `hw`'s architecture (`hw` itself where none is named)."""
    source = ARCH_WORK.get((target_name, hw.compute))
    if source is None or source == hw.name:
        return hw
    return replace(hw, **{f: getattr(boxes[source], f) for f in ARCH_WORK_FIELDS})


@dataclass(frozen=True)
class TargetProfile:
    name: str
    architecture: str  # config.json architectures[0]; picks SGLang's auto speculative params
    layers: int
    moe_layers: int
    hidden: int
    experts: int
    experts_per_token: int
    expert_bytes: float  # one routed expert, all shards together
    shared_bytes_per_layer: float  # attention + shared expert (+ dense FFN averaged in)
    lm_head_bytes: float
    active_params: float
    kv_bytes_per_token: int  # per TP rank (MLA latent KV is replicated on every rank)
    weights_mib_total: float  # resident weights over all GPUs (divided by TP per GPU)
    expert_correlation: float  # rho: N tokens touch experts like N**rho independent tokens
    load_s: float  # weights from page cache + KV allocation + CUDA-graph capture
    context_length: int


KIMI_K25 = TargetProfile(
    name="kimi_k25",
    architecture="KimiK25ForConditionalGeneration",
    layers=61,  # speculative-performance.md §7
    moe_layers=60,
    hidden=7168,
    experts=384,
    experts_per_token=8,
    # estimate: 3 x 7168 x 2048 params at INT4 with group-32 scales (~4.5 bits)
    expert_bytes=3 * 7168 * 2048 * 0.5625,
    # estimate: MLA attention ~101M params + shared expert 44M params, BF16
    shared_bytes_per_layer=(101e6 + 44e6) * 2,
    lm_head_bytes=163_840 * 7168 * 2,
    active_params=32.9e9,
    kv_bytes_per_token=70_272,  # (512 + 64) x 61 x 2 B, speculative-performance.md §6
    # calibrated: 0.85 x 97,887 MiB leaves 116,171 KV tokens with the drafter's KV (seed table)
    # after the 100 MiB that SGLang 0.5.23 keeps back from a multimodal model's KV budget
    # (harness.sglang.memory; the seeds do not say their version: fitted without that
    # reservation this was 74,841, so 0.5.23's token counts are the same either way)
    weights_mib_total=74_741 * 8,
    expert_correlation=0.66,  # Cohere: verifying 4 tokens reads ~2.5x unique experts, not 4x
    load_s=90.0,  # estimate: ~75 GB/GPU from page cache + graph capture; cold loads take longer
    context_length=262_144,
)

# Llama-3.1-8B-Instruct, BF16, dense: the single-GPU profile (1x H100, TP 1). A dense model is
# one "shared" block per layer and no routed experts.
LLAMA31_8B = TargetProfile(
    name="llama31_8b",
    architecture="LlamaForCausalLM",  # SGLang's auto speculative params: (5, 4, 8)
    layers=32,
    moe_layers=0,
    hidden=4096,
    experts=1,
    experts_per_token=1,
    expert_bytes=0.0,
    # config.json: 8.03B params, of which embeddings and lm_head are 128,256 x 4,096 each
    shared_bytes_per_layer=(8.03e9 - 2 * 128_256 * 4096) * 2 / 32,
    lm_head_bytes=128_256 * 4096 * 2,
    active_params=8.03e9,
    kv_bytes_per_token=32 * 8 * 128 * 2 * 2,  # 32 layers x 8 KV heads x 128 x K,V x BF16
    weights_mib_total=8.03e9 * 2 / MIB,
    expert_correlation=1.0,  # no experts
    load_s=25.0,  # estimate: 16 GB from page cache + graph capture on one GPU
    context_length=131_072,
)

TARGETS = {p.name: p for p in (KIMI_K25, LLAMA31_8B)}


# Sampled acceptance: each draft token's acceptance probability a_k is multiplied by
# 1 - SAMPLED_ACCEPT_DROP * temperature (perf_model.sampled_acceptance). calibrated: the EAGLE-3
# paper's Table 1 (speculative-performance.md section 3.1) has tau at temperature 1 4-21% below
# temperature 0 (Vicuna-13B 6.62 -> 5.67, LLaMA-3.1-8B 6.23 -> 4.92, LLaMA-3.3-70B 5.88 -> 5.66,
# DSR1-Distill-8B 5.84 -> 4.89: -14% on average) at tree depth 8; 6% off every a_k takes 14-18% off
# tau on a depth-8 chain at a = 0.8-0.9. Linear in temperature between 0 and 1 is an assumption
# (the paper measures only the two ends), and so is extending it to temperature 2.
SAMPLED_ACCEPT_DROP = 0.06


@dataclass(frozen=True)
class DrafterProfile:
    """Acceptance of one drafter on its target, as per-position probabilities.

    a_k = first_accept * depth_decay**(k-1) is the chance that the top-1 draft at depth k is
    right given the path so far; each extra sibling catches (1 - sibling_residual) of what is
    left; long outputs lower every a_k by 1 / (1 + position / long_context_tokens).

    The last four fields are acceptance shapes for the search family's "shapes" part
    (harness.sim.model.shapes), not calibrated; their defaults turn them off and every named
    drafter leaves them so: depth_shape (per-depth multipliers on first_accept in place of the
    geometric decay; empty: geometric), depth_fade (deeper drafts fade faster over the output;
    0: one fade for every depth), sibling_residuals (a sibling residual per depth; empty: the
    shared sibling_residual) and sibling_rank_power (later siblings catch less; 0: each catches
    the same share).
    """

    name: str
    kind: str  # "eagle3" drafters need --speculative-algorithm EAGLE3
    first_accept: float
    depth_decay: float
    sibling_residual: float
    long_context_tokens: float
    weights_mib_per_gpu: float
    kv_bytes_per_token: int  # per TP rank
    depth_shape: tuple[float, ...] = ()
    depth_fade: float = 0.0
    sibling_residuals: tuple[float, ...] = ()
    sibling_rank_power: float = 0.0


# calibrated: the seeds' memory table (116,171 tokens at 0.85, 159,277 at 0.88) puts the whole KV
# cell at ~71,430 B per token per rank; the target's MLA cache is 70,272 B of it, which leaves
# ~1.1 KB for the draft layer's KV per rank (e.g. 4.5 KV heads of 128 x K,V x BF16 over TP 8).
_EAGLE3_KV = 1_152

# The seeds' first drafter, trained on 10K samples (TTT 1). fitted: first_accept to seed row 8's
# accept length (2.27 at 2/2/5, ~1K-token outputs). estimate: depth_decay 0.88 (a TTT-1 drafter
# never trained on its own drafts loses more with depth than a TTT-5 one), sibling_residual 0.85
# (a second branch catches 15% of what the first missed).
EAGLE3_10K = DrafterProfile("eagle3_10k", "eagle3", 0.768, 0.88, 0.85, 8_000, 450, _EAGLE3_KV)
# The 37K-sample drafter trained with TTT=5. fitted: first_accept to seed rows 12/3 (3/1/4 with
# the overlap worker at 0.951x the baseline of the same stack); its training reported 74.7%
# next-token accuracy (~0.75 here), the deployed value is lower, as the seeds found (seed 003).
# estimate: depth_decay 0.93 (TTT holds acceptance with depth), sibling_residual 0.85.
EAGLE3_37K_TTT5 = DrafterProfile(
    "eagle3_37k_ttt5", "eagle3", 0.664, 0.93, 0.85, 10_000, 450, _EAGLE3_KV
)
# AQ-MedAI's drafter trained for Kimi-K2-Instruct, used on K2.5. fitted: first_accept to seed
# row 5 (50.5 tok/s without CUDA graphs, row 4's configuration assumed). estimate: the rest.
AQ_MEDAI_K2 = DrafterProfile("aq_medai_k2", "eagle3", 0.757, 0.85, 0.88, 6_000, 450, _EAGLE3_KV)

# lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B on MT-bench-like prompts. fitted: first_accept to
# 373.25 tok/s at 5/8/32 (the SGLang docs' EAGLE-3 example of the paper's era; Table 4).
# estimate: depth_decay 0.97 (the paper's Fig. 7: EAGLE-3's acceptance stays almost flat with
# depth), sibling_residual 0.79. Held out: the paper's tau 6.13 for its depth-8, 60-node tree,
# which this profile overshoots (docs/simulator.md).
# ~0.4B params (1 layer + fc 3x4096->4096 + 32K-vocab head) in BF16; KV of 1 layer, 8 heads.
EAGLE3_LLAMA31_8B = DrafterProfile(
    "eagle3_llama31_8b", "eagle3", 0.866, 0.97, 0.55, 20_000, 760, 1 * 8 * 128 * 2 * 2
)

DRAFTERS = {p.name: p for p in (EAGLE3_10K, EAGLE3_37K_TTT5, AQ_MEDAI_K2, EAGLE3_LLAMA31_8B)}
