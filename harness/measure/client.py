"""One streaming request -> its RequestRecord and its token Timeline.

Two APIs: the OpenAI-style chat endpoint (`/v1/chat/completions`, what users call) and SGLang's
native `/generate` (exact token counts in every chunk). `_StreamState` reads either stream. Every
time is on the server's clock, through the `server_time` function the caller passes (wall
monotonic -> server seconds since the benchmark started).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable
from typing import Any

import httpx
import orjson

from harness.errors import BenchmarkError
from harness.measure.clock import ServerClock
from harness.measure.http_stream import SSE, StreamClient, StreamEnded
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord
from harness.spec import BenchmarkSpec
from harness.workload import Prompt

ABORTED = "aborted by the server"  # how an aborted request's error starts


def deadline_error(spec: BenchmarkSpec) -> str:
    """The error a request that missed its deadline is recorded with."""
    return f"no complete response within {spec.request_deadline_s:.0f} s (wall): stalled"


def is_aborted(error: str | None) -> bool:
    """Whether a request's error says the server aborted it mid-stream."""
    return error is not None and error.startswith(ABORTED)


def sampling_fields(spec: BenchmarkSpec) -> dict[str, Any]:
    """The request's sampling, by SGLang's names in both APIs (ChatCompletionRequest and
    SamplingParams, srt/entrypoints/openai/protocol.py and srt/sampling/sampling_params.py,
    0.5.23). Greedy is temperature 0 alone: SGLang then decodes with top_k = 1 whatever else
    is sent."""
    if spec.greedy:
        return {"temperature": 0.0}
    fields: dict[str, Any] = {"temperature": spec.temperature, "top_p": spec.top_p}
    if spec.top_k is not None:
        fields["top_k"] = spec.top_k
    return fields


def request_body(
    spec: BenchmarkSpec, prompt: Prompt, *, speculative: bool
) -> tuple[str, dict[str, Any]]:
    """The endpoint and the JSON body for `prompt`."""
    if spec.api == "generate":
        text = "\n".join(m["content"] for m in prompt.messages)
        params: dict[str, Any] = {"max_new_tokens": spec.max_tokens, **sampling_fields(spec)}
        if spec.ignore_eos:
            params["ignore_eos"] = True
        return "/generate", {"text": text, "sampling_params": params, "stream": True}
    body: dict[str, Any] = {
        "model": spec.model,
        "messages": list(prompt.messages),
        "max_tokens": spec.max_tokens,
        **sampling_fields(spec),
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "chat_template_kwargs": {"thinking": spec.thinking},
    }
    if speculative:
        body["return_spec_tokens_details"] = True  # SGLang 0.5.23: per-request accept length
    if spec.ignore_eos:
        body["ignore_eos"] = True
    return "/v1/chat/completions", body


async def stream_request(
    client: httpx.AsyncClient,
    spec: BenchmarkSpec,
    prompt: Prompt,
    *,
    phase: str,
    run: int,
    concurrency: int,
    speculative: bool,
    server_time: Callable[[float], float],
    on_start: Callable[[Timeline], None] | None = None,
) -> Timeline:
    """Send one request and read its stream. Never raises for the request's own failure: an HTTP
    error, a malformed stream or a missed deadline becomes `record.error`. `on_start` gets the
    timeline as it fills, so a caller that cancels the request keeps what had arrived."""
    path, body = request_body(spec, prompt, speculative=speculative)
    record = RequestRecord(
        phase, run, concurrency, prompt.id, 0.0, None, None, round=prompt.round,
        category=prompt.category,
    )  # fmt: skip
    timeline = Timeline(record)
    if on_start is not None:
        on_start(timeline)
    points = timeline.points
    state = _StreamState(spec.api, keep_text=spec.rounds > 1)
    now = ServerClock.now

    stamps = timeline.stamps

    def on_event(data: bytes) -> None:  # one SSE payload: parsed, and timed if it has tokens
        chunk = orjson.loads(data)
        if state.add(chunk):
            points.append((server_time(now()), state.tokens))
            if "sim_elapsed_s" in chunk:  # the simulator's stamp (harness.measure.clock.restamp)
                stamps.append(float(chunk["sim_elapsed_s"]))
                if "sim_wall_s" in chunk:
                    timeline.walls.append(float(chunk["sim_wall_s"]))

    record.start_s = server_time(now())
    try:
        async with asyncio.timeout(spec.request_deadline_s):
            if isinstance(client, StreamClient) and client.lean:
                status, text = await client.stream_events(path, orjson.dumps(body), on_event)
                if status != 200:
                    raise BenchmarkError(f"HTTP {status}: {text.decode(errors='replace')[:300]}")
            else:
                await _read_with_httpx(client, path, body, SSE(on_event))
        if state.abort is not None:
            with contextlib.suppress(BenchmarkError):
                state.complete(record)  # the partial counts, kept for the record only
            record.error = f"{ABORTED}: {state.abort}"  # not ok: in no rate, accept or truncation
        else:
            state.complete(record)
    except TimeoutError:
        record.error = deadline_error(spec)
    except (httpx.RemoteProtocolError, StreamEnded) as exc:  # 0.5.1.post3 cuts the stream
        record.error = f"{ABORTED}: the stream ended early ({exc})"
    except (httpx.HTTPError, OSError, BenchmarkError, json.JSONDecodeError) as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    if record.error is None:
        record.end_s = server_time(ServerClock.now())
        timeline.points = state.rescale(points)
        timeline.exact = state.exact
        record.first_token_s = timeline.points[0][0] if timeline.points else None
    timeline.answer = state.answer()
    return timeline


