"""SGLang's adaptive speculative decoding (`--speculative-adaptive`), as the simulator serves it.

The policy is SGLang 0.5.23's, line for line (srt/speculative/adaptive_spec_params.py,
adaptive_runtime_state.py; the same in 0.5.22):

- one `AdaptiveStepSlot` per batch-size threshold of the config (`"1"`, `"8"`, ...); a batch is
  padded up to the next captured CUDA-graph batch size, then served by the slot with the largest
  threshold <= that size (`_route`, `_pad_to_cuda_graph_bs`, `_find_closest_bs`);
- after each decode verify the slot of that batch size folds the batch's mean accepted drafts
  per request into an EMA (`ema_alpha`, 0.2), unless it is at 0 steps (drafting off: nothing to
  observe); it counts batches, and after `warmup_batches` (10), every `update_interval` (5)
  batches, it recomputes its steps: down one candidate while the EMA <= prev - 0.5 +
  down_hysteresis (0.5 + down_hysteresis when prev is 0), else up while EMA > current - 0.5 +
  up_hysteresis; from 0 it probes the smallest positive candidate (`_recompute_params`);
- before each decode batch the worker activates its slot's steps (`activate_step_by_batch`).
  With the overlap scheduler the result of batch i is processed after batch i+1 was launched
  (`batch_result_processor.py:801`), so a batch runs at the steps known one batch earlier.

Every candidate has its runtime state built at start-up (`AdaptiveController.init_states`: its
own CUDA graphs, draft tokens = steps + 1), so a switch swaps pre-built state: its cost here is
`SWITCH_COST_S` of host time on the next step (a modelling choice: SGLang's swap re-binds
attention backends and graph runners on the host, no GPU work), and every candidate's graphs
take memory (`memory_plan`). At 0 steps SGLang still runs a 1-token verify and the draft
extend (eagle_worker_v2.py:1469-1503): the PerfModel at steps 0 costs exactly that.
"""

from __future__ import annotations

import bisect
import logging
import math
import random
from dataclasses import replace
from typing import Any

from harness.sglang.adaptive import ADAPTIVE_KNOB_DEFAULTS, adaptive_slots
from harness.sim.model.adaptive_args import adaptive_config
from harness.sim.model.perf_model import MemoryPlan, PerfModel, cuda_graph_mib

log = logging.getLogger("sglang.scheduler")
SWITCH_COST_S = 0.0002  # host time of one runtime-state swap (see the module docstring)


