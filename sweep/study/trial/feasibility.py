"""Where `mem_fraction_static` runs out, per memory-relevant group, learned from the study's trials.

SGLang reserves `mem_fraction_static` of each GPU for weights and the KV pool; what is left must
hold the activations and the CUDA graphs, which grow with the draft tokens verified per request
and the captured batch size. So, for one setup (model, drafter, hardware, CUDA graphs on/off,
running-request cap), the outcome of a start-up is monotone in the fraction within a *group*
(the draft tokens and the CUDA-graph batch): a GPU OOM at `m` repeats at every
fraction >= `m`, a start at `m` succeeds at every fraction <= `m` (down to the KV-pool floor:
"not enough memory" repeats at every fraction <= its own). The boundary of a group is bracketed by
its largest success and its smallest GPU OOM.

Evidence from the group itself is *direct*. Evidence from another group is *indirect*: a group
that needs no more memory (fewer or equal draft tokens, a smaller or equal graph batch) OOMing at
`m` predicts this group OOMs at `m` too (`candidates.predicts_oom`), and a group that needs at
least as much succeeding at `m` says this one fits. Indirect evidence rests on the memory model
being right about which group needs more (it ignores the draft tree's shape, for one), so a
predicted OOM that rests on it alone is launched once per group to check (`recheck`); after that
the group has its own evidence. An OOM of a launch of the same kind (chain or tree) that `c`
is at least as large as in every term (draft tokens, steps x topk branches, graph batch)
counts as direct: nothing is left to check.

HiCache is not in the group: its tier is host memory, not GPU memory beyond the pool. In SGLang
0.5.23 the host pool is allocated on the host, pinned (`mem_cache/pool_host/mha.py` and `mla.py`,
`alloc_func(..., device=self.device, pin_memory=...)` with the host device); on the GPU it adds
one pointer per layer (`k_device_ptrs`), and `arg_groups/hicache_hook.py::handle_hicache` leaves
the fraction alone. So a GPU OOM at `m` with HiCache off is the same OOM with any HiCache size,
and the other way round (the simulator plans it so too: harness/sim/model/perf_model.py, host RAM
only). Where HiCache fails is the host (`host` OOMs, `candidates.predicts_oom`).
"""

from __future__ import annotations

from dataclasses import dataclass

from optuna.trial import FrozenTrial

from harness.record.results import Outcome
from sweep.study.trial.candidates import Candidate, predicts_oom

STARTED = (Outcome.OK, Outcome.PRUNED)  # the server came up at this fraction
RECHECK_ATTR = "recheck_of"  # set on a trial launched to check an indirect predicted OOM


@dataclass(frozen=True)
class Point:
    number: int
    candidate: Candidate
    outcome: str
    oom_kind: str | None
    recheck: bool


@dataclass(frozen=True)
class Boundary:
    """What the study knows about one group's fractions: `fits` the largest one known to start,
    `ooms` the smallest known to run out of GPU memory, `floor` the largest whose KV pool was too
    small; each None when unknown, with whether it came from the group itself."""

    fits: float | None = None
    fits_direct: bool = False
    ooms: float | None = None
    ooms_direct: bool = False
    floor: float | None = None

    @property
    def settled(self) -> bool:
        """Both sides known from the group itself."""
        return self.fits_direct and self.ooms_direct


@dataclass(frozen=True)
class Prediction:
    source: FrozenTrial
    direct: bool  # the OOM was of this candidate's own group


def group_of(c: Candidate) -> tuple:
    """The fields that decide how much GPU memory beyond the static pool a start-up needs (not
    HiCache: the module docstring)."""
    return (c.draft_tokens, c.cuda_graph_max_bs)


def same_setup(a: Candidate, b: Candidate) -> bool:
    return (a.context, a.drafter, a.algorithm, a.cuda_graph, a.max_running_requests) == (
        b.context,
        b.drafter,
        b.algorithm,
        b.cuda_graph,
        b.max_running_requests,
    )


