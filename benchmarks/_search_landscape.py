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

A landscape is a `Setup` (hardware, target and drafter profiles of the simulator, TP size) and an
objective. The named setups are the simulator's three boxes as conf/ composes them (8x RTX PRO
6000 and 8x H200 with Kimi-K2.5 and the 37K TTT=5 drafter; 1x H100 with Llama-3.1-8B and its
EAGLE-3 drafter); `_search_family` adds drawn ones.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from harness.server.command import server_flags
from harness.sglang.speculative import SPEC_MAX_RUNNING_REQUESTS
from harness.sim.cli import build_parser, resolve, sglang_version_of
from harness.sim.model.profiles import HARDWARE, TARGETS
from harness.sim.oracle import PROMPT_TOKENS, build_model, evaluate, modelled_steady_state
from harness.spec import ServerSpec
from sweep.study.search.space import DRAFT, STEPS, TOPK
from sweep.study.trial.capacity import Demand

ROOT = Path(__file__).resolve().parent.parent
MAX_TOKENS, WARMUP, RUNS, REQUESTS = 2048, 2, 5, 3
MULTI_TOKENS = 512
LEVELS = (1, 8, 32, 64)
PROMPT = "Reason step by step about the following question and then answer it carefully. " * 4
CACHE = ROOT / "benchmarks/out/oracle_cache.json"
# The datagen landscape (issue 17): the seeds' pipeline, speculation off, at its load.
DATAGEN_C, DATAGEN_TOKENS = 150, 4096
DATAGEN_PREFIX = "You are a careful data generator. Follow the schema exactly. " * 200


@dataclass(frozen=True)
class Setup:
    """One simulated deployment: the simulator's --sim-hardware/--sim-target/--sim-drafter
    profiles, the target's path and its TP size (the GPUs a launch holds)."""

    name: str
    hardware: str
    target: str
    drafter: str
    model_path: str = "moonshotai/Kimi-K2.5"
    tp: int = 8

    def sim_flags(self, speculative: bool = True) -> list[str]:
        flags = ["--sim-hardware", self.hardware, "--sim-target", self.target]
        return [*flags, "--sim-drafter", self.drafter] if speculative else flags


SETUPS = {
    s.name: s
    for s in (
        Setup("rtx_pro_6000_pcie", "rtx_pro_6000_pcie", "kimi_k25", "eagle3_37k_ttt5"),
        Setup("h200_nvlink", "h200_nvlink", "kimi_k25", "eagle3_37k_ttt5"),
        Setup(
            "h100_sxm",
            "h100_sxm",
            "llama31_8b",
            "eagle3_llama31_8b",
            "meta-llama/Llama-3.1-8B-Instruct",
            1,
        ),
    )
}
PROFILES = tuple(SETUPS)


def server_for(values: dict, setup: Setup = SETUPS["rtx_pro_6000_pcie"]) -> ServerSpec:
    return ServerSpec(
        model_path=setup.model_path,
        tp_size=setup.tp,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/drafter",
        speculative_num_steps=values[STEPS],
        speculative_eagle_topk=values[TOPK],
        speculative_num_draft_tokens=values[DRAFT],
        mem_fraction_static=values["mem_fraction_static"],
        hicache_size=values["hicache_size"],
    )


