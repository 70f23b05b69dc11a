"""Which measured figure each simulator constant is fitted to, and which figures are held out.

Every figure the simulator is compared with (shared/reference/seed-figures.md, the seeds' box;
shared/reference/speculative-performance.md, published numbers) is one `Figure` with a role:

- fit: one constant is solved so the model meets it (`fit` below, in the order of FIT_ORDER); the
  figure then says nothing about the model's accuracy;
- held-out: no constant saw it; `benchmarks/sim_calibration.py` gates it (within HELD_OUT_TOL,
  the seeds' own run-to-run spread, chosen before the held-out figures were computed);
- known error: held out, and the model misses it for a reason docs/simulator.md states;
  shown, not gated;
- unused: the figure's configuration is not recorded, or the simulator does not model it.

The model's prediction for a figure is computed in-process (`harness.sim.model.perf_model`,
expected values, no noise) for the figure's workload: the seeds' single-stream script (a ~20-token
prompt, up to 1,024 output tokens, seed 001), their parallel script at concurrency 1 (200 tokens,
seed 004), the EAGLE-3 paper's MT-bench (a ~100-token prompt, 512 tokens), SGLang's cookbook
random dataset (1K or 8K in, 1K or 8K out). `python benchmarks/sim_calibration.py --fit` runs the
fit from scratch and prints each constant beside the shipped one; tests/unit/test_calibration_fit.py
holds the shipped single-stream constants to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from harness.sglang.graphs import default_decode_max_bs
from harness.sim.model import profiles
from harness.sim.model.perf_model import Deployment, PerfModel, Speculation
from harness.sim.oracle import expected_decode

HELD_OUT_TOL = 0.10  # seed-figures.md: "single runs vary by +-10%"
# The tree allocation moves in steps as acceptance does, so a solve lands near a figure, not on.
FIT_TOL = 0.02

Constants = dict[str, object]  # profile name -> HardwareProfile | DrafterProfile | TargetProfile


def shipped() -> Constants:
    return {**profiles.HARDWARE, **profiles.DRAFTERS, **profiles.TARGETS}


@dataclass(frozen=True)
class Workload:
    prompt: int  # tokens of context before the first output token
    output: int  # tokens generated
    batch: int = 1  # requests decoding in lockstep


SEEDS_SCRIPT = Workload(20, 1024)  # seed 001: ~20-token prompts, ~1,000-token answers
PARALLEL_C1 = Workload(60, 200)  # seed 004: benchmark_parallel.py --max-tokens 200, C=1
MT_BENCH = Workload(100, 512)


def decode(model: PerfModel, w: Workload) -> tuple[float, float]:
    """(tokens per second per request after the first token, tokens per verify step) of `w`."""
    return expected_decode(model, w.output, w.prompt, w.batch)


def launch(
    c: Constants,
    hardware: str,
    spec: tuple[int, int, int, str] | None = None,
    *,
    graphs: bool = True,
    overlap: bool = True,
    algorithm: str = "EAGLE3",
) -> PerfModel:
    """The model of one launch: `spec` is (steps, topk, draft tokens, drafter) or None."""
    hw = c[hardware]
    target = c["llama31_8b" if hardware == "h100_sxm" else "kimi_k25"]
    speculation = None
    if spec:
        steps, topk, draft, drafter = spec
        speculation = Speculation(algorithm, steps, topk, draft, c[drafter])  # type: ignore[arg-type]
    tp = 1 if hardware == "h100_sxm" else 8
    deployment = Deployment(
        tp=tp,
        cuda_graph=graphs,
        overlap=overlap,
        nccl_tuned=True,
        hicache_size_gb=0,
        # SGLang 0.5.23's default decode graphs for the card (harness.sglang.graphs): every
        # batch a figure names (1-64) is then a captured size, as on a server whose request pool
        # holds that batch (get_batch_sizes_to_capture adds the pool's size)
        graph_max_bs=default_decode_max_bs(hw.gpu_memory_mib, tp),
        speculation=speculation,
        kv_reserve_mib=100 if hardware != "h100_sxm" else 0,
    )
    return PerfModel(hw, target, deployment)  # type: ignore[arg-type]


def tok_s(c: Constants, hardware: str, w: Workload, spec=None, **kw) -> float:
    return decode(launch(c, hardware, spec, **kw), w)[0]


def accept(c: Constants, hardware: str, w: Workload, spec, **kw) -> float:
    return decode(launch(c, hardware, spec, **kw), w)[1]


def tpot_ms(c: Constants, w: Workload) -> float:
    return 1000 / tok_s(c, "h200_nvlink", w)


def speedup(c: Constants, hardware: str, w: Workload, spec, **kw) -> float:
    """Per-request speed of `spec` over the baseline's (overlap on) at `w.batch`."""
    return tok_s(c, hardware, w, spec, **kw) / tok_s(c, hardware, w)


