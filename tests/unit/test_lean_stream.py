"""The lean stream reader (harness/measure/http_stream.py) reads every stream the way the httpx path
does: the same records for the bodies of test_stream_parser, whatever the chunking on the wire;
refusals, cut streams and keep-alive reuse over a real socket."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from harness.measure.client import is_aborted, stream_request
from harness.measure.http_stream import StreamClient
from harness.spec import BenchmarkSpec
from tests.unit.test_stream_parser import (
    ABORT,
    ERROR_CHUNK,
    PROMPT,
    chat_chunk,
    gen_chunk,
    read,
    sse,
    usage,
)

BODIES = {
    "chat-ok": (
        "chat",
        sse(chat_chunk("a"), chat_chunk("b", "stop"), {"choices": [], "usage": usage(2)}),
    ),
    "chat-error-chunk": (
        "chat",
        sse(chat_chunk("a"), chat_chunk("b"), ERROR_CHUNK, {"choices": [], "usage": usage(2)}),
    ),
    "chat-graceful-abort": (
        "chat",
        sse(chat_chunk("a"), chat_chunk(None, "abort"), {"choices": [], "usage": usage(1)}),
    ),
    "generate-ok": ("generate", sse(gen_chunk(1), gen_chunk(2, {"type": "stop", "matched": None}))),
    "generate-abort": (
        "generate",
        sse(gen_chunk(1), gen_chunk(2, {"type": "abort", "message": ABORT, "status_code": 500})),
    ),
}


class Wire:
    """A tiny HTTP/1.1 server on the test's own loop: each request gets the next response, its
    body sent in pieces of `piece` bytes (chunked encoding) or raw bytes as they are."""

    def __init__(self, responses: list[bytes]):
        self.responses = list(responses)
        self.connections = 0
        self.requests: list[bytes] = []

    @staticmethod
    def chunked(body: bytes, piece: int, status: str = "200 OK") -> bytes:
        head = f"HTTP/1.1 {status}\r\ntransfer-encoding: chunked\r\n\r\n".encode()
        parts = [body[i : i + piece] for i in range(0, len(body), piece)]
        return head + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.responses:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                response = self.responses.pop(0)
                for i in range(0, len(response), 7):  # split mid-line and mid-size on the wire
                    writer.write(response[i : i + 7])
                    await writer.drain()
                if response.startswith(b"CUT"):
                    break
        except asyncio.IncompleteReadError:
            pass
        writer.close()


def lean_read(api: str, responses: list[bytes], *, headers=None):
    spec = BenchmarkSpec(model="m", api=api, max_tokens=64)
    wire = Wire([r.removeprefix(b"CUT") for r in responses])
    cuts = [r.startswith(b"CUT") for r in responses]

    async def go():
        async def handle(reader, writer):
            if cuts and cuts[0]:  # serve one response, then hang up mid-stream
                cuts.pop(0)
                wire.responses, rest = wire.responses[:1], wire.responses[1:]
                await wire.handle(reader, writer)
                wire.responses = rest
                return
            await wire.handle(reader, writer)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = StreamClient(base_url=f"http://127.0.0.1:{port}", headers=headers)
        try:
            records = []
            for _ in responses:
                timeline = await stream_request(
                    client,
                    spec,
                    PROMPT,
                    phase="measure",
                    run=1,
                    concurrency=1,
                    speculative=False,
                    server_time=lambda wall: wall,
                )
                records.append(timeline)
            return records
        finally:
            await client.aclose()
            server.close()

    return asyncio.run(go()), wire


def same(a, b) -> bool:
    fields = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "finish_reason", "chunks")
    return all(getattr(a, f) == getattr(b, f) for f in fields) and a.error == b.error


@pytest.mark.parametrize("name", list(BODIES))
@pytest.mark.parametrize("piece", [1, 5, 4096])
def test_lean_reader_gives_the_httpx_paths_record_however_the_body_is_cut(name, piece):
    api, body = BODIES[name]
    [timeline], _ = lean_read(api, [Wire.chunked(body, piece)])
    expected = read(api, body)
    assert same(timeline.record, expected), (timeline.record, expected)
    assert timeline.record.ok == expected.ok
    assert len(timeline.points) == timeline.record.chunks


def test_a_refusal_is_an_http_error_with_its_body():
    refusal = b'{"error": "bad"}'
    response = b"HTTP/1.1 400 Bad Request\r\ncontent-length: %d\r\n\r\n%s" % (len(refusal), refusal)
    [timeline], _ = lean_read("chat", [response])
    assert timeline.record.error == 'BenchmarkError: HTTP 400: {"error": "bad"}'  # as httpx's


def test_a_cut_stream_is_an_abort_as_on_sglang_051():
    _, body = BODIES["chat-ok"]
    whole = Wire.chunked(body, 4096)
    [timeline], _ = lean_read("chat", [b"CUT" + whole[: len(whole) // 2]])
    assert is_aborted(timeline.record.error) and "ended early" in timeline.record.error


def test_connections_are_kept_alive_and_headers_sent():
    _, body = BODIES["chat-ok"]
    timelines, wire = lean_read(
        "chat", [Wire.chunked(body, 9)] * 3, headers={"Authorization": "Bearer k"}
    )
    assert all(t.record.ok for t in timelines)
    assert wire.connections == 1  # one connection reused for all three
    assert all(b"Authorization: Bearer k\r\n" in r for r in wire.requests)
    assert all(r.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") for r in wire.requests)


def test_a_refused_connection_is_a_request_error():
    async def go():
        client = StreamClient(base_url="http://127.0.0.1:9")
        spec = BenchmarkSpec(model="m", max_tokens=8)
        try:
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
        finally:
            await client.aclose()

    record = asyncio.run(go()).record
    assert record.error is not None and "Connect" in record.error and not record.ok


def test_the_stream_client_is_an_httpx_client_for_everything_else():
    assert issubclass(StreamClient, httpx.AsyncClient)


def test_a_response_that_is_not_http_is_a_request_error():
    [timeline], _ = lean_read("chat", [b"HTTP/1.1 abc\r\n\r\n"])
    assert timeline.record.error.startswith("BenchmarkError: malformed HTTP response")