def datagen_server(values: dict, setup: Setup = SETUPS["rtx_pro_6000_pcie"]) -> ServerSpec:
    return ServerSpec(
        model_path=setup.model_path,
        tp_size=setup.tp,
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
    """Cached answers of the simulator's model for one setup (keyed by its name: a drawn
    setup's name carries a hash of its constants)."""

    def __init__(self, setup: Setup, levels: tuple[int, ...] = LEVELS):
        self.setup, self.profile, self.levels = setup, setup.name, levels
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

    def known(self) -> set[str]:
        """The keys of the answers it holds (read from the cache, or computed since)."""
        return set(self._disk)

    def answers_since(self, known: set[str]) -> dict[str, list]:
        """The answers it computed whose keys are not in `known`."""
        return {k: v for k, v in self._disk.items() if k not in known}

    def learn(self, answers: dict[str, list]) -> None:
        """Answers another process computed (`save` writes them with its own)."""
        self._disk.update(answers)

    def _argv(self, values: dict) -> list[str]:
        if STEPS not in values:
            return [*server_flags(datagen_server(values, self.setup)), *self.setup.sim_flags(False)]
        return [*server_flags(server_for(values, self.setup)), *self.setup.sim_flags()]

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
            if key not in self._disk:  # a drawn family's thousands of points: minutes to redo
                e = evaluate(self._argv(effective(values)), max_tokens)
                self._disk[key] = [
                    e.outcome,
                    e.oom_kind,
                    e.tok_s,
                    e.startup_s,
                    e.max_total_num_tokens,
                ]
            self._mem[key] = tuple(self._disk[key])
        return self._mem[key]

    def at_least(self, values: dict, max_tokens: int) -> list[float]:
        """P(>=k) over the verify steps of one `max_tokens` decode, the steps' average (what
        the server's per-request histogram counts; 1 + its sum is the steps' accept length)."""
        key = json.dumps(["al", self.profile, max_tokens, sorted(effective(values).items())])
        if key not in self._mem:
            argv = self._argv(effective(values))
            ns = build_parser(sglang_version_of(argv)).parse_args(argv)
            hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
            model = build_model(resolve(ns, target.architecture, hw.gpu_memory_mib).args, ns, "LL")
            position, steps, sums = 1.0, 0, [0.0] * len(model.accept_at_least(0))
            while position < max_tokens:
                for k, p in enumerate(model.accept_at_least(int(position))):
                    sums[k] += p
                position += min(model.expected_accept_len(int(position)), max_tokens - position)
                steps += 1
            self._mem[key] = [x / steps for x in sums]
        return self._mem[key]  # type: ignore[return-value]

    def level(self, values: dict, concurrency: int) -> float:
        """Steady-state output tok/s at `concurrency` (MULTI_TOKENS-token outputs)."""
        return self._steady(values, concurrency)[0]

    def running(self, values: dict, concurrency: int) -> float:
        """The mean #running-req at `concurrency` (what SGLang's decode lines report, and the
        harness records as running_mean_c<C>): the requests the KV pool and the cap admit."""
        return self._steady(values, concurrency)[1]

    def _steady(self, values: dict, concurrency: int) -> list[float]:
        v = effective(values)
        kv = self.point(v, MULTI_TOKENS)[4]
        running = min(concurrency, SPEC_MAX_RUNNING_REQUESTS)
        ample = running * (PROMPT_TOKENS * 4 + MULTI_TOKENS + v[DRAFT] + 64)
        shape = {k: x for k, x in v.items() if k != "mem_fraction_static"}
        key = json.dumps(["lv", self.profile, concurrency, min(kv, ample), sorted(shape.items())])
        if len(self._disk.get(key, ())) < 2:  # [output tok/s, mean running]
            prompts = [f"{PROMPT}#{i}" for i in range(3 * concurrency + 32)]
            r = modelled_steady_state(
                self._argv(v),
                concurrency,
                prompts,
                MULTI_TOKENS,
                max(concurrency, 16),
                ignore_eos=True,
            )
            self._disk[key] = [r.output_tok_s, r.running]
        return self._disk[key]

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

    def demand(self) -> Demand:
        """What one request holds in the KV pool, as the sweep estimates it from its benchmark
        (`sweep.study.trial.capacity`): the prompt as `level` bounds it, the outputs asked for."""
        if self.kind == "datagen":
            return Demand(len(DATAGEN_PREFIX) // 4 + PROMPT_TOKENS, DATAGEN_TOKENS)
        if self.kind == "multi":
            return Demand(4 * PROMPT_TOKENS, MULTI_TOKENS)
        return Demand(PROMPT_TOKENS, MAX_TOKENS)

    def server(self, values: dict) -> ServerSpec:
        setup = self.oracle.setup
        return (
            datagen_server(values, setup) if self.kind == "datagen" else server_for(values, setup)
        )

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
