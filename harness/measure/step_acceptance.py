"""P(>=k) per concurrency level: the share of verify steps that yield at least k + 1 tokens (at
least k accepted drafts), k = 1 .. the draft depth, from the stream's per-chunk token counts.

A chain's k-th draft does not know how many follow it, so P(>=k) measured on one long chain gives
every shorter chain's accept length, tau(s) = 1 + sum_{k<=s} P(>=k).

A request's steps come from the server's own histogram where it sent one (`server_steps`:
SGLang 0.5.23 spec_correct_drafts_histogram, every verify step by the drafts it accepted, whole),
else from its stream's chunks (`count_steps`). The chunks rest on the stream's structure, read
from SGLang 0.5.23's released source (docs/measurement.md, "Acceptance by draft depth"), and each
assumption is checked here:

- **One chunk, one verify step.** At --stream-interval 1 the scheduler sends a streaming
  request's new tokens after every step (srt/managers/scheduler_components/output_streamer.py
  `accept`): the first chunk is prefill's token, each later one a verify step's accepted drafts +
  the bonus token. A coarser interval sends a chunk once that many tokens are unsent, several
  steps in one; adaptive speculation changes the depth between steps. Either way nothing is
  counted and the record says why (`StepShape.refused`).
- **Chunks that merge under load.** The tokenizer manager hands an HTTP handler that fell behind
  everything queued for it as one chunk (srt/managers/tokenizer_manager.py `_wait_one_response`,
  `_coalesce_streaming_chunks`), and a chat step whose text the reasoning or tool parser holds
  back sends no chunk (its tokens ride with the next). A step yields at most depth + 1 tokens
  (`harness.sglang.speculative.max_accepted_drafts`), so a chunk over that holds several steps;
  where the server reports a request's verify steps (`spec_verify_ct`), the chunks short of it
  count every merged step, else the chunks over the bound give a lower bound. The merged steps'
  share bounds the error (a merge turns two steps into one, so the mean step reads high by about
  that share): above MERGED_SHARE_MAX the level is refused, below it the chunks over the bound are
  left out and the rest counted. A chat step split into a reasoning chunk and a content chunk
  (both carrying the step's cumulative usage) is one step: a chunk without new tokens is skipped.
- **The ends.** The first chunk is prefill's token, never a verify step. The last step is cut
  where the request ends: at max_tokens (schedule_batch.py `update_finish_state`, finished_len)
  or after a stop token (`output_ids_through_stop`), so its short count is not a rejection. A
  step is counted only when the request's final length left room for a whole step after it began
  (final - tokens before it >= depth + 1): which steps count then depends on where they began, not
  on what they accepted, and a step cut by the end is never read as drafts rejected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord, StepHistogram
from harness.sglang.speculative import max_accepted_drafts
from harness.spec import ServerSpec

# Above this share of verify steps merged into other chunks a level's P(>=k) is refused: the mean
# step (tau) would read more than 1% high, the accuracy the histogram is for (issue 28: one chain
# predicts shorter chains within 1%).
MERGED_SHARE_MAX = 0.01


@dataclass(frozen=True)
class StepShape:
    """What one verify step can carry in this launch, or why its steps cannot be counted at all
    (`refused`) or not from its chunks (`stream_refused`: the server's histograms still count)."""

    depth: int  # the most drafts one verify step accepts
    refused: str | None = None
    stream_refused: str | None = None


def launch_steps(server: ServerSpec, info: dict[str, Any]) -> StepShape | None:
    """The launch's step shape from what the server says it runs (/server_info), else from what
    was asked; None without speculation."""
    if not server.speculative:
        return None

    def value(name: str) -> Any:
        return info.get(name) if info.get(name) is not None else getattr(server, name)

    steps, draft = value("speculative_num_steps"), value("speculative_num_draft_tokens")
    interval = int(value("stream_interval") or 1)
    if server.speculative_adaptive:
        return StepShape(0, "adaptive speculation changes the draft depth from step to step")
    if steps is None or draft is None:
        return StepShape(0, "the draft depth is unknown (no speculative_num_steps / draft tokens)")
    depth = max_accepted_drafts(int(steps), int(draft))
    if interval > 1:
        return StepShape(
            depth,
            stream_refused=f"--stream-interval {interval}: a chunk carries the steps of "
            f"{interval} tokens, not one verify step (SGLang 0.5.23 output_streamer.py accept)",
        )
    return StepShape(depth)


@dataclass(frozen=True)
class RequestSteps:
    """One request's chunks read as verify steps."""

    step_tokens: list[int]  # the counted steps by tokens carried: [n - 1] steps of n tokens
    seen: int  # chunks after the first that carried tokens: the verify steps seen as such
    merged: int  # verify steps that arrived inside another chunk (a lower bound without verify_ct)
    left_out: str | None = None  # why none of its steps count
    from_server: bool = False  # the server's own histogram, not the chunks


def server_steps(record: RequestRecord, depth: int) -> RequestSteps | None:
    """The request's steps from the server's histogram (0.5.23 spec_correct_drafts_histogram:
    every verify step by the drafts it accepted, counted before max_tokens cuts the last one, so
    exact and whole); None when the server sent none."""
    hist = record.drafts_histogram
    if not record.ok or not hist:
        return None
    if len(hist) > depth + 1 and any(hist[depth + 1 :]):
        why = f"the server's histogram has steps past the launch's depth {depth}"
        return RequestSteps([0] * (depth + 1), 0, 0, why, from_server=True)
    tokens = [*hist[: depth + 1], *[0] * (depth + 1 - len(hist))]
    return RequestSteps(tokens, sum(tokens), 0, from_server=True)


def count_steps(line: Timeline, depth: int) -> RequestSteps | None:
    """The request's verify steps; None when it is not a finished answer (failed, cut)."""
    record = line.record
    if not record.ok or not line.points:
        return None
    bound = depth + 1
    tokens = [0] * bound
    if not line.exact:  # counts spread over the chunks: no chunk's own count is known
        return RequestSteps(tokens, 0, 0, "no per-chunk token counts")
    counts = [n for _, n in line.points]
    final = counts[-1]
    # The first chunk is prefill's one token; more than that merged verify steps into it.
    over = math.ceil((counts[0] - 1) / bound)
    seen, before = 0, counts[0]
    for cumulative in counts[1:]:
        size = cumulative - before
        if size <= 0:  # a step's second chunk (chat: its reasoning, then its content)
            continue
        seen += 1
        if size > bound:  # more than one step can carry: merged steps, left out
            over += math.ceil(size / bound) - 1
        elif final - before >= bound:  # the end left room for a whole step: not cut
            tokens[size - 1] += 1
        before = cumulative
    if record.verify_ct is None:  # taken on trust but for the chunks over the bound
        return RequestSteps(tokens, seen, over)
    if seen > record.verify_ct:
        why = f"{seen} chunks after the first against {record.verify_ct} verify steps"
        return RequestSteps([0] * bound, seen, 0, why)
    return RequestSteps(tokens, seen, max(record.verify_ct - seen, over))


def pool(concurrency: int, requests: Sequence[RequestSteps], depth: int) -> StepHistogram:
    """One level's P(>=k) over its requests' counted steps, or why it is refused."""
    counted = [r for r in requests if r.left_out is None]
    tokens = [sum(column) for column in zip(*(r.step_tokens for r in counted), strict=True)]
    tokens = tokens or [0] * (depth + 1)
    steps, seen = sum(tokens), sum(r.seen for r in counted)
    merged = sum(r.merged for r in counted)
    share = merged / (seen + merged) if seen + merged else 0.0
    sources = {r.from_server for r in counted}
    hist = StepHistogram(
        concurrency,
        source={frozenset({True}): "server", frozenset({False}): "stream"}.get(
            frozenset(sources), "mixed" if sources else ""
        ),
        steps=steps,
        step_tokens=tokens,
        requests=sum(1 for r in counted if sum(r.step_tokens)),
        left_out=len(requests) - len(counted),
        merged_steps=merged,
        merged_share=share,
    )
    if share > MERGED_SHARE_MAX:
        hist.refused = (
            f"{share:.1%} of the verify steps arrived merged into other chunks (over "
            f"{MERGED_SHARE_MAX:.0%}): SGLang coalesces a request's queued steps when its client "
            "falls behind the stream"
        )
    elif not steps:
        reasons = sorted({r.left_out for r in requests if r.left_out})
        hist.refused = "no verify step could be counted" + (f": {reasons[0]}" if reasons else "")
    else:  # P(>=k): steps that carried k + 1 tokens or more, [k:] of the counts by tokens
        hist.at_least = [sum(tokens[k:]) / steps for k in range(1, depth + 1)]
    return hist


def step_histograms(timelines: Sequence[Timeline], shape: StepShape) -> list[StepHistogram]:
    """P(>=k) per concurrency level over the measured requests; each counted request's own
    counts go on its record (`step_tokens`, requests.jsonl)."""
    levels = sorted({line.record.concurrency for line in timelines})
    if shape.refused is not None:
        return [StepHistogram(c, refused=shape.refused) for c in levels]
    by_level: dict[int, list[RequestSteps]] = {c: [] for c in levels}
    for line in timelines:
        request = server_steps(line.record, shape.depth)
        if request is None and shape.stream_refused is not None:
            if line.record.ok:
                request = RequestSteps([0] * (shape.depth + 1), 0, 0, shape.stream_refused)
        elif request is None:
            request = count_steps(line, shape.depth)
        if request is None:
            continue
        by_level[line.record.concurrency].append(request)
        if request.left_out is None:
            line.record.step_tokens = request.step_tokens
    return [pool(c, by_level[c], shape.depth) for c in levels]


def histogram_metrics(hists: Sequence[StepHistogram]) -> dict[str, float]:
    """accept_steps_c<C>: the verify steps each recorded level's P(>=k) counts (the values
    themselves are stepped metrics, accept_at_least_c<C>: harness.record.results)."""
    return {f"accept_steps_c{h.concurrency}": float(h.steps) for h in hists if h.at_least}


def merged_levels(hists: Sequence[StepHistogram]) -> list[int]:
    """The levels refused because too many of their steps arrived merged."""
    return [h.concurrency for h in hists if h.merged_share > MERGED_SHARE_MAX]