async def _read_with_httpx(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], sse: SSE
) -> None:
    """The same stream through httpx (a plain AsyncClient, an https server): slower per chunk."""
    async with client.stream("POST", path, json=body) as response:
        if response.status_code != 200:
            text = (await response.aread()).decode(errors="replace")[:300]
            raise BenchmarkError(f"HTTP {response.status_code}: {text}")
        async for data in response.aiter_bytes():
            if sse.feed(data):
                break


class _StreamState:
    """What one stream said so far, for chat chunks and /generate chunks alike."""

    def __init__(self, api: str, keep_text: bool = False):
        self.api = api
        # the answer's text pieces (content; reasoning apart), kept for a multi-round user's
        # next turn (harness.measure.rounds) only: a single-round run pays nothing per chunk for
        # them
        self.content: list[str] | None = [] if keep_text else None
        self.reasoning: list[str] = []
        self.tokens = 0  # cumulative, exact when the server reports it, else chunks so far
        self.exact = False
        self.chunks = 0
        self.usage: dict[str, Any] = {}
        self.meta: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.answered = False  # content after the reasoning arrived
        self.abort: str | None = None  # what the server said when it aborted the request

    def add(self, chunk: dict[str, Any]) -> bool:
        """Record a chunk; True if it carried new tokens.

        An aborted request (SGLang 0.5.23) is read as such: on chat an `{"error": {...}}` chunk
        (then the usage chunk and [DONE]) or a choice with finish_reason "abort"; on /generate a
        meta_info finish_reason {"type": "abort", "message": ...} or an `{"error": ...}` chunk."""
        error = chunk.get("error")
        if isinstance(error, dict):
            self.abort = _error_text(error)
            return False
        if self.api == "generate":
            self.meta = chunk.get("meta_info") or self.meta
            reported = int(self.meta.get("completion_tokens") or 0)
            reason = self.meta.get("finish_reason")
            if isinstance(reason, dict):
                self.finish_reason = reason.get("type")
                if self.finish_reason == "abort":
                    self.abort = _error_text(reason)
            self.exact = True
            new = reported > self.tokens
            self.tokens = max(self.tokens, reported)
            self.chunks += int(new)
            return new
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("sglext"):
            self.meta = (chunk["sglext"] or {}).get("spec_tokens_details") or {}
        new = False
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.answered = True
            if delta.get("content") or delta.get("reasoning_content"):
                new = True
                if self.content is not None:
                    self.content.append(delta.get("content") or "")
                    self.reasoning.append(delta.get("reasoning_content") or "")
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            if self.finish_reason == "abort" and self.abort is None:  # a graceful abort
                self.abort = "finish_reason abort"
        if new:
            self.chunks += 1
            if chunk.get("usage"):  # continuous usage: exact cumulative count per chunk
                self.exact = True
                self.tokens = int(chunk["usage"].get("completion_tokens") or self.tokens + 1)
            else:
                self.tokens += 1  # rescaled to the true total at the end
        return new

    def complete(self, record: RequestRecord) -> None:
        """Fill the record from the final usage / meta_info; raise if tokens cannot be counted."""
        source = self.meta if self.api == "generate" else self.usage
        if not source:
            raise BenchmarkError("the stream carried no usage; cannot count tokens")
        details = source.get("completion_tokens_details") or {}
        record.prompt_tokens = source.get("prompt_tokens")
        record.completion_tokens = source.get("completion_tokens")
        record.reasoning_tokens = source.get("reasoning_tokens") or details.get("reasoning_tokens")
        record.finish_reason = self.finish_reason
        record.chunks = self.chunks
        if self.api == "chat":
            record.reasoning_ended = self.answered
        elif record.reasoning_tokens is not None and record.completion_tokens:
            record.reasoning_ended = record.reasoning_tokens < record.completion_tokens
        verify = self.meta.get("spec_verify_ct")
        if verify:
            record.verify_ct = int(verify)
            record.accepted_tokens = self.meta.get("spec_num_correct_drafts")
            record.drafts_histogram = self.meta.get("spec_correct_drafts_histogram") or None

    def answer(self) -> str:
        """The answer's text as the next turn's history holds it: the content (a chat template
        drops earlier turns' reasoning), the reasoning when the answer never left it."""
        if self.content is None:
            return ""
        return "".join(self.content) or "".join(self.reasoning)

    def rescale(self, points: list[tuple[float, int]]) -> list[tuple[float, int]]:
        """Without per-chunk counts, spread the reported total evenly over the chunks."""
        total = int(
            (self.meta if self.api == "generate" else self.usage).get("completion_tokens") or 0
        )
        if self.exact or not points or not total:
            return points
        return [(t, math.ceil(total * n / self.chunks)) for t, n in points]


def _error_text(error: dict[str, Any]) -> str:
    """`HTTP 500 INTERNAL_SERVER_ERROR: <message>` from a chat error chunk's `error` (code,
    type, message) or a /generate abort finish_reason (status_code, message)."""
    code = error.get("code", error.get("status_code"))
    kind = error.get("type") if error.get("type") not in (None, "abort") else None
    head = " ".join(str(part) for part in (f"HTTP {code}" if code else None, kind) if part)
    message = str(error.get("message") or "aborted")
    return f"{head}: {message}" if head else message
