"""The landscapes `search_efficiency.py` searches: what every configuration of the space would
give, from the simulator's own model (`harness.sim.oracle`), and what each launch costs.

- `single`: single-stream decode tok/s at 2048-token reasoning outputs (`oracle.evaluate`), five
  runs of three requests after two warm-up requests, as `conf/benchmark/reasoning_2048.yaml`;
- `datagen`: steady-state output tok/s at the seeds' data-generation load (DATAGEN_C in
  flight, DATAGEN_TOKENS-token reasoning answers at natural length, one long shared system
  prompt), speculation off, over mem_fraction_static x hicache_size (the capacity model: KV
  admission, queueing, the radix cache and HiCache; `Objective("throughput", 150)`);
- `multi`: weighted output throughput over the load profile LEVELS (equal weights;
  `Objective("weighted_throughput")`, the sweep's own aggregate): concurrency 1 from `evaluate`,
  the others from the steady-state model (`oracle.modelled_steady_state`, the engine the
  simulator serves on an instant clock), with 512-token outputs (ignore_eos) to keep the oracle's
  cost down: the ranking it tests is the step cost at each batch, which the length moves little.

Oracle evaluations are cached in memory and on disk (benchmarks/out/, keyed by a hash of the
simulator's source, so a changed model is evaluated again). The steady-state model reads the
memory fraction only through the KV pool (`max_total_num_tokens`); a pool that holds every token
the level can have in flight (the running cap times prompt + output + draft tokens) behaves like
any larger one, so the cache key is the pool capped there: configurations that differ only in a
fraction that gives them ample KV share one evaluation.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from harness.record.results import Outcome, RunSummary, TrialResult
from harness.record.stats import summarize
from harness.server.command import server_flags
from harness.sglang.speculative import SPEC_MAX_RUNNING_REQUESTS
from harness.sim.oracle import PROMPT_TOKENS, evaluate, modelled_steady_state
from harness.spec import EarlyStop, ServerSpec
from sweep.study.space import DRAFT, STEPS, TOPK

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("rtx_pro_6000_pcie", "h200_nvlink")
DRAFTER = "eagle3_37k_ttt5"
MAX_TOKENS, WARMUP, RUNS, REQUESTS = 2048, 2, 5, 3
MULTI_TOKENS = 512
LEVELS = (1, 8, 32, 64)
RUN_CV = 0.01  # run-to-run spread the simulator shows at the quickstart's settings
GPUS = 8
PROMPT = "Reason step by step about the following question and then answer it carefully. " * 4
CACHE = ROOT / "benchmarks/out/oracle_cache.json"
# The datagen landscape (issue 17): the seeds' pipeline, speculation off, at its load.
DATAGEN_C, DATAGEN_TOKENS = 150, 4096
DATAGEN_PREFIX = "You are a careful data generator. Follow the schema exactly. " * 200


def server_for(values: dict) -> ServerSpec:
    return ServerSpec(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/drafter",
        speculative_num_steps=values[STEPS],
        speculative_eagle_topk=values[TOPK],
        speculative_num_draft_tokens=values[DRAFT],
        mem_fraction_static=values["mem_fraction_static"],
        hicache_size=values["hicache_size"],
    )


def datagen_server(values: dict) -> ServerSpec:
    return ServerSpec(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        mem_fraction_static=values["mem_fraction_static"],
        hicache_size=values["hicache_size"],
    )


def effective(values: dict) -> dict:
    """SGLang forces draft = steps + 1 at topk 1: the server runs that."""
    if values.get(TOPK) == 1:
        return {**values, DRAFT: values[STEPS] + 1}
    return dict(values)


def _source_hash() -> str:
    files = [
        *sorted((ROOT / "harness/sim").rglob("*.py")),
        *sorted((ROOT / "harness/sglang").glob("*.py")),
    ]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


class Oracle:
    """Cached answers of the simulator's model for one profile."""

    def __init__(self, profile: str, levels: tuple[int, ...] = LEVELS):
        self.profile, self.levels = profile, levels
        self.version = _source_hash()
        self._disk: dict[str, list] = {}
        if CACHE.is_file():
            data = json.loads(CACHE.read_text())
            if data.get("version") == self.version:
                self._disk = data["entries"]
        self._mem: dict[str, object] = {}

    def save(self) -> None:
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        old = {}
        if CACHE.is_file():
            data = json.loads(CACHE.read_text())
            old = data["entries"] if data.get("version") == self.version else {}
        CACHE.write_text(json.dumps({"version": self.version, "entries": {**old, **self._disk}}))

    def _argv(self, values: dict) -> list[str]:
        if STEPS not in values:
            return [*server_flags(datagen_server(values)), "--sim-hardware", self.profile]
        flags = server_flags(server_for(values))
        return [*flags, "--sim-hardware", self.profile, "--sim-drafter", DRAFTER]

    def datagen(self, values: dict) -> float | None:
        """Steady-state output tok/s at the datagen load (None: OOM), every fraction its own
        KV pool: at this load the pool is what decides."""
        if self.point(values, DATAGEN_TOKENS)[0] != "ok":
            return None
        key = json.dumps(["dg", self.profile, DATAGEN_C, sorted(values.items())])
        if key not in self._disk:
            prompts = [
                [
                    {"role": "system", "content": DATAGEN_PREFIX},
                    {"role": "user", "content": f"Record {i}: generate it, reasoning first."},
                ]
                for i in range(3 * DATAGEN_C + 32)
            ]
            r = modelled_steady_state(
                self._argv(values), DATAGEN_C, prompts, DATAGEN_TOKENS, DATAGEN_C
            )
            self._disk[key] = [r.output_tok_s]
        return self._disk[key][0]

    def point(self, values: dict, max_tokens: int = MAX_TOKENS):
        """(outcome, oom kind, single-stream tok/s, start-up s, KV tokens) of a launch."""
        key = json.dumps(["pt", self.profile, max_tokens, sorted(effective(values).items())])
        if key not in self._mem:
            e = evaluate(self._argv(effective(values)), max_tokens)
            self._mem[key] = (e.outcome, e.oom_kind, e.tok_s, e.startup_s, e.max_total_num_tokens)
        return self._mem[key]

    def level(self, values: dict, concurrency: int) -> float:
        """Steady-state output tok/s at `concurrency` (MULTI_TOKENS-token outputs)."""
        v = effective(values)
        kv = self.point(v, MULTI_TOKENS)[4]
        running = min(concurrency, SPEC_MAX_RUNNING_REQUESTS)
        ample = running * (PROMPT_TOKENS * 4 + MULTI_TOKENS + v[DRAFT] + 64)
        shape = {k: x for k, x in v.items() if k != "mem_fraction_static"}
        key = json.dumps(["lv", self.profile, concurrency, min(kv, ample), sorted(shape.items())])
        if key not in self._disk:
            prompts = [f"{PROMPT}#{i}" for i in range(3 * concurrency + 32)]
            r = modelled_steady_state(
                self._argv(v),
                concurrency,
                prompts,
                MULTI_TOKENS,
                max(concurrency, 16),
                ignore_eos=True,
            )
            self._disk[key] = [r.output_tok_s]
        return self._disk[key][0]

    def multi(self, values: dict) -> dict[int, float] | None:
        """Output tok/s at every level, or None when the launch would OOM."""
        outcome, _, tok_s, _, _ = self.point(values, MULTI_TOKENS)
        if outcome != "ok":
            return None
        return {c: (tok_s if c == 1 else self.level(values, c)) for c in self.levels}


