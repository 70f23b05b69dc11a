"""P(>=k) from synthetic stream timelines (harness.measure.step_acceptance): exact values, the
first chunk and the cut last step, chunks that merged, and the launches whose chunks are not
verify steps at all. A timeline is written as its cumulative token counts, one per chunk."""

from __future__ import annotations

import pytest

from harness.measure.step_acceptance import (
    MERGED_SHARE_MAX,
    StepShape,
    count_steps,
    histogram_metrics,
    launch_steps,
    merged_levels,
    step_histograms,
)
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord, StepHistogram, TrialResult, stepped_metrics
from harness.sglang.speculative import max_accepted_drafts
from tests.conftest import eagle3, kimi_server

DEPTH3 = StepShape(depth=3)  # 3/1/4: a step carries 1 to 4 tokens


def line(counts, verify=None, concurrency=1, exact=True, error=None, reason="stop"):
    """A finished request whose chunks carried `counts` tokens cumulatively."""
    record = RequestRecord(
        "measure", 1, concurrency, "p", 0.0, 0.1, 1.0, completion_tokens=counts[-1],
        finish_reason=reason, verify_ct=verify, error=error,
    )  # fmt: skip
    return Timeline(record, [(0.1 * i, n) for i, n in enumerate(counts)], exact=exact)


def cumulative(*sizes):
    """Prefill's token, then one chunk per step of these sizes."""
    counts = [1]
    for size in sizes:
        counts.append(counts[-1] + size)
    return counts


def test_p_at_least_k_is_the_share_of_steps_with_k_plus_one_tokens_or_more():
    # Steps of 3, 2, 1, 4 tokens, then a 1-token step inside the last 4 tokens (not counted).
    [hist] = step_histograms([line(cumulative(3, 2, 1, 4, 1), verify=5)], DEPTH3)
    assert hist.step_tokens == [1, 1, 1, 1] and hist.steps == 4
    assert hist.at_least == [3 / 4, 2 / 4, 1 / 4]
    assert hist.refused is None and hist.requests == 1 and hist.merged_steps == 0


def test_requests_pool_per_level_and_each_keeps_its_own_counts():
    one = line(cumulative(4, 4, 1, 2, 4, 3), verify=6)  # counted: 4, 4, 1, 2, 4 (3: the end)
    two = line(cumulative(1, 1, 4, 4, 2), verify=5)  # counted: 1, 1, 4, 4
    other = line(cumulative(2, 2, 2, 2, 2), verify=5, concurrency=8)  # counted: 2, 2, 2, 2
    hists = step_histograms([one, two, other], DEPTH3)
    assert [h.concurrency for h in hists] == [1, 8]
    assert hists[0].step_tokens == [3, 1, 0, 5] and hists[0].steps == 9
    assert hists[0].at_least == pytest.approx([6 / 9, 5 / 9, 5 / 9])
    assert hists[1].at_least == [1.0, 0.0, 0.0] and hists[1].steps == 4
    assert one.record.step_tokens == [1, 1, 0, 3] and two.record.step_tokens == [2, 0, 0, 2]
    assert histogram_metrics(hists) == {"accept_steps_c1": 9.0, "accept_steps_c8": 4.0}


def test_the_first_chunk_is_prefills_token_never_a_step():
    # Every verify step accepted all 3 drafts: P(>=k) is 1 at every depth. Read as a step, the
    # first chunk's single token would be a full rejection (P(>=1) 4/5).
    [hist] = step_histograms([line(cumulative(4, 4, 4, 4, 4), verify=5)], DEPTH3)
    assert hist.at_least == [1.0, 1.0, 1.0] and hist.steps == 5


def test_a_step_cut_by_max_tokens_is_not_a_rejection():
    # max_tokens 10: steps of 4 and 4, then a step SGLang cut to the 1 token left (finished_len).
    cut = line([1, 5, 9, 10], verify=3, reason="length")
    [hist] = step_histograms([cut], DEPTH3)
    assert hist.at_least == [1.0, 1.0, 1.0] and hist.steps == 2


def test_a_last_step_of_the_most_a_step_carries_was_not_cut_and_counts():
    # Final length 13: the last step began 4 tokens before the end and carried all 4.
    [hist] = step_histograms([line(cumulative(4, 4, 4), verify=3, reason="length")], DEPTH3)
    assert hist.step_tokens == [0, 0, 0, 3]