PCIE, H100, H200 = "rtx_pro_6000_pcie", "h100_sxm", "h200_nvlink"
NO_OVERLAP = {"overlap": False}


@dataclass(frozen=True)
class Figure:
    key: str
    box: str  # the profile's hardware
    what: str
    value: float
    unit: str
    role: str  # "fit", "held-out", "known error", "unused"
    predict: Callable[[Constants], float] | None = None
    fits: str = ""  # "<profile>.<constant>" for a fit figure
    source: str = ""
    note: str = ""
    high: float | None = None  # the figure is the range value..high

    def model(self, c: Constants) -> float | None:
        return self.predict(c) if self.predict else None

    def miss(self, c: Constants) -> float:
        """The model's miss for constants `c` (`miss_of`)."""
        m = self.model(c)
        assert m is not None
        return self.miss_of(m)

    def miss_of(self, value: float) -> float:
        """value / figure - 1; for a range, the distance outside it (0 inside)."""
        if self.high is not None and self.value <= value <= self.high:
            return 0.0
        edge = self.high if self.high is not None and value > self.high else self.value
        return value / edge - 1


def _table3(batch: int, value: float, fits: str = "") -> Figure:
    return Figure(
        f"paper table 3, bs {batch}", H100,
        f"EAGLE-3 chain 3/1/4 over the baseline at batch {batch} (SGLang v0.4.4, MT-bench)",
        value, "x", "fit" if fits else "held-out",
        lambda c: speedup(c, H100, Workload(100, 512, batch), (3, 1, 4, "eagle3_llama31_8b"),
                          **NO_OVERLAP),
        fits, source="EAGLE-3 paper Table 3 (speculative-performance.md 3.1)",
    )  # fmt: skip


