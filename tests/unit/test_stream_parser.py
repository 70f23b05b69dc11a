"""The client reads SGLang 0.5.23's abort chunks as errors (serving_chat.py: an `{"error": ...}`
chunk from serving_base.create_streaming_error_response, then the usage chunk and [DONE];
/generate: meta_info finish_reason {"type": "abort", ...} from schedule_batch.FINISH_ABORT)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from harness.measure.client import is_aborted, stream_request
from harness.spec import BenchmarkSpec
from harness.workload import Prompt

PROMPT = Prompt("p1", ({"role": "user", "content": "hi"},))
ABORT = (
    "Out of memory even after retracting all other requests in the decode batch. "
    "Aborting the last request."
)


def sse(*payloads: object) -> bytes:
    return "".join(f"data: {json.dumps(p)}\n\n" for p in payloads).encode() + b"data: [DONE]\n\n"


def chat_chunk(content: str | None, finish: str | None = None, usage=None) -> dict:
    delta = {"content": content} if content else {}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "x", "object": "chat.completion.chunk", "choices": [choice], "usage": usage}


def usage(tokens: int) -> dict:
    return {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens}


def gen_chunk(tokens: int, finish: dict | None = None) -> dict:
    meta = {"id": "r", "prompt_tokens": 5, "completion_tokens": tokens, "finish_reason": finish}
    return {"text": "x" * tokens, "meta_info": meta, "index": 0}


def read(api: str, body: bytes):
    spec = BenchmarkSpec(model="m", api=api, max_tokens=64)
    transport = httpx.MockTransport(lambda _request: httpx.Response(200, content=body))

    async def go():
        async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
            return await stream_request(
                client,
                spec,
                PROMPT,
                phase="measure",
                run=1,
                concurrency=1,
                speculative=False,
                server_time=lambda wall: wall,
            )

    return asyncio.run(go()).record


ERROR_CHUNK = {
    "error": {
        "object": "error",
        "message": ABORT,
        "type": "INTERNAL_SERVER_ERROR",
        "param": None,
        "code": 500,
    }
}


def test_chat_error_chunk_then_usage_is_an_aborted_request_not_a_success():
    body = sse(chat_chunk("a"), chat_chunk("b"), ERROR_CHUNK, {"choices": [], "usage": usage(2)})
    record = read("chat", body)
    assert not record.ok and is_aborted(record.error)
    assert "HTTP 500 INTERNAL_SERVER_ERROR" in record.error and ABORT in record.error
    assert record.completion_tokens == 2  # the partial count, kept for the record only


def test_chat_graceful_abort_finish_reason_is_an_aborted_request():
    body = sse(chat_chunk("a"), chat_chunk(None, "abort"), {"choices": [], "usage": usage(1)})
    record = read("chat", body)
    assert not record.ok and is_aborted(record.error)


@pytest.mark.parametrize(
    "last",
    [
        gen_chunk(2, {"type": "abort", "message": ABORT, "status_code": 500, "err_type": None}),
        {"error": {"message": "boom", "type": "invalid_request_error", "code": 400}},
    ],
    ids=["abort-meta", "error-chunk"],
)
def test_generate_abort_meta_is_an_aborted_request(last):
    record = read("generate", sse(gen_chunk(1), gen_chunk(2), last))
    assert not record.ok and is_aborted(record.error)


@pytest.mark.parametrize("api", ["chat", "generate"])
def test_a_whole_stream_is_still_a_success(api):
    if api == "chat":
        body = sse(chat_chunk("a"), chat_chunk("b", "stop"), {"choices": [], "usage": usage(2)})
    else:
        body = sse(gen_chunk(1), gen_chunk(2, {"type": "stop", "matched": None}))
    record = read(api, body)
    assert record.ok and record.error is None and record.completion_tokens == 2
