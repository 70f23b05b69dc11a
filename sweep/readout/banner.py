"""The banner's lines on what a sweep measures: which prompts, how they are drawn, how they are
sampled, and what a run is at each level (docs/benchmark.md says why); and which earlier trials
it measures again because they ran on other software."""

from __future__ import annotations

from collections import Counter

from harness.measure.prompt_plan import PromptPlan
from harness.spec import BenchmarkSpec
from harness.workload import Prompt


def workload_line(spec: BenchmarkSpec, prompts: list[Prompt]) -> str:
    counts = Counter(p.category or "uncategorised" for p in prompts)
    mix = ", ".join(f"{name} {n}" for name, n in counts.most_common())
    if spec.temperature == 0:
        sampling = "greedy"
    else:
        parts = [f"temperature {spec.temperature:g}", f"top_p {spec.top_p:g}"]
        if spec.top_k not in (None, -1, 0):
            parts.append(f"top_k {spec.top_k}")
        sampling = "sampled, " + " ".join(parts)
    source = f", from {spec.sampling_source}" if spec.sampling_source else ""
    return (
        f"workload {spec.workload}: {len(prompts)} prompts ({mix}); {sampling}{source}; "
        f"warm-up prompts never measured, {own_prompts(spec, prompts)}, run r the same in every "
        "trial"
    )


def own_prompts(spec: BenchmarkSpec, prompts: list[Prompt]) -> str:
    """ "each run its own prompts", or where the workload is too small for that, which levels'
    later runs send earlier runs' prompts again (their interval is then narrower than the
    truth: the runs are correlated)."""
    plan = PromptPlan(prompts, spec)
    short = plan.short_levels(spec.runs)
    if not short:
        return "each run its own prompts"
    parts = []
    for c, held in sorted(short.items()):
        reused = f"run {held + 1}" if held + 1 == spec.runs else f"runs {held + 1}-{spec.runs}"
        parts.append(
            f"at C={c} the workload holds {held} disjoint run{'s' * (held != 1)} of "
            f"{plan.segment_length(c)} prompts, so {reused} send earlier runs' prompts again"
        )
    return (
        "each run its own prompts except "
        + "; ".join(parts)
        + " (correlated runs: their interval is narrower than the truth; a larger workload or "
        "fewer benchmark.runs avoids it)"
    )


def prompt_reuse(spec: BenchmarkSpec, prompts: list[Prompt]) -> dict[str, dict[str, int]]:
    """The summary's record of `own_prompts`: per level that reuses, runs planned, disjoint runs
    held and prompts per run."""
    plan = PromptPlan(prompts, spec)
    return {
        str(c): {
            "runs": spec.runs,
            "disjoint_runs": held,
            "prompts_per_run": plan.segment_length(c),
        }
        for c, held in sorted(plan.short_levels(spec.runs).items())
    }


def runs_line(spec: BenchmarkSpec) -> str:
    levels = []
    for c in spec.concurrency:
        if c == 1:
            n = spec.requests_at(1)
            levels.append(f"C=1: {n} request{'s' * (n != 1)} one after another")
        else:
            levels.append(f"C={c}: {c} in flight, a window of {spec.window_at(c)} completions")
    return (
        f"{spec.warmup} warm-up + {spec.runs} runs per level of up to {spec.max_tokens} tokens "
        f"each ({'; '.join(levels)})"
    )


def _numbers(numbers: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def software_notice(changes: dict[str, list[int]]) -> str | None:
    """One line for the banner: which earlier trials ran on other software, and what changed
    (`changes`: "sglang 0.5.22 -> 0.5.23" -> trial numbers)."""
    if not changes:
        return None
    parts = [
        f"trial{'s' if len(ns) > 1 else ''} {_numbers(ns)} ({change})"
        for change, ns in sorted(changes.items(), key=lambda item: min(item[1]))
    ]
    return (
        "note: earlier trials were measured on other software: "
        + "; ".join(parts)
        + ". They are not reused (nor is their baseline): this sweep measures again."
    )