FIGURES: list[Figure] = [
    # -- the seeds' box: 8x RTX PRO 6000 (PCIe), Kimi-K2.5 --------------------------------------
    Figure("row 2", PCIE, "SGLang baseline, NCCL tuned", 90.0, "tok/s", "fit",
           lambda c: tok_s(c, PCIE, SEEDS_SCRIPT), "rtx_pro_6000_pcie.allreduce_latency_us"),
    Figure("row 8 accept", PCIE, "EAGLE3 10K, 2/2/5, accept length", 2.27, "accept", "fit",
           lambda c: accept(c, PCIE, SEEDS_SCRIPT, (2, 2, 5, "eagle3_10k"), **NO_OVERLAP),
           "eagle3_10k.first_accept"),
    Figure("row 8", PCIE, "EAGLE3 10K, CUDA graphs, 2/2/5", 81.7, "tok/s", "fit",
           lambda c: tok_s(c, PCIE, SEEDS_SCRIPT, (2, 2, 5, "eagle3_10k"), **NO_OVERLAP),
           "rtx_pro_6000_pcie.spec_host_no_overlap_ms"),
    Figure("row 6", PCIE, "EAGLE3 10K, CUDA graphs, 16 draft tokens (4/4/16)", 74.9, "tok/s",
           "fit", lambda c: tok_s(c, PCIE, SEEDS_SCRIPT, (4, 4, 16, "eagle3_10k"), **NO_OVERLAP),
           "rtx_pro_6000_pcie.verify_token_us"),
    Figure("row 4", PCIE, "EAGLE3 10K, no CUDA graphs, 3/2/5", 53.2, "tok/s", "fit",
           lambda c: tok_s(c, PCIE, SEEDS_SCRIPT, (3, 2, 5, "eagle3_10k"), graphs=False,
                           overlap=False), "rtx_pro_6000_pcie.eager_us_per_layer"),
    Figure("row 5", PCIE, "EAGLE3 AQ-MedAI K2 drafter, no CUDA graphs, 3/2/5", 50.5, "tok/s",
           "fit", lambda c: tok_s(c, PCIE, SEEDS_SCRIPT, (3, 2, 5, "aq_medai_k2"), graphs=False,
                                  overlap=False), "aq_medai_k2.first_accept"),
    Figure("row 12 / row 3", PCIE, "EAGLE3 37K TTT-5, 3/1/4, overlap worker, over the baseline "
           "(both later stack, parallel script at C=1)", 88.2 / 92.7, "x", "fit",
           lambda c: speedup(c, PCIE, PARALLEL_C1, (3, 1, 4, "eagle3_37k_ttt5")),
           "eagle3_37k_ttt5.first_accept",
           note="a 5-request smoke test; the ratio, since rows 3 and 12 ran a later stack"),
    Figure("row 7", PCIE, "EAGLE3 10K, CUDA graphs, 3/2/5", 82.3, "tok/s", "held-out",
           lambda c: tok_s(c, PCIE, SEEDS_SCRIPT, (3, 2, 5, "eagle3_10k"), **NO_OVERLAP)),
    Figure("row 7 accept", PCIE, "EAGLE3 10K, 3/2/5, accept length", 2.0, "accept", "held-out",
           lambda c: accept(c, PCIE, SEEDS_SCRIPT, (3, 2, 5, "eagle3_10k"), **NO_OVERLAP),
           high=2.4, note="a range: the miss is the distance outside it"),
    Figure("row 4 accept", PCIE, "EAGLE3 10K, no CUDA graphs, accept length", 2.1, "accept",
           "unused", note="seed 002 gives ~2.1 for row 7's run: not a separate measurement"),
    Figure("row 13", PCIE, "--speculative-algorithm EAGLE with an EAGLE-3 drafter", 1.0,
           "accept", "held-out",
           lambda c: accept(c, PCIE, SEEDS_SCRIPT, (3, 1, 4, "eagle3_37k_ttt5"),
                            algorithm="EAGLE"), note="a mechanism, no constant"),
    Figure("datagen 0.88", PCIE, "data generation, 0.88 + HiCache 48, 150 in flight", 600.0,
           "tok/s", "fit", None, "rtx_pro_6000_pcie.attention_efficiency",
           note="the steady-state oracle (benchmarks/_datagen.py); minutes, so --fit only"),
    Figure("datagen 0.85", PCIE, "data generation, 0.85, no HiCache", 400.0, "tok/s",
           "known error", None,
           note="probably a client-side estimate, not the server's throughput (docs/simulator.md)"),
    Figure("row 1", PCIE, "vLLM baseline", 82.5, "tok/s", "unused", note="vLLM, not modelled"),
    Figure("row 9", PCIE, "37K drafter on a misconfigured server", 56.8, "tok/s", "unused",
           note="hidden-state mismatch and a num-steps override: not modelled"),
    Figure("row 10", PCIE, "EAGLE3 after allreduce fusion", 96.1, "tok/s", "unused",
           note="configuration not recorded"),
    Figure("row 11", PCIE, "EAGLE3 topk 4, v1 worker", 80.9, "tok/s", "unused",
           note="steps and draft tokens not recorded"),
    # -- 1x H100, Llama-3.1-8B: the EAGLE-3 paper's SGLang box ----------------------------------
    Figure("paper table 4 baseline", H100, "SGLang, no speculation, bs 1", 158.34, "tok/s", "fit",
           lambda c: tok_s(c, H100, MT_BENCH), "h100_sxm.kernel_us_per_layer"),
    Figure("paper table 1 tau", H100, "EAGLE-3 accept length, tree depth 8, 60 nodes, MT-bench "
           "T=0", 6.13, "accept", "held-out",
           lambda c: accept(c, H100, MT_BENCH, (8, 10, 60, "eagle3_llama31_8b")),
           source="the HF backend's tree (EAGLE-3 paper Table 1, App. A)"),
    Figure("paper table 4 EAGLE-3", H100, "SGLang EAGLE-3 5/8/32, bs 1", 373.25, "tok/s", "fit",
           lambda c: tok_s(c, H100, MT_BENCH, (5, 8, 32, "eagle3_llama31_8b"), **NO_OVERLAP),
           "eagle3_llama31_8b.sibling_residual"),
    # the chain at the smallest batch measures the drafter's top-1 rate; the tree above, what
    # its siblings add under SGLang's per-round selection
    _table3(2, 1.81, "eagle3_llama31_8b.first_accept"),
    *(_table3(b, v) for b, v in ((4, 1.82), (8, 1.62), (16, 1.48), (24, 1.39),
                                 (32, 1.32), (48, 1.38), (56, 1.34), (64, 1.38))),
    # -- 8x H200, Kimi-K2.5: SGLang's cookbook (0.5.6.post2, random dataset, concurrency 1) ------
    Figure("cookbook 1K/1K", H200, "baseline TPOT, 1K in / 1K out", 9.22, "ms", "fit",
           lambda c: tpot_ms(c, Workload(1000, 1000)), "h200_nvlink.forward_latency_ms"),
    Figure("cookbook 1K/8K", H200, "baseline TPOT, 1K in / 8K out", 14.4, "ms", "known error",
           lambda c: tpot_ms(c, Workload(1000, 8000)),
           note="+1.5 us per context token per step: no term of the model grows like that"),
    Figure("cookbook 8K/1K", H200, "baseline TPOT, 8K in / 1K out", 25.0, "ms", "known error",
           lambda c: tpot_ms(c, Workload(8000, 1000)), note="as 1K/8K; vLLM at 8K/1K, C=4: 11 ms"),
]  # fmt: skip