@dataclass
class Landscape:
    kind: str  # "single" or "multi"
    oracle: Oracle
    weights: tuple[float, ...] = ()

    def server(self, values: dict) -> ServerSpec:
        return datagen_server(values) if self.kind == "datagen" else server_for(values)

    def true_value(self, values: dict) -> float | None:
        if self.kind == "datagen":
            return self.oracle.datagen(values)
        if self.kind == "single":
            outcome, _, tok_s, _, _ = self.oracle.point(values)
            return tok_s if outcome == "ok" else None
        per = self.oracle.multi(values)
        if per is None:
            return None
        w = self.weights or (1.0,) * len(per)
        return sum(wi * per[c] for wi, c in zip(w, self.oracle.levels, strict=True)) / sum(w)


class Simulation:
    """One search on one landscape: each launch costs its simulated time, recorded on the
    TrialResult as the harness records it, so `sweep.study.budget` prices it as the sweeper does;
    tracks when a launch first came within 2% of the optimum."""

    def __init__(self, land: Landscape, optimum: float, rng: random.Random):
        self.land, self.optimum, self.rng = land, optimum, rng
        self.starts, self.gpu_hours = 0, 0.0
        self.reached: tuple[int, float] | None = None

    def launch(self, values: dict, early_stop: EarlyStop | None = None) -> TrialResult:
        from sweep.study.budget import gpu_hours

        tokens = {"single": MAX_TOKENS, "multi": MULTI_TOKENS}.get(self.land.kind, DATAGEN_TOKENS)
        outcome, kind, tok_s, startup, _ = self.land.oracle.point(values, tokens)
        self.starts += 1
        result = TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, dict(values))
        result.startup_s = result.startup_wall_s = startup
        if outcome == "oom":
            result.outcome, result.oom_kind, result.wall_s = Outcome.OOM, kind, startup
            self.gpu_hours += gpu_hours(result, GPUS)
            return result
        if self.land.kind == "single":
            seconds = self._single(result, tok_s, early_stop)
        elif self.land.kind == "datagen":
            seconds = self._datagen(result, values)
        else:
            seconds = self._multi(result, values)
        result.wall_s = startup + seconds
        self.gpu_hours += gpu_hours(result, GPUS)
        true = self.land.true_value(values)
        ok = result.outcome is Outcome.OK
        if ok and self.reached is None and true is not None and true >= 0.98 * self.optimum:
            self.reached = (self.starts, self.gpu_hours)
        return result

    def _single(self, result: TrialResult, tok_s: float, early_stop) -> float:
        request_s = MAX_TOKENS / tok_s
        seconds = WARMUP * request_s
        runs: list[RunSummary] = []
        for run in range(1, RUNS + 1):
            seconds += REQUESTS * request_s
            value = tok_s * self.rng.gauss(1.0, RUN_CV)
            runs.append(RunSummary(run, 1, REQUESTS, 0, 0, value, value, value, 0.1, None, None))
            if early_stop and early_stop.should_stop(runs):
                result.outcome = Outcome.PRUNED
                break
        stat = summarize([r.decode_tok_s for r in runs])
        result.runs = runs
        result.metrics = {"tok_s": stat.mean}
        if stat.n > 1:
            result.metrics["tok_s_ci95"] = stat.ci95
        return seconds

    def _multi(self, result: TrialResult, values: dict) -> float:
        """Every level on one server start: at 1 as the single-stream runs, above 1 a run of
        C ramp-up + max(C, 16) window completions per run (harness.measure.steady)."""
        per = self.land.oracle.multi(values)
        assert per is not None
        seconds = 0.0
        for c, rate in per.items():
            requests = WARMUP + RUNS * REQUESTS if c == 1 else RUNS * (c + max(c, 16))
            seconds += requests * MULTI_TOKENS / rate  # rate: all streams' tok/s
            samples = [rate * self.rng.gauss(1.0, RUN_CV) for _ in range(RUNS)]
            stat = summarize(samples)
            result.metrics[f"output_tok_s_c{c}"] = stat.mean
            result.metrics[f"output_tok_s_c{c}_ci95"] = stat.ci95
        return seconds

    def _datagen(self, result: TrialResult, values: dict) -> float:
        """One steady-state level: RUNS runs of C ramp-up + C window completions, each request
        priced at the full DATAGEN_TOKENS (an upper bound: answers end at their natural length)."""
        rate = self.land.oracle.datagen(values)
        assert rate is not None
        samples = [rate * self.rng.gauss(1.0, RUN_CV) for _ in range(RUNS)]
        stat = summarize(samples)
        c = DATAGEN_C
        result.metrics[f"output_tok_s_c{c}"] = stat.mean
        result.metrics[f"output_tok_s_c{c}_ci95"] = stat.ci95
        return RUNS * 2 * c * DATAGEN_TOKENS / rate