def test_no_step_counts_where_the_end_could_have_cut_it_whatever_it_carried():
    # Final length 12. The 1-token step at 9 is not the last chunk, but with 3 tokens left a
    # longer step would have been cut too: counting only its short outcome would read low.
    [hist] = step_histograms([line([1, 5, 9, 10, 12], verify=4, reason="length")], DEPTH3)
    assert hist.step_tokens == [0, 0, 0, 2]


def test_a_chat_step_sent_as_reasoning_then_content_is_one_step():
    # Both chunks carry the step's cumulative usage: the second adds no token, and the five
    # steps match the server's verify count.
    split = line([1, 4, 4, 8, 12, 16, 20], verify=5)
    [hist] = step_histograms([split], DEPTH3)
    assert hist.step_tokens == [0, 0, 1, 4] and hist.left_out == 0 and hist.merged_steps == 0


def test_merged_steps_below_the_share_are_left_out_and_counted():
    # 150 steps of 2 tokens, one chunk of 6 (two steps of 3 merged: over the 4 a step can
    # carry), the server's verify count one more than the chunks.
    sizes = [2] * 75 + [6] + [2] * 75 + [4]
    [hist] = step_histograms([line(cumulative(*sizes), verify=153)], DEPTH3)
    assert hist.refused is None and hist.merged_steps == 1
    assert hist.merged_share == pytest.approx(1 / 153) and hist.merged_share < MERGED_SHARE_MAX
    assert hist.step_tokens == [0, 150, 0, 1]  # the 6-token chunk is not a step


def test_merged_steps_within_the_bound_are_counted_from_the_verify_count():
    # Two 2-token steps arrived as one 4-token chunk: nothing in the chunks shows it, the
    # server's verify count does (10 steps, 9 chunks after the first).
    [hist] = step_histograms([line(cumulative(*[2] * 8, 4, 4, 4), verify=12)], DEPTH3)
    assert hist.merged_steps == 1 and hist.merged_share == pytest.approx(1 / 12)
    assert hist.at_least == [] and "merged" in hist.refused
    assert merged_levels([hist]) == [1]


def test_without_a_verify_count_the_chunks_over_the_bound_are_the_evidence():
    trusted = line(cumulative(*[2] * 120), verify=None)
    [hist] = step_histograms([trusted], DEPTH3)
    assert hist.merged_steps == 0 and hist.refused is None  # taken on trust
    merged = line(cumulative(*[2] * 60, 9, 7, *[2] * 60), verify=None)  # 9: >= 3 steps; 7: >= 2
    [hist] = step_histograms([merged], DEPTH3)
    assert hist.merged_steps == 3 and "merged" in hist.refused
    first = line([6 + 2 * i for i in range(61)], verify=None)  # 6: prefill's + >= 2 steps
    assert count_steps(first, 3).merged == 2 and count_steps(first, 3).seen == 60


def test_more_chunks_than_verify_steps_leaves_the_request_out():
    odd = line(cumulative(2, 2, 2, 2, 2), verify=3)
    good = line(cumulative(3, 3, 3, 3, 3), verify=5)
    [hist] = step_histograms([odd, good], DEPTH3)
    assert hist.left_out == 1 and hist.requests == 1 and hist.step_tokens == [0, 0, 4, 0]
    assert odd.record.step_tokens is None and good.record.step_tokens == [0, 0, 4, 0]


def test_failed_requests_are_not_read_and_counts_spread_over_chunks_are_left_out():
    failed = line(cumulative(4, 4, 4), verify=3, error="cut: still running")
    spread = line(cumulative(4, 4, 4, 4), verify=4, exact=False)
    [hist] = step_histograms([failed, spread], DEPTH3)
    assert hist.left_out == 1 and hist.steps == 0
    assert hist.refused == "no verify step could be counted: no per-chunk token counts"


@pytest.mark.parametrize(
    ("overrides", "info", "depth", "refused"),
    [
        ({}, {}, 3, None),  # 3/1/4
        ({"steps": 5, "topk": 4, "draft": 4}, {}, 3, None),  # a tree of 3 drafts: depth 3
        ({}, {"speculative_num_steps": 5, "speculative_num_draft_tokens": 6}, 5, None),
        ({"stream_interval": 4}, {}, 3, "--stream-interval 4"),  # chunks only: the server's
        ({}, {"stream_interval": 8}, 3, "--stream-interval 8"),  # histograms still count
        ({"speculative_adaptive": True}, {}, 0, "adaptive"),
    ],
)
def test_a_launch_says_what_a_step_carries_or_why_its_chunks_are_not_steps(
    overrides, info, depth, refused
):
    shape = launch_steps(eagle3(30000, **overrides), info)
    assert shape.depth == depth
    why = shape.refused or shape.stream_refused
    assert (why is None) if refused is None else refused in why
    assert launch_steps(kimi_server(30000), {}) is None  # the baseline: nothing to count