class AdaptiveStepSlot:
    """adaptive_spec_params.py:153-272."""

    def __init__(self, initial_steps: int, cfg: dict[str, Any]):
        knob = {**ADAPTIVE_KNOB_DEFAULTS, **cfg}
        self.candidate_steps = sorted(set(cfg["candidate_steps"]))
        self.ema_alpha = knob["ema_alpha"]
        self.update_interval = knob["update_interval"]
        self.warmup_batches = knob["warmup_batches"]
        self.down_hysteresis = knob["down_hysteresis"]
        self.up_hysteresis = knob["up_hysteresis"]
        self.ceiling_coeff = knob["ceiling_coeff"]
        if initial_steps in self.candidate_steps:
            self.current_steps = initial_steps
        else:
            self.current_steps = self.candidate_steps[len(self.candidate_steps) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0

    def update(self, num_correct_drafts_per_req: list[int]) -> bool:
        if not num_correct_drafts_per_req:
            return False
        if self.current_steps > 0:
            batch_avg = sum(num_correct_drafts_per_req) / len(num_correct_drafts_per_req)
            self.ema_accept_len = (
                1 - self.ema_alpha
            ) * self.ema_accept_len + self.ema_alpha * batch_avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return False
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute_params()

    def _recompute_params(self) -> bool:
        old_steps = self.current_steps
        current_idx = old_idx = self.candidate_steps.index(old_steps)
        if old_steps == 0:
            current_idx = min(current_idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[current_idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old_steps, target)
        while current_idx > 0:
            prev_step = self.candidate_steps[current_idx - 1]
            drop = (0.5 if prev_step == 0 else prev_step - 0.5) + self.down_hysteresis
            if self.ema_accept_len > drop:
                break
            current_idx -= 1
        if current_idx == old_idx:
            while current_idx < len(self.candidate_steps) - 1:
                rise = self.candidate_steps[current_idx] - 0.5 + self.up_hysteresis
                if self.ema_accept_len <= rise:
                    break
                current_idx += 1
        target = self.candidate_steps[current_idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if ceiling < target <= old_steps:
                while current_idx > 0 and self.candidate_steps[current_idx] > ceiling:
                    current_idx -= 1
                target = self.candidate_steps[current_idx]
        return self._apply(old_steps, target)

    def _apply(self, old_steps: int, target: int) -> bool:
        if target == old_steps:
            return False
        self.current_steps = target
        log.info(
            f"Adaptive spec params updated: steps {old_steps} -> {target} "
            f"(ema_accept_len={self.ema_accept_len:.2f})"
        )
        return True


class AdaptivePolicy:
    """AdaptiveSpeculativeParams (adaptive_spec_params.py:275-358): routes a batch size to its
    slot."""

    def __init__(self, initial_steps: int, config: dict[str, Any], cuda_graph_bs: list[int]):
        slots = adaptive_slots(config)
        self.thresholds = sorted(slots)
        self.slots = {bs: AdaptiveStepSlot(initial_steps, slots[bs]) for bs in self.thresholds}
        self.cuda_graph_bs = sorted(cuda_graph_bs) or None
        self.candidate_steps = sorted({s for p in self.slots.values() for s in p.candidate_steps})
        first = self.slots[self.thresholds[0]]
        log.info(
            f"AdaptiveSpeculativeParams initialized: steps={first.current_steps}, "
            f"candidate_steps={first.candidate_steps}"
        )

    def route(self, batch_size: int) -> AdaptiveStepSlot:
        padded = batch_size
        if self.cuda_graph_bs is not None:
            i = bisect.bisect_left(self.cuda_graph_bs, batch_size)
            padded = self.cuda_graph_bs[i] if i < len(self.cuda_graph_bs) else batch_size
        i = bisect.bisect_right(self.thresholds, padded) - 1
        return self.slots[self.thresholds[max(0, i)]]

    def steps_for_batch(self, batch_size: int) -> int:
        return self.route(batch_size).current_steps

    def on_verify_complete(self, accepted_drafts: list[int], batch_size: int) -> int | None:
        slot = self.route(batch_size)
        return slot.current_steps if slot.update(accepted_drafts) else None


class AdaptivePerfModel(PerfModel):
    """The PerfModel of an adaptive server: each decode step costs and accepts at the steps the
    policy has active for that batch (`PerfModel.at_steps`). The engine calls it as any
    PerfModel (decode_step_s once per decode batch, then sample_tokens per request), which is
    where the policy is fed and consulted; `spec` stays the launch's (SGLang's decode log line
    divides by the launch's draft tokens too, metrics_reporter.py:975-980)."""

    def __init__(self, base: PerfModel, policy: AdaptivePolicy):
        super().__init__(base.hw, base.target, base.dep)
        assert self.spec is not None
        self.policy = policy
        self.current = self.spec.steps
        self.switches = 0
        self.steps_used: dict[int, int] = {}  # steps -> decode batches served at them
        self._models: dict[int, PerfModel] = {}
        self._accepted: list[int] = []
        self._batch = 0
        self._pending_cost = 0.0

    def at(self, steps: int) -> PerfModel:
        if steps not in self._models:
            self._models[steps] = self.at_steps(steps)
        return self._models[steps]

    def _activate(self, steps: int) -> None:
        if steps == self.current:
            return
        log.info(
            f"Switch adaptive runtime state: steps {self.current} -> {steps}, "
            f"draft_tokens {self.current + 1} -> {steps + 1}"
        )
        self.current = steps
        self.switches += 1
        self._pending_cost += SWITCH_COST_S

    def _verify_complete(self) -> None:
        if self._accepted:
            new = self.policy.on_verify_complete(self._accepted, self._batch)
            if new is not None:
                self._activate(new)
        self._accepted = []

    def decode_step_s(self, batch: int, context: int) -> float:
        if not self.dep.overlap:
            self._verify_complete()  # the last batch's result, then this batch's activation
        self._activate(self.policy.steps_for_batch(batch))
        if self.dep.overlap:
            self._verify_complete()  # processed while this batch runs
        self._batch = batch
        self.steps_used[self.current] = self.steps_used.get(self.current, 0) + 1
        cost, self._pending_cost = self._pending_cost, 0.0
        return self.at(self.current).decode_step_s(batch, context) + cost

    def sample_tokens(self, rng: random.Random, position: int, prompt_factor: float) -> int:
        tokens = self.at(self.current).sample_tokens(rng, position, prompt_factor)
        self._accepted.append(tokens - 1)  # num_correct_drafts_per_req
        return tokens

    def expected_accept_len(self, position: int = 0, prompt_factor: float = 1.0) -> float:
        return self.at(self.current).expected_accept_len(position, prompt_factor)

    def memory_plan(self, mem_fraction_static: float) -> MemoryPlan:
        """Every candidate's CUDA graphs are captured at start-up (init_states)."""
        plan = super().memory_plan(mem_fraction_static)
        if not self.dep.cuda_graph:
            return plan
        extra = sum(
            cuda_graph_mib(self.dep.graph_max_bs, self.at(k).spec, fixed_mib=0)
            for k in self.policy.candidate_steps
            if k != self.spec.steps  # type: ignore[union-attr]
        )
        needed = plan.non_static_mib + extra
        failure = plan.failure
        if failure is None and needed > plan.gpu_mib - plan.static_mib:
            failure = "graph_oom"
        return replace(
            plan, graph_mib=plan.graph_mib + extra, non_static_mib=needed, failure=failure
        )


def adaptive_model(model: PerfModel, args: dict[str, Any]) -> PerfModel:
    """`model` as an adaptive server serves it, when the launch asked for (and kept) adaptive."""
    if not args.get("speculative_adaptive") or model.spec is None:
        return model
    config = adaptive_config(args.get("speculative_adaptive_config"))
    return AdaptivePerfModel(model, AdaptivePolicy(model.spec.steps, config, model.captured))