def figure(key: str) -> Figure:
    return next(f for f in FIGURES if f.key == key)


# -- the fit ------------------------------------------------------------------------------------
def _set(c: Constants, dotted: str, value: float) -> Constants:
    name, field = dotted.split(".")
    return {**c, name: replace(c[name], **{field: value})}  # type: ignore[type-var]


def _solve(c: Constants, dotted: str, figure: Figure, lo: float, hi: float) -> Constants:
    """Bisect the constant `dotted` in [lo, hi] until the model meets `figure` (monotone)."""
    f_lo = figure.model(_set(c, dotted, lo))
    assert f_lo is not None
    rising = figure.model(_set(c, dotted, hi)) > f_lo  # type: ignore[operator]
    for _ in range(60):
        mid = (lo + hi) / 2
        above = figure.model(_set(c, dotted, mid)) > figure.value  # type: ignore[operator]
        if above == rising:
            hi = mid
        else:
            lo = mid
    return _set(c, dotted, (lo + hi) / 2)


# The single-stream fit, in order: each group's constants are solved from its figures (in turn,
# until all of them hold: they enter the same steps), seeing the constants solved before it. The
# estimates the fit starts from (profiles.py says where each comes from) are not touched, except
# by the two rules in `_rules`.
FIT_ORDER = [
    ["row 2"],
    ["row 8 accept"],
    ["row 8", "row 6"],
    ["row 4"],
    ["row 5"],
    ["row 12 / row 3"],
    ["paper table 4 baseline"],
    ["paper table 3, bs 2"],
    ["paper table 4 EAGLE-3"],
    ["cookbook 1K/1K"],
]
RANGES = {
    "rtx_pro_6000_pcie.allreduce_latency_us": (5.0, 120.0),
    "eagle3_10k.first_accept": (0.3, 0.95),
    "rtx_pro_6000_pcie.spec_host_no_overlap_ms": (0.0, 15.0),
    "rtx_pro_6000_pcie.verify_token_us": (0.0, 2000.0),
    "rtx_pro_6000_pcie.eager_us_per_layer": (0.0, 600.0),
    "aq_medai_k2.first_accept": (0.2, 0.95),
    "eagle3_37k_ttt5.first_accept": (0.2, 0.95),
    "h100_sxm.kernel_us_per_layer": (0.0, 100.0),
    "eagle3_llama31_8b.first_accept": (0.3, 0.97),
    "eagle3_llama31_8b.sibling_residual": (0.2, 0.99),
    "h200_nvlink.forward_latency_ms": (0.0, 10.0),
}


