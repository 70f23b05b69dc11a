"""A request's token timeline: when each of its stream chunks arrived, with how many tokens.

Every time is on the server's clock (`harness.measure.clock`). The points are the (arrival time,
cumulative tokens) of the stream's chunks, so rates can be computed for exactly the tokens that
arrived inside a window (`harness.measure.metrics`). `harness.measure.client` fills one per
request; the simulator's per-chunk stamps ride along for `harness.measure.clock.restamp`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.record.results import RequestRecord


@dataclass
class Timeline:
    record: RequestRecord
    points: list[tuple[float, int]] = field(default_factory=list)  # (time, cumulative tokens)
    # The simulator's per-chunk stamps: virtual seconds from its receipt of the request to the
    # chunk, one per point (real SGLang sends none). Read by `restamp`.
    stamps: list[float] = field(default_factory=list)
    # And the wall seconds from its receipt to sending the chunk: the simulator's own share of the
    # wall time (timer lateness, its event loop, falling behind), none of it the client's.
    walls: list[float] = field(default_factory=list)
    exact: bool = True  # token counts per chunk from the server, not spread over the chunks
    answer: str = ""  # the streamed answer text, kept only with benchmark.rounds > 1
    scaled_end_s: float | None = None  # the end on the client's scaled clock, before `restamp`