def _needs_at_least(a: Candidate, b: Candidate) -> bool:
    """Does `a` need at least the GPU memory beyond the static pool that `b` needs?"""
    graph = (
        a.cuda_graph_max_bs == b.cuda_graph_max_bs
        if a.cuda_graph_max_bs is None or b.cuda_graph_max_bs is None
        else a.cuda_graph_max_bs >= b.cuda_graph_max_bs
    )
    return (a.draft_tokens or 1) >= (b.draft_tokens or 1) and graph


def _larger_in_every_term(a: Candidate, b: Candidate) -> bool:
    """Is `a` at least as large as `b` in every term its start-up's memory beyond the pool grows
    with (the draft tokens verified per request, the draft branches steps x topk, the CUDA-graph
    batch), and of the same kind, both chains or both trees (SGLang picks the
    attention backend, and with it the kernels' workspace, from the topk:
    `harness/sglang/attention.py`)? Then `b`'s GPU OOM at `m` is `a`'s too, and checking it by a
    launch only spends one (on a memory-tight card such rechecks were a third of a search)."""
    same_kind = ((a.topk or 1) > 1) == ((b.topk or 1) > 1)
    branches = (a.steps or 0) * (a.topk or 1) >= (b.steps or 0) * (b.topk or 1)
    return same_kind and branches and _needs_at_least(a, b)


class Feasibility:
    def __init__(self, trials: list[FrozenTrial]):
        self.trials = {t.number: t for t in trials}
        self.points: list[Point] = []
        for t in trials:
            attrs = t.user_attrs
            outcome = attrs.get("outcome")
            if "candidate" not in attrs or outcome not in (*STARTED, Outcome.OOM):
                continue
            self.points.append(
                Point(
                    t.number,
                    Candidate.from_dict(attrs["candidate"]),
                    outcome,
                    attrs.get("oom_kind"),
                    RECHECK_ATTR in attrs,
                )
            )

    def _related(self, c: Candidate) -> list[Point]:
        return [
            p
            for p in self.points
            if same_setup(p.candidate, c) and p.candidate.mem_fraction_static is not None
        ]

    def boundary(self, c: Candidate) -> Boundary:
        fits: list[tuple[float, bool]] = []  # (fraction, direct)
        ooms: list[tuple[float, bool]] = []
        floors: list[float] = []
        for p in self._related(c):
            m = p.candidate.mem_fraction_static
            direct = group_of(p.candidate) == group_of(c)
            if p.outcome in STARTED and (direct or _needs_at_least(p.candidate, c)):
                fits.append((m, direct))
            elif p.oom_kind == "gpu" and (direct or _needs_at_least(c, p.candidate)):
                ooms.append((m, direct or _larger_in_every_term(c, p.candidate)))
            elif p.oom_kind == "kv_pool":
                floors.append(m)
        top = max(fits, default=None)  # (m, True) sorts after (m, False): direct wins a tie
        low = min(ooms, key=lambda x: (x[0], not x[1]), default=None)
        return Boundary(
            fits=top[0] if top else None,
            fits_direct=bool(top and top[1]),
            ooms=low[0] if low else None,
            ooms_direct=bool(low and low[1]),
            floor=max(floors, default=None),
        )

    def rechecked(self, c: Candidate) -> bool:
        """Was a trial of this candidate's group already launched to check a prediction?"""
        return any(p.recheck and group_of(p.candidate) == group_of(c) for p in self._related(c))

    def predicted_oom(self, c: Candidate) -> Prediction | None:
        """The OOM that predicts `c` runs out too (a direct one first), or None; None too when a
        start of `c`'s own group at a fraction >= `c`'s contradicts an indirect prediction."""
        indirect = None
        started_above = any(
            p.outcome in STARTED
            and group_of(p.candidate) == group_of(c)
            and c.mem_fraction_static is not None
            and p.candidate.mem_fraction_static >= c.mem_fraction_static
            for p in self._related(c)
        )
        for p in self.points:
            if p.outcome != Outcome.OOM or not predicts_oom(c, p.candidate, p.oom_kind):
                continue
            direct = (
                p.oom_kind != "gpu"
                or group_of(p.candidate) == group_of(c)
                or _larger_in_every_term(c, p.candidate)
            )
            if direct:
                return Prediction(self.trials[p.number], True)
            if indirect is None and not started_above:
                indirect = Prediction(self.trials[p.number], False)
        return indirect
