"""Performance model of the simulated SGLang server.

All times are seconds of the simulated clock. Constants live in `profiles` with their sources.

Target forward of B requests with n tokens each (n = 1 for a decode step, n = draft tokens for a
verify pass); N = B*n tokens, L layers, g = TP size:

    T_fwd(B, n) = L * (2 * t_ar(N) + t_kernel) + t_weights(N) + t_flops(N) + t_attn(B, ctx) + t_host
    t_ar(N)     = t_ar0 * f_nccl + 2 (g-1)/g * N * hidden * 2 B / bus_bw        (ring allreduce)
    t_weights(N)= [L * shared + L_moe * E * (1 - (1 - k/E)^(N^rho)) * expert + lm_head] / g / hbm
    t_flops(N)  = 2 * active_params * N / g / tflops
    t_attn      = B * ctx * kv_bytes / (hbm * e_attn)    (MLA latent KV read per step; e_attn the
                                                          kernel's share of HBM bandwidth)
    t_kernel    = kernel_us (+ eager_us where the step runs eager: see Graphs below)
    t_host      = host step time + r (r: latency-bound kernel time of the target's layers
                                      beyond t_kernel, profiles.forward_latency_ms)

The expert term is the unique experts N routed tokens touch; rho < 1 because consecutive tokens
of one request route alike (Cohere measured ~2.5x the bytes for 4 verify tokens, not 4x). The
costs of SGLang's work on the target (host times, the verify cost, eager launches, r) are those
measured for that target on the box's architecture (`profiles.for_target`, `ARCH_WORK`), so two
boxes of one architecture differ only where their GPUs and links do.

Speculative iteration (EAGLE/EAGLE3, `steps` draft steps, `topk` branches, `D` draft tokens):

    T_spec(B) = T_fwd(B, D) + steps * T_draft(B * topk) + T_draft(B * D) + H_spec + (D-1) * v
    T_draft(M)= 2 * t_ar(M) + 3 * t_kernel + draft weights / hbm + draft_host

with T_draft(B * D) the draft-extend pass over the verified tokens and H_spec the worker's host
time per iteration (smaller with the overlap scheduler) and v the per-draft-token verify cost
(tree mask, logits over the 160K vocabulary, rejection sampling). Baseline decode is T_fwd(B, 1).

Graphs (SGLang 0.5.23, harness.sglang.graphs): a decode or verify step of B running requests
replays the CUDA graph of P = the smallest captured batch size >= B (the sizes count requests; a
verify graph holds P * D token rows), so T_fwd, T_draft and the allreduces above run at P: the
P - B padding rows cost every GEMM, expert read and allreduce a real row does, and attend to one
token (the backends' seq_len fill value), so t_attn counts the B real rows. The step cost is
then a staircase in B with its jumps at the captured sizes. Above the largest captured size (or
with graphs off) the step runs eager at B, eager_us per layer added. Prefill is not padded.

Tokens per request per iteration: tau = 1 + sum_k prod_{j<=k} q_j, with the tree's nodes per
depth n_k allocated greedily from the budget D - 1 (at most topk at depth 1, topk^2 deeper) and

    q_k = 1 - (1 - a_k * m(pos) * f) * residual^(n_k - 1),   a_k = a_1 * decay^(k-1)
    m(pos) = 1 / (1 + pos / long_context_tokens)              (drafters fade on long outputs)
             * (1 - X) ** (pos / 1000)                   (--sim-accept-decay X, default 0)

f is a per-prompt factor (easy math/code vs hard text) times the sampling factor
s(T) = 1 - SAMPLED_ACCEPT_DROP * T: sampled requests accept fewer drafts than greedy ones.
The profiles' shape fields (`shapes`: per-depth multipliers in place of the decay, a faster
fade for deeper drafts, per-depth or rank-falling sibling residuals, verify-cost buckets and
growth, per-candidate tree bookkeeping) change these forms; their defaults leave them as above.
`--speculative-algorithm EAGLE` with an EAGLE-3 drafter gets a_k = 0: the drafter is bypassed and
every draft is rejected (seed row 13).

Memory per GPU (SGLang: mem_fraction_static = (weights + KV pool) / GPU memory):

    KV pool   = mem_fraction * gpu_mem - weights/g - draft weights - multimodal reserve
    KV tokens = KV pool / (target KV/token + draft KV/token)
    needed    = activations + [graphs: 300 MiB + 1.6 MiB * bs * n + 0.8 MiB * bs * topk * steps]
    OOM when needed > (1 - mem_fraction) * gpu_mem (CUDA-graph capture fails), "Loaded weights
    leave no GPU memory" when the KV pool is not positive, "Not enough memory" when it is empty,
    and the OOM killer when HiCache * TP exceeds host RAM.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from harness.sglang import graphs
from harness.sim.model import shapes
from harness.sim.model.profiles import (
    MIB,
    SAMPLED_ACCEPT_DROP,
    DrafterProfile,
    HardwareProfile,
    TargetProfile,
    for_target,
)


def sampled_acceptance(temperature: float) -> float:
    """The factor on every draft token's acceptance probability at `temperature` (1 greedy):
    under sampling, verification accepts a draft by rejection sampling against the target's
    distribution instead of by matching its argmax, and accepts less (profiles,
    SAMPLED_ACCEPT_DROP)."""
    return 1.0 - SAMPLED_ACCEPT_DROP * min(max(temperature, 0.0), 2.0)


@dataclass(frozen=True)
class Speculation:
    algorithm: str  # EAGLE or EAGLE3 (after SGLang's NEXTN -> EAGLE alias)
    steps: int
    topk: int
    draft_tokens: int
    drafter: DrafterProfile
    accept_decay: float = 0.0  # --sim-accept-decay: fraction lost per 1000 output tokens


@dataclass(frozen=True)
class Deployment:
    tp: int
    cuda_graph: bool
    overlap: bool
    nccl_tuned: bool
    hicache_size_gb: int
    graph_max_bs: int  # the largest decode batch captured (what the graphs' memory scales with)
    speculation: Speculation | None
    # KV budget kept back for a multimodal model's embedding cache (0.5.23
    # SGLANG_VLM_CACHE_SIZE_MB, harness.sglang.memory), at any mem_fraction_static
    kv_reserve_mib: float = 0.0
    device: str = "cuda"  # --device: names the batch lines' graph label ("cpu graph")
    # the decode batch sizes captured (harness.sglang.graphs.decode_batch_sizes); empty: SGLang's
    # listed sizes up to graph_max_bs
    graph_bs: tuple[int, ...] = ()


@dataclass(frozen=True)
class MemoryPlan:
    gpu_mib: float
    static_mib: float
    weights_mib: float
    kv_pool_mib: float
    kv_tokens: int
    non_static_mib: float  # what activations + graphs need
    graph_mib: float
    # None, "kv_pool" (too low), "no_kv_room" (the weights fill the static budget: 0.5.23's
    # "Loaded weights leave no GPU memory"), "graph_oom" (too high), "host_oom"
    failure: str | None
    host_needed_gb: float
    pool_note: str | None = None  # SGLang's warning when --max-total-tokens exceeds the pool

    def capped(self, max_total_tokens: int | None) -> MemoryPlan:
        """The pool under --max-total-tokens, as 0.5.23 applies it
        (kv_cache_configurator.py _apply_token_constraints): the smaller of the two, with a
        warning when the cap is the larger."""
        if max_total_tokens is None or self.failure is not None or self.kv_tokens <= 0:
            return self
        if max_total_tokens > self.kv_tokens:
            note = (
                f"max_total_tokens={max_total_tokens} is larger than the profiled value "
                f"{self.kv_tokens}. Use the profiled value instead."
            )
            return replace(self, pool_note=note)
        share = max_total_tokens / self.kv_tokens
        return replace(self, kv_tokens=max_total_tokens, kv_pool_mib=self.kv_pool_mib * share)


CUDA_GRAPH_FIXED_MIB = 300  # once per server, whatever it captures


def cuda_graph_mib(
    graph_max_bs: int, spec: Speculation | None, fixed_mib: float = CUDA_GRAPH_FIXED_MIB
) -> float:
    """The memory the CUDA graphs of one configuration take (`spec`; None: no speculation),
    captured up to `graph_max_bs`, with `fixed_mib` on top (the module docstring's Memory):

        fixed + 1.6 MiB * bs * tokens per request + 0.8 MiB * bs * topk * steps

    An adaptive server captures every candidate's graphs at start-up; those past the launch's
    share its fixed part (`fixed_mib=0`, harness.sim.model.adaptive)."""
    per_req = spec.draft_tokens if spec else 1
    mib = fixed_mib + 1.6 * graph_max_bs * per_req
    if spec:
        mib += 0.8 * graph_max_bs * spec.topk * spec.steps
    return mib


class PerfModel:
    def __init__(self, hw: HardwareProfile, target: TargetProfile, deployment: Deployment):
        self.hw = for_target(hw, target.name)
        self.target = target
        self.dep = deployment
        self.spec = deployment.speculation
        self.levels = self._tree_levels() if self.spec else []
        # the decode batch sizes captured as CUDA graphs, ascending (empty: none, all eager)
        self.captured: list[int] = []
        if deployment.cuda_graph:
            self.captured = list(deployment.graph_bs) or graphs.decode_batch_sizes(
                deployment.graph_max_bs, self.spec is not None
            )

    def at_steps(self, steps: int) -> PerfModel:
        """The same deployment with the chain drafter at `steps` (topk 1, steps + 1 draft tokens;
        0: drafting off, a 1-token verify plus the draft extend): an adaptive server's runtime
        state for that candidate (harness.sim.model.adaptive)."""
        assert self.spec is not None
        spec = replace(self.spec, steps=steps, topk=1, draft_tokens=steps + 1)
        return PerfModel(self.hw, self.target, replace(self.dep, speculation=spec))

    # -- time ----------------------------------------------------------------------------------
    def _allreduce_s(self, tokens: int) -> float:
        g = self.dep.tp
        if g == 1:
            return 0.0
        latency = self.hw.allreduce_latency_us * 1e-6
        if not self.dep.nccl_tuned:
            latency *= self.hw.untuned_nccl_factor
        volume = 2 * (g - 1) / g * tokens * self.target.hidden * 2
        return latency + volume / (self.hw.bus_gb_s * 1e9)

    def _kernel_s(self, eager: bool) -> float:
        us = self.hw.kernel_us_per_layer + (self.hw.eager_us_per_layer if eager else 0)
        return us * 1e-6

    def target_forward_s(
        self,
        batch: int,
        tokens_per_req: int,
        context: int,
        *,
        eager: bool | None = None,
        attended: int | None = None,
    ) -> float:
        """`batch` rows of `tokens_per_req` tokens; `attended` of them (default all) read
        `context` tokens of KV: a captured graph's padding rows run every GEMM and allreduce
        but attend to one token (the backends' `get_cuda_graph_seq_len_fill_value`, 1).
        `eager` None: eager exactly when the launch captures no graphs."""
        t, g, n = self.target, self.dep.tp, batch * tokens_per_req
        eager = not self.dep.cuda_graph if eager is None else eager
        experts = t.experts * (
            1 - (1 - t.experts_per_token / t.experts) ** (n**t.expert_correlation)
        )
        weight_bytes = (
            t.layers * t.shared_bytes_per_layer + t.moe_layers * experts * t.expert_bytes
        ) + t.lm_head_bytes
        weights_s = weight_bytes / g / (self.hw.hbm_gb_s * 1e9)
        flops_s = 2 * t.active_params * n / g / (self.hw.tflops * 1e12)
        readers = batch if attended is None else attended
        attn_s = readers * context * t.kv_bytes_per_token / (self.hw.hbm_gb_s * 1e9)
        attn_s /= self.hw.attention_efficiency
        host_s = 1e-3 * (
            self.hw.host_step_ms if self.dep.overlap else self.hw.host_step_no_overlap_ms
        )
        layers_s = t.layers * (2 * self._allreduce_s(n) + self._kernel_s(eager))
        if self.dep.hicache_size_gb > 0:
            # SGLang issue #26305: HiCache on an MLA model regressed TPOT; a small tax here.
            layers_s *= 1.02
        latency_s = self.hw.forward_latency_ms * 1e-3
        return layers_s + weights_s + flops_s + attn_s + host_s + latency_s

    def _draft_forward_s(self, tokens: int, eager: bool) -> float:
        assert self.spec is not None
        weights_s = self.spec.drafter.weights_mib_per_gpu * MIB / (self.hw.hbm_gb_s * 1e9)
        return (
            2 * self._allreduce_s(tokens)
            + 3 * self._kernel_s(eager)
            + weights_s
            + self.hw.draft_host_ms * 1e-3
        )

    def graph_batch(self, batch: int) -> int | None:
        """The captured batch size a decode (verify) step of `batch` requests replays, or None
        where it runs eager (harness.sglang.graphs.padded_batch)."""
        return graphs.padded_batch(batch, self.captured)

    def decode_step_s(self, batch: int, context: int) -> float:
        """One scheduler iteration for `batch` running requests at mean context `context`: the
        target's decode (verify) pass and the draft's passes at the captured batch size the
        batch pads to (its padding rows computed like real ones), or eager at `batch` above
        the largest captured size (the module docstring's Graphs)."""
        padded = self.graph_batch(batch)
        rows, eager = (batch, True) if padded is None else (padded, False)
        if self.spec is None:
            return self.target_forward_s(rows, 1, context, eager=eager, attended=batch)
        s = self.spec
        host = self.hw.spec_host_ms if self.dep.overlap else self.hw.spec_host_no_overlap_ms
        return (
            self.target_forward_s(rows, s.draft_tokens, context, eager=eager, attended=batch)
            + s.steps * self._draft_forward_s(rows * s.topk, eager)
            + self._draft_forward_s(rows * s.draft_tokens, eager)
            + (
                host
                + shapes.verify_ms(self.hw, s.draft_tokens)
                + shapes.candidate_ms(self.hw, s.steps, s.topk)
            )
            * 1e-3
        )

    def prefill_s(self, tokens: int) -> float:
        return self.target_forward_s(1, max(tokens, 1), 0)

    # -- acceptance ----------------------------------------------------------------------------
    def _tree_levels(self) -> list[int]:
        """Nodes per depth: spend the D - 1 draft slots where they raise tau the most."""
        s = self.spec
        assert s is not None
        levels = [0] * s.steps
        for _ in range(s.draft_tokens - 1):
            best, best_gain = None, 0.0
            for k in range(s.steps):
                cap = s.topk if k == 0 else min(s.topk**2, levels[k - 1] * s.topk)
                if levels[k] >= cap:
                    continue
                trial = levels.copy()
                trial[k] += 1
                gain = self._tau(trial, 1.0) - self._tau(levels, 1.0)
                if gain > best_gain + 1e-12:
                    best, best_gain = k, gain
            if best is None:
                break
            levels[best] += 1
        return levels

    def _accept_probs(self, levels: list[int], scale: float, position: int = 0) -> list[float]:
        s = self.spec
        assert s is not None
        d = s.drafter
        if s.algorithm == "EAGLE" and d.kind == "eagle3":
            return [0.0] * len(levels)  # no aux hidden states: the drafter is bypassed
        probs = []
        for k, nodes in enumerate(levels):
            if nodes == 0:
                break
            a = d.first_accept * shapes.depth_factor(d, k) * scale
            if d.depth_fade:
                a *= shapes.depth_fade(d, k, position)
            probs.append(1 - (1 - min(0.98, a)) * shapes.miss_factor(d, k, nodes))
        return probs

    def _tau(self, levels: list[int], scale: float, position: int = 0) -> float:
        tau, reach = 1.0, 1.0
        for q in self._accept_probs(levels, scale, position):
            reach *= q
            tau += reach
        return tau

    def _scale(self, position: int, prompt_factor: float) -> float:
        assert self.spec is not None
        s = self.spec
        fade = 1 + position / s.drafter.long_context_tokens
        return prompt_factor / fade * (1 - s.accept_decay) ** (position / 1000)

    def expected_accept_len(self, position: int = 0, prompt_factor: float = 1.0) -> float:
        if self.spec is None:
            return 1.0
        return self._tau(self.levels, self._scale(position, prompt_factor), position)

    def accept_at_least(self, position: int = 0, prompt_factor: float = 1.0) -> list[float]:
        """P(>=k), k = 1 .. the tree's depth: the chance one iteration yields at least k + 1
        tokens (1 + their sum is `expected_accept_len`); what the harness measures per step."""
        reach, at_least = 1.0, []
        for q in self._accept_probs(self.levels, self._scale(position, prompt_factor), position):
            reach *= q
            at_least.append(reach)
        return at_least

    def sample_tokens(self, rng: random.Random, position: int, prompt_factor: float) -> int:
        """Tokens one request gains in one iteration: accepted drafts + the bonus token."""
        if self.spec is None:
            return 1
        tokens = 1
        for q in self._accept_probs(self.levels, self._scale(position, prompt_factor), position):
            if rng.random() >= q:
                break
            tokens += 1
        return tokens

    # -- memory --------------------------------------------------------------------------------
    def memory_plan(self, mem_fraction_static: float) -> MemoryPlan:
        hw, t, dep = self.hw, self.target, self.dep
        drafter = self.spec.drafter if self.spec else None
        static = mem_fraction_static * hw.gpu_memory_mib
        weights = t.weights_mib_total / dep.tp + (drafter.weights_mib_per_gpu if drafter else 0)
        kv_pool = static - weights - dep.kv_reserve_mib
        cell = t.kv_bytes_per_token + (drafter.kv_bytes_per_token if drafter else 0)
        kv_tokens = max(0, math.floor(kv_pool * MIB / cell))
        graph = cuda_graph_mib(dep.graph_max_bs, self.spec) if dep.cuda_graph else 0.0
        needed = hw.activation_mib + graph
        host_needed = dep.hicache_size_gb * dep.tp
        failure = None
        if host_needed > hw.host_ram_gb:
            failure = "host_oom"
        elif kv_pool <= 0:
            failure = "no_kv_room"
        elif kv_tokens < 1024:
            failure = "kv_pool"
        elif needed > hw.gpu_memory_mib - static:
            failure = "graph_oom"
        return MemoryPlan(
            gpu_mib=hw.gpu_memory_mib,
            static_mib=static,
            weights_mib=weights,
            kv_pool_mib=kv_pool,
            kv_tokens=kv_tokens,
            non_static_mib=needed,
            graph_mib=graph,
            failure=failure,
            host_needed_gb=host_needed,
        )
