"""How the simulator streams a request as SGLang does: server-sent events, one per engine chunk.

Every generation endpoint streams the same way (SGLang 0.5.23 `entrypoints/http_server.py` and
`entrypoints/openai/serving_*.py`): `data: <json>\n\n` per chunk the engine emits (one per verify
step), then, for the OpenAI endpoints on `stream_options.include_usage`, a usage chunk, then
`data: [DONE]`. A client that goes away mid-stream aborts the request in the engine. An abort with
a status code (the abort-request fault: out of memory after retraction) ends the chunks: OpenAI's
endpoints send one `{"error": ...}` chunk for it (`error_event`), /generate a last chunk whose
finish reason says so; 0.5.1.post3 raises inside the stream instead, so the response is cut
(`cut`). What each endpoint sends per chunk is its own (`event`); the rest is here.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from fastapi.responses import StreamingResponse

from harness.sim.api.state import ABORT_STATUS, ServerState, finish_request
from harness.sim.request import Chunk, SimRequest

DONE = "data: [DONE]\n\n"


def sse(payload: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"data: {json.dumps(payload)}\n\n"


@dataclass(frozen=True)
class StreamOptions:
    """OpenAI's `stream_options` (protocol.py StreamOptions)."""

    include_usage: bool  # a usage chunk (no choices) before [DONE]
    continuous_usage: bool  # continuous_usage_stats: usage on every chunk too

    @classmethod
    def of(cls, body: dict[str, Any]) -> StreamOptions:
        options = body.get("stream_options") or {}
        return cls(
            include_usage=bool(options.get("include_usage")),
            continuous_usage=bool(options.get("continuous_usage_stats")),
        )


def stream(
    state: ServerState,
    request: SimRequest,
    event: Callable[[Chunk], dict[str, Any]],
    trailer: Callable[[], dict[str, Any]] | None = None,
) -> StreamingResponse:
    """`request` streamed: `event(chunk)` for each engine chunk up to the last, `trailer()` (the
    usage chunk) after it when given, then [DONE]. `event` may raise (`cut`)."""
    request.stream = True  # its counters' is_streaming="true" series
    return StreamingResponse(
        _events(state, request, event, trailer), media_type="text/event-stream"
    )


async def _events(
    state: ServerState,
    request: SimRequest,
    event: Callable[[Chunk], dict[str, Any]],
    trailer: Callable[[], dict[str, Any]] | None,
) -> AsyncIterator[str]:
    finished = False
    try:
        while not finished:
            chunk = await request.queue.get()
            finished = chunk.finish_reason is not None
            yield sse(event(chunk))
        if trailer is not None:
            yield sse(trailer())
        yield DONE
        finish_request(state, request)
    finally:
        if not finished:  # the client went away (or the stream failed) before the last chunk
            state.engine.abort(request)


async def chunks(request: SimRequest) -> AsyncIterator[Chunk]:
    """The request's engine chunks up to its last one, for an answer sent whole."""
    while True:
        chunk = await request.queue.get()
        yield chunk
        if chunk.finish_reason is not None:
            return


def error_event(request: SimRequest) -> dict[str, Any]:
    """SGLang 0.5.23 serving_base.create_streaming_error_response: an abort with a status code (a
    system error: OOM, timeout) is one `{"error": ...}` chunk; the loop breaks, then the usage
    chunk (and chat's sglext) and [DONE] follow as usual."""
    code, name = ABORT_STATUS
    error = {"object": "error", "message": request.abort, "type": name, "param": None}
    return {"error": {**error, "code": code}}


def cut(request: SimRequest) -> NoReturn:
    """0.5.1.post3 raises HTTPException inside the stream on an abort: the response is cut."""
    raise RuntimeError(f"HTTPException(status_code=500): {request.abort}")


def sim_stamps(request: SimRequest, at: float) -> dict[str, float]:
    """Simulator only, on each chunk: the virtual seconds since receipt (harness.measure.clock)
    and the wall seconds the simulator held the request (harness.measure.metrics.restamp)."""
    return {
        "sim_elapsed_s": round(at - request.submitted_at, 9),
        "sim_wall_s": round(time.monotonic() - request.received_wall, 9),
    }
