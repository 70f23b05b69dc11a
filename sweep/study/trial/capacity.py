"""Whether the KV pool binds at the objective's highest level: the pool each started server
reported, against the tokens that level keeps in it.

SGLang sizes its KV pool from `mem_fraction_static` and reports it as `max_total_num_tokens`
(/server_info; the harness records it as `effective.max_total_num_tokens`, and `SearchDriver.tell`
keeps a trial's `effective` in its user attributes, so a resumed study reads it back). A level of
C requests in flight keeps at most min(C, the running cap) of them in the pool at once (the cap:
the server's reported `max_running_requests`, else the candidate's, which is SGLang's speculative
reset `SPEC_MAX_RUNNING_REQUESTS` when speculation is on and no cap is set), each holding its
prompt, its output and the draft tokens being verified. Where the pool holds that with room, a
larger fraction changes nothing at that level: the scheduler never waits for KV and never retracts
a request, so the fraction decides only whether the server starts. Where it does not, a larger
pool admits more requests at once and the fraction is worth searching (`sweep.study.search.memory`).

The lengths are what the benchmark asks for (`Demand`): `benchmark.max_tokens` output tokens (an
upper bound for answers that end at their natural length; exact with ignore_eos), and the
workload's prompt lengths at their 90th percentile, estimated as characters / 4 as the workload
record does (`harness.workload.record`: the harness has no tokenizer); with `benchmark.rounds`
above 1 a request carries its conversation so far, so rounds x (prompt + output), and what pays
is keeping every open conversation (`benchmark.users`, C when 0) in the pool between its turns,
running or not, so the need counts the users rather than the running requests. The margin is on
the one estimated term: the prompt counts PROMPT_MARGIN times its estimate (characters / 4 is
off by a fraction either way, and the chat template adds its role tags); the output is already an
upper bound and the draft tokens are exact. On the PCIe box's load profile (Kimi-K2.5, 48
running, 2048-token outputs, the reasoning prompts' p90 of 44) that is 48 x (66 + 2048 + 4) =
102k tokens against the 116k SGLang reports at 0.85: the pool holds, and a larger fraction would
admit no more requests than the running cap already does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf
from optuna.trial import FrozenTrial

from harness.errors import ConfigError
from harness.workload import load_prompts
from harness.workload.record import estimated_tokens
from sweep.config.workload import workload_choice
from sweep.study.trial.candidates import Candidate
from sweep.study.trial.feasibility import STARTED

POOL = "max_total_num_tokens"  # SGLang's name for the KV pool's size, in tokens
PROMPT_MARGIN = 1.5  # the prompt's share of the need, over its characters / 4 estimate


@dataclass(frozen=True)
class Demand:
    """The tokens one request of the benchmark holds in the KV pool, less its draft tokens."""

    prompt_tokens: int
    output_tokens: int
    rounds: int = 1
    users: int = 0  # with rounds > 1: conversations open at once (0: the level)

    def tokens(self, draft_tokens: int) -> int:
        prompt = math.ceil(PROMPT_MARGIN * self.prompt_tokens)
        return self.rounds * (prompt + self.output_tokens) + draft_tokens


def demand_for(cfg: DictConfig) -> Demand | None:
    """The benchmark's Demand from the composed config; None where it has no benchmark or its
    workload cannot be read here (the pool then cannot be judged)."""
    bench = OmegaConf.select(cfg, "benchmark")
    if bench is None:
        return None
    try:
        _name, source, categories = workload_choice(cfg)
        lengths = sorted(estimated_tokens(p) for p in load_prompts(source, 0, categories))
    except (ConfigError, OSError, ValueError):
        return None
    if not lengths:
        return None
    p90 = lengths[min(len(lengths) - 1, int(0.9 * len(lengths)))]
    rounds = max(1, int(bench.get("rounds") or 1))
    return Demand(p90, int(bench.max_tokens), rounds, int(bench.get("users") or 0))


def reported_pool(trial: FrozenTrial) -> int | None:
    pool = (trial.user_attrs.get("effective") or {}).get(POOL)
    return int(pool) if isinstance(pool, int | float) and pool > 0 else None


def running(candidate: Candidate, effective: dict[str, Any], level: int) -> int:
    """Requests the server keeps in flight at `level`: capped by its running-request limit."""
    cap = effective.get("max_running_requests") or candidate.max_running_requests
    return min(level, int(cap)) if cap else level


def need(trial: FrozenTrial, level: int, demand: Demand) -> int:
    """The KV tokens `level` keeps in the pool on the server `trial` started: its running
    requests', or, over several rounds, every open conversation's."""
    c = Candidate.from_dict(trial.user_attrs["candidate"])
    held = running(c, trial.user_attrs.get("effective") or {}, level)
    if demand.rounds > 1:
        held = max(held, demand.users or level)
    return held * demand.tokens(c.draft_tokens or 0)


def binds(trials: list[FrozenTrial], level: int, demand: Demand) -> bool | None:
    """Does the KV pool bind at `level`? None while no trial has started; True when a started
    server's reported pool is under its need, or when none that started reported a pool
    (nothing says it holds); else False."""
    started = [
        t for t in trials if t.user_attrs.get("outcome") in STARTED and "candidate" in t.user_attrs
    ]
    if not started:
        return None
    judged = False
    for t in started:
        pool = reported_pool(t)
        if pool is None:
            continue
        judged = True
        if pool < need(t, level, demand):
            return True
    return not judged