def test_a_refused_launch_records_why_at_every_level_and_counts_nothing():
    lines = [line(cumulative(4, 4, 4), verify=3), line(cumulative(4, 4), verify=2, concurrency=4)]
    hists = step_histograms(lines, StepShape(0, "--stream-interval 4: ..."))
    assert [(h.concurrency, h.refused, h.at_least) for h in hists] == [
        (1, "--stream-interval 4: ...", []),
        (4, "--stream-interval 4: ...", []),
    ]
    assert lines[0].record.step_tokens is None and histogram_metrics(hists) == {}


def test_the_draft_depth_of_chains_and_trees():
    assert max_accepted_drafts(3, 4) == 3  # chain: draft tokens = steps + 1
    assert max_accepted_drafts(5, 4) == 3  # a tree of 3 drafts cannot be 5 deep
    assert max_accepted_drafts(3, 8) == 3  # a wide tree: depth is the steps
    assert max_accepted_drafts(0, 1) == 0  # adaptive's drafting off


def test_result_json_keeps_the_histograms_and_mlflow_gets_them_by_depth(tmp_path):
    hist = StepHistogram(1, at_least=[0.75, 0.5, 0.25], steps=4, step_tokens=[1, 1, 1, 1])
    refused = StepHistogram(8, refused="--stream-interval 4: ...")
    result = TrialResult(
        "t", "trial", "ok", "sim", True, 1.0, {}, accept_by_window=[3.0, 2.5],
        step_histograms=[hist, refused],
    )  # fmt: skip
    result.write(tmp_path)
    assert TrialResult.read(tmp_path).step_histograms == [hist, refused]
    assert stepped_metrics(result) == [
        ("accept_len_by_window", 3.0, 0),
        ("accept_len_by_window", 2.5, 1),
        ("accept_at_least_c1", 0.75, 1),
        ("accept_at_least_c1", 0.5, 2),
        ("accept_at_least_c1", 0.25, 3),
    ]


def test_the_servers_own_histogram_is_taken_whole_and_exact():
    # 0.5.23 spec_correct_drafts_histogram: [j] verify steps accepted j drafts, the last step
    # counted whole although max_tokens cut its tokens; chunks that merged do not matter.
    merged = line(cumulative(4, 8, 2), verify=5)  # a chunk of 8: two steps merged
    merged.record.drafts_histogram = [1, 1, 0, 3]
    hist = step_histograms([merged], StepShape(3))[0]
    assert hist.source == "server" and hist.merged_steps == 0 and hist.refused is None
    assert hist.step_tokens == [1, 1, 0, 3] and hist.steps == 5
    assert hist.at_least == pytest.approx([4 / 5, 3 / 5, 3 / 5])
    assert merged.record.step_tokens == [1, 1, 0, 3]


def test_a_short_histogram_is_padded_and_one_deeper_than_the_launch_is_left_out():
    short = line(cumulative(2, 2), verify=2)
    short.record.drafts_histogram = [0, 2]
    deep = line(cumulative(2, 2), verify=2)
    deep.record.drafts_histogram = [0, 0, 0, 0, 2]  # 4 drafts accepted at depth 3: not this launch
    hist = step_histograms([short, deep], StepShape(3))[0]
    assert hist.step_tokens == [0, 2, 0, 0] and hist.left_out == 1


def test_a_coarse_stream_counts_from_the_server_or_not_at_all():
    with_hist = line(cumulative(4, 4), verify=2)
    with_hist.record.drafts_histogram = [0, 0, 0, 2]
    without = line(cumulative(4, 4), verify=2, concurrency=4)
    shape = StepShape(3, stream_refused="--stream-interval 4: ...")
    by_level = {h.concurrency: h for h in step_histograms([with_hist, without], shape)}
    assert by_level[1].source == "server" and by_level[1].at_least == [1.0, 1.0, 1.0]
    assert by_level[4].at_least == [] and "--stream-interval 4" in by_level[4].refused


def test_a_level_counted_from_both_sources_says_mixed():
    a, b = line(cumulative(4, 4, 4), verify=3), line(cumulative(4, 4, 4), verify=3)
    a.record.drafts_histogram = [0, 0, 0, 3]
    assert step_histograms([a, b], StepShape(3))[0].source == "mixed"