def _rules(c: Constants) -> Constants:
    """Two constants no figure measures, derived from fitted ones:
    - spec_host_ms (the EAGLE worker's host time per iteration with the overlap scheduler) is the
      fitted no-overlap time less what the overlap hides of a plain decode step on the same box
      (host_step_no_overlap_ms - host_step_ms): overlap hides host work, it cannot add any;
    - the H200's kernel time per layer is the H100's fitted value (the same Hopper generation,
      CUDA graphs on): no H200 figure separates kernels from the rest of its step, so what the
      cookbook's step leaves over is Kimi-K2.5's latency-bound layer time on Hopper
      (forward_latency_ms, profiles.ARCH_WORK: every Hopper box running Kimi-K2.5 takes it).
    """
    for box in (PCIE, H100):
        hw = c[box]
        hidden = hw.host_step_no_overlap_ms - hw.host_step_ms  # type: ignore[attr-defined]
        c = _set(c, f"{box}.spec_host_ms", hw.spec_host_no_overlap_ms - hidden)  # type: ignore[attr-defined]
    return _set(c, f"{H200}.kernel_us_per_layer", c[H100].kernel_us_per_layer)  # type: ignore[attr-defined]


def fit_single_stream(c: Constants) -> Constants:
    """Every single-stream constant solved from its fit figures, from the estimates in `c`."""
    for group in FIT_ORDER:
        for _ in range(40 if len(group) > 1 else 1):
            for key in group:
                f = figure(key)
                c = _rules(_solve(c, f.fits, f, *RANGES[f.fits]))
    return c


def misses(c: Constants, role: str) -> list[tuple[Figure, float]]:
    """(figure, model / figure - 1) for every figure of `role` the model predicts."""
    out = []
    for f in FIGURES:
        if f.role == role and f.predict:
            out.append((f, f.miss(c)))
    return out


# -- the fit under load (minutes: the steady-state oracle) --------------------------------------
@contextmanager
def installed(c: Constants) -> Iterator[None]:
    """The simulator's named profiles replaced by `c`'s while the block runs (the oracle looks
    them up by name, as the served simulator does)."""
    tables = (profiles.HARDWARE, profiles.DRAFTERS, profiles.TARGETS)
    saved = [dict(t) for t in tables]
    for table in tables:
        table.update({k: v for k, v in c.items() if k in table})  # type: ignore[misc]
    try:
        yield
    finally:
        for table, old in zip(tables, saved, strict=True):
            table.clear()
            table.update(old)


def datagen_088(c: Constants) -> float:
    """The model's tok/s for the seeds' data-generation row at 0.88 + HiCache 48."""
    from benchmarks._datagen import datagen

    with installed(c):
        rows = datagen(only="0.88 + HiCache 48")
    return rows[0]["sim_tok_s"]


def fit(c: Constants, rounds: int = 2, say: Callable[[str], None] = print) -> Constants:
    """The whole fit: the single-stream constants, then attention efficiency on the PCIe box to
    the data-generation row (which the single-stream rows feel by < 2%: long contexts only), in
    `rounds` until both settle."""
    target = figure("datagen 0.88").value
    for r in range(rounds):
        c = fit_single_stream(c)
        lo, hi = 0.05, 1.0
        for _ in range(9):
            mid = (lo + hi) / 2
            got = datagen_088(_set(c, f"{PCIE}.attention_efficiency", mid))
            say(f"  round {r + 1}: attention_efficiency {mid:.3f} -> {got:.0f} tok/s")
            lo, hi = (lo, mid) if got > target else (mid, hi)
        c = _set(c, f"{PCIE}.attention_efficiency", (lo + hi) / 2)
    return fit_single_stream(c)
